"""Switch seconds on a described cluster, from the engine's own switch planner, planned on first
use: ``auto`` asks for a few dozen of the hundreds of pairs a large cluster has."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.layout import param_layout, partial_over_replicas
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.switch_bound import bound_seconds
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch.plan import SwitchPlan
from hotswitch.backend.switch.planner import plan_switch
from hotswitch.backend.train.planning.memory import expert_params

SwitchKey = tuple[str, Strategy, Strategy]

# Switch seconds planned so far, for every simulated cluster: a plan depends on the model, the
# cluster, the dtypes and the two layouts only, so every context and dataset of a grid shares it.
_SECONDS: dict[tuple, float] = {}


def layout_of(strategy: Strategy) -> Strategy:
    """The parameter layout a strategy has: sequence parallelism and checkpointing change none;
    context parallelism replicates parameters like dp, and its ranks sit between dp's and tp's
    in the mesh, so dp x cp replicas are one dp of the same ranks. A device group keeps its ranks;
    expert parallelism its split of the experts (over consecutive replicas: with cp, its ep
    groups are not those of the dp x cp replicas, so the layout keeps cp too)."""
    if strategy.ep > 1 and strategy.cp > 1:
        return Strategy(strategy.dp, strategy.tp, strategy.pp, cp=strategy.cp, first=strategy.first, ep=strategy.ep)
    return Strategy(strategy.replicas, strategy.tp, strategy.pp, first=strategy.first, ep=strategy.ep)


class PlannedSwitches(Mapping[SwitchKey, float]):
    """``CostModel.switch_s`` for a simulated cluster: ("params" | "grads", src, dst) -> seconds.

    Planned as the engine plans them (``Switches`` in ``train/loop/switches.py``): parameters in their compute dtype
    into the destination layout; accumulated gradients into the destination's dp-partial layout.
    A plan's time is the planner's bandwidth model (``SwitchPlan.time_s``) plus the busiest
    rank's messages at the device's latency."""

    def __init__(self, config: ModelConfig, cluster: Cluster, precision: Precision, latency_s: float):
        self.config = config
        self.cluster = cluster
        self.precision = precision
        self.latency_s = latency_s
        self.strategies: set[Strategy] = set()
        self.plans: dict[SwitchKey, SwitchPlan] = {}
        self.seconds: dict[SwitchKey, float] = {}
        self.bounds: dict[SwitchKey, float] = {}
        self.estimates: dict[SwitchKey, float] = {}  # ``switch_bound``'s answers, per pair asked
        self.estimate = False  # answer with ``switch_bound`` instead of planning (a search's mode)

    def allow(self, strategies: list[Strategy]) -> None:
        """The strategies whose pairs this mapping answers for (any pair of them, on demand)."""
        self.strategies.update(strategies)

    def plan(self, what: str, src: Strategy, dst: Strategy) -> SwitchPlan:
        key = (what, layout_of(src), layout_of(dst))
        if key not in self.plans:
            source = param_layout(self.config, key[1])
            target = param_layout(self.config, key[2])
            if what == "grads":
                target, itemsize = partial_over_replicas(target), self.precision.grad_bytes
            else:
                itemsize = self.precision.param_bytes
            self.plans[key] = plan_switch(source, target, self.cluster, itemsize=itemsize)
        return self.plans[key]

    def plan_seconds(self, plan: SwitchPlan) -> float:
        messages = [0] * self.cluster.world_size
        for m in plan.messages:
            messages[m.sender] += 1
            messages[m.receiver] += 1
        return plan.time_s + max(messages) * self.latency_s

    def bound(self, what: str, src: Strategy, dst: Strategy) -> float:
        """``switch_bound``'s seconds for the pair (no plan made)."""
        itemsize = self.precision.grad_bytes if what == "grads" else self.precision.param_bytes
        nbytes = itemsize * self.config.n_params
        experts = itemsize * expert_params(self.config)
        a, b = layout_of(src), layout_of(dst)
        return bound_seconds(a, b, self.cluster, nbytes, self.latency_s, partial=what == "grads", expert_bytes=experts)

    def __getitem__(self, key: SwitchKey) -> float:
        what, src, dst = key
        if what not in ("params", "grads") or src == dst or not {src, dst} <= self.strategies:
            raise KeyError(key)
        if self.estimate:
            if key in self.estimates:  # a search asks for the same pairs many times
                return self.estimates[key]
            shared: tuple = (
                "bound",
                self.config,
                self.cluster,
                self.precision,
                self.latency_s,
                what,
                layout_of(src),
                layout_of(dst),
            )
            if shared not in _SECONDS:
                _SECONDS[shared] = self.bound(what, src, dst)
            self.estimates[key] = _SECONDS[shared]
            return self.estimates[key]
        if key not in self.seconds:
            shared = (self.config, self.cluster, self.precision, self.latency_s, what, layout_of(src), layout_of(dst))
            if shared not in _SECONDS:
                _SECONDS[shared] = self.plan_seconds(self.plan(what, src, dst))
            self.seconds[key] = _SECONDS[shared]
        return self.seconds[key]

    def __iter__(self) -> Iterator[SwitchKey]:
        return iter(self.seconds)  # the pairs planned so far

    def __len__(self) -> int:
        return len(self.seconds)
