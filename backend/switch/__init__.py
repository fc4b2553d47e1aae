"""Hot switching: planning and executing the move of tensors between DistStates."""

from hotswitch.backend.switch.plan import SwitchPlan, Transfer
from hotswitch.backend.switch.planner import (
    ALGORITHMS,
    SwitchBounds,
    SwitchPlanner,
    model_layouts,
    plan_switch,
    switch_bounds,
)

__all__ = [
    "ALGORITHMS",
    "SwitchBounds",
    "SwitchPlan",
    "SwitchPlanner",
    "Transfer",
    "model_layouts",
    "plan_switch",
    "switch_bounds",
]
