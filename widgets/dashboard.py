"""``Dashboard``: a training job live — throughput, loss, time breakdown, progress, plan, logs, controls."""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Iterable
from html import escape

import ipywidgets as widgets

# imported whole before plotly is used: plotly looks numpy up in sys.modules without importing it,
# and in a kernel a job's thread may be importing numpy (with torch) at that moment, so plotly
# would see the module half made ("partially initialized module 'numpy'"); an import waits for it
import numpy  # noqa: F401
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from hotswitch.backend.train.loop.events import EVENTS, read_events
from hotswitch.widgets.dashboard_state import PHASES, DashboardState, throughput_text
from hotswitch.widgets.html_table import html_table
from hotswitch.widgets.plan.plan_bands import band_labels, band_shapes, x_extent
from hotswitch.widgets.plot_output import PlotOutput
from hotswitch.widgets.throttle import Throttle

UPDATE_INTERVAL_S = 0.1  # at most 10 updates of the text a second
PLOT_INTERVAL_S = 1.0  # plots are sent whole: at most one redraw a second
LOG_LINES = 200
LIVE_WIDTH_PX = 680  # fixed, so that the plan labels can be laid out for the space they get
LIVE_MARGIN = {"t": 40, "b": 30, "l": 60, "r": 20}
PHASE_COLORS = {"compute": "#54a24b", "switch": "#e45756", "grad_sync": "#f58518", "update": "#4c78a8"}
AUTO = "auto"


