"""A simulated step as a timeline per rank: switches, each strategy's compute, the idle time of
pipeline bubbles and slower replicas, gradient syncs, the update."""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from hotswitch.widgets.figure_widget import FigureWidget

COLORS = {"switch": "#d62728", "bubble": "#d9d9d9", "sync": "#9467bd", "update": "#2ca02c"}
PALETTE = ("#1f77b4", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22")


@dataclass(frozen=True)
class TimelineBars:
    """One bar trace per (kind, strategy): ``ranks``, ``starts`` and ``widths`` in seconds."""

    traces: dict[tuple[str, str], dict[str, list]]
    seconds: float
    world: int


def timeline_bars(step) -> TimelineBars:
    """``step``: a ``backend.sim.step.SimulatedStep``, folded into plain bar data."""
    traces: dict[tuple[str, str], dict[str, list]] = {}
    for s in step.segments:
        key = (s.kind, s.strategy if s.kind == "compute" else "")
        bar = traces.setdefault(key, {"ranks": [], "starts": [], "widths": []})
        bar["ranks"].append(s.rank)
        bar["starts"].append(s.start)
        bar["widths"].append(s.end - s.start)
    world = 1 + max((s.rank for s in step.segments), default=0)
    return TimelineBars(traces, step.seconds, world)


def timeline_figure(step, title: str = "") -> FigureWidget:
    """Ranks down, seconds across; compute coloured by strategy (in the step's order)."""
    bars = timeline_bars(step)
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(step.order)}
    fig = go.Figure()
    for (kind, strategy), bar in bars.traces.items():
        fig.add_bar(
            y=bar["ranks"],
            x=bar["widths"],
            base=bar["starts"],
            orientation="h",
            name=f"{strategy} compute" if kind == "compute" else kind,
            marker_color=colors.get(strategy) if kind == "compute" else COLORS[kind],
            hovertemplate="rank %{y}: %{base:.3f}s + %{x:.3f}s<extra>%{fullData.name}</extra>",
        )
    fig.update_layout(
        barmode="overlay",
        title=title or f"one simulated step: {bars.seconds:.2f} s",
        xaxis_title="seconds",
        yaxis={"title": "rank", "autorange": "reversed"},
        height=min(120 + 18 * bars.world, 720),
    )
    return FigureWidget(fig)
