"""What a dashboard shows, folded from training events; plain data, no widgets.

Fed event by event (live) or from a recorded list (replay): the same events in the same
order give the same ``snapshot()``. Memory is bounded: step points are downsampled by
``BoundedSeries``; bands, switch marks and notices keep their newest ``MAX_MARKS``.
"""

from __future__ import annotations

from collections import deque

from hotswitch.backend.train.loop.events import NOTICES, PHASES, notice
from hotswitch.backend.train.loop.run_totals import RunTotals
from hotswitch.widgets.series import BoundedSeries

STEP_COLUMNS = ("step", "tokens_per_s", "loss", *PHASES)
MAX_MARKS = 200
ETA_WINDOW = 20


class DashboardState:
    """Fold events with ``ingest``. ``steps`` holds one row per step (coarser for old steps);
    ``bands`` are [first step, last step, execution order] per plan in force; ``marks`` the
    steps where the plan changed; ``evals`` the held-out losses; ``hot_switches`` the "switch"
    events (a new src -> dst pair);
    ``strategies`` those of every plan and every executable graph the job reported, in order seen.
    """

    def __init__(self, capacity: int = 2000):
        self.steps = BoundedSeries(STEP_COLUMNS, capacity)
        self.evals = BoundedSeries(("step", "loss"), capacity)  # held-out loss, when the run evaluates
        self.bands: deque[list] = deque(maxlen=MAX_MARKS)
        self.marks: deque[dict] = deque(maxlen=MAX_MARKS)
        self.hot_switches: deque[dict] = deque(maxlen=MAX_MARKS)
        self.notices: deque[str] = deque(maxlen=MAX_MARKS)
        self.recent_seconds: deque[float] = deque(maxlen=ETA_WINDOW)
        self.plan: dict | None = None
        self.graphs: dict | None = None
        self.strategies: list[str] = []
        self.last_step: dict | None = None
        self.done: dict | None = None
        self.ended: str | None = None  # how the job ended (its status), whether or not "done" came
        self.totals = RunTotals()  # the run's figures, as the command line and the reports compute them
        self.events = 0

    def ingest(self, event: dict) -> None:
        """Fold one event; one that cannot be shown (a body's own, malformed) becomes a notice."""
        self.events += 1
        try:
            self._ingest(event)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            self.notices.append(f"an event of type {event.get('type')!r} could not be shown: {error!r}")

    def _ingest(self, event: dict) -> None:
        self.totals.add(event)
        kind = event.get("type")
        if kind == "step":
            self._step(event)
        elif kind == "plan":
            self._plan(event)
        elif kind == "graphs":
            self.graphs = event
            self._offer(event.get("exec", {}))  # valid for this model and world, compiled already
        elif kind == "switch":
            self.hot_switches.append({k: event.get(k) for k in ("step", "src", "dst", "what", "bytes", "seconds")})
        elif kind == "eval":
            self.evals.append({"step": event["step"], "loss": event["loss"]})
        elif kind == "done":
            self.done = event
        elif kind in NOTICES:
            self.notices.append(notice(event))

    def _step(self, event: dict) -> None:
        seconds = event.get("seconds", {})
        self.steps.append(
            {
                "step": event["step"],
                "tokens_per_s": event.get("tokens_per_s", 0.0),
                "loss": event.get("loss", float("nan")),
                **{p: seconds.get(p, 0.0) for p in PHASES},
            }
        )
        self.recent_seconds.append(seconds.get("total", sum(seconds.get(p, 0.0) for p in PHASES)))
        self.last_step = event
        if self.bands:
            self.bands[-1][1] = event["step"]

    def _plan(self, event: dict) -> None:
        order = list(event.get("order") or [b[0] for b in event.get("buckets", [])])
        self._offer([*order, *(b[0] for b in event.get("buckets", []))])
        at = event.get("step", 0)
        if self.plan is not None and _same_plan(self.plan, event):
            return  # the plan in force, announced again (a warm trainer's next job): no change
        if self.plan is not None:
            self.marks.append({"step": at, "order": order, "source": event.get("source")})
        self.plan = event
        if self.bands and self.bands[-1][0] == at:  # replaced before any step ran under it
            self.bands.pop()
        self.bands.append([at, at, order])

    def _offer(self, strategies) -> None:
        for s in strategies:
            if s not in self.strategies:
                self.strategies.append(s)

    @property
    def progress(self) -> tuple[int, int]:
        """(steps done, steps planned); planned is 0 before the first step event."""
        if self.last_step is None:
            return 0, 0
        return self.last_step["step"], self.last_step.get("steps", self.last_step["step"])

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the mean pace of the last steps; None before a step or after the end."""
        done, planned = self.progress
        if not self.recent_seconds or self.done is not None:
            return None
        return max(0, planned - done) * sum(self.recent_seconds) / len(self.recent_seconds)

    @property
    def tokens_per_s(self) -> float | None:
        """The run's throughput so far, as ``summary`` (and the command line, and the reports)
        give it: ``RunTotals``' tokens over step seconds. None before a step's seconds are known
        (a body's own step events may carry none)."""
        totals = self.totals.summary()
        return totals["tokens_per_s"] if totals["seconds"] else None

    @property
    def end_reason(self) -> str | None:
        """Why the run ended: the ranks' "done" reason, else the job's final status (a job stopped
        or killed between steps sends no "done"); None while it runs."""
        return str(self.done.get("reason")) if self.done is not None else self.ended

    def summary(self) -> dict | None:
        """The final figures once a "done" event has arrived, else None: ``tokens_per_s`` is
        ``backend.train.loop.run_totals.summarize``'s (tokens over step seconds);
        ``seconds_per_step`` the mean of the steps' seconds and ``total_step_seconds`` their
        sum (so tokens / total_step_seconds is tokens_per_s); ``seconds`` the wall time of the
        whole loop (planning, control and profiling included); ``attention`` the kernel it ran
        and ``compile_s`` the step seconds spent compiling."""
        if self.done is None:
            return None
        totals = self.totals.summary()
        return {
            "reason": self.done.get("reason"),
            "steps": totals["steps"],  # the steps this job trained (a resumed run's numbers go on from its checkpoint)
            "last_step": self.done.get("step"),
            "tokens": totals["tokens"],
            "tokens_per_s": self.tokens_per_s or 0.0,
            "seconds_per_step": totals["measured_step_s"] or 0.0,
            "total_step_seconds": totals["seconds"],
            "seconds": self.done.get("seconds") or 0.0,
            "hot_switches": totals["switches"],
            "plan_changes": len(self.marks),
            "attention": (self.graphs or {}).get("attention", {}).get("kernel"),
            "compile_s": totals["compile_s"],
            "final_loss": totals["last_loss"],
        }

    def snapshot(self) -> dict:
        """Everything shown, as plain data (for comparing a live run with its replay)."""
        return {
            "steps": list(self.steps.rows),
            "appended": self.steps.appended,
            "evals": list(self.evals.rows),
            "bands": [list(b) for b in self.bands],
            "marks": list(self.marks),
            "hot_switches": list(self.hot_switches),
            "notices": list(self.notices),
            "plan": self.plan,
            "strategies": list(self.strategies),
            "progress": self.progress,
            "summary": self.summary(),
            "events": self.events,
        }


def throughput_text(tokens_per_s: float) -> str:
    """How the dashboard writes a throughput, wherever it shows one: whole tokens, grouped."""
    return f"{tokens_per_s:,.0f}"


def _same_plan(plan: dict, event: dict) -> bool:
    return all(plan.get(k) == event.get(k) for k in ("buckets", "order", "instantiation"))
