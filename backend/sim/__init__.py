"""Whole training steps on a described cluster, without the cluster: the engine's own
dispatcher, ``auto`` planner and switch planner on a ``CostModel`` computed from FLOPs, bytes and
the device's bandwidths ("plan offline" extended to "run offline").

This package is the step model the library uses; the HotSPa paper's experiment (its baselines,
measured logs, calibrations and grids) is ``sim.paper``, which reads this package and which
nothing else under ``backend/`` imports."""

from hotswitch.backend.lazy_import import lazy_exports

_EXPORTS = {
    "Setup": "hotswitch.backend.sim.scenario",
    "simulate_step": "hotswitch.backend.sim.step",
    "batch_lengths": "hotswitch.backend.sim.datasets",
    "device_spec": "hotswitch.backend.sim.device",
    "run_auto": "hotswitch.backend.sim.contenders",
    "run_static": "hotswitch.backend.sim.contenders",
    "sim_candidates": "hotswitch.backend.sim.contenders",
    "fastest_statics": "hotswitch.backend.sim.contenders",
    "plan_floor": "hotswitch.backend.sim.floor",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
