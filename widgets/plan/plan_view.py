"""``PlanView``: predicted time and memory per strategy over sequence length, and a batch's dispatch."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.widgets.figure_widget import FigureWidget
from hotswitch.widgets.palette import strategy_color
from hotswitch.widgets.plan.plan_prediction import AUTO, PlanPrediction, predict_plan

MEMORY_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
HISTOGRAM_BINS = 50


class PlanView(widgets.VBox):
    """Three panels sharing the length axis: predicted time per sequence, predicted memory per
    device (with the ``memory_limit`` line), and the batch's length histogram, one colour per
    strategy; a dotted line at every bucket boundary.

    ``curves``: {strategy: {"lengths": [...], "time_s": [...], "memory_bytes": [...]}};
    ``buckets``: [[strategy, above], ...] (sequences longer than ``above`` go to ``strategy``);
    ``batch``: [(length, strategy), ...]. Traces, in order: one time curve per strategy, one
    memory curve per strategy, then one histogram per strategy of ``curves`` (sharing bins of
    whole lengths).
    Memory is drawn in the unit of ``memory_scale`` (GB, MB, ... picked for the limit).
    Build it from the cost model with ``PlanView.of``.
    """

    def __init__(
        self,
        curves: Mapping[str, Mapping[str, Sequence[float]]],
        memory_limit: float,
        buckets: Sequence[Sequence] = (),
        batch: Sequence[tuple[int, str]] = (),
        title: str = "",
    ):
        unknown = {s for _, s in batch} - set(curves)
        if unknown:
            raise ValueError(f"batch sequences assigned to {sorted(unknown)}, which have no curves; add their curves")
        self.curves = dict(curves)
        self.memory_limit = memory_limit
        self.buckets = [list(b) for b in buckets]
        self.batch = list(batch)
        self.prediction: PlanPrediction | None = None
        self.memory_scale, unit = _memory_unit(memory_limit)
        fig = make_subplots(
            rows=3,
            cols=1,
            shared_xaxes=True,
            vertical_spacing=0.06,
            subplot_titles=(
                "predicted seconds per sequence (dp replicas in parallel)",
                f"predicted memory per device ({unit})",
                "batch lengths",
            ),
        )
        self._draw_curves(fig)
        self._draw_batch(fig)
        self._draw_limits(fig)
        fig.update_layout(barmode="stack", height=720, margin={"t": 70 if title else 40}, title=title or None)
        fig.update_xaxes(title_text="sequence length", row=3, col=1)
        self.fig = FigureWidget(fig)
        super().__init__([self.fig])

    def _draw_curves(self, fig) -> None:
        """Rows 1 and 2: each strategy's predicted time and memory over length."""
        for row, key, scale in ((1, "time_s", 1.0), (2, "memory_bytes", self.memory_scale)):
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

    def _draw_batch(self, fig) -> None:
        """Row 3: the batch's lengths, stacked by the strategy the plan sends them to."""
        longest = max([n for n, _ in self.batch] + [max(c["lengths"], default=1) for c in self.curves.values()])
        bins = {"start": 0.5, "size": max(1, math.ceil(longest / HISTOGRAM_BINS))}  # whole lengths per bin
        for i, strategy in enumerate(self.curves):
            lengths = [n for n, s in self.batch if s == strategy]
            fig.add_trace(
                go.Histogram(
                    x=lengths,
                    name=strategy,
                    legendgroup=strategy,
                    showlegend=False,
                    marker_color=strategy_color(i),
                    bingroup="batch",
                    xbins=bins,
                ),
                row=3,
                col=1,
            )

    def _draw_limits(self, fig) -> None:
        """The memory limit and the buckets' boundaries."""
        fig.add_hline(
            y=self.memory_limit * self.memory_scale,
            line_dash="dash",
            line_color="#c00",
            annotation_text="memory limit",
            row=2,
            col=1,
        )
        for strategy, above in self.buckets:
            for row in (1, 2, 3) if above > 0 else ():
                label = {"annotation_text": f"{strategy} above {above}"} if row == 1 else {}
                fig.add_vline(x=above, line_dash="dot", line_color="#555", row=row, col=1, **label)

    @classmethod
    def of(
        cls,
        cost,
        plan: HotSwitchPlan | str | Sequence | None = AUTO,
        lengths: Sequence[int] = (),
        max_len: int | None = None,
    ) -> PlanView:
        """The view of a ``CostModel`` (``backend.train.planning.cost``): every strategy's curves, its
        ``budget`` as the memory limit, ``plan``'s buckets (a ``HotSwitchPlan``, buckets such as
        ``[("tp4", 128), ("dp4", 0)]``, "auto": what ``auto_plan`` picks for ``lengths``, or
        None: curves only), and ``lengths`` dispatched as the plan sends them. ``prediction``
        keeps the numbers; the title gives the plan and, with a batch, its predicted step time."""
        prediction = predict_plan(cost, plan, lengths, max_len)
        title = f"plan {prediction.plan}" if prediction.plan else "predicted costs per strategy"
        if prediction.predicted_step_s is not None:
            title += f": {len(lengths)} sequences in {prediction.predicted_step_s:.3g} s predicted"
        view = cls(prediction.curves, prediction.memory_limit, prediction.buckets, prediction.batch, title)
        view.prediction = prediction
        return view


def _memory_unit(limit: float) -> tuple[float, str]:
    """(scale, name) of the largest unit the limit reaches, so the axis reads 4.5 MB, not 0.0045 GB."""
    for size, name in MEMORY_UNITS:
        if limit >= size:
            return 1 / size, name
    return 1.0, "bytes"
