"""``PlotOutput``: a plotly figure that is redrawn whole, for plots fed while a job runs."""

from __future__ import annotations

import json

import ipywidgets as widgets
import plotly.graph_objects as go

MIME = "application/vnd.plotly.v1+json"  # drawn by the front end's plotly renderer, as a cell output is


class PlotOutput(widgets.Output):
    """Shows ``figure`` in an ``Output`` widget; ``redraw()`` sends the whole figure again.

    plotly's ``FigureWidget`` sends edits that each view must apply in turn: a view that misses
    them stays as it was. On a loaded machine a live dashboard's views did, and stayed empty
    while the job trained. An ``Output``'s one state is the whole figure, so whichever redraw a
    view sees last, it shows the figure as it is then. Redraws replace the plot; callers
    throttle them (the dashboard: once a second).
    """

    def __init__(self, figure: go.Figure):
        super().__init__(outputs=_shown(figure))  # the figure is in the widget's first message
        self.figure = figure
        self.redraws = 1

    def redraw(self) -> None:
        self.outputs = _shown(self.figure)
        self.redraws += 1


def _shown(figure: go.Figure) -> tuple[dict]:
    data = json.loads(figure.to_json())  # plotly's encoder: numpy arrays and dates included
    text = f"<plotly figure: {len(figure.data)} traces>"
    return ({"output_type": "display_data", "data": {MIME: data, "text/plain": text}, "metadata": {}},)
