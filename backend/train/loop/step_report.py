"""What a trainer reports about itself, as events: the plan in force, the graphs it compiled,
and each trained step (the engine's result and the step's wall time)."""

from __future__ import annotations

from dataclasses import asdict

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.graph.logical import summarize
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.loop.engine import Engine, StepResult
from hotswitch.backend.train.loop.events import event, tokens_per_s
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, Stage, as_stage


def plan_event(
    step: int,
    plan: HotSwitchPlan,
    order: list[Strategy | Stage],
    instantiation: Strategy,
    predicted: float | None,
    source: str,
) -> dict:
    """The ``plan`` event of ``plan``, run in ``order``, in force from ``step`` on."""
    return event(
        "plan",
        step=step,
        buckets=plan.spec,
        order=[" + ".join(map(str, as_stage(s))) for s in order],  # device groups side by side joined by +
        instantiation=str(instantiation),
        predicted_step_s=predicted,
        source=source,
    )


def graphs_event(engine: Engine) -> dict:
    """The ``graphs`` event: the logical graph, this rank's executable graph per strategy, and
    the attention kernel they run (with what choosing it measured)."""
    executable = {str(s): state.graph.summary() for s, state in engine.states.items() if state.graph is not None}
    attention = {k: v for k, v in asdict(engine.attention).items() if k != "alone"}  # alone: only while timed
    experts = {"experts": engine.experts_kernel} if engine.experts_kernel else {}
    return event("graphs", logical=summarize(engine.logical), exec=executable, attention=attention, **experts)


def step_event(
    step: int, steps: int, batch: list[Sequence], result: StepResult, total_s: float, predicted: float | None, lr: float
) -> dict:
    """The ``step`` event of ``batch``, trained as ``result`` says in ``total_s`` seconds."""
    times = result.times
    count = sum(s.length for s in batch)
    return event(
        "step",
        step=step,
        steps=steps,
        tokens=count,
        padding=sum(share["padding"] for share in times.per_strategy.values()),
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
        tokens_per_s=tokens_per_s(count, total_s),
        strategies={
            s: {**v, "tokens_per_s": tokens_per_s(v["tokens"], v["seconds"])} for s, v in times.per_strategy.items()
        },
        switches=times.switches,
        compile_s=times.compile,
        predicted_step_s=predicted,
        lr=lr,
    )
