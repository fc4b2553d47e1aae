"""Training events: the contract between the ranks and everything that shows or records a run.

Events are plain, JSON-ready dicts handed to a sink callable (rank 0 only). Each type is
declared once below as a ``TypedDict``; ``event(kind, **fields)`` builds one and refuses a
field its declaration lacks or a missing required one, so the declarations cannot drift from
what the trainer emits. Every event has ``type`` and ``time`` (seconds since the epoch); the
kernel adds ``rank`` on arrival, and a comparison run tags its events with ``run``.

The figures a run is judged by (tokens/s, time split, per-strategy throughput) have one
definition, ``summarize``: the command line's table, the dashboard and the demo report call it;
throughput itself is ``tokens_per_s`` wherever it is computed (a step, a strategy, a run).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal, TypedDict

PHASES = ("compute", "switch", "grad_sync", "update")


class Tags(TypedDict, total=False):
    rank: int  # added by the kernel: the rank that sent the event
    run: str  # added by a comparison: which of its runs emitted the event


class Event(Tags):
    type: str
    time: float


class PlanEvent(Event):
    step: int
    buckets: list[list]  # [[strategy, above], ...], longest first
    order: list[str]  # execution order, the instantiation strategy last
    instantiation: str
    predicted_step_s: float | None
    source: Literal["auto", "fixed", "buckets"]


class AttentionKernel(TypedDict):
    kernel: str  # the kernel attention runs (models.attention_kernels)
    seconds: dict[str, float | None]  # what each candidate took when it was chosen ({} if named)
    lengths: list[int]  # the lengths it was timed at
    documents: str  # how packed rows attend their documents: "per_document" or "flex"
    document_seconds: dict[str, float | None]  # what each way took on a packed row ({} unpacked)


class GraphsEvent(Event):
    logical: dict  # graph.logical.summarize
    exec: dict[str, dict]  # {strategy: ExecGraph.summary()} of rank 0
    attention: AttentionKernel


class StepSeconds(TypedDict):
    compute: float
    switch: float
    grad_sync: float
    update: float
    total: float


class StrategyShare(TypedDict):
    tokens: int
    padding: int  # tokens of padding computed beside them (see ``MicroBatching.padding``)
    seconds: float
    tokens_per_s: float


class StepEvent(Event):
    step: int
    steps: int  # planned total
    tokens: int
    padding: int  # tokens of padding the step computed beside its own, over every replica
    sequences: int
    loss: float  # mean token loss
    grad_norm: float  # before clipping
    seconds: StepSeconds
    tokens_per_s: float  # this step's tokens over its total seconds
    strategies: dict[str, StrategyShare]
    switches: int  # hot switches that ran
    compile_s: float  # of the compute seconds, those spent in torch.compile (``compile``)
    predicted_step_s: float | None
    lr: float  # the learning rate this step's update used


class SwitchEvent(Event):
    """The first time each switch runs, before that step's ``step`` event."""

    step: int
    src: str
    dst: str
    what: Literal["params", "grads", "grads_final"]
    bytes: int
    predicted_s: float
    seconds: float


class _ControlFields(TypedDict, total=False):
    strategy: str | list  # of a switch command
    path: str | None  # of a checkpoint command


class ControlEvent(Event, _ControlFields):
    """A control command that was applied."""

    step: int
    command: Literal["switch", "pause", "resume", "stop", "checkpoint"]


class EvalEvent(Event):
    """The loss on the held-out split after ``step`` updates."""

    step: int
    loss: float  # mean token loss over the held-out batches
    tokens: int
    seconds: float


class CheckpointEvent(Event):
    step: int
    path: str


class WarningEvent(Event):
    message: str


class DoneEvent(Event):
    step: int
    reason: Literal["finished", "stopped"]
    seconds: float  # wall time of the whole loop
    tokens: int


class StaticsEvent(Event):
    """A comparison's choice of static strategy (``backend.train.loop.compare``)."""

    predicted_step_s: dict[str, float]
    infeasible: dict[str, int]  # strategy -> the longest sequence it holds
    chosen: str


EVENTS: dict[str, type] = {
    "plan": PlanEvent,
    "graphs": GraphsEvent,
    "step": StepEvent,
    "switch": SwitchEvent,
    "control": ControlEvent,
    "checkpoint": CheckpointEvent,
    "eval": EvalEvent,
    "warning": WarningEvent,
    "done": DoneEvent,
    "statics": StaticsEvent,
}

Sink = Callable[[dict], None]
EVENTS_FILE = "events.jsonl"  # a run folder's events, one JSON object per line


def event(kind: str, **fields) -> dict:
    """An event of type ``kind`` stamped now; raises TypeError if ``fields`` do not match its
    declaration (a field not declared, or a required one missing)."""
    declared = EVENTS.get(kind)
    if declared is None:
        raise TypeError(f"unknown event type {kind!r}; declared: {', '.join(EVENTS)}")
    allowed = set(declared.__annotations__) - {"type", "time"}
    # every value of EVENTS is a TypedDict class; mypy has no type that says so
    required = set(declared.__required_keys__) - {"type", "time"}  # type: ignore[attr-defined]
    unknown, missing = set(fields) - allowed, required - set(fields)
    if unknown or missing:
        raise TypeError(f"{kind} event: undeclared fields {sorted(unknown)}, missing fields {sorted(missing)}")
    return {"type": kind, "time": time.time(), **fields}


