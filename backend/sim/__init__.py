"""Whole training steps on a described cluster, without the cluster: the engine's own
dispatcher, ``auto`` planner and switch planner on a ``CostModel`` computed from FLOPs, bytes and
the device's bandwidths ("plan offline" extended to "run offline")."""

from hotswitch.backend.exports import lazy_exports

_EXPORTS = {
    "Setup": "hotswitch.backend.sim.setup",
    "compare": "hotswitch.backend.sim.compare",
    "simulate_step": "hotswitch.backend.sim.step",
    "batch_lengths": "hotswitch.backend.sim.datasets",
    "paper_grid": "hotswitch.backend.sim.grid",
    "device_spec": "hotswitch.backend.sim.device",
    "paper_contenders": "hotswitch.backend.sim.baselines",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
