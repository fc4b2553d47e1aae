"""``export_html``: a view's figures and tables as one standalone HTML file (no network needed)."""

from __future__ import annotations

from html import escape
from pathlib import Path

import ipywidgets as widgets
import plotly.graph_objects as go

from hotswitch.widgets.plot_output import PlotOutput


def view_parts(view: widgets.Widget) -> list:
    """The figures and HTML snippets of ``view``, in display order (depth-first)."""
    if isinstance(view, go.FigureWidget):
        return [view]
    if isinstance(view, PlotOutput):
        return [view.figure]
    if isinstance(view, widgets.HTML):
        return [view.value] if view.value else []
    return [part for child in getattr(view, "children", ()) for part in view_parts(child)]


def export_html(view: widgets.Widget, path: str | Path, title: str = "hotswitch") -> Path:
    """Write ``view`` (any hotswitch view, or any widget box) to ``path``; plotly.js is
    inlined once, so the file opens offline. Controls are not exported, only what they show."""
    body = []
    inlined = False
    for part in view_parts(view):
        if isinstance(part, go.FigureWidget | go.Figure):
            body.append(go.Figure(part).to_html(full_html=False, include_plotlyjs=not inlined))
            inlined = True
        else:
            body.append(f"<div>{part}</div>")
    path = Path(path)
    path.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head>"
        f"<body style='font-family:sans-serif'>{''.join(body)}</body></html>",
        encoding="utf-8",
    )
    return path