def tokens_per_s(tokens: float, seconds: float) -> float:
    """Throughput: ``tokens`` over the step ``seconds`` that trained them (0.0 when no time was
    measured). The one definition; a step event, a strategy's share and a run's summary use it."""
    return tokens / seconds if seconds else 0.0


def discard(_: dict) -> None:
    """A sink that keeps nothing."""


class RunTotals:
    """Figures of a run folded from its events, one at a time (live) or all at once (replay):
    the same events give the same ``summary()``. The first ``warmup`` steps count for the
    progress and the losses but not for throughput, unless no other step exists. Memory stays
    constant however long the run. Step events a body emitted itself are folded with whatever
    fields they have (missing ones count as zero): a dashboard must never fail on them."""

    def __init__(self, warmup: int = 0):
        self.warmup = warmup
        self.steps = 0
        self.first_loss: float | None = None
        self.last_loss: float | None = None
        self.plans = 0
        self.compile_s = 0.0  # over every step: compilation is what the first steps pay
        self._all, self._measured = _Window(), _Window()

    def add(self, e: dict) -> None:
        if e.get("type") == "plan":
            self.plans += 1
        if e.get("type") != "step":
            return
        self.steps += 1
        loss = e.get("loss")
        self.first_loss = loss if self.first_loss is None else self.first_loss
        self.last_loss = loss
        self.compile_s += e.get("compile_s", 0.0)
        self._all.add(e)
        if self.steps > self.warmup:
            self._measured.add(e)

    def summary(self) -> dict:
        """``steps`` (all), ``first_loss``, ``last_loss``, ``plans``, ``compile_s`` (all); and over the measured
        steps: ``measured_steps``, ``tokens``, ``padding`` (tokens), ``seconds`` (step time), ``tokens_per_s``,
        ``split`` (seconds per phase), ``switches``, ``strategies`` ({name: {tokens,
        tokens_per_s}}), ``measured_step_s`` and ``predicted_step_s`` (mean, or None)."""
        window = self._measured if self._measured.steps else self._all
        return {
            "steps": self.steps,
            "first_loss": self.first_loss,
            "last_loss": self.last_loss,
            "plans": self.plans,
            "compile_s": self.compile_s,
            **window.summary(),
        }


class _Window:
    """Sums over a run of step events."""

    def __init__(self):
        self.steps = self.tokens = self.padding = self.switches = 0
        self.seconds = 0.0
        self.split = dict.fromkeys(PHASES, 0.0)
        self.per_strategy: dict[str, list] = {}
        self.predicted: list[float] = []

    def add(self, e: dict) -> None:
        # a body may emit "step" events of its own (job.emit): what they lack counts as nothing
        seconds = e.get("seconds")
        if not isinstance(seconds, dict):
            seconds = {}
        self.steps += 1
        self.tokens += e.get("tokens", 0)
        self.padding += e.get("padding", 0)
        self.switches += e.get("switches", 0)
        self.seconds += seconds.get("total", sum(seconds.get(phase, 0.0) for phase in PHASES))
        for phase in PHASES:
            self.split[phase] += seconds.get(phase, 0.0)
        for name, share in (e.get("strategies") or {}).items():
            totals = self.per_strategy.setdefault(name, [0, 0.0])
            totals[0] += share.get("tokens", 0)
            totals[1] += share.get("seconds", 0.0)
        if e.get("predicted_step_s") is not None:
            self.predicted.append(e["predicted_step_s"])

    def summary(self) -> dict:
        return {
            "measured_steps": self.steps,
            "tokens": self.tokens,
            "padding": self.padding,
            "seconds": self.seconds,
            "tokens_per_s": tokens_per_s(self.tokens, self.seconds),
            "split": dict(self.split),
            "switches": self.switches,
            "strategies": {
                name: {"tokens": t, "tokens_per_s": tokens_per_s(t, s)}
                for name, (t, s) in sorted(self.per_strategy.items())
            },
            "measured_step_s": self.seconds / self.steps if self.steps else None,
            "predicted_step_s": sum(self.predicted) / len(self.predicted) if self.predicted else None,
        }


def summarize(events: Iterable[dict], warmup: int = 0) -> dict:
    """``RunTotals(warmup)`` over ``events``: tokens/s is the measured steps' tokens over their
    step seconds, wherever it is shown."""
    totals = RunTotals(warmup)
    for e in events:
        totals.add(e)
    return totals.summary()


def read_events(path: str | os.PathLike) -> list[dict]:
    """The events of a run folder (or of its ``events.jsonl``); a last line cut short by a
    crash is left out."""
    path = Path(path)
    if path.is_dir():
        path = path / EVENTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; give a run folder or its {EVENTS_FILE}")
    events = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a partial line written as the kernel died
    return events
