"""A view's figure reaches the front end in the widget's first message, never after it."""

import comm
import plotly.graph_objects as go
import pytest

from hotswitch.widgets import Dashboard
from hotswitch.widgets.figure_widget import FigureWidget
from tests.widgets.recorded_events import recorded_events


@pytest.fixture
def sent(monkeypatch):
    """Every comm message the widgets send: (message type, its state)."""
    messages = []

    class Recording(comm.DummyComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            messages.append((msg_type, (data or {}).get("state") or {}))

    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: Recording(**kwargs))
    return messages


def test_the_comm_opens_with_the_traces_and_the_layout(sent):
    figure = FigureWidget(go.Figure(data=[go.Scatter(name="loss", x=[1, 2], y=[3, 4])], layout={"title": "t"}))
    state = sent[0][1]
    assert [(t["name"], list(t["x"])) for t in state["_widget_data"]] == [("loss", [1, 2])]
    assert state["_widget_layout"]["title"] == {"text": "t"}
    assert state["_view_count"] is None and sent[1] == ("comm_msg", {"_view_count": 0})  # plotly's order
    figure.data[0].y = [5, 6]  # edits still reach the open comm
    assert sent[-1][0] == "comm_msg" and "_py2js_restyle" in sent[-1][1]


def test_plotly_alone_would_open_empty_and_send_the_figure_later(sent):
    """Why FigureWidget exists; once plotly opens with the figure, FigureWidget can go."""
    go.FigureWidget(go.Figure(data=[go.Scatter(x=[1])]))
    assert sent[0][0] == "comm_open" and sent[0][1]["_widget_data"] == []


def test_a_dashboards_figures_open_with_their_traces(sent):
    Dashboard.replay(recorded_events(steps=3, switch_at=2))
    opened = [state["outputs"] for kind, state in sent if kind == "comm_open" and state.get("outputs")]
    figures = [outputs[0]["data"]["application/vnd.plotly.v1+json"]["data"] for outputs in opened]
    assert [[t["name"] for t in data] for data in figures] == [
        ["tokens/s", "loss", "plan change", "held-out loss"],
        ["compute", "switch", "grad_sync", "update"],
    ]
    assert figures[0][1]["y"] == [e["loss"] for e in recorded_events(steps=3, switch_at=2) if e["type"] == "step"]
