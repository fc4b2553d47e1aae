"""One step's walk over its stages: strategies one after another (HotSPa), or several device
groups side by side in one stage, each on its own ranks at the same time.

A stage is a tuple of strategies on disjoint ranks: one strategy over every device, or
device groups (``Strategy.first``). Every rank takes part in every switch of the step (each
switch is planned over all ranks, so a group's ranks also send what others need); a rank
computes only in the group holding it and reduces its gradients over that group's replicas.
Gradients enter a stage through its first strategy (the others start from zero) and leave it
from every group: the first group's as a switch that writes, each other's as one that adds, so
that the next strategy (or the master layout) holds the sum of every group's gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from hotswitch.backend.data.stream import Sequence as Seq
from hotswitch.backend.layout import is_expert
from hotswitch.backend.runtime.devices import DeviceMarks, Span
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.dispatch import Stage, as_stage, check_disjoint

if TYPE_CHECKING:
    from hotswitch.backend.train.loop.engine import Engine, StepTimes


def as_stages(order: Sequence[Strategy | Stage]) -> list[Stage]:
    """An execution order as stages (a bare strategy is a stage of its own), each checked:
    a stage of several strategies holds device groups on disjoint ranks."""
    stages = [as_stage(item) for item in order]
    for stage in stages:
        if len(stage) > 1:
            check_side_by_side(stage)
    return stages


def check_side_by_side(stage: Stage) -> None:
    """Raise, naming the fix, unless ``stage``'s strategies are device groups on disjoint ranks."""
    whole = [str(s) for s in stage if not s.is_group]
    if whole:
        raise ValueError(
            f"{whole} span every device and cannot train beside other strategies; place each side-by-side "
            "strategy on its ranks, e.g. 'tp2@0-1' beside 'dp2@2-3'"
        )
    check_disjoint(stage)


