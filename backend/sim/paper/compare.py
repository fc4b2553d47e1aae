"""One setting's comparison: every static strategy that fits, hand-picked hot switching, ``auto``
and the user's own plan, each simulated on the same batch. Bad input is refused before any of
them runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from hotswitch.backend.sim.contenders import Contender, run_auto, run_plan, sim_candidates, step_seconds
from hotswitch.backend.sim.paper import setups
from hotswitch.backend.sim.paper.baselines import PAPER_CONTENDERS, paper_contenders
from hotswitch.backend.sim.scenario import Setup
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
    buckets = []
    for bucket, upper in plan.reach(setup.context):
        strategy = bucket.strategy
        if upper > bucket.above and not cost.fits(strategy, upper):
            strategy = replace(strategy, ckpt=True)
        buckets.append(Bucket(strategy, bucket.above))
    return HotSwitchPlan(tuple(buckets))


def static_strategies(setup: Setup, model_name: str | None = None) -> list[Strategy]:
    """The paper's baselines (multiples of 8 GPUs) and each strategy of its hand-picked plans
    for this setting run statically; on other GPU counts every candidate without checkpointing."""
    world = setup.cluster.world_size
    if world % 8:
        return [s for s in candidate_strategies(setup.config, world) if not s.ckpt]
    picked = [setups.hand_picked(model_name or setup.config.name, world, which) for which in ("c1", "c2")]
    extra = [s for plan in picked if plan is not None for s in plan.strategies]
    return [s for s in dict.fromkeys([*setups.baselines(world), *extra]) if _allowed(setup, s)]


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
    paper: dict[str, Contender] = field(default_factory=dict)  # sim.paper.baselines, by name
    auto_cp: Contender | None = None  # ``auto`` with the cp layouts too, where asked for
    auto_groups: Contender | None = None  # ``auto`` also weighing device groups side by side, where asked for

    @property
    def cp_speedup(self) -> float | None:
        """``auto`` over ``auto+cp`` (None where either has no plan or cp was not asked for)."""
        cp = self.auto_cp
        return self.auto.step_s / cp.step_s if cp and cp.step_s and self.auto.step_s else None

    @property
    def groups_speedup(self) -> float | None:
        """``auto`` (sequential buckets) over ``auto+groups`` (None where either has no plan or
        groups were not asked for)."""
        groups = self.auto_groups
        return self.auto.step_s / groups.step_s if groups and groups.step_s and self.auto.step_s else None

    @property
    def best_static(self) -> Contender | None:
        fitting = [c for c in self.statics if c.step is not None]
        return min(fitting, key=step_seconds) if fitting else None

    def contenders(self) -> list[Contender]:
        extra = [c for c in (self.auto_cp, self.auto_groups) if c]
        return [*self.statics, *self.hot.values(), *self.paper.values(), self.auto, *extra]

    @property
    def megatron_paper(self) -> Contender | None:
        """The faster of ``megatron-paper`` and its ``+recompute`` variant that fits (the engine
        keeps more activations than Megatron-LM, so without recompute few MBS fit)."""
        runs = [self.paper.get(n) for n in ("megatron-paper", "megatron-paper+recompute")]
        fitting = [c for c in runs if c is not None and c.step_s]
        return min(fitting, key=step_seconds) if fitting else None


def compare(
    setup: Setup,
    model_name: str | None = None,
    plan: HotSwitchPlan | None = None,
    baselines: tuple[str, ...] = PAPER_CONTENDERS,
    progress: Callable[[str, int, int], None] | None = None,
    context_parallel: bool = False,
    side_by_side: bool = False,
) -> Comparison:
    """Simulate every contender of ``setup`` (the paper's c1/c2 when ``model_name`` and the GPU
    count are one of its settings; ``plan`` when given; the named paper ``baselines``; with
    ``context_parallel``, ``auto+cp``: ``auto`` with the cp layouts too; with ``side_by_side``,
    ``auto+groups``: ``auto`` also weighing two device groups side by side), calling
    ``progress(what, done, total)`` before each."""
    unknown = [n for n in baselines if n not in PAPER_CONTENDERS]
    if unknown:
        raise ValueError(f"unknown contender {unknown[0]!r}; choose from {', '.join(PAPER_CONTENDERS)}")
    check_fits_somewhere(setup)
    progress = progress or (lambda what, done, total: None)
    layouts = static_strategies(setup, model_name)
    offers = {w: setups.hand_picked(model_name or setup.config.name, setup.cluster.world_size, w) for w in ("c1", "c2")}
    picked = {w: p for w, p in offers.items() if p is not None}
    total, done = (
        len(layouts) + len(picked) + (plan is not None) + len(baselines) + 1 + context_parallel + side_by_side,
        0,
    )
    statics = []
    for s in layouts:
        progress(f"static {s}", done, total)
        statics.append(run_plan(setup, checkpointed_where_needed(setup, HotSwitchPlan.of(s)), str(s)))
        done += 1
    hot = {}
    for which, chosen in picked.items():
        progress(which, done, total)
        hot[which] = run_plan(setup, checkpointed_where_needed(setup, chosen), which)
        done += 1
    if plan is not None:
        progress("your plan", done, total)
        hot["plan"] = run_plan(setup, plan, "plan")
        done += 1
    named = {}
    for name in baselines:
        progress(name, done, total)
        named.update(paper_contenders(setup, model_name, (name,)))
        done += 1
    progress("auto", done, total)
    seeds = [c for w, c in hot.items() if w in ("c1", "c2")]
    auto = run_auto(setup, seeds=seeds)
    auto_cp = None
    if context_parallel:
        progress("auto with cp", done + 1, total)
        auto_cp = replace(run_auto(replace(setup, context_parallel=True), seeds=seeds), name="auto+cp")
    auto_groups = None
    if side_by_side:
        progress("auto with device groups", total - 1, total)
        auto_groups = replace(run_auto(replace(setup, side_by_side=True), seeds=seeds), name="auto+groups")
    progress("done", total, total)
    return Comparison(setup, statics, hot, auto, named, auto_cp, auto_groups)
