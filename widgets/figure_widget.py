"""``FigureWidget``: plotly's widget, created in the front end with its figure already in it."""

from __future__ import annotations

import plotly.graph_objects as go


class FigureWidget(go.FigureWidget):
    """A ``plotly.graph_objects.FigureWidget`` whose comm opens only once the figure is built.

    plotly opens the widget's comm at the very start of construction, with no traces and no
    layout, and sends the figure in a second message. A view that renders between the two
    (JupyterLab on a busy machine does) draws an empty plot and never recovers: it listens for
    edits only, and edits of traces it does not have are lost. Opening after construction puts
    the figure into the model's first state, so every view starts from it.
    """

    def __init__(self, figure: go.Figure | dict | None = None):
        self._building = True
        super().__init__(figure)
        self._building = False
        # plotly turns view counting on after its comm opens, and the order matters: a model
        # counting views from its first state gets views that stop applying edits (seen with
        # plotly 7.1 and anywidget 0.11 in JupyterLab 4.6), so keep plotly's order.
        counting, self._view_count = self._view_count, None  # type: ignore[has-type]  # plotly's own, untyped
        self.open()
        self._view_count = counting

    def open(self) -> None:
        if not getattr(self, "_building", False):
            super().open()
