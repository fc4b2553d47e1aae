"""What a ``PlanView`` draws, computed from a cost model, a plan and a batch: plain data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hotswitch.backend.data.stream import Sequence as Seq
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, instantiation_strategy

CURVE_POINTS = 64
LONGEST_DRAWN = 1 << 17  # the length axis ends here at most when nothing else bounds it
AUTO = "auto"


@dataclass(frozen=True)
class PlanPrediction:
    """``curves``: {strategy: {"lengths", "time_s", "memory_bytes"}} for every strategy of the
    cost model, where ``time_s`` is the predicted seconds per sequence with the strategy's dp
    replicas working in parallel (what one sequence adds to a group's time) and
    ``memory_bytes`` the model states plus one sequence's activations per device;
    ``buckets`` [[strategy, above], ...]; ``batch`` [(length, strategy the plan sends it to)];
    ``predicted_step_s`` the cost model's step time for that batch (None without one).
    Without a plan: the curves and the limit only."""

    curves: dict[str, dict[str, list[float]]]
    memory_limit: float
    plan: HotSwitchPlan | None
    buckets: list[list]
    batch: list[tuple[int, str]]
    predicted_step_s: float | None


def predict_plan(
    cost,
    plan: HotSwitchPlan | str | Sequence | None = AUTO,
    lengths: Sequence[int] = (),
    max_len: int | None = None,
    points: int = CURVE_POINTS,
) -> PlanPrediction:
    """``cost``: a ``backend.train.planning.cost.CostModel``. ``plan``: a ``HotSwitchPlan``, anything
    ``HotSwitchPlan.of`` reads, "auto" (the buckets ``auto_plan`` picks for ``lengths``, as
    the trainer does) or None. The curves run from length 1 to ``max_len``, by default the
    longest of ``lengths``, else the longest sequence any strategy holds within the budget."""
    top = max_len or (max(lengths) if lengths else max(cost.longest(s, LONGEST_DRAWN) for s in cost.strategies))
    grid = sorted({round(1 + i * (top - 1) / max(points - 1, 1)) for i in range(points)})
    curves = {str(s): _curve(cost, s, grid) for s in cost.strategies}
    if plan is None:
        if lengths:
            raise ValueError('a batch is coloured by the plan that dispatches it: give a plan, or plan="auto"')
        return PlanPrediction(curves, cost.budget, None, [], [], None)
    if plan == AUTO:
        if not lengths:
            raise ValueError('plan="auto" picks buckets for a batch: pass the batch\'s lengths, or give a plan')
        from hotswitch.backend.train.planning.auto import auto_plan  # the cost model's module: imports torch

        instantiation = instantiation_strategy(list(cost.strategies))
        plan, _ = auto_plan(lengths, cost, instantiation, max_len or max(lengths))
    else:
        plan = plan if isinstance(plan, HotSwitchPlan) else HotSwitchPlan.of(plan)
        instantiation = instantiation_strategy(plan.strategies)
    missing = [str(s) for s in plan.strategies if s not in cost.strategies]
    if missing:
        raise ValueError(
            f"the cost model has no profile of {missing}; it covers {[str(s) for s in cost.strategies]}: "
            "profile those strategies too or plan with these"
        )
    groups = plan.assign([Seq(i, (0,) * (n + 1)) for i, n in enumerate(lengths)])
    return PlanPrediction(
        curves=curves,
        memory_limit=cost.budget,
        plan=plan,
        buckets=plan.spec,
        batch=sorted((q.length, str(s)) for s, seqs in groups.items() for q in seqs),
        predicted_step_s=cost.step_s(plan, lengths, instantiation) if lengths else None,
    )


def _curve(cost, strategy: Strategy, grid: list[int]) -> dict[str, list[float]]:
    c = cost.strategies[strategy]
    return {
        "lengths": list(grid),
        "time_s": [c.time(n) / strategy.dp for n in grid],
        "memory_bytes": [c.static_bytes + c.memory(n) for n in grid],
    }
