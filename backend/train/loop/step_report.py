"""A trained step as its ``step`` event: the engine's result and the step's wall time."""

from __future__ import annotations

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.train.loop.engine import StepResult
from hotswitch.backend.train.loop.events import event


def step_event(
    step: int, steps: int, batch: list[Sequence], result: StepResult, total_s: float, predicted: float | None, lr: float
) -> dict:
    """The ``step`` event of ``batch``, trained as ``result`` says in ``total_s`` seconds."""
    times, count = result.times, sum(s.length for s in batch)
    return event(
        "step",
        step=step,
        steps=steps,
        tokens=count,
        sequences=len(batch),
        loss=result.loss,
        grad_norm=result.grad_norm,
        seconds={
            "compute": times.compute,
            "switch": times.switch,
            "grad_sync": times.grad_sync,
            "update": times.update,
            "total": total_s,
        },
        tokens_per_s=count / total_s,
        strategies={
            s: {**v, "tokens_per_s": v["tokens"] / v["seconds"] if v["seconds"] else 0.0}
            for s, v in times.per_strategy.items()
        },
        switches=times.switches,
        predicted_step_s=predicted,
        lr=lr,
    )
