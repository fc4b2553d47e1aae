"""``plan_switch``: from one layout of a set of tensors to another, which rank sends what."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.layout import TensorLayout, param_layout
from hotswitch.backend.models.config import ModelConfig, get_config
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch.balanced import balanced_transfers, group_demands
from hotswitch.backend.switch.greedy import greedy_transfers, naive_transfers
from hotswitch.backend.switch.lp import min_max_assignment
from hotswitch.backend.switch.needs import SwitchNeeds, switch_needs
from hotswitch.backend.switch.plan import SwitchPlan, Transfer

ALGORITHMS = ("balanced", "greedy", "naive")


def _plan(needs: SwitchNeeds, cluster: Cluster, algorithm: str, itemsize: int, started: float) -> SwitchPlan:
    if algorithm == "naive":
        transfers = naive_transfers(needs)
    elif algorithm == "greedy":
        transfers = greedy_transfers(needs, cluster, itemsize)
    elif algorithm == "balanced":
        transfers = balanced_transfers(needs, cluster, itemsize)
    else:
        raise ValueError(f"unknown switch algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    order = {name: i for i, name in enumerate(needs.names)}
    transfers.sort(key=lambda t: (order[t.name], t.box.offset, t.receiver, t.sender))
    return SwitchPlan(
        algorithm,
        cluster,
        itemsize,
        needs.names,
        tuple(transfers),
        needs.zero_first,
        fused=algorithm != "naive",
        plan_s=time.perf_counter() - started,
    )


def plan_switch(
    src: Mapping[str, TensorLayout],
    dst: Mapping[str, TensorLayout],
    cluster: Cluster,
    algorithm: str = "balanced",
    itemsize: int = 4,
) -> SwitchPlan:
    """Plan moving every tensor from its ``src`` DistState to its ``dst`` DistState.

    ``balanced`` (default) minimises the predicted switch time and may split a slice
    between senders; it falls back to HotSPa's ``greedy`` choice when that predicts
    no slower. ``naive`` sends every slice from its first owner, each slice in a
    message of its own. Deterministic: every
    rank computes the same plan. Raises ``ValueError`` on mismatched tensors before
    anything is sent.
    """
    started = time.perf_counter()
    needs = switch_needs(src, dst, cluster)
    plan = _plan(needs, cluster, algorithm, itemsize, started)
    if algorithm == "balanced":
        greedy = _plan(needs, cluster, "greedy", itemsize, started)
        if greedy.time_s <= plan.time_s:
            plan = replace(greedy, algorithm="balanced")
    return plan


@dataclass(frozen=True)
class SwitchBounds:
    max_send: float  # fewest bytes the busiest sender must send
    time_s: float  # shortest predicted switch time


def switch_bounds(
    src: Mapping[str, TensorLayout], dst: Mapping[str, TensorLayout], cluster: Cluster, itemsize: int = 4
) -> SwitchBounds:
    """Lower bounds over all plans, even ones splitting slices arbitrarily among owners."""
    demands, _ = group_demands(switch_needs(src, dst, cluster), itemsize)
    return SwitchBounds(
        min_max_assignment(demands, cluster, "bytes").value,
        min_max_assignment(demands, cluster, "time").value,
    )


def model_layouts(model: str | ModelConfig, src: str | Strategy, dst: str | Strategy, cluster: Cluster):
    """The parameter layouts of ``model`` under two strategies, checked against ``cluster``."""
    config = get_config(model)
    layouts = []
    for strategy in (Strategy.parse(src), Strategy.parse(dst)):
        strategy.check_fits(cluster.world_size)
        layouts.append(param_layout(config, strategy))
    return layouts


class SwitchPlanner:
    """Plans switches between strategies of one model on one cluster, each (src, dst) once."""

    def __init__(self, model: str | ModelConfig, cluster: Cluster, algorithm: str = "balanced", itemsize: int = 4):
        self.config = get_config(model)
        self.cluster = cluster
        self.algorithm = algorithm
        self.itemsize = itemsize
        self._plans: dict[tuple[Strategy, Strategy], SwitchPlan] = {}

    def plan(self, src: str | Strategy, dst: str | Strategy) -> SwitchPlan:
        key = (Strategy.parse(src), Strategy.parse(dst))
        if key not in self._plans:
            source, target = model_layouts(self.config, *key, self.cluster)
            self._plans[key] = plan_switch(source, target, self.cluster, self.algorithm, self.itemsize)
        return self._plans[key]


__all__ = ["ALGORITHMS", "SwitchBounds", "SwitchPlan", "SwitchPlanner", "Transfer", "plan_switch", "switch_bounds"]
