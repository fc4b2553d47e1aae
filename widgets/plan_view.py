"""``PlanView``: predicted time and memory per strategy over sequence length, and a batch's dispatch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from hotswitch.widgets.palette import strategy_color


class PlanView(widgets.VBox):
    """Three panels sharing the length axis: predicted step time, predicted memory (with the
    ``memory_limit`` line) and the batch's length histogram, one colour per strategy.

    ``curves``: {strategy: {"lengths": [...], "time_s": [...], "memory_bytes": [...]}};
    ``buckets``: [[strategy, above], ...] (sequences longer than ``above`` go to ``strategy``);
    ``batch``: [(length, strategy), ...]. Traces, in order: one time curve per strategy, one
    memory curve per strategy, then one histogram per strategy of ``curves``.
    """

    def __init__(
        self,
        curves: Mapping[str, Mapping[str, Sequence[float]]],
        memory_limit: float,
        buckets: Sequence[Sequence] = (),
        batch: Sequence[tuple[int, str]] = (),
    ):
        unknown = {s for _, s in batch} - set(curves)
        if unknown:
            raise ValueError(f"batch sequences assigned to {sorted(unknown)}, which have no curves; add their curves")
        self.curves, self.memory_limit = dict(curves), memory_limit
        self.buckets, self.batch = [list(b) for b in buckets], list(batch)
        fig = make_subplots(
            rows=3,
            cols=1,
            shared_xaxes=True,
            vertical_spacing=0.06,
            subplot_titles=("predicted time (s)", "predicted memory (GB)", "batch lengths"),
        )
        for row, key, scale in ((1, "time_s", 1.0), (2, "memory_bytes", 1e-9)):
            for i, (strategy, c) in enumerate(self.curves.items()):
                fig.add_trace(
                    go.Scatter(
                        x=list(c["lengths"]),
                        y=[v * scale for v in c[key]],
                        name=strategy,
                        legendgroup=strategy,
                        showlegend=row == 1,
                        line={"color": strategy_color(i)},
                    ),
                    row=row,
                    col=1,
                )
        for i, strategy in enumerate(self.curves):
            lengths = [n for n, s in self.batch if s == strategy]
            fig.add_trace(
                go.Histogram(
                    x=lengths, name=strategy, legendgroup=strategy, showlegend=False, marker_color=strategy_color(i)
                ),
                row=3,
                col=1,
            )
        fig.add_hline(
            y=memory_limit * 1e-9, line_dash="dash", line_color="#c00", annotation_text="memory limit", row=2, col=1
        )
        for strategy, above in self.buckets:
            if above > 0:
                fig.add_vline(x=above, line_dash="dot", line_color="#555", annotation_text=f"{strategy} above {above}")
        fig.update_layout(barmode="stack", height=720, margin={"t": 40})
        fig.update_xaxes(title_text="sequence length", row=3, col=1)
        self.fig = go.FigureWidget(fig)
        super().__init__([self.fig])