class Dashboard(widgets.VBox):
    """The dashboard of ``job`` (a ``hotswitch.kernel.notebook.jobs.job.Job`` or anything with
    ``on_event``, ``add_done_callback``, ``done``, ``status``, ``switch``, ``pause``, ``resume``, ``stop``,
    ``checkpoint`` and ``logs``).

    It subscribes to the job's events (those already received first); redraws are batched and
    throttled to one per ``interval`` s whatever thread the events arrive on, and one last
    redraw follows the job's end (logs, final status). ``state`` is what is shown, as plain
    data. Control buttons call the job; what they answer (or raise) appears in ``status``.
    """

    def __init__(
        self,
        job=None,
        *,
        events: Iterable[dict] = (),
        interval: float = UPDATE_INTERVAL_S,
        capacity: int = 2000,
        follow: bool = True,
    ):
        self.job = job
        self.state = DashboardState(capacity)
        for e in events:
            self.state.ingest(e)
        self.renders = 0
        self._pending: list[dict] = []
        self._lock = threading.Lock()
        self._throttle = Throttle(self._flush, interval)
        self._redraws = Throttle(self._redraw, max(interval, PLOT_INTERVAL_S))  # the plots, after a flush
        self._build()
        self._render()
        self.live_plot = PlotOutput(self.live)  # drawn as rendered
        self.breakdown_plot = PlotOutput(self.breakdown)
        super().__init__(self._children())
        self._unsubscribe = None
        if job is not None and follow:
            self._unsubscribe = job.on_event(lambda event: self.push([event]))
            job.add_done_callback(lambda _: self._throttle.request())

    @classmethod
    def replay(cls, events: Iterable[dict] | str | os.PathLike, job=None) -> Dashboard:
        """A dashboard of recorded events (a list, or a run folder / its ``events.jsonl``),
        drawn once; controls call ``job`` when one is given."""
        if isinstance(events, str | os.PathLike):
            path, events = events, read_events(events)
            if events and not any(isinstance(e, dict) and e.get("type") in EVENTS for e in events):
                raise ValueError(f"{path} holds no hotswitch events; give a run folder or its events.jsonl")
        return cls(job, events=events, follow=False)

    # -- feeding --------------------------------------------------------------------------------
    def push(self, events: Iterable[dict]) -> None:
        """Queue events from any thread; they are drawn at the next throttled update."""
        with self._lock:
            self._pending.extend(events)
        self._throttle.request()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Block until every queued event is drawn (False if ``timeout`` seconds pass first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                queued = bool(self._pending)
            if not queued and not self._throttle.pending and not self._redraws.pending:
                return True
            time.sleep(0.02)
        return False

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._throttle.cancel()
        self._redraws.cancel()
        super().close()

    def _flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for e in pending:
            self.state.ingest(e)
        if self.job is not None and self.job.done:  # how it ended, even if no "done" event came
            self.state.ended = self.job.status
        try:
            self._render()
        except Exception as error:  # on the timer thread: shown in the dashboard, not lost on stderr
            traceback.print_exc()
            self.status.value = f"<span style='color:#c00'>drawing failed: {escape(repr(error))}</span>"
        self._redraws.request()

    # -- widgets ----------------------------------------------------------------------------------
    def _build(self) -> None:
        live = make_subplots(
            rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=("tokens/s", "loss")
        )
        live.add_trace(go.Scatter(name="tokens/s", mode="lines+markers", marker={"size": 4}), row=1, col=1)
        live.add_trace(go.Scatter(name="loss", mode="lines+markers", marker={"size": 4}), row=2, col=1)
        live.add_trace(
            go.Scatter(
                name="plan change", mode="markers", marker={"symbol": "triangle-down", "size": 11, "color": "#e45756"}
            ),
            row=1,
            col=1,
        )
        held_out = go.Scatter(name="held-out loss", mode="lines+markers", marker={"size": 7, "symbol": "diamond"})
        live.add_trace(held_out, row=2, col=1)
        live.update_layout(height=420, width=LIVE_WIDTH_PX, margin=LIVE_MARGIN, legend={"orientation": "h", "y": -0.12})
        live.update_xaxes(title_text="step", row=2, col=1)
        self.live = live
        self._titles = list(live.layout.annotations)  # the subplots' titles, kept beside the plan labels
        self.breakdown = go.Figure(
            data=[go.Bar(name=p, marker_color=PHASE_COLORS[p]) for p in PHASES],
            layout={"barmode": "stack", "height": 260, "title": "seconds per step", "margin": {"t": 40, "b": 30}},
        )
        self.progress = widgets.IntProgress(value=0, min=0, max=1, description="steps")
        self.progress_text = widgets.HTML()
        self.plan_html = widgets.HTML()
        self.summary_html = widgets.HTML()
        self.notices_html = widgets.HTML()
        self.status = widgets.HTML()
        self.logs = widgets.Tab(layout={"display": "none"})  # shown with the first rank's output
        self._log_panes: dict[int, widgets.HTML] = {}
        self.strategy = widgets.Dropdown(options=[AUTO], value=None, description="strategy")
        self.pause_button = widgets.Button(description="pause", icon="pause")
        self.resume_button = widgets.Button(description="resume", icon="play")
        self.stop_button = widgets.Button(description="stop", icon="stop", button_style="danger")
        self.checkpoint_button = widgets.Button(description="checkpoint", icon="save")
        self.strategy.observe(self._on_strategy, names="value")
        self.pause_button.on_click(lambda _: self._control("pause"))
        self.resume_button.on_click(lambda _: self._control("resume"))
        self.stop_button.on_click(lambda _: self._control("stop"))
        self.checkpoint_button.on_click(lambda _: self._control("checkpoint"))
        self._setting_options = False
        self.controls = widgets.HBox(
            [self.strategy, self.pause_button, self.resume_button, self.stop_button, self.checkpoint_button]
        )
        for button in self.controls.children:
            button.disabled = self.job is None

    def _children(self) -> list[widgets.Widget]:
        return [
            widgets.HBox([self.progress, self.progress_text]),
            self.controls,
            self.status,
            self.summary_html,
            widgets.HBox([self.live_plot, widgets.VBox([self.plan_html, self.notices_html])]),
            self.breakdown_plot,
            self.logs,
        ]

    # -- control -----------------------------------------------------------------------------------
    def _on_strategy(self, change) -> None:
        if self._setting_options or change["new"] is None:
            return
        self._control("switch", change["new"])

    def _control(self, command: str, *args) -> None:
        try:
            getattr(self.job, command)(*args)
        except Exception as error:  # shown, not lost in a widget callback
            self.status.value = f"<span style='color:#c00'>{escape(command)} failed: {escape(str(error))}</span>"
            return
        what = f"{command} {' '.join(map(str, args))}".strip()
        self.status.value = f"sent <code>{escape(what)}</code>; applied at the next step boundary"

    # -- drawing ----------------------------------------------------------------------------------
    def _render(self) -> None:
        self.renders += 1
        state = self.state
        steps = state.steps.column("step")
        with self.live.batch_update():
            self.live.data[0].x, self.live.data[0].y = steps, state.steps.column("tokens_per_s")
            self.live.data[1].x, self.live.data[1].y = steps, state.steps.column("loss")
            self.live.data[3].x, self.live.data[3].y = state.evals.column("step"), state.evals.column("loss")
            marks = list(state.marks)
            self.live.data[2].x = [m["step"] + 0.5 for m in marks]
            self.live.data[2].y = [_value_near(steps, state.steps.column("tokens_per_s"), m["step"]) for m in marks]
            self.live.data[2].hovertext = [
                f"step {m['step']}: {' -> '.join(m['order'])} ({m['source']})" for m in marks
            ]
            bands = list(state.bands)
            self.live.layout.shapes = band_shapes(bands, state.strategies)
            plot_px = LIVE_WIDTH_PX - LIVE_MARGIN["l"] - LIVE_MARGIN["r"]
            labels = band_labels(bands, x_extent(steps, bands), plot_px)
            self.live.layout.annotations = [*self._titles, *labels]
        with self.breakdown.batch_update():
            for trace, phase in zip(self.breakdown.data, PHASES):
                trace.x = steps
                trace.y = state.steps.column(phase)
        self._render_progress()
        self._render_plan()
        self._render_options()
        self._render_logs()
        self.notices_html.value = "<br>".join(escape(n) for n in list(state.notices)[-8:])
        summary = state.summary()
        if summary is not None:
            shown = {**summary, "tokens_per_s": throughput_text(summary["tokens_per_s"])}
            rows = [{"figure": k, "value": v} for k, v in shown.items()]
            self.summary_html.value = html_table(rows, caption="run summary")

    def _redraw(self) -> None:
        self.live_plot.redraw()
        self.breakdown_plot.redraw()

    def _render_progress(self) -> None:
        done, planned = self.state.progress
        self.progress.max = max(planned, 1)
        self.progress.value = min(done, self.progress.max)
        eta = self.state.eta_s
        rate = self.state.tokens_per_s
        parts = [f"{done} / {planned} steps"]
        if eta is not None and self.state.end_reason is None:
            parts.append(f"ETA {eta:.0f} s")
        if rate is not None:  # the run's so far: the summary's figure, written the same way
            parts.append(f"{throughput_text(rate)} tokens/s")
        if self.state.end_reason is not None:
            parts.append(f"<b>{escape(self.state.end_reason)}</b>")
        self.progress_text.value = " &mdash; ".join(parts)

    def _render_plan(self) -> None:
        plan = self.state.plan
        if plan is None:
            self.plan_html.value = "<i>no plan yet</i>"
            return
        rows = [{"strategy": s, "sequences longer than": above} for s, above in plan.get("buckets", [])]
        data = self.state.totals.data  # said before the first plan
        self.plan_html.value = html_table(
            rows, caption=f"plan ({plan.get('source')}) from step {plan.get('step', 0) + 1}"
        ) + (
            f"<br>order: {escape(' -> '.join(plan.get('order', [])))}<br>"
            f"instantiation: {escape(str(plan.get('instantiation')))}" + (f"<br>data: {escape(data)}" if data else "")
        )

    def _render_options(self) -> None:
        options = [AUTO, *self.state.strategies]
        if list(self.strategy.options) == options:
            return
        self._setting_options = True
        try:
            value = self.strategy.value
            self.strategy.options = options
            self.strategy.value = value if value in options else None
        finally:
            self._setting_options = False

    def _render_logs(self) -> None:
        logs = getattr(self.job, "logs", None)
        spec = getattr(self.job, "spec", None)
        if logs is None or spec is None:
            return
        for rank in range(spec.nproc * spec.nodes):
            text = logs(rank)
            if not text:
                continue
            if rank not in self._log_panes:
                self._log_panes[rank] = widgets.HTML()
                self.logs.children = [*self.logs.children, self._log_panes[rank]]
                self.logs.set_title(len(self.logs.children) - 1, f"rank {rank}")
                self.logs.layout.display = None
            tail = "\n".join(text.splitlines()[-LOG_LINES:])
            self._log_panes[rank].value = f"<pre style='max-height:240px;overflow:auto'>{escape(tail)}</pre>"


def _value_near(xs: list[float], ys: list[float], x: float) -> float | None:
    """y of the first point at or after ``x`` (the last one if none)."""
    for px, py in zip(xs, ys):
        if px >= x:
            return py
    return ys[-1] if ys else None
