"""One rank's share of hot-switch training: a buffer set and an executable graph per
strategy, the switches between them, and the update on the instantiation strategy.

Parameters live once per strategy in a flat buffer; the instantiation strategy's buffer
holds the master weights that AdamW updates. Only the instantiation strategy's buffers
stay allocated between steps: another strategy's are allocated when a step switches into
it and released once its parameters and gradients have moved on, so that a device holds
the model states of the instantiation strategy and of at most two others at once.

Gradients accumulate in a flat buffer per strategy: a group's gradients are reduced over
its data-parallel ranks, then switched into the next strategy's layout as a dp-partial
sum (the value on one replica, zeros on the others), so that its micro-batches add to
them and the next reduction is exact.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.data.stream import Sequence as Seq
from hotswitch.backend.dist_state import Replicate
from hotswitch.backend.graph.compile import ExecGraph, compile_graph
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.layout import param_layout, partial_over_dp
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.llama import init_param
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.runtime.process_groups import ProcessGroups, strategy_rank_sets
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch.executor import BoundSwitch
from hotswitch.backend.switch.planner import plan_switch
from hotswitch.backend.train.batching import balance, collate, pack
from hotswitch.backend.train.cost import CostModel
from hotswitch.backend.train.reference import OptimizerConfig


@dataclass
class StepTimes:
    compute: float = 0.0
    switch: float = 0.0
    grad_sync: float = 0.0
    update: float = 0.0
    switches: int = 0
    per_strategy: dict[str, dict] = field(default_factory=dict)  # tokens and compute seconds per strategy


@dataclass
class StrategyState:
    strategy: Strategy
    layout: dict
    params: FlatBuffer
    grads: FlatBuffer
    graph: ExecGraph

    @property
    def allocated(self) -> bool:
        return self.params.allocated

    def allocate(self) -> None:
        self.params.allocate()
        self.grads.allocate()

    def release(self) -> None:
        self.params.release()
        self.grads.release()


class Engine:
    def __init__(
        self,
        config: ModelConfig,
        strategies: Sequence[Strategy],
        instantiation: Strategy,
        optim: OptimizerConfig,
        seed: int = 0,
        token_budget: int = 4096,
        cluster: Cluster | None = None,
        schedule: str = "1f1b",
        device: torch.device | str = "cpu",
    ):
        self.config, self.optim, self.token_budget, self.schedule = config, optim, token_budget, schedule
        self.device = torch.device(device)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.cluster = cluster or Cluster.local(self.world, device=self.device.type, memory=device_memory(self.device))
        self.cost: CostModel | None = None  # set by the trainer: groups are balanced and packed as it predicts
        self._switches: dict[tuple, BoundSwitch] = {}
        self.first_runs: list[dict] = []  # statistics of each switch the first time it runs; drained by the trainer
        self.groups = ProcessGroups()
        self.states: dict[Strategy, StrategyState] = {}
        self.instantiation = instantiation
        self.set_strategies(strategies)
        master = self.states[instantiation]
        with torch.no_grad():
            for name, box in master.params.boxes.items():
                master.params.views[name].copy_(init_param(name, master.layout[name].shape, seed)[box.slices()])
        self._master = [nn.Parameter(master.params.views[n]) for n in master.params.views]
        for p, n in zip(self._master, master.grads.views):
            p.grad = master.grads.views[n]
        self.optimizer = optim.adamw(self._master)

    # -- strategies --------------------------------------------------------------------------
    def set_strategies(self, strategies: Sequence[Strategy]) -> None:
        """Make every strategy runnable (collective: all ranks call it with the same list)."""
        wanted = list(dict.fromkeys([*strategies, self.instantiation]))
        if set(wanted) == set(self.states):
            return  # already runnable: a new plan over resident strategies changes nothing here
        for s in wanted:
            s.check_fits(self.world)
        graph = LogicalGraph.build(self.config, wanted)
        self.groups = ProcessGroups(strategy_rank_sets(wanted))
        self.logical = graph
        kept = {s: st for s, st in self.states.items() if s in wanted}
        for s in wanted:
            layout = param_layout(self.config, s)
            state = kept.get(s) or StrategyState(
                s,
                layout,
                FlatBuffer(layout, self.rank, device=self.device),
                FlatBuffer(layout, self.rank, device=self.device),
                compile_graph(graph, s, self.rank),
            )
            if s not in kept:
                state.graph.attach(state.params, state.grads)
                self._release(state)
            state.graph.bind(self.groups)
            kept[s] = state
        self.states = kept

    def _release(self, state: StrategyState) -> None:
        if state.strategy != self.instantiation:
            state.release()

    @contextmanager
    def holding(self, *strategies: Strategy) -> Iterator[None]:
        """The strategies' buffers allocated for the block (undefined values where they were
        released), and released again after."""
        released = [self.states[s] for s in strategies if not self.states[s].allocated]
        for state in released:
            state.allocate()
        try:
            yield
        finally:
            for state in released:
                self._release(state)

    def _run_switch(self, what: str, src: Strategy, dst: Strategy, times: StepTimes) -> None:
        first = (what, src, dst) not in self._switches
        bound = self._switch(what, src, dst)
        started = time.perf_counter()
        bound.run()
        elapsed = time.perf_counter() - started
        times.switch += elapsed
        times.switches += 1
        if first:
            self.first_runs.append(
                {
                    "src": str(src),
                    "dst": str(dst),
                    "what": what,
                    "bytes": bound.plan.bytes_moved,
                    "predicted_s": bound.predicted_s,
                    "seconds": elapsed,
                }
            )

    def _switch(self, what: str, src: Strategy, dst: Strategy) -> BoundSwitch:
        key = (what, src, dst)
        if key not in self._switches:
            with self.holding(src, dst):  # views are taken of allocated memory only
                self._switches[key] = self._bind_switch(what, src, dst)
        return self._switches[key]

    def _bind_switch(self, what: str, src: Strategy, dst: Strategy) -> BoundSwitch:
        a, b = self.states[src], self.states[dst]
        if what == "params":
            return BoundSwitch(plan_switch(a.layout, b.layout, self.cluster), self.rank, a.params, b.params)
        # reduced gradients into a dp-partial sum, or into the master layout as they are
        target = b.layout if dst == self.instantiation and what == "grads_final" else partial_over_dp(b.layout)
        return BoundSwitch(plan_switch(a.layout, target, self.cluster), self.rank, a.grads, b.grads)

    # -- one step --------------------------------------------------------------------------------
    def step(self, groups: dict[Strategy, list[Seq]], order: Sequence[Strategy]) -> tuple[float, StepTimes]:
        """Train one global batch (the union of ``groups``), strategies in ``order`` (the
        instantiation strategy last). Returns the mean token loss and the time split."""
        total = sum(s.length for seqs in groups.values() for s in seqs)
        if total == 0:
            raise ValueError("the global batch holds no tokens")
        scale = 1.0 / total
        times = StepTimes()
        loss = torch.zeros((), dtype=torch.float64, device=self.device)
        previous: Strategy | None = None
        for strategy in order:
            seqs = groups.get(strategy, [])
            if not seqs and strategy != self.instantiation:
                continue
            state = self.states[strategy]
            state.allocate()  # a released one comes back with undefined values: the switches define them
            if previous is None:
                state.grads.flat.zero_()
            else:
                self._run_switch("grads", previous, strategy, times)
            if strategy != self.instantiation:
                self._run_switch("params", previous or self.instantiation, strategy, times)
            if previous is not None:
                self._release(self.states[previous])  # its parameters and gradients have moved on
            started = time.perf_counter()
            local = self._run_group(state, seqs, scale)
            times.compute += (spent := time.perf_counter() - started)
            times.per_strategy[str(strategy)] = {"tokens": sum(s.length for s in seqs), "seconds": spent}
            _, _, tp = strategy.coords(self.rank)
            if tp == 0:
                loss += local
            started = time.perf_counter()
            if strategy.dp > 1:
                dist.all_reduce(state.grads.flat, group=self.groups[strategy.dp_group(self.rank)])
            times.grad_sync += time.perf_counter() - started
            previous = strategy
        if previous != self.instantiation:
            self._run_switch("grads_final", previous, self.instantiation, times)
            self._release(self.states[previous])
        started = time.perf_counter()
        dist.all_reduce(loss)
        self._clip_and_update()
        times.update = time.perf_counter() - started
        return loss.item() / total, times

    def _run_group(self, state: StrategyState, seqs: list[Seq], scale: float) -> float:
        strategy = state.strategy
        _, replica, _ = strategy.coords(self.rank)
        cost = self.cost if self.cost and strategy in self.cost.strategies else None
        mine = balance(seqs, strategy.dp, cost.strategies[strategy].time if cost else float)[replica]
        packed = cost.packed(strategy, mine) if cost else pack(mine, self.token_budget)
        micro_batches = [collate(group) for group in packed]
        inputs = [(m.tokens.to(self.device), m.targets.to(self.device)) for m in micro_batches]
        return state.graph.run(inputs, scale, self.schedule).item()

    def _clip_and_update(self) -> None:
        master = self.states[self.instantiation]
        _, replica, tp = self.instantiation.coords(self.rank)
        squares = torch.zeros((), dtype=torch.float64, device=self.device)
        if replica == 0:  # every element once: dp replicas hold copies, tp replicas of norms too
            for name, grad in master.grads.views.items():
                if tp == 0 or master.layout[name].state.placements[1] != Replicate():
                    squares += grad.double().pow(2).sum()
        dist.all_reduce(squares)
        norm = squares.sqrt().item()
        coefficient = min(self.optim.max_grad_norm / (norm + 1e-6), 1.0)
        master.grads.flat.mul_(coefficient)
        self.optimizer.step()
        self.grad_norm = norm

    def free_memory(self) -> float:
        """Bytes per device for a strategy's own parameters, gradients and activations: the
        device's memory less what the instantiation strategy always holds (master weights,
        gradients, AdamW's two moments)."""
        master = self.states[self.instantiation].params.flat
        return self.cluster.memory - 4 * master.numel() * master.element_size()

    def global_params(self) -> dict[str, torch.Tensor]:
        """Full parameters gathered on every rank (tests and small models only)."""
        master = self.states[self.instantiation]
        _, replica, tp = self.instantiation.coords(self.rank)
        out = {}
        for name, p in master.layout.items():
            full = torch.zeros(p.shape, device=self.device)
            owner = name in master.params.views and replica == 0  # one copy of every element
            if owner and (tp == 0 or p.state.placements[1] != Replicate()):
                full[master.params.boxes[name].slices()] = master.params.views[name]
            dist.all_reduce(full)
            out[name] = full.cpu()
        return out


def device_memory(device: torch.device) -> int:
    """Bytes of memory on a CUDA device; the nominal default of a ``Cluster`` elsewhere."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return Cluster.memory
