"""Widgets: ipywidgets + plotly views of backend objects and training events.

Names are imported on first use: showing a job's ``Dashboard`` does not load the engine.
"""

import importlib

_EXPORTS = {
    "Dashboard": "hotswitch.widgets.dashboard",
    "export_html": "hotswitch.widgets.export",
    "GraphView": "hotswitch.widgets.graph_view",
    "PlanView": "hotswitch.widgets.plan_view",
    "show": "hotswitch.widgets.show_object",
    "SwitchPlanView": "hotswitch.widgets.switch_plan_view",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hotswitch.widgets' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
