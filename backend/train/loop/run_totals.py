"""A run's figures folded from its events: ``RunTotals`` (live, one event at a time) and
``summarize`` (all at once), the one definition of tokens/s, the time split and per-strategy
throughput that the command line, the dashboard and the reports show."""

from __future__ import annotations

from collections.abc import Iterable

from hotswitch.backend.train.loop.events import PHASES, tokens_per_s


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
        self.first_step: int | None = None  # step numbers: a resumed run's first is past 1
        self.last_step: int | None = None
        self.planned_steps: int | None = None  # the run's total, the checkpoint's steps included
        self.compile_s = 0.0  # over every step: compilation is what the first steps pay
        self.first_eval_loss: float | None = None  # the held-out documents' loss, where the run evaluates
        self.last_eval_loss: float | None = None
        self.data: str | None = None  # what the run trains on, where it said (its ``data`` event)
        self.checkpoints = 0  # resumable checkpoints written, the last at ``last_checkpoint``
        self.last_checkpoint: str | None = None
        self.exported: str | None = None  # the Hugging Face export's folder
        self._all = _Window()
        self._measured = _Window()

    def add(self, e: dict) -> None:
        if e.get("type") == "plan":
            self.plans += 1
        if e.get("type") == "data":
            self.data = _data_text(e)
        if e.get("type") == "checkpoint":
            self._saved(e)
        if e.get("type") == "eval" and e.get("loss") is not None:
            self.first_eval_loss = e["loss"] if self.first_eval_loss is None else self.first_eval_loss
            self.last_eval_loss = e["loss"]
        if e.get("type") != "step":
            return
        self.steps += 1
        self.first_step = e.get("step") if self.first_step is None else self.first_step
        self.last_step = e.get("step")
        self.planned_steps = e.get("steps")
        loss = e.get("loss")
        self.first_loss = loss if self.first_loss is None else self.first_loss
        self.last_loss = loss
        self.compile_s += e.get("compile_s", 0.0)
        self._all.add(e)
        if self.steps > self.warmup:
            self._measured.add(e)

    def _saved(self, e: dict) -> None:
        if e.get("format") == "hf":
            self.exported = e.get("path")
            return
        self.checkpoints += 1
        self.last_checkpoint = e.get("path")

    def summary(self) -> dict:
        """``steps`` (all; ``first_step``, ``last_step`` their numbers and ``planned_steps`` the
        run's total, all None where no step ran), ``first_loss``, ``last_loss``,
        ``first_eval_loss`` and ``last_eval_loss`` (None where the run did not evaluate),
        ``plans``, ``compile_s`` (all), ``data`` (what it trains on, in words, or None),
        ``checkpoints`` (resumable ones written) and ``last_checkpoint`` (its folder, or None),
        ``exported`` (the Hugging Face export's folder, or None); and over the measured steps:
        ``measured_steps``, ``tokens``, ``padding`` (tokens), ``seconds`` (step time),
        ``tokens_per_s``, ``split`` (seconds per phase), ``switches``, ``strategies`` ({name:
        {tokens, tokens_per_s}}), ``measured_step_s`` and ``predicted_step_s`` (mean, or None)."""
        window = self._measured if self._measured.steps else self._all
        return {
            "steps": self.steps,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "planned_steps": self.planned_steps,
            "first_loss": self.first_loss,
            "last_loss": self.last_loss,
            "first_eval_loss": self.first_eval_loss,
            "last_eval_loss": self.last_eval_loss,
            "plans": self.plans,
            "compile_s": self.compile_s,
            "data": self.data,
            "checkpoints": self.checkpoints,
            "last_checkpoint": self.last_checkpoint,
            "exported": self.exported,
            **window.summary(),
        }


def _data_text(e: dict) -> str:
    """A ``data`` event in words: its source and tokenizer, and the documents held out."""
    held = e.get("held_out")
    separate = e.get("evaluated_on")
    return (
        f"{e.get('source')}, {e.get('tokenizer')} tokens"
        + (f"; {held:,} held out" if held else "")
        + (f"; evaluated on {separate}" if separate else "")
    )


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
