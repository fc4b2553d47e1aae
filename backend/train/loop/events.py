"""Training events: the contract between the ranks and everything that shows or records a run.

Events are plain, JSON-ready dicts handed to a sink callable (rank 0 only). Each type is
declared once below as a ``TypedDict``; ``event(kind, **fields)`` builds one and refuses a
field its declaration lacks or a missing required one, so the declarations cannot drift from
what the trainer emits. Every event has ``type`` and ``time`` (seconds since the epoch); the
kernel adds ``rank`` on arrival, and a comparison run tags its events with ``run``.

The figures a run is judged by (tokens/s, time split, per-strategy throughput) have one
definition, ``run_totals.summarize``: the command line's table, the dashboard and the demo report
call it; throughput itself is ``tokens_per_s`` wherever it is computed (a step, a strategy, a run).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
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
    kernel: str  # the kernel attention runs (models.attention.kernels)
    repeats_heads: bool  # grouped keys and values repeated to the query heads (faster so there)
    seconds: dict[str, float | None]  # what each candidate took when it was chosen ({} if named)
    lengths: list[int]  # the lengths it was timed at
    documents: str  # how packed rows attend their documents: "per_document", "varlen" or "flex"
    document_seconds: dict[str, float | None]  # what each way took on a packed row ({} unpacked)


class _ExpertsField(TypedDict, total=False):
    experts: dict  # a mixture of experts' kernel and what choosing it measured (dense models: absent)


class GraphsEvent(Event, _ExpertsField):
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
    """A checkpoint written after ``step`` updates: one to resume from (``hotswitch``), or
    the model exported for ``transformers`` (``hf``)."""

    step: int
    path: str
    format: Literal["hotswitch", "hf"]


class WarningEvent(Event):
    message: str


class DoneEvent(Event):
    step: int
    reason: Literal["finished", "stopped"]
    seconds: float  # wall time of the whole loop
    tokens: int


class _DataFields(TypedDict, total=False):
    evaluated_on: str | None  # the validation documents of ``eval_data``, described, or None


class DataEvent(Event, _DataFields):
    """What the run trains on, once as it starts."""

    documents: int  # the training documents (held-out ones not counted)
    source: str  # where they come from (``DocumentSource.describe``)
    tokenizer: str
    held_out: int | None  # documents set aside for evaluation, or None


class StaticsEvent(Event):
    """A comparison's choice of static strategy (``backend.train.loop.compare``)."""

    predicted_step_s: dict[str, float]
    infeasible: dict[str, int]  # strategy -> the longest sequence it holds
    chosen: str


class ProfileEvent(Event):
    """Profiling (before ``auto`` plans, or a memory budget is checked): the stage of strategies
    measured now, ``index`` of ``of``, at each of ``lengths``."""

    measuring: str  # a strategy, or device groups side by side joined by " + "
    index: int  # from 1
    of: int
    lengths: list[int]


EVENTS: dict[str, type] = {
    "data": DataEvent,
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
    "profile": ProfileEvent,
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
    unknown = set(fields) - allowed
    missing = required - set(fields)
    if unknown or missing:
        raise TypeError(f"{kind} event: undeclared fields {sorted(unknown)}, missing fields {sorted(missing)}")
    return {"type": kind, "time": time.time(), **fields}


def tokens_per_s(tokens: float, seconds: float) -> float:
    """Throughput: ``tokens`` over the step ``seconds`` that trained them (0.0 when no time was
    measured). The one definition; a step event, a strategy's share and a run's summary use it."""
    return tokens / seconds if seconds else 0.0


def discard(_: dict) -> None:
    """A sink that keeps nothing."""


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


NOTICES = ("control", "checkpoint", "warning", "profile")  # the event types shown as a line of their own


def notice(event: dict) -> str:
    """A ``control``, ``checkpoint``, ``warning`` or ``profile`` event in one line: the dashboard's notices and
    ``hotswitch train``'s lines above its bar."""
    kind = event["type"]
    if kind == "profile":
        lengths = event.get("lengths") or [0]
        return (
            f"profiling {event.get('measuring')} ({event.get('index')} of {event.get('of')}) at "
            f"{len(lengths)} lengths up to {max(lengths):,} tokens, to plan"
        )
    if kind == "control":
        fields = ", ".join(f"{k}={v}" for k, v in event.items() if k not in ("type", "time", "step", "command", "rank"))
        return f"step {event.get('step')}: {event.get('command')} {fields}".rstrip()
    if kind == "checkpoint" and event.get("format") == "hf":
        return f"step {event.get('step')}: exported to {event.get('path')} (Hugging Face: model and tokenizer)"
    if kind == "checkpoint":
        return f"step {event.get('step')}: checkpoint saved to {event.get('path')}"
    return f"warning: {event.get('message')}"
