"""Micro-batches through one rank's pipeline stage, under a schedule.

A schedule is each stage's order of forward (``F``) and backward (``B``) passes:
GPipe runs every forward, then every backward; 1F1B warms up with ``stages - stage - 1``
forwards, then alternates, so a stage keeps at most that many activations alive.
Micro-batches differ in rows and length, so no shape is fixed: an activation travels
with its shape sent first, and its gradient comes back in the shape the receiver
already knows. Between two passes a stage makes one exchange with its neighbours, what
the last pass sends and what the next needs posted together (``runtime.p2p``), an
order that cannot deadlock on NCCL. With one stage a pass is a plain forward and
backward of the micro-batch. With a mixture's auxiliary loss on (``models.balance``), one more
link joins neighbouring stages: a micro-batch's routing so far goes on with its activations and
the complete routing comes back with their gradients.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import record_function

from hotswitch.backend.models.balance import BALANCE, SequenceRouting
from hotswitch.backend.runtime.p2p import P2P, Exchanger, exchanges
from hotswitch.backend.runtime.profile_ranges import BACKWARD, FORWARD
from hotswitch.backend.strategy import Strategy


@dataclass(frozen=True)
class Link:
    """One tensor crossing stages: the stage at the other end, and the index of its p2p
    node in the logical graph (every stage numbers the crossings alike)."""

    peer_stage: int
    index: int


@runtime_checkable
class PipelineStage(Protocol):
    """What ``run_stage`` needs of one rank's part of a pipeline (``graph.compile.ExecGraph``
    is one). ``module(tokens, targets, positions, *received)``, one tensor per ``receives``
    link, returns the loss sum on the last stage, else the tuple of tensors for ``sends``."""

    @property
    def strategy(self) -> Strategy: ...

    @property
    def rank(self) -> int: ...

    @property
    def stage(self) -> int: ...

    @property
    def module(self) -> nn.Module: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def receives(self) -> Sequence[Link]: ...  # from earlier stages

    @property
    def sends(self) -> Sequence[Link]: ...  # to later stages

    @property
    def crossings(self) -> int: ...  # links in the whole pipeline, numbered alike on every stage

    @property
    def token_group(self) -> dist.ProcessGroup | None: ...  # the process group a sequence's tokens split over


@dataclass(frozen=True)
class Pass:
    kind: str  # "F" | "B"
    micro: int


def gpipe(stages: int, stage: int, micros: int) -> list[Pass]:
    return [Pass("F", m) for m in range(micros)] + [Pass("B", m) for m in range(micros)]


def one_f_one_b(stages: int, stage: int, micros: int) -> list[Pass]:
    warmup = min(stages - stage - 1, micros)
    order = [Pass("F", m) for m in range(warmup)]
    for m in range(warmup, micros):
        order += [Pass("F", m), Pass("B", m - warmup)]
    return order + [Pass("B", m) for m in range(micros - warmup, micros)]


def forward_only(stages: int, stage: int, micros: int) -> list[Pass]:
    """Evaluation: every micro-batch forward, nothing kept for backward."""
    return [Pass("F", m) for m in range(micros)]


SCHEDULES = {"1f1b": one_f_one_b, "gpipe": gpipe, "forward": forward_only}


def bubble_fraction(stages: int, micros: int) -> float:
    """The idle share of a stage under GPipe or 1F1B with equal micro-batches."""
    return (stages - 1) / (micros + stages - 1)


@dataclass
class StageClock:
    """Where a stage's time went: computing passes, or waiting to receive."""

    busy_s: float = 0.0
    wait_s: float = 0.0


