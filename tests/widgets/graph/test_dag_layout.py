"""The layered layout: edges point down, positions are distinct, ordering removes crossings."""

import pytest

from hotswitch.widgets.graph.dag_layout import crossings, dag_layout, layers_of
from hotswitch.widgets.graph.graph_nodes import summary_edges


def test_every_edge_points_down_and_no_two_nodes_overlap(tiny_summary):
    names = [n["name"] for n in tiny_summary["nodes"]]
    edges = summary_edges(tiny_summary)
    position = dag_layout(names, edges)
    assert set(position) == set(names)
    assert len(set(position.values())) == len(names)
    assert all(position[a][1] > position[b][1] for a, b in edges)


def test_parameters_sit_just_above_their_first_consumer():
    layer = layers_of(["x", "a", "b", "w"], [("x", "a"), ("a", "b"), ("w", "b")])
    assert layer == {"x": 0, "a": 1, "b": 2, "w": 1}


def test_barycentric_ordering_untangles_a_crossed_bipartite_graph():
    # listed so that the naive order crosses every pair of edges
    names = ["a", "b", "c", "z", "y", "x"]
    edges = [("a", "x"), ("b", "y"), ("c", "z")]
    naive = {n: (i % 3, -(i // 3)) for i, n in enumerate(names)}
    assert crossings(naive, edges) == 3
    assert crossings(dag_layout(names, edges), edges) == 0


def test_a_cycle_is_reported():
    with pytest.raises(ValueError, match="cycle"):
        dag_layout(["a", "b"], [("a", "b"), ("b", "a")])
