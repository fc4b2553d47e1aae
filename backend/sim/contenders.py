"""The contenders of one simulated setting, each through the engine's own planning code: a static
strategy, a hand-picked hot-switch plan, or ``auto``; what each step takes and needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from hotswitch.backend.sim.envelope import lower_envelope
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.sim.step import SimulatedStep, simulate_step
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.auto import (
    auto_plan,
    candidate_strategies,
    check_feasible,
    expert_parallel_candidates,
    with_selective,
)
from hotswitch.backend.train.planning.boundaries import Shared
from hotswitch.backend.train.planning.cost import CostModel
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, instantiation_strategy
from hotswitch.backend.train.planning.side_by_side import group_places, mixed_plan, placed, side_by_side_plan


@dataclass(frozen=True)
class Contender:
    """``step`` is None when the plan does not fit; ``why`` then says which limit it broke."""

    name: str
    plan: HotSwitchPlan | None
    instantiation: Strategy | None
    step: SimulatedStep | None
    memory_bytes: dict[str, float]  # per strategy: peak bytes per device
    why: str = ""
    seconds: float | None = None  # a baseline simulated outside the engine's plans (``sim.paper.baselines``)
    detail: str = ""  # how that baseline ran (layout, MBS...)
    predicted_s: float | None = None  # what the planner's fitted costs predicted for ``step``

    @property
    def step_s(self) -> float | None:
        return self.step.seconds if self.step else self.seconds

    def summary(self) -> dict:
        return {
            "name": self.name,
            "plan": str(self.plan) if self.plan else (self.detail or None),
            "instantiation": str(self.instantiation) if self.instantiation else None,
            "step_s": self.step_s,
            "predicted_s": self.predicted_s,
            "memory_gib": {s: b / 2**30 for s, b in self.memory_bytes.items()},
            "breakdown_s": self.step.breakdown() if self.step else None,
            "why": self.why or None,
        }


def step_seconds(contender: Contender) -> float:
    """``step_s`` of a contender that has one: the key that orders contenders that ran."""
    if contender.step_s is None:
        raise ValueError(f"{contender.name} has no step time ({contender.why or 'not run'})")
    return contender.step_s


def _run(setup: Setup, name: str, plan: HotSwitchPlan, cost: CostModel, instantiation: Strategy) -> Contender:
    """``plan`` planned on ``cost`` (the fitted costs), timed on the device (``Setup.exact_model``)."""
    predicted = cost.step_s(plan, setup.lengths, instantiation)
    step = simulate_step(setup.exact_model(cost), plan, setup.lengths, instantiation, setup.cluster.world_size)
    master = setup.precision.master_bytes * setup.optimizer_share(instantiation)
    memory = {
        str(s): master + cost.strategies[s].static_bytes + step.activation_bytes.get(str(s), 0.0)
        for s in plan.strategies
    }
    return Contender(name, plan, instantiation, step, memory, predicted_s=predicted)


def run_plan(
    setup: Setup, plan: HotSwitchPlan, name: str | None = None, instantiation: Strategy | None = None
) -> Contender:
    """A static or hand-picked plan, its instantiation chosen as the trainer chooses it (or given)."""
    for s in plan.strategies:
        setup.check(s)
    instantiation = instantiation or instantiation_strategy(plan.strategies)
    cost = setup.cost_model(list(plan.strategies), instantiation)
    name = name or str(plan)
    try:
        check_feasible(plan, cost, setup.context)
    except ValueError as error:
        why = _over_limit(setup, plan, cost, instantiation) or str(error)
        return Contender(name, plan, instantiation, None, {}, why)
    return _run(setup, name, plan, cost, instantiation)


def _over_limit(setup: Setup, plan: HotSwitchPlan, cost: CostModel, instantiation: Strategy) -> str | None:
    """Why ``plan`` does not fit, against the one limit every peak is held within: the first
    bucket that cannot hold its longest sequences, what it would need and how long it can go."""
    limit = setup.spec.memory - setup.spec.reserved
    for bucket, upper in plan.reach(setup.context):
        s = bucket.strategy
        if upper > bucket.above and not cost.fits(s, upper):
            need = setup.precision.master_bytes * setup.optimizer_share(instantiation)
            need += cost.strategies[s].static_bytes + cost.strategies[s].memory(upper)
            longest = cost.longest(s, upper)
            gib = need / 2**30
            limit_gib = limit / 2**30
            over = f"{s} needs {gib:.1f} GiB per device at {upper} tokens, over the {limit_gib:.1f} GiB limit"
            if longest < 1:
                return f"{over} (it holds no sequence at all); use more tensor or pipeline parallelism"
            fix = f"raise its lower bound to {longest} or use more tensor parallelism"
            return f"{over} (it holds at most {longest}); {fix}"
    return None


def run_static(setup: Setup, strategy: Strategy | str, instantiation: Strategy | None = None) -> Contender:
    """``strategy`` alone training ``setup``'s batch (master weights on ``instantiation``, by
    default the one the engine would choose): its step, or why it does not fit."""
    strategy = Strategy.parse(strategy)
    return run_plan(setup, HotSwitchPlan.of(strategy), str(strategy), instantiation)


def sim_candidates(setup: Setup, world: int | None = None) -> list[Strategy]:
    """The trainer's ``auto`` candidates, and the tensor-parallel ones with sequence parallelism
    also with activation checkpointing: at 32K tokens the engine's activations (which keep the
    gathered input of every column-parallel linear) need it where the paper's system did not.
    Those and pure data parallelism also with selective recompute (``with_selective``: kept by
    ``auto`` where it lets a bucket fit). The trainer leaves these out to keep its search (and its
    profile) small; ``auto_plan`` takes them alike. With ``setup.context_parallel``, also the cp
    layouts whose group spans the whole cluster (``planning.context.context_candidates``). For a
    mixture of experts, each of those with replicas also with its experts split over them
    (``auto.expert_parallel_candidates``, as the trainer weighs them) and, where that ep group
    spans servers, over as many as one server holds (``within_servers``).
    ``world``: the candidates over that many devices (a device group's) instead of every one."""
    world = world or setup.cluster.world_size
    # cp serves the few longest documents, one at a time on the whole cluster (dp 1): the search
    # over every cp x dp layout takes minutes where this takes seconds
    candidates = [
        s
        for s in candidate_strategies(setup.config, world, setup.context_parallel)
        if s.cp == 1 or s.cp * s.tp == world
    ]
    checkpointed = [replace(s, ckpt=True) for s in candidates if s.sp]
    selective = with_selective([s for s in candidates if s.sp or s.world_size == s.dp])
    every = list(dict.fromkeys([*candidates, *checkpointed, *selective]))
    split = expert_parallel_candidates(setup.config, every)
    return list(dict.fromkeys([*every, *split, *within_servers(split, setup.cluster.devices_per_node)]))


def within_servers(strategies: Sequence[Strategy], per_server: int) -> list[Strategy]:
    """Each ep layout whose ep group spans servers again with the widest ep that keeps it inside
    one (a divisor of its ep, above 1): its all-to-alls then run over NVLink, not the servers'
    network, which ``expert_parallel_candidates`` (the widest ep dividing the expert count)
    leaves out."""
    out = []
    for s in strategies:
        inside = [ep for ep in range(2, s.ep) if s.ep % ep == 0 and ep * s.cp * s.tp <= per_server]
        if s.ep * s.cp * s.tp > per_server and inside:
            out.append(replace(s, ep=max(inside)))
    return out


def fastest_statics(setup: Setup, strategies: list[Strategy]) -> list[Strategy]:
    """``strategies`` that hold the context, fastest first when each runs the batch alone."""
    seconds: dict[Strategy, float] = {}
    for s in strategies:
        cost = setup.cost_model([s], instantiation_strategy([s]))  # an ep layout's master weights: without ep
        if cost.fits(s, setup.context):
            seconds[s] = cost.static_step_s(s, setup.lengths)
    return sorted(seconds, key=seconds.__getitem__)


def roomiest(setup: Setup, candidates: Sequence[Strategy]) -> list[Strategy]:
    """For a mixture of experts, the instantiation leaving the most memory (its master weights
    sharded over the most replicas): tensor parallelism replicates the experts, so the trainer's
    choice (the most split by tp x pp) can leave none, where data parallelism shards them all."""
    if setup.config.experts is None:
        return []
    return [max((instantiation_strategy([s]) for s in candidates if not s.is_group), key=setup.budget)]


def run_auto(
    setup: Setup, instantiations: Sequence[Strategy] | None = None, seeds: Sequence[Contender] = ()
) -> Contender:
    """``auto_plan`` over ``sim_candidates`` for this batch, once per instantiation tried (default:
    the trainer's choice, the three fastest candidates run statically, for a mixture of experts
    the ``roomiest``, then each strategy of the best plan so far that holds the context): the
    fastest prediction.

    Planned as the trainer plans each batch: the longest bucket must hold the context (the
    data's ``max_len``), as every static strategy must, so no contender gains from this batch
    happening to lack the longest documents.

    ``seeds``: plans already simulated (the paper's hand-picked ones) that ``auto`` starts from:
    where one beats the search, ``auto`` runs it (a trainer given the same plan would).
    ``setup.envelope``: the search weighs the candidates' ``sim.envelope.lower_envelope`` only.
    """
    candidates = sim_candidates(setup)
    statics = fastest_statics(setup, candidates)[:3]
    fastest = [instantiation_strategy([s]) for s in statics]  # an ep layout's master weights: without ep
    queue = list(instantiations or [instantiation_strategy(candidates), *fastest, *roomiest(setup, candidates)])
    if setup.envelope:
        costs = [setup.cost_model(candidates, s) for s in dict.fromkeys(queue)]
        candidates = lower_envelope(costs, candidates, setup.lengths, statics)
    reported = setup.switches.estimate
    setup.switches.estimate = True  # the search on switch-time bounds; the step reported as the setup says
    try:
        best, errors = _search(setup, candidates, queue, instantiations is None)
        finalists = ([best] if best else []) + (_side_by_side(setup, best) if setup.side_by_side else [])
    finally:
        setup.switches.estimate = reported
    if not finalists:
        return Contender("auto", None, None, None, {}, errors[0] if errors else "no candidate strategy")
    # ranked on switch-time bounds, the finalists are compared on the switches their steps take
    # (the sequential one first, so a tie keeps it): groups never win on a bound alone
    best = min(finalists, key=lambda f: f[2].step_s(f[1], setup.lengths, f[3]))
    found = _run(setup, "auto", best[1], best[2], best[3])
    for seed in seeds:  # chosen as the trainer would choose: by prediction
        ours = found.predicted_s
        theirs = seed.predicted_s
        if seed.step is not None and theirs is not None and ours is not None and theirs < ours:
            found = replace(seed, name="auto", detail="seeded")
    return found


def _search(setup: Setup, candidates: list[Strategy], queue: list[Strategy], grow: bool) -> tuple:
    """``run_auto``'s search: (best (predicted, plan, cost, instantiation) or None, errors)."""
    best = None  # what the searches of this batch share
    tried = set()
    errors = []
    shared = Shared()
    while queue:
        instantiation = queue.pop(0)
        if instantiation in tried:
            continue
        tried.add(instantiation)
        cost = setup.cost_model(candidates, instantiation)
        try:
            plan, predicted = auto_plan(
                setup.lengths, cost, instantiation, setup.context, latency_aware=setup.latency_aware, shared=shared
            )
        except ValueError as error:
            errors.append(str(error))
            continue
        if best is None or predicted < best[0] - 1e-12:
            best = (predicted, plan, cost, instantiation)
            if grow:  # an ep layout holds the master weights without its ep (``instantiation_strategy``)
                holding = [instantiation_strategy([s]) for s in plan.strategies if cost.fits(s, setup.context)]
                queue += [s for s in holding if s not in tried]
    return best, errors


def group_candidates(setup: Setup) -> list[Strategy]:
    """Device groups for ``auto`` to place side by side: the candidates of each of
    ``group_places`` (the long sequences' group at rank 0, the rest's beside it)."""
    out = []
    for first, devices in group_places(setup.cluster.world_size):
        for s in (s for s in sim_candidates(setup, devices) if s.ep == 1):  # no group splits experts
            try:
                out.append(setup.check(placed(s, first)))
            except ValueError:  # a layout the model does not split into on this cluster
                continue
    return list(dict.fromkeys(out))


def _side_by_side(setup: Setup, sequential: tuple | None) -> list[tuple]:
    """Plans with device groups side by side, as ``_search``'s best is: (predicted, plan, cost,
    instantiation): two groups alone (the master weights data-parallel over every device), and
    the ``sequential`` best's longest bucket followed by two groups (its instantiation kept)."""
    groups = group_candidates(setup)
    found = []
    instantiation = Strategy(dp=setup.cluster.world_size)
    cost = setup.cost_model(groups, instantiation)
    alone = side_by_side_plan(setup.lengths, cost, instantiation, setup.context)
    if alone is not None:
        found.append((alone[1], alone[0], cost, instantiation))
    if sequential is not None and len(sequential[1].buckets) > 1:
        first = sequential[1].buckets[0]
        instantiation = sequential[3]
        cost = setup.cost_model([*groups, first.strategy], instantiation)
        mixed = mixed_plan(setup.lengths, cost, instantiation, setup.context, first)
        if mixed is not None:
            found.append((mixed[1], mixed[0], cost, instantiation))
    return found
