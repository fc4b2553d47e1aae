"""``SwitchPlanView``: where a hot switch's bytes go, and how the planners compare."""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as widgets
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.switch import ALGORITHMS, SwitchBounds, SwitchPlan, plan_switch, switch_bounds
from hotswitch.widgets.figure_widget import FigureWidget
from hotswitch.widgets.html_table import html_table
from hotswitch.widgets.plan.switch_traffic import byte_matrix, message_rows

TRAFFIC = (("send_intra", "send intra-node"), ("send_inter", "send inter-node"))
RECEIVE = (("recv_intra", "receive intra-node"), ("recv_inter", "receive inter-node"))
COLORS = {"intra": "#4c78a8", "inter": "#e45756"}
MESSAGE_ROWS = 100


class SwitchPlanView(widgets.VBox):
    """A heat map of bytes sender -> receiver (node borders drawn), per-rank send and receive
    bars split intra/inter, the planners against the bound, and the fused-message table.

    ``plans`` maps an algorithm name to its plan (one or more); ``algorithm`` picks the one
    drawn in the heat map, bars and table. ``heat``'s z sums to that plan's ``bytes_moved``;
    ``bars`` holds, in order, send intra, send inter, receive intra, receive inter per rank.
    """

    def __init__(self, plans: Mapping[str, SwitchPlan], bound: SwitchBounds | None = None):
        if not plans:
            raise ValueError("SwitchPlanView needs at least one plan, e.g. {'balanced': plan_switch(...)}")
        self.plans = dict(plans)
        self.bound = bound
        self.algorithm = widgets.Dropdown(options=list(self.plans), description="plan")
        self.heat = go.Figure(
            data=[go.Heatmap(colorscale="Blues", colorbar={"title": "bytes"}, hovertemplate=_HEAT_HOVER)],
            layout={
                "height": 520,
                "width": 560,
                "xaxis": {"title": "receiver", "constrain": "domain"},
                "yaxis": {"title": "sender", "autorange": "reversed", "scaleanchor": "x"},
                "margin": {"t": 40},
            },
        )
        self.bars = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=("bytes sent", "bytes received"))
        for row, series in ((1, TRAFFIC), (2, RECEIVE)):
            for key, name in series:
                color = COLORS[key.split("_")[1]]
                self.bars.add_trace(go.Bar(name=name, marker_color=color, legendgroup=key), row=row, col=1)
        self.bars.update_layout(barmode="stack", height=420, margin={"t": 40})
        self.bars.update_xaxes(title_text="rank", row=2, col=1)
        self.comparison = FigureWidget(self._comparison_figure())
        self.table = widgets.HTML()
        self.redraw()
        self.heat = FigureWidget(self.heat)  # made with its data: a view rendered later never misses the first draw
        self.bars = FigureWidget(self.bars)
        super().__init__(
            [
                self.algorithm,
                widgets.HBox([self.heat, self.bars]),
                self.comparison,
                widgets.HTML("<b>messages</b>"),
                self.table,
            ]
        )
        self.algorithm.observe(lambda _: self.redraw(), names="value")

    @classmethod
    def compare(cls, src, dst, cluster: Cluster, itemsize: int = 4) -> SwitchPlanView:
        """Plan ``src`` -> ``dst`` layouts with every algorithm and draw them with the bound."""
        plans = {a: plan_switch(src, dst, cluster, a, itemsize) for a in ALGORITHMS}
        return cls(plans, switch_bounds(src, dst, cluster, itemsize))

    @property
    def plan(self) -> SwitchPlan:
        return self.plans[self.algorithm.value]

    def redraw(self) -> None:
        plan = self.plan
        world = plan.cluster.world_size
        ranks = list(range(world))
        with self.heat.batch_update():
            self.heat.data[0].z = byte_matrix(plan)
            self.heat.data[0].x = ranks
            self.heat.data[0].y = ranks
            self.heat.layout.shapes = _node_borders(plan.cluster)
            self.heat.layout.title = (
                f"{plan.algorithm}: {plan.bytes_moved / 1e9:.3g} GB moved, {len(plan.messages)} messages, "
                f"{plan.time_s * 1e3:.3g} ms predicted"
            )
        with self.bars.batch_update():
            for trace, (key, _) in zip(self.bars.data, TRAFFIC + RECEIVE):
                trace.x = ranks
                trace.y = [getattr(r, key) for r in plan.traffic]
        self.table.value = html_table(message_rows(plan), MESSAGE_ROWS)

    def _comparison_figure(self) -> go.Figure:
        names = list(self.plans) + (["bound"] if self.bound else [])
        times = [p.time_s * 1e3 for p in self.plans.values()] + ([self.bound.time_s * 1e3] if self.bound else [])
        sends = [p.max_send / 1e9 for p in self.plans.values()] + ([self.bound.max_send / 1e9] if self.bound else [])
        fig = make_subplots(rows=1, cols=2, subplot_titles=("predicted switch time (ms)", "busiest sender (GB)"))
        colors = ["#9d755d" if n == "bound" else "#4c78a8" for n in names]
        fig.add_trace(go.Bar(x=names, y=times, name="time ms", marker_color=colors, showlegend=False), row=1, col=1)
        fig.add_trace(go.Bar(x=names, y=sends, name="max send GB", marker_color=colors, showlegend=False), row=1, col=2)
        fig.update_layout(height=300, margin={"t": 40})
        return fig


_HEAT_HOVER = "sender %{y} -> receiver %{x}<br>%{z:,} bytes<extra></extra>"


def _node_borders(cluster: Cluster) -> list[dict]:
    """One square per node around its block of the matrix, and dotted lines between nodes."""
    d = cluster.devices_per_node
    edge = cluster.world_size - 0.5
    squares = [
        {"type": "rect", "x0": k * d - 0.5, "x1": (k + 1) * d - 0.5, "y0": k * d - 0.5, "y1": (k + 1) * d - 0.5}
        | {"line": {"color": "#333333", "width": 1.5}}
        for k in range(cluster.nodes)
    ]
    dotted = {"color": "#999999", "width": 0.5, "dash": "dot"}
    between = [k * d - 0.5 for k in range(1, cluster.nodes)]
    across = [{"type": "line", "x0": x, "x1": x, "y0": -0.5, "y1": edge, "line": dotted} for x in between]
    down = [{"type": "line", "y0": y, "y1": y, "x0": -0.5, "x1": edge, "line": dotted} for y in between]
    return squares + across + down