class StageWalk:
    """``engine``'s walk over one step's stages, accumulating gradients and the loss."""

    def __init__(self, engine: Engine, times: StepTimes, scale: float):
        self.engine = engine
        self.times = times
        self.scale = scale
        self.loss = torch.zeros((), dtype=torch.float64, device=engine.device)
        self.previous: Stage = ()
        self.marks = DeviceMarks(engine.device)
        self.unread: list[tuple[Stage, dict]] = []  # stages whose seconds are still marks
        self.unread_switches: list[Span] = []  # so are switches'

    def stage(self, stage: Stage, groups: dict[Strategy, list[Seq]]) -> None:
        """Train ``stage``'s share of the batch: gradients and parameters in, compute, reduce."""
        engine = self.engine
        ran = tuple(s for s in stage if groups.get(s) or s == engine.instantiation)
        if not ran:
            return
        for s in ran:
            engine.states[s].allocate()  # a released one comes back with undefined values: the switches define them
        fresh = ran[1:] if self.previous else ran  # gradients that start from zero here (in ``run_group``)
        if self.previous:
            self.move_grads(self.previous, ran[0], "grads")
        source = self.previous[0] if len(self.previous) == 1 else engine.instantiation
        for s in ran:
            if s != engine.instantiation:
                self.switched(engine.run_switch("params", source, s))
        self.release(self.previous)  # its parameters and gradients have moved on
        self.compute(ran, groups, fresh)
        self.previous = ran

    def compute(self, ran: Stage, groups: dict[Strategy, list[Seq]], fresh: Stage) -> None:
        """This rank's group of the stage through its graph (its gradients from zero where it is
        ``fresh``, else added to those switched in), then reduced over its replicas; timed by
        marks in the device's work, read at the step's end (``read_times``) unless the stage
        leaves ranks waiting (``waits``): then its seconds are compared now, which also brings
        every rank to the next switch together, so that no switch's seconds hold a wait."""
        engine = self.engine
        marks = self.marks
        mine = next((s for s in ran if engine.rank in s.ranks), None)
        spans = {}
        for i, s in enumerate(ran):
            seqs = groups.get(s, [])
            shares = engine.batching.split(s, seqs)
            entry = {"tokens": sum(q.length for q in seqs), "padding": engine.batching.padding(s, shares)}
            self.times.per_strategy[str(s)] = {**entry, "seconds": 0.0}
            if s != mine:
                continue
            started = marks.mark()
            share = shares[s.coords(engine.rank).dp] if s.ep == 1 else padded_for_experts(s, shares, engine.rank)
            local = engine.run_group(s, share, self.scale, fresh=s in fresh)
            computed = marks.mark()
            if s.coords(engine.rank).tp == 0:
                self.loss += local
            if s.replicas > 1:
                reduce_over_replicas(engine, s)
            spans[i] = (started, computed, marks.mark())
        self.unread.append((ran, spans))
        if self.waits(ran):  # each group timed itself; every rank reports all of them
            self.read_times()

    def waits(self, ran: Stage) -> bool:
        """Whether some rank computes nothing or less than the stage takes: groups side by
        side, or one group on part of the ranks (the others idle until it ends)."""
        return len(ran) > 1 or len(ran[0].ranks) < self.engine.world

    def read_times(self) -> None:
        """The compute, gradient-reduction and switch seconds of the stages run since the last
        call, from their marks (waiting for the device to reach the last)."""
        times = self.times
        marks = self.marks
        times.switch += sum(marks.seconds(*span) for span in self.unread_switches)
        self.unread_switches.clear()
        for ran, spans in self.unread:
            seconds = torch.zeros(len(ran), dtype=torch.float64)
            for i, (started, computed, synced) in spans.items():
                seconds[i] = marks.seconds(started, computed)
                times.grad_sync += marks.seconds(computed, synced)
            if self.waits(ran):
                dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
            for i, s in enumerate(ran):
                times.per_strategy[str(s)]["seconds"] = seconds[i].item()
            times.compute += seconds.max().item()
        self.unread.clear()

    def finish(self) -> None:
        """The last stage's gradients into the master layout (the instantiation strategy's)."""
        engine = self.engine
        assert self.previous, "the order ends with the instantiation strategy, which always runs"
        if self.previous != (engine.instantiation,):
            self.move_grads(self.previous, engine.instantiation, "grads_final")
            self.release(self.previous)

    def move_grads(self, stage: Stage, dst: Strategy, what: str) -> None:
        """Every group's reduced gradients of ``stage`` into ``dst``: the first written, the others added."""
        for i, s in enumerate(stage):
            self.switched(self.engine.run_switch(what, s, dst, add=i > 0))  # type: ignore[arg-type]

    def switched(self, span: Span) -> None:
        self.unread_switches.append(span)
        self.times.switches += 1

    def release(self, stage: Stage) -> None:
        for s in stage:
            self.engine.release(self.engine.states[s])


IDLE = [Seq(-1, (0, 0), ((0, 1),))]  # a micro-batch of one token that trains nothing


def padded_for_experts(s: Strategy, shares: list[list[list[Seq]]], rank: int) -> list[list[Seq]]:
    """``rank``'s replica's micro-batches, with idle ones after them up to the most that any
    replica of its ep group runs: tokens travel between them at every micro-batch's mixtures of
    experts, so each must run as many (an idle one sends and receives nothing of its own)."""
    replica = s.coords(rank).dp
    first = replica - replica % s.ep
    most = max(len(shares[d]) for d in range(first, first + s.ep))
    mine = shares[replica]
    return [*mine, *[IDLE] * (most - len(mine))]


def reduce_over_replicas(engine: Engine, s: Strategy) -> None:
    """Sum this rank's accumulated gradients of ``s`` over its replicas (collective over them):
    every parameter over the replica group (dp x cp); under expert parallelism the experts' over
    the ranks holding the same experts only, the rest then over the ep group too (their
    replica group is the two together)."""
    grads = engine.states[s].grads
    rank = engine.rank
    if s.ep == 1:
        dist.all_reduce(grads.flat, group=engine.groups[s.replica_group(rank)])
        return
    if len(s.expert_replica_group(rank)) > 1:
        dist.all_reduce(grads.flat, group=engine.groups[s.expert_replica_group(rank)])
    dense = [view for name, view in grads.views.items() if not is_expert(name)]
    packed = torch.cat([v.reshape(-1) for v in dense])
    dist.all_reduce(packed, group=engine.groups[s.ep_group(rank)])
    offset = 0
    for view in dense:
        view.copy_(packed[offset : offset + view.numel()].view_as(view))
        offset += view.numel()
