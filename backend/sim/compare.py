"""One setting's comparison: every static strategy that fits, hand-picked hot switching, ``auto``
and the user's own plan, each simulated on the same batch. Bad input is refused before any of
them runs."""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.sim import paper
from hotswitch.backend.sim.contenders import Contender, run_auto, run_plan, sim_candidates
from hotswitch.backend.sim.setup import Setup
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.auto import candidate_strategies
from hotswitch.backend.train.planning.dispatch import Bucket, HotSwitchPlan, instantiation_strategy


def check_fits_somewhere(setup: Setup) -> None:
    """Raise, naming the limit, if no strategy holds a ``context``-long sequence on this
    cluster, even with the model split over every device and its optimizer at its smallest."""
    candidates = sim_candidates(setup)
    instantiation = instantiation_strategy(candidates)
    cost = setup.cost_model(candidates, instantiation)
    if any(cost.fits(s, setup.context) for s in candidates):
        return
    longest = max(cost.longest(s, setup.context) for s in candidates)
    raise ValueError(
        f"{setup.config.name} does not fit {setup.cluster.world_size} x {setup.spec.name} at {setup.context} tokens: "
        f"with {setup.budget(instantiation) / 2**30:.1f} GiB per device left beside the optimizer state, the best "
        f"strategy holds at most {longest} tokens; use more GPUs or a context of at most {longest}"
    )


def checkpointed_where_needed(setup: Setup, plan: HotSwitchPlan) -> HotSwitchPlan:
    """``plan`` with activation checkpointing on each strategy that cannot hold its bucket's
    longest sequences without it (the engine keeps more activations than Megatron-LM: the
    gathered input of every column-parallel linear, fp32 norms and rotary); the others unchanged.
    Applied alike to the paper's static baselines and its hand-picked plans."""
    cost = setup.cost_model(list(plan.strategies), instantiation_strategy(plan.strategies))
    upper, buckets = setup.context, []
    for bucket in plan.buckets:
        strategy = bucket.strategy
        if upper > bucket.above and not cost.fits(strategy, upper):
            strategy = Strategy(strategy.dp, strategy.tp, strategy.pp, sp=strategy.sp, ckpt=True)
        buckets.append(Bucket(strategy, bucket.above))
        upper = bucket.above
    return HotSwitchPlan(tuple(buckets))


def static_strategies(setup: Setup, model_name: str | None = None) -> list[Strategy]:
    """The paper's baselines (multiples of 8 GPUs) and each strategy of its hand-picked plans
    for this setting run statically; on other GPU counts every candidate without checkpointing."""
    world = setup.cluster.world_size
    if world % 8:
        return [s for s in candidate_strategies(setup.config, world) if not s.ckpt]
    picked = [paper.hand_picked(model_name or setup.config.name, world, which) for which in ("c1", "c2")]
    extra = [s for plan in picked if plan is not None for s in plan.strategies]
    return [s for s in dict.fromkeys([*paper.baselines(world), *extra]) if _allowed(setup, s)]


def _allowed(setup: Setup, strategy: Strategy) -> bool:
    try:
        setup.check(strategy)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Comparison:
    setup: Setup
    statics: list[Contender]  # every static strategy tried, fitting or not
    hot: dict[str, Contender]  # "c1", "c2" (the paper's) and "plan" (the user's), where given
    auto: Contender

    @property
    def best_static(self) -> Contender | None:
        fitting = [c for c in self.statics if c.step is not None]
        return min(fitting, key=lambda c: c.step_s) if fitting else None

    def contenders(self) -> list[Contender]:
        return [*self.statics, *self.hot.values(), self.auto]


def compare(setup: Setup, model_name: str | None = None, plan: HotSwitchPlan | None = None) -> Comparison:
    """Simulate every contender of ``setup`` (the paper's c1/c2 when ``model_name`` and the GPU
    count are one of its settings; ``plan`` when given)."""
    check_fits_somewhere(setup)
    statics = [
        run_plan(setup, checkpointed_where_needed(setup, HotSwitchPlan.of(s)), str(s))
        for s in static_strategies(setup, model_name)
    ]
    hot = {}
    for which in ("c1", "c2"):
        picked = paper.hand_picked(model_name or setup.config.name, setup.cluster.world_size, which)
        if picked is not None:
            hot[which] = run_plan(setup, checkpointed_where_needed(setup, picked), which)
    if plan is not None:
        hot["plan"] = run_plan(setup, plan, "plan")
    return Comparison(setup, statics, hot, run_auto(setup))
