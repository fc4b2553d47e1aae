"""``show``: the right view for any backend object, without a running job."""

from __future__ import annotations

import ipywidgets as widgets


def show(obj) -> widgets.Widget:
    """A ``GraphView`` for a ``LogicalGraph``, an ``ExecGraph``, summarize()'s dict or a
    "graphs" event; a ``SwitchPlanView`` for a ``SwitchPlan``; a ``PlanView`` for a
    ``CostModel`` (its curves), or a tuple ``(cost_model, plan)`` or ``(cost_model, plan,
    lengths)`` (see ``PlanView.of``); a ``Dashboard`` replay for a list of training events; a running ``Job``'s
    ``Dashboard``. Returned, so a notebook cell ending in ``show(x)`` displays it."""
    from hotswitch.backend.graph.compile import ExecGraph
    from hotswitch.backend.graph.logical import LogicalGraph
    from hotswitch.backend.switch import SwitchPlan
    from hotswitch.backend.train.planning.cost import CostModel
    from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
    from hotswitch.widgets.dashboard import Dashboard
    from hotswitch.widgets.graph.graph_view import GraphView
    from hotswitch.widgets.plan.plan_view import PlanView
    from hotswitch.widgets.plan.switch_plan_view import SwitchPlanView

    if isinstance(obj, (LogicalGraph, ExecGraph)) or (isinstance(obj, dict) and ("nodes" in obj or "logical" in obj)):
        return GraphView.of(obj)
    if isinstance(obj, SwitchPlan):
        return SwitchPlanView({obj.algorithm: obj})
    if isinstance(obj, CostModel):
        return PlanView.of(obj, plan=None)
    if isinstance(obj, tuple) and 2 <= len(obj) <= 3 and isinstance(obj[0], CostModel):
        return PlanView.of(*obj)
    if isinstance(obj, HotSwitchPlan):
        raise TypeError("a HotSwitchPlan is drawn against its cost model: show((cost_model, plan, batch_lengths))")
    if isinstance(obj, (list, tuple)) and all(isinstance(e, dict) and "type" in e for e in obj):
        return Dashboard.replay(obj)
    if hasattr(obj, "events") and hasattr(obj, "switch"):
        return Dashboard(obj)
    raise TypeError(
        f"show() takes a LogicalGraph, ExecGraph, SwitchPlan, CostModel, (CostModel, plan[, lengths]), "
        f"a list of training events or a Job, "
        f"not {type(obj).__name__}"
    )
