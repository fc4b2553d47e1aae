import pytest

from hotswitch.backend.graph.logical import LogicalGraph, summarize
from hotswitch.backend.models import get_config


@pytest.fixture(scope="session")
def tiny_graph():
    return LogicalGraph.build(get_config("tiny"), ["dp4", "tp4", "dp2tp2"])


@pytest.fixture(scope="session")
def tiny_summary(tiny_graph):
    return summarize(tiny_graph)