def run_stage(
    graph: PipelineStage,
    micro_batches: Sequence[tuple[torch.Tensor, ...]],
    scale: float,
    schedule: str,
    clock: StageClock | None = None,
):
    """Forward and backward every micro-batch (this rank's ``(tokens, targets, positions)``,
    the module's leading arguments) through ``graph`` (one rank's executable graph) in the
    order ``schedule`` gives its stage; gradients of ``scale * loss`` accumulate into the
    graph's parameters. Returns the loss summed on this rank; adds compute and exchange times
    to ``clock`` if given. Between passes the stage makes one exchange with its neighbours
    (``runtime.p2p``)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; one of {', '.join(SCHEDULES)}")
    strategy = graph.strategy
    stage = graph.stage
    last = stage == strategy.pp - 1
    device = graph.device
    passes = SCHEDULES[schedule](strategy.pp, stage, len(micro_batches))
    route = routing_links(graph)
    plan = exchanges(passes, [*graph.receives, *route.receives], [*graph.sends, *route.sends])
    exchanger = Exchanger(graph.rank, stage, len(strategy.stage_ranks[0]), graph.crossings + 1)  # equal (dp, cp, tp)
    inputs: dict[int, list[torch.Tensor]] = {}
    outputs: dict[int, list[torch.Tensor]] = {}
    routings: dict[int, SequenceRouting | None] = {}
    loss = torch.zeros((), device=device)
    clock = clock or StageClock()
    outgoing: dict[P2P, torch.Tensor] = {}
    for step, ops in zip([*passes, None], plan, strict=True):
        started = time.perf_counter()
        like = {
            op: _carried(routings[op.micro]) if op.link == route.index else outputs[op.micro][_index(graph.sends, op)]
            for op in ops
            if not op.send and op.kind == "grad"
        }
        arrived = exchanger.run(ops, outgoing, like, device)
        computing = time.perf_counter()
        clock.wait_s += computing - started
        if step is None:
            break
        m = step.micro
        if step.kind == "F":
            # the batch is made here when read (runtime.on_read), outside forward's range
            inputs[m], outputs[m], outgoing = _forward(graph, micro_batches[m], m, arrived, last)
            routings[m] = route.pass_on(m, arrived, outgoing)
            if last:
                loss += outputs[m][0].detach()
        else:
            routing = routings.pop(m)
            route.take_back(m, arrived, routing)
            with BALANCE.backward_of(routing):
                outgoing = _backward(graph, m, inputs.pop(m), outputs.pop(m), arrived, scale if last else None)
            route.send_back(m, routing, outgoing)
        clock.busy_s += time.perf_counter() - computing
    return loss


@dataclass(frozen=True)
class RoutingLinks:
    """The auxiliary loss's routing between neighbouring stages (``models.balance``): link
    ``index`` (after the graph's crossings) from the stage before and to the stage after, where
    the loss is on in a pipeline; none otherwise. Where a sequence's tokens are split over
    ranks (sp, cp), the last stage sums their routing over ``group``."""

    index: int
    receives: tuple[Link, ...] = ()
    sends: tuple[Link, ...] = ()
    group: dist.ProcessGroup | None = None

    def pass_on(self, m: int, arrived: dict, outgoing: dict) -> SequenceRouting | None:
        """After micro-batch ``m``'s forward: its routing, what came from the stage before added,
        put in ``outgoing`` for the stage after; on the last, complete over the token group."""
        came = [arrived[P2P(r.peer_stage, m, r.index, "act", False)] for r in self.receives]
        routing = BALANCE.carry_on(came[0] if came else None, last=not self.sends)
        for link in self.sends:
            assert routing is not None  # the links exist only while the loss is on
            outgoing[P2P(link.peer_stage, m, link.index, "act", True)] = routing.carried()
        if routing is not None and not self.sends and self.group is not None:
            mine = routing.carried()
            whole = mine.clone()
            dist.all_reduce(whole, group=self.group)
            whole[:, -1] = mine[:, -1]  # each rank saw every layer: the layers counted are its own
            routing.complete_with(whole)
            routing.counts_value = dist.get_rank(self.group) == 0  # the group's value, once
        return routing

    def take_back(self, m: int, arrived: dict, routing: SequenceRouting | None) -> None:
        """Before ``m``'s backward: the complete routing that came back from the stage after."""
        for link in self.sends:
            assert routing is not None
            routing.complete_with(arrived[P2P(link.peer_stage, m, link.index, "grad", False)])

    def send_back(self, m: int, routing: SequenceRouting | None, outgoing: dict) -> None:
        """After ``m``'s backward: the complete routing, back to the stage before."""
        for link in self.receives:
            assert routing is not None
            outgoing[P2P(link.peer_stage, m, link.index, "grad", True)] = routing.carried()


def routing_links(graph: PipelineStage) -> RoutingLinks:
    """``graph``'s stage's ``RoutingLinks``."""
    index, stage, stages = graph.crossings, graph.stage, graph.strategy.pp
    if not BALANCE.weight:
        return RoutingLinks(index)
    receives = (Link(stage - 1, index),) if stage > 0 else ()
    sends = (Link(stage + 1, index),) if stage < stages - 1 else ()
    return RoutingLinks(index, receives, sends, graph.token_group)


def _forward(graph: PipelineStage, batch: tuple[torch.Tensor, ...], m: int, arrived: dict, last: bool):
    """Micro-batch ``m``'s forward pass through the stage: its inputs (the activations that
    arrived, made leaves that keep their gradients), its outputs (the loss on the last stage)
    and the activations to send on."""
    inputs = [arrived[P2P(r.peer_stage, m, r.index, "act", False)].requires_grad_() for r in graph.receives]
    with record_function(FORWARD):
        result = graph.module(*batch, *inputs)
    outputs = [result] if last else list(result)
    outgoing = (
        {} if last else {P2P(link.peer_stage, m, link.index, "act", True): t for t, link in zip(outputs, graph.sends)}
    )
    return inputs, outputs, outgoing


def _backward(graph: PipelineStage, m: int, received: list, produced: list, arrived: dict, scale: float | None):
    """Micro-batch ``m``'s backward pass: from ``scale`` times the loss where ``scale`` is given
    (the last stage), else from the gradients that arrived for its outputs; the gradients of its
    inputs to send back (zeros where an input did not reach the loss)."""
    with record_function(BACKWARD):
        if scale is not None:
            (produced[0] * scale).backward()
        else:
            grads = [arrived[P2P(link.peer_stage, m, link.index, "grad", False)] for link in graph.sends]
            torch.autograd.backward(produced, grads)
    outgoing: dict[P2P, torch.Tensor] = {}
    for tensor, link in zip(received, graph.receives):
        grad = tensor.grad if tensor.grad is not None else torch.zeros_like(tensor)
        outgoing[P2P(link.peer_stage, m, link.index, "grad", True)] = grad
    return outgoing


def _carried(routing: SequenceRouting | None) -> torch.Tensor:
    assert routing is not None  # a routing link's traffic: the loss is on
    return routing.carried()


def _index(links: Sequence[Link], op: P2P) -> int:
    return next(i for i, link in enumerate(links) if link.index == op.link and link.peer_stage == op.peer)
