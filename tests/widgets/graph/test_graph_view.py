"""GraphView draws what the backend graphs hold: kinds, comm vs dummy per strategy, layers."""

import pytest

from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.logical import LogicalGraph, summarize
from hotswitch.backend.models import get_config
from hotswitch.widgets import GraphView, show
from hotswitch.widgets.graph.graph_nodes import ALL_LAYERS
from hotswitch.widgets.palette import KIND_COLORS


def _trace(view, kind):
    return next(t for t in view.fig.data if t.name == kind)


def test_traces_are_fixed_and_coloured_by_kind(tiny_graph):
    view = GraphView.of(tiny_graph)
    assert [t.name for t in view.fig.data] == ["edges", *KIND_COLORS]
    for kind, color in KIND_COLORS.items():
        assert _trace(view, kind).marker.color == color


@pytest.mark.parametrize("strategy", ["dp4tp1pp1", "dp1tp4pp1", "dp2tp2pp1"])
def test_comm_and_dummy_nodes_drawn_match_summarize(tiny_graph, tiny_summary, strategy):
    view = GraphView.of(tiny_graph)
    view.layer.value = ALL_LAYERS
    view.strategy.value = strategy
    comm = [n for n in tiny_summary["nodes"] if n["kind"] == "comm"]
    real = sorted(n["name"] for n in comm if n["comm"][strategy])
    assert len(_trace(view, "comm").x) == len(real)
    assert sorted(n.name for n in view.drawn if n.kind == "comm") == real
    assert len(_trace(view, "dummy").x) == tiny_summary["dummies"][strategy]
    assert len(view.drawn) == len(tiny_summary["nodes"])
    assert len(view.fig.data[0].x) == 3 * len(tiny_summary["edges"])  # two ends and a break per edge


def test_hover_shows_op_shape_and_every_strategys_diststate(tiny_graph, tiny_summary):
    view = GraphView.of(tiny_graph)
    view.layer.value = ALL_LAYERS
    trace = _trace(view, "compute")
    hover = trace.hovertext[0]
    node = next(n for n in tiny_summary["nodes"] if n["kind"] == "compute")
    assert f"op: {node['op']}" in hover and f"shape: {node['shape']}" in hover
    for strategy, state in node["states"].items():
        assert f"{strategy}: {', '.join(state['placements'])}" in hover


def test_collapsed_layers_account_for_every_node(tiny_graph, tiny_summary):
    view = GraphView.of(tiny_graph)
    boxes = [n for n in view.drawn if n.kind == "layer"]
    assert len(boxes) == get_config("tiny").n_layers
    inside = sum(len(b.members) for b in boxes)
    assert inside + sum(n.kind != "layer" for n in view.drawn) == len(tiny_summary["nodes"])
    view.strategy.value = "dp1tp4pp1"
    comm_in_boxes = sum(dict(b.counts).get("comm", 0) for b in view.drawn if b.kind == "layer")
    comm_outside = sum(n.kind == "comm" for n in view.drawn)
    assert comm_in_boxes + comm_outside == sum(1 for n in tiny_summary["nodes"] if n["kind"] == "comm")
    view.layer.value = 1
    assert len([n for n in view.drawn if n.kind == "layer"]) == get_config("tiny").n_layers - 1
    assert any(n.layer == 1 and n.kind == "compute" for n in view.drawn)


def test_executable_graph_of_any_rank_matches_compile(tiny_graph):
    view = GraphView.of(tiny_graph)
    view.view.value = "executable"
    view.strategy.value = "dp2tp2pp1"
    view.rank.value = 3
    view.layer.value = ALL_LAYERS
    summary = compile_graph(tiny_graph, "dp2tp2pp1", 3).summary()
    assert view.rank.max == 3
    assert [n.name for n in view.drawn] == [n["name"] for n in summary["nodes"]]
    assert len(_trace(view, "comm").x) == sum(n["kind"] == "comm" for n in summary["nodes"])
    assert show(compile_graph(tiny_graph, "tp4", 1)).rank.value == 1


def test_a_7b_graph_stays_readable_when_collapsed():
    graph = LogicalGraph.build(get_config("7b"), ["dp8", "dp2tp4"])
    view = GraphView.of(graph)
    assert len([n for n in view.drawn if n.kind == "layer"]) == 32
    assert len(view.drawn) < 60
    view.strategy.value = "dp2tp4pp1"
    view.view.value = "executable"
    assert len(view.drawn) < 80
    assert len(summarize(graph)["nodes"]) > 1000


def test_a_graphs_event_shows_logical_and_rank_zero_executable(tiny_graph, tiny_summary):
    event = {
        "type": "graphs",
        "logical": tiny_summary,
        "exec": {"dp4tp1pp1": compile_graph(tiny_graph, "dp4", 0).summary()},
    }
    view = show(event)
    view.view.value = "executable"
    assert view.rank.max == 0 and len(view.drawn) > 0


def test_one_executable_graph_on_its_own_is_drawn(tiny_graph):
    """``GraphView.of(exec_graph)`` (notebook 2) selects its one strategy and draws its nodes."""
    exec_graph = compile_graph(tiny_graph, "dp2tp2pp1", 3)
    view = GraphView.of(exec_graph)
    assert view.strategy.value == "dp2tp2pp1" and view.rank.value == 3
    drawn = sum(len(t.x or ()) for t in view.fig.data if t.name != "edges")
    assert drawn == len(view.drawn) > 0
