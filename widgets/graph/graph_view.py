"""``GraphView``: the logical graph under a chosen strategy, or one (strategy, rank) executable graph."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
import plotly.graph_objects as go

from hotswitch.backend.strategy import Strategy
from hotswitch.widgets.figure_widget import FigureWidget
from hotswitch.widgets.graph.dag_layout import dag_layout
from hotswitch.widgets.graph.graph_nodes import (
    ALL_LAYERS,
    DrawnNode,
    collapse_layers,
    exec_nodes,
    logical_nodes,
    summary_edges,
)
from hotswitch.widgets.palette import KIND_COLORS

LOGICAL = "logical"
EXECUTABLE = "executable"
COLLAPSED = "collapsed"
LABELS_UP_TO = 150  # above this many markers, names only on hover
SYMBOLS = {"comm": "diamond", "dummy": "diamond-open", "layer": "square", "param": "circle", "buffer": "circle"}
SIZES = {"layer": 22, "param": 7, "buffer": 7}

ExecSource = Callable[[str, int], dict]


class GraphView(widgets.VBox):
    """A layered drawing of a graph with controls: view (logical / executable), strategy, rank,
    and which transformer layer to expand (the others are one box each).

    Build it with ``GraphView.of(obj)`` from a ``LogicalGraph`` (any strategy and rank), an
    ``ExecGraph``, ``summarize()``'s dict, or a "graphs" training event (rank 0 only).
    ``fig`` has one edge trace then one trace per node kind in ``KIND_COLORS`` order, always;
    ``drawn`` holds the nodes currently drawn.
    """

    def __init__(
        self,
        logical: dict | None,
        exec_source: ExecSource | None,
        exec_ranks: Callable[[str], int],
        fixed: dict | None = None,
    ):
        self._logical = logical
        self._exec_source = exec_source
        self._exec_ranks = exec_ranks
        # Options given at construction select the first (ipywidgets leaves a Dropdown whose
        # options are set later at None, and redraw draws nothing for None).
        strategies = logical["strategies"] if logical else [fixed["strategy"]] if fixed else []
        views = ([LOGICAL] if logical else []) + ([EXECUTABLE] if exec_source else [])
        self.view = widgets.ToggleButtons(options=views, description="graph")
        self.strategy = widgets.Dropdown(options=strategies, description="strategy")
        self.rank = widgets.BoundedIntText(value=0, min=0, max=0, description="rank", layout={"width": "160px"})
        self.layer = widgets.Dropdown(description="layers")
        self.message = widgets.HTML()
        self.fig = go.Figure(
            data=[go.Scatter(name="edges", mode="lines", hoverinfo="skip", line={"color": "#bbbbbb", "width": 1})]
            + [_kind_trace(kind) for kind in KIND_COLORS],
            layout={
                "height": 700,
                "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
                "xaxis": {"visible": False},
                "yaxis": {"visible": False},
                "hovermode": "closest",
                "plot_bgcolor": "white",
            },
        )
        self.drawn: list[DrawnNode] = []
        self.edges: list[tuple[str, str]] = []
        controls = widgets.HBox([self.view, self.strategy, self.rank, self.layer])
        if fixed is not None:  # one ExecGraph summary on its own
            self.rank.max = fixed["rank"]
            self.rank.value = fixed["rank"]
            self.rank.disabled = True
        self._set_layer_options()
        self.redraw()
        self.fig = FigureWidget(self.fig)  # made with its data: a view rendered later never misses the first draw
        super().__init__([controls, self.message, self.fig])
        for control in (self.view, self.strategy, self.rank, self.layer):
            control.observe(lambda _: self.redraw(), names="value")

    # -- construction from backend objects -----------------------------------------------------
    @classmethod
    def of(cls, graph) -> GraphView:
        from hotswitch.backend.graph.compile import ExecGraph, compile_graph
        from hotswitch.backend.graph.logical import LogicalGraph, summarize

        if isinstance(graph, LogicalGraph):
            compiled: dict[tuple[str, int], dict] = {}

            def source(strategy: str, rank: int) -> dict:
                if (strategy, rank) not in compiled:
                    compiled[strategy, rank] = compile_graph(graph, strategy, rank).summary()
                return compiled[strategy, rank]

            return cls(summarize(graph), source, lambda s: Strategy.parse(s).world_size)
        if isinstance(graph, ExecGraph):
            graph = graph.summary()
        if isinstance(graph, dict) and "logical" in graph:  # a "graphs" event: rank 0 of each strategy
            execs = graph.get("exec") or {}
            return cls(graph["logical"], (lambda s, _rank: execs[s]) if execs else None, lambda _s: 1)
        if isinstance(graph, dict) and "rank" in graph:  # one ExecGraph summary
            return cls.of_exec(graph)
        if isinstance(graph, dict) and "strategies" in graph:
            return cls(graph, None, lambda _s: 1)
        raise TypeError(
            f"GraphView shows a LogicalGraph, an ExecGraph, summarize()'s dict or a 'graphs' event, "
            f"not {type(graph).__name__}"
        )

    @classmethod
    def of_exec(cls, summary: dict) -> GraphView:
        return cls(None, lambda _s, _r: summary, lambda _s: 1, fixed=summary)

    # -- drawing ---------------------------------------------------------------------------------
    def current_nodes(self) -> tuple[list[DrawnNode], list[tuple[str, str]]]:
        """The uncollapsed nodes and edges of what the controls select."""
        strategy = self.strategy.value
        if self.view.value == LOGICAL:
            assert self._logical is not None  # the view is offered only with a logical graph
            return logical_nodes(self._logical, strategy), summary_edges(self._logical)
        assert self._exec_source is not None  # the view is offered only with executable graphs
        summary = self._exec_source(strategy, self.rank.value if not self.rank.disabled else 0)
        return exec_nodes(summary), summary_edges(summary)

    def redraw(self) -> None:
        if self.strategy.value is None or self.view.value is None:
            return
        if not self.rank.disabled:
            self.rank.max = self._exec_ranks(self.strategy.value) - 1
        self.rank.layout.visibility = "visible" if self.view.value == EXECUTABLE else "hidden"
        nodes, edges = self.current_nodes()
        expanded = {COLLAPSED: None, ALL_LAYERS: ALL_LAYERS}.get(self.layer.value, self.layer.value)
        self.drawn, self.edges = collapse_layers(nodes, edges, expanded)
        self._plot()

    def _set_layer_options(self) -> None:
        nodes, _ = self.current_nodes()
        layers = sorted({n.layer for n in nodes if n.layer is not None})
        self.layer.options = [(COLLAPSED, COLLAPSED), (ALL_LAYERS, ALL_LAYERS)] + [
            (f"expand layer {k}", k) for k in layers
        ]
        self.layer.value = COLLAPSED

    def _plot(self) -> None:
        position = dag_layout([n.name for n in self.drawn], self.edges)
        edge_x = []
        edge_y = []
        for a, b in self.edges:
            edge_x += [position[a][0], position[b][0], None]
            edge_y += [position[a][1], position[b][1], None]
        labels = len(self.drawn) <= LABELS_UP_TO
        title = self._title()
        with self.fig.batch_update():
            self.fig.data[0].x, self.fig.data[0].y = edge_x, edge_y
            for trace, kind in zip(self.fig.data[1:], KIND_COLORS):
                mine = [n for n in self.drawn if n.kind == kind]
                trace.x = [position[n.name][0] for n in mine]
                trace.y = [position[n.name][1] for n in mine]
                trace.hovertext = [n.hover for n in mine]
                trace.text = [n.label if labels or kind == "layer" else "" for n in mine]
            self.fig.layout.title = title
        self.message.value = ""

    def _title(self) -> str:
        counts = {kind: sum(n.kind == kind for n in self.drawn) for kind in ("comm", "dummy", "layer")}
        where = self.strategy.value if self.view.value == LOGICAL else f"{self.strategy.value}, rank {self.rank.value}"
        return (
            f"{self.view.value} graph ({where}): {len(self.drawn)} drawn, {counts['comm']} comm, "
            f"{counts['dummy']} dummy, {counts['layer']} collapsed layers"
        )


def _kind_trace(kind: str) -> go.Scatter:
    color = KIND_COLORS[kind]
    line = {"color": color if kind == "dummy" else "#333333", "width": 1.5 if kind == "dummy" else 0.5}
    return go.Scatter(
        name=kind,
        mode="markers+text",
        textposition="middle right",
        textfont={"size": 9},
        hoverinfo="text",
        marker={"color": color, "symbol": SYMBOLS.get(kind, "circle"), "size": SIZES.get(kind, 11), "line": line},
    )
