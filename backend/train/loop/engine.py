"""One rank's share of hot-switch training: a buffer set and an executable graph per
strategy, the switches between them, and the update on the instantiation strategy.

Parameters live once per strategy in a flat buffer; the instantiation strategy's buffer
holds the master weights that AdamW updates. Only the instantiation strategy's buffers
stay allocated between steps: another strategy's are allocated when a step switches into
it and released once its parameters and gradients have moved on, so that a device holds
the model states of the instantiation strategy and of at most two others at once.

Gradients accumulate in a flat buffer per strategy: a group's gradients are reduced over
its replica group (dp x cp: context-parallel ranks hold the same weights and sum the
gradients of their chunks of each sequence), then switched into the next strategy's layout
as a replica-partial sum (the value on one replica, zeros on the others), so that its
micro-batches add to them and the next reduction is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple, cast

import torch
import torch.distributed as dist
from torch.profiler import record_function

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.data.stream import Sequence as Seq
from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.compiled_regions import compile_seconds
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.layout import param_layout
from hotswitch.backend.models.attention.kernels import AttentionChoice, chosen, in_force, use
from hotswitch.backend.models.balance import BALANCE
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.experts import choose_experts, use_experts
from hotswitch.backend.runtime.devices import Span, local_device
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.runtime.on_read import OnRead, to_device
from hotswitch.backend.runtime.process_groups import ProcessGroups, strategy_rank_sets
from hotswitch.backend.runtime.profile_ranges import INPUTS
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.switch.plan import SwitchPlan
from hotswitch.backend.train.config.run_config import RunConfig
from hotswitch.backend.train.loop.stages import StageWalk, as_stages
from hotswitch.backend.train.loop.strategy_state import StrategyState
from hotswitch.backend.train.loop.switches import Switches, SwitchKind
from hotswitch.backend.train.planning.batching import MicroBatching
from hotswitch.backend.train.planning.dispatch import Stage, check_device_groups
from hotswitch.backend.train.state.master import InitialValue, Master


@dataclass
class StepTimes:
    compute: float = 0.0
    switch: float = 0.0
    grad_sync: float = 0.0
    update: float = 0.0
    switches: int = 0
    compile: float = 0.0  # of the compute seconds, those spent compiling runs (``compiled``)
    per_strategy: dict[str, dict] = field(default_factory=dict)  # tokens and compute seconds per strategy


class StepResult(NamedTuple):
    loss: float  # mean token loss over the global batch
    grad_norm: float  # before clipping
    times: StepTimes


class Engine:
    """This rank's part of training ``config`` under ``strategies`` (collective: every rank
    builds its engine with the same arguments), the master weights on ``instantiation``. Every
    setting comes from ``run``, a configuration checked for training
    (``RunConfig.check_training``): no default of its own. The weights start from the run's
    ``seed`` or, when given, from ``initial(name, full_shape, box)`` (this rank's box of each
    parameter, e.g. ``models.hf.hf_initializer(dir)``). With ``shard_optimizer`` the master
    weights and AdamW's moments are sharded over the instantiation strategy's replicas, dp x cp
    as Megatron's distributed optimizer (a no-op where it has one replica). ``compile``: each
    rank's runs of tensor math between attentions ``torch.compile``d
    (``graph.compiled_regions``), compiled on their first micro-batch. ``attention``: the
    kernel attention runs (``models.attention.kernels``: "flash", "cudnn", ...), or "auto",
    the fastest measured on the device. ``cluster`` and ``batching`` are what the recipe built
    (by default: this machine's ranks, and micro-batches of the run's token budget)."""

    def __init__(
        self,
        config: ModelConfig,
        strategies: Sequence[Strategy],
        instantiation: Strategy,
        run: RunConfig,
        *,
        cluster: Cluster | None = None,
        batching: MicroBatching | None = None,
        initial: InitialValue | None = None,
    ):
        precision = run.precision
        parallelism = run.parallelism
        if precision.token_budget is None:
            raise ValueError("Engine needs a run checked for training: RunConfig.check_training(max_len) fills it in")
        self.config = config
        self.optim = run.optimizer.adamw(run.steps)
        self.token_budget = precision.token_budget
        self.schedule = parallelism.pipeline_schedule
        self.precision = precision.precision()
        self.compiled = bool(precision.compile)
        self.device = torch.device(local_device(parallelism.device))
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.cluster = cluster or Cluster.local(self.world, device=self.device.type, memory=device_memory(self.device))
        self.batching = batching or MicroBatching(self.token_budget, packed=precision.packing)
        if instantiation.is_group:
            raise ValueError(
                f"the instantiation strategy holds the master weights on every rank; {instantiation} is a device group"
            )
        if instantiation.ep > 1:
            raise ValueError(
                f"the instantiation strategy holds every expert on each replica; {instantiation} splits them over "
                f"ep={instantiation.ep}: give it without ep (the plan's strategies may split them)"
            )
        self.switches = Switches(self)
        self.groups = ProcessGroups()
        self.states: dict[Strategy, StrategyState] = {}
        self.instantiation = instantiation
        self.set_strategies(strategies)
        self.attention = self._choose_attention(precision.attention)
        self.experts_kernel = self._choose_experts(precision.experts)
        self.seed = run.seed
        self.initial = initial
        self.shard_optimizer = parallelism.shard_optimizer is not False
        self.master = self._new_master()

    def _new_master(self) -> Master:
        """Master weights on the instantiation strategy, at their initial values (the seed's, or
        ``initial``'s), with AdamW's state (sharded over its replicas where asked)."""
        state = self.states[self.instantiation]
        if not state.allocated:
            state.allocate()
        return Master(
            state,
            self.optim,
            self.seed,
            self.rank,
            self.initial,
            self.precision,
            self.master_replicas,
            self.shard_optimizer,
            fused=self.compiled,
        )

    def instantiate_on(self, strategy: Strategy) -> None:
        """Hold the master weights on ``strategy`` from now on (collective), as if the engine had
        been built so: only before the first update, while they are their initial values, which
        every layout sets alike. The former instantiation's buffers are released."""
        if self.master.updates:
            raise RuntimeError(f"the master weights moved after {self.master.updates} update(s); only before the first")
        if strategy.is_group:
            raise ValueError(f"the master weights live on every rank; {strategy} is a device group")
        former = self.instantiation
        self.instantiation = strategy
        self.set_strategies([*self.states, strategy])
        self.master = self._new_master()
        if former in self.states and former != strategy:
            self.release(self.states[former])

    def _choose_attention(self, kernel: str) -> AttentionChoice:
        """Attention's kernel put in force on every rank (collective): ``kernel``, or under
        "auto" the fastest on rank 0's device, timed there (once per process) on the model's heads
        at lengths up to the token budget (``models.attention.kernels``)."""
        if kernel != "auto":
            use(kernel)
            return in_force()
        c = self.config
        top = min(self.token_budget, c.max_seq_len)
        lengths = [n for n in (512, 2048, 8192) if n < top] + [top]
        heads = (c.n_heads, c.n_kv_heads, c.head_size)
        packed = self.token_budget if self.batching.packed else None  # and how a packed row attends documents
        dtype = self.precision.compute_dtype
        box = [chosen(self.device, dtype, heads, lengths, packed) if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        choice = cast("AttentionChoice", box[0])  # rank 0's, now on every rank
        use(choice)
        return choice

    def _choose_experts(self, kernel: str) -> dict | None:
        """A mixture of experts' kernel put in force on every rank (collective; None for a
        dense model): ``kernel``, or under "auto" the faster timed on rank 0's device on a
        micro-batch's tokens (``models.experts.choose_experts``)."""
        experts = self.config.experts
        if experts is None:
            return None
        if kernel != "auto":
            use_experts(kernel)
            return {"kernel": kernel}
        tokens = min(self.token_budget, 4096)
        dtype = self.precision.compute_dtype
        box = [choose_experts(experts, self.config.dim, tokens, self.device, dtype) if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        choice = cast("dict", box[0])  # rank 0's, now on every rank
        use_experts(choice["kernel"])
        return choice

    def master_replicas(self):
        """This rank's replica group (dp x cp) of the instantiation strategy (groups are rebuilt
        when the strategies change, so it is looked up when a collective runs)."""
        return self.groups[self.instantiation.replica_group(self.rank)]

    def use_batching(self, batching: MicroBatching) -> None:
        """Cut groups into micro-batches by ``batching`` from the next step on (e.g. the cost
        model's ``micro_batching()``, so that the engine runs what it predicts)."""
        self.batching = batching

    # -- strategies --------------------------------------------------------------------------
    def set_strategies(self, strategies: Sequence[Strategy]) -> None:
        """Make every strategy runnable (collective: all ranks call it with the same list)."""
        wanted = list(dict.fromkeys([*strategies, self.instantiation]))
        if set(wanted) == set(self.states):
            return  # already runnable: a new plan over resident strategies changes nothing here
        for s in wanted:
            s.check_fits(self.world)
        check_device_groups(wanted, self.world)
        graph = LogicalGraph.build(self.config, wanted)
        self.groups = ProcessGroups(strategy_rank_sets(wanted))
        self.logical = graph
        kept = {s: st for s, st in self.states.items() if s in wanted}
        for s in wanted:
            layout = param_layout(self.config, s)
            state = kept.get(s) or StrategyState(
                s,
                layout,
                FlatBuffer(layout, self.rank, self.precision.compute_dtype, self.device),
                FlatBuffer(layout, self.rank, self.precision.grad_dtype, self.device),
                # None: a device group elsewhere
                compile_graph(graph, s, self.rank, self.compiled) if self.rank in s.ranks else None,
            )
            if state.graph is not None and s not in kept:
                state.graph.attach(state.params, state.grads)
            if s not in kept:
                self.release(state)
            if state.graph is not None:
                state.graph.bind(self.groups)
            kept[s] = state
        self.states = kept

    def release(self, state: StrategyState) -> None:
        """Free a strategy's buffers, unless it is the instantiation strategy (the master's)."""
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
                self.release(state)

    # -- switches ------------------------------------------------------------------------------
    def switch_plan(self, what: SwitchKind, src: Strategy, dst: Strategy) -> SwitchPlan:
        """The plan of a switch between two resident strategies (planned once, then cached)."""
        return self.switches.bound(what, src, dst).plan

    def take_switch_stats(self) -> list[dict]:
        """Statistics of each switch that ran for the first time since the last call (src,
        dst, what, bytes, predicted_s, seconds), oldest first; the list is then emptied."""
        return self.switches.take_stats()

    def run_switch(self, what: SwitchKind, src: Strategy, dst: Strategy, add: bool = False) -> Span:
        """Run one switch (collective over every rank); the marks of its start and end
        (``DeviceMarks``). ``add``: gradients land added to what ``dst`` holds (a second device
        group's merged with the first's)."""
        return self.switches.run(what, src, dst, add)

    # -- one step --------------------------------------------------------------------------------
    def step(
        self,
        groups: dict[Strategy, list[Seq]],
        order: Sequence[Strategy | Stage],
        before_update: Callable[[Master], None] | None = None,
    ) -> StepResult:
        """Train one global batch (the union of ``groups``), stages in ``order`` (a strategy, or
        device groups side by side; the instantiation strategy last): the mean token loss, the
        gradient norm, the time split. ``before_update(master)`` runs on every rank once the
        batch's gradients are accumulated on the master layout and before they are clipped (an
        oracle may gather them there)."""
        total = sum(s.trained for seqs in groups.values() for s in seqs)  # the loss is their mean
        if total == 0:
            raise ValueError("the global batch holds no tokens that train")
        times = StepTimes()
        compiling = compile_seconds()
        walk = StageWalk(self, times, 1.0 / total)
        self._balance(sum(len(seqs) for seqs in groups.values()))
        try:
            for stage in as_stages(order):
                walk.stage(stage, groups)
        finally:
            BALANCE.close()
        walk.finish()
        times.compile = compile_seconds() - compiling
        started = walk.marks.mark()  # no phase stops the device; the update's norm ends the step
        dist.all_reduce(walk.loss)
        if before_update is not None:
            before_update(self.master)
        grad_norm = self.master.clip_and_update()
        times.update = walk.marks.seconds(started, walk.marks.mark())
        walk.read_times()
        return StepResult(walk.loss.item() / total, grad_norm, times)

    def _balance(self, sequences: int) -> None:
        """Open the auxiliary loss for a step of ``sequences`` (``models.balance``), if it is on."""
        experts = self.config.experts
        if experts is not None and experts.aux_loss_coef:
            BALANCE.start_step(experts.aux_loss_coef, experts.routed_layers(self.config.n_layers), sequences)

    @torch.no_grad()
    def evaluate(self, seqs: list[Seq]) -> tuple[float, int]:
        """The token loss summed over ``seqs`` and their trained token count, forward only under the
        instantiation strategy (collective; nothing is accumulated or updated)."""
        graph = self.states[self.instantiation].graph
        assert graph is not None  # the instantiation strategy spans every rank
        _, replica, _, tp = self.instantiation.coords(self.rank)
        inputs = self._inputs(self.batching.split(self.instantiation, seqs)[replica])
        local = graph.evaluate(inputs) if inputs else torch.zeros((), device=self.device)
        total = (local if tp == 0 else torch.zeros_like(local)).to(torch.float64)
        dist.all_reduce(total)
        return total.item(), sum(s.trained for s in seqs)

    def run_group(self, strategy: Strategy, share: list[list[Seq]], scale: float, fresh: bool = False) -> torch.Tensor:
        """This rank's replica's ``share`` of ``strategy``'s sequences through its graph; the loss
        sum, left on the device (reading it would stop the device). Gradients accumulate into
        its buffer, from zero where ``fresh`` (the first gradient of each parameter copied in:
        ``ExecGraph.restart_grads``); the buffer is whole afterwards, even if this fails. With the
        auxiliary loss on, the sum includes its sequences' share of it, in the loss's units."""
        graph = self.states[strategy].graph
        assert graph is not None, f"rank {self.rank} computes nothing under {strategy}"
        if fresh:
            graph.restart_grads()
        mark = BALANCE.opened()
        try:
            local = graph.run(self._inputs(share), scale, self.schedule)
        finally:
            graph.settle_grads()
        return local + BALANCE.weighted_since(mark, local.device) / scale if BALANCE.weight else local

    def _inputs(self, share: list[list[Seq]]) -> Sequence[tuple[torch.Tensor, ...]]:
        """A replica's micro-batches (each a list of sequences) as the graph takes them, each
        made when the schedule reads it (``runtime.on_read``): tokens and targets on the device,
        positions on the host (``models.documents``)."""
        return OnRead(self._micro_batch, share)

    def _micro_batch(self, seqs: list[Seq]) -> tuple[torch.Tensor, ...]:
        with record_function(INPUTS):
            m = self.batching.collate(seqs)
            BALANCE.begin(m.sequences)  # read as its forward starts (runtime.on_read)
            return to_device(m.tokens, self.device), to_device(m.targets, self.device), m.positions

    def free_memory(self) -> float:
        """Bytes per device for a strategy's own parameters, gradients and activations: the
        device's memory less what the instantiation strategy always holds (its parameters
        and gradients, AdamW's two moments, and fp32 master weights in mixed precision)."""
        elements = self.master.state.params.flat.numel()
        p = self.precision
        master = p.master_bytes / (self.instantiation.replicas if self.master.sharded else 1)
        return self.cluster.memory - elements * (p.param_bytes + p.grad_bytes + master)


def device_memory(device: torch.device) -> int:
    """Bytes of memory on a CUDA device; the nominal default of a ``Cluster`` elsewhere."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return Cluster.memory
