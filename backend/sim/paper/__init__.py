"""The HotSPa paper's experiment through the step model: the paper's settings and baselines
(Megatron-LM, DeepSpeed, Hetu's static layouts), the published and this project's measured
logs, the calibrations fitted to them, and the grids of settings. It reads ``backend.sim``;
nothing else under ``backend/`` imports it (``tests/backend/test_import_layers.py``)."""

from hotswitch.backend.lazy_import import lazy_exports

_EXPORTS = {
    # not ``compare``: the module of that name would shadow it once imported
    "compare_contenders": "hotswitch.backend.sim.paper.compare:compare",
    "paper_grid": "hotswitch.backend.sim.paper.grid",
    "paper_contenders": "hotswitch.backend.sim.paper.baselines",
    "context_row": "hotswitch.backend.sim.paper.context_grid",
    "calibration_report": "hotswitch.backend.sim.paper.calibrate:report",
    "HELD_OUT_LIMIT": "hotswitch.backend.sim.paper.calibrate",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
