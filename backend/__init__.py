"""The hot-switch engine: strategies, layouts, switch planning and execution, training.

Pure torch; never imports Jupyter code. Names are imported on first use, so that the pure
planning parts (strategies, clusters, the switch planner) load without torch.
"""

from hotswitch.backend.exports import lazy_exports

_EXPORTS = {
    "Cluster": "hotswitch.backend.cluster",
    "Box": "hotswitch.backend.dist_state",
    "DistState": "hotswitch.backend.dist_state",
    "Partial": "hotswitch.backend.dist_state",
    "Replicate": "hotswitch.backend.dist_state",
    "Shard": "hotswitch.backend.dist_state",
    "ParamLayout": "hotswitch.backend.layout",
    "param_layout": "hotswitch.backend.layout",
    "CONFIGS": "hotswitch.backend.models.config",
    "ModelConfig": "hotswitch.backend.models.config",
    "get_config": "hotswitch.backend.models.config",
    "Strategy": "hotswitch.backend.strategy",
    "SwitchPlan": "hotswitch.backend.switch.plan",
    "SwitchPlanner": "hotswitch.backend.switch.planner",
    "plan_switch": "hotswitch.backend.switch.planner",
    "switch_bounds": "hotswitch.backend.switch.planner",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
