"""PlanView draws the curves and the batch it is given; export_html writes a standalone page."""

from hotswitch.widgets import GraphView, PlanView, export_html
from tests.widgets.recorded_events import recorded_events

CURVES = {
    "dp4": {"lengths": [64, 128, 256], "time_s": [0.1, 0.3, 1.0], "memory_bytes": [2e9, 6e9, 20e9]},
    "tp4": {"lengths": [64, 128, 256], "time_s": [0.2, 0.4, 0.9], "memory_bytes": [1e9, 2e9, 6e9]},
}
BATCH = [(40, "dp4"), (60, "dp4"), (100, "dp4"), (200, "tp4"), (250, "tp4")]


def test_plan_view_traces_limit_and_buckets():
    view = PlanView(CURVES, memory_limit=16e9, buckets=[["tp4", 128], ["dp4", 0]], batch=BATCH)
    data = view.fig.data
    assert [t.name for t in data] == ["dp4", "tp4"] * 3
    assert list(data[0].y) == CURVES["dp4"]["time_s"]
    assert list(data[3].y) == [v / 1e9 for v in CURVES["tp4"]["memory_bytes"]]
    assert sorted(data[4].x) == [40, 60, 100] and sorted(data[5].x) == [200, 250]
    assert data[4].marker.color == data[0].line.color
    shapes = view.fig.layout.shapes
    assert any(s.y0 == 16.0 and s.y1 == 16.0 for s in shapes)  # the memory limit
    assert any(s.x0 == 128 and s.x1 == 128 for s in shapes)  # the tp4 bucket boundary


def test_export_html_is_standalone(tmp_path, tiny_graph):
    from hotswitch.widgets import Dashboard

    path = export_html(Dashboard.replay(recorded_events(steps=6, switch_at=3)), tmp_path / "dash.html")
    text = path.read_text()
    assert text.count("Plotly.newPlot") == 2 and "run summary" in text
    assert "cdn" not in text.split("Plotly.newPlot")[0][-2000:].lower()
    assert len(text) > 1_000_000  # plotly.js inlined once
    graph = export_html(GraphView.of(tiny_graph), tmp_path / "graph.html").read_text()
    assert graph.count("Plotly.newPlot") == 1


def test_a_job_displays_as_its_dashboard():
    from hotswitch.kernel.notebook.jobs.job import Job
    from tests.widgets.test_dashboard import FakeJob

    job = FakeJob()
    job.done = True
    bundle = Job._repr_mimebundle_(job)
    assert "application/vnd.jupyter.widget-view+json" in bundle
