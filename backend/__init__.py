"""The hot-switch engine: strategies, layouts, switch planning and execution, training.

Pure torch; never imports Jupyter code.
"""

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.dist_state import Box, DistState, Partial, Replicate, Shard
from hotswitch.backend.layout import ParamLayout, param_layout
from hotswitch.backend.models import CONFIGS, ModelConfig, get_config
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch import SwitchPlan, SwitchPlanner, plan_switch, switch_bounds

__all__ = [
    "CONFIGS",
    "Box",
    "Cluster",
    "DistState",
    "ModelConfig",
    "ParamLayout",
    "Partial",
    "Replicate",
    "Shard",
    "Strategy",
    "SwitchPlan",
    "SwitchPlanner",
    "get_config",
    "param_layout",
    "plan_switch",
    "switch_bounds",
]
