"""Widgets: ipywidgets + plotly views of backend objects and training events.

Names are imported on first use: showing a job's ``Dashboard`` does not load the engine.
"""

from hotswitch.backend.lazy_import import lazy_exports

_EXPORTS = {
    "Dashboard": "hotswitch.widgets.dashboard",
    "export_html": "hotswitch.widgets.export",
    "GraphView": "hotswitch.widgets.graph.graph_view",
    "PlanView": "hotswitch.widgets.plan.plan_view",
    "show": "hotswitch.widgets.show_object",
    "SwitchPlanView": "hotswitch.widgets.plan.switch_plan_view",
    "timeline_figure": "hotswitch.widgets.simulation.timeline",
    "speedup_figure": "hotswitch.widgets.simulation.speedup",
    "PAPER_YARDSTICKS": "hotswitch.widgets.simulation.speedup",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
