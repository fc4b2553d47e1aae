"""Micro-batches through one rank's pipeline stage, under a schedule.

A schedule is each stage's order of forward (``F``) and backward (``B``) passes:
GPipe runs every forward, then every backward; 1F1B warms up with ``stages - stage - 1``
forwards, then alternates, so a stage keeps at most that many activations alive.
Micro-batches differ in rows and length, so no shape is fixed: an activation travels
with its shape sent first, and its gradient comes back in the shape the receiver
already knows. Sends never block and receives do, so every schedule whose passes
respect the data dependencies runs without deadlock. With one stage a pass is a plain
forward and backward of the micro-batch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
import torch.distributed as dist
from torch import nn

from hotswitch.backend.strategy import Strategy

_MAX_DIMS = 7


@dataclass(frozen=True)
class Link:
    """One tensor crossing stages: the stage at the other end, and the index of its p2p
    node in the logical graph (every stage numbers the crossings alike)."""

    peer_stage: int
    index: int


@runtime_checkable
class PipelineStage(Protocol):
    """What ``run_stage`` needs of one rank's part of a pipeline (``graph.compile.ExecGraph``
    is one). ``module(tokens, targets, *received)``, one tensor per ``receives`` link,
    returns the loss sum on the last stage, else the tuple of tensors for ``sends``."""

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


SCHEDULES = {"1f1b": one_f_one_b, "gpipe": gpipe}


def bubble_fraction(stages: int, micros: int) -> float:
    """The idle share of a stage under GPipe or 1F1B with equal micro-batches."""
    return (stages - 1) / (micros + stages - 1)


class _Wire:
    """Point-to-point transfers of one rank's stage; tags keep micro-batches and
    crossings apart (gloo matches on them)."""

    def __init__(self, graph: PipelineStage):
        strategy = graph.strategy
        self.rank, self.stage, self.width = graph.rank, graph.stage, strategy.dp * strategy.tp
        self.crossings = max(graph.crossings, 1)  # the same on every stage
        self.pending: list = []

    def _peer(self, link: Link) -> int:
        return self.rank + (link.peer_stage - self.stage) * self.width

    def _tag(self, micro: int, link: Link, what: int) -> int:
        return ((micro * self.crossings + link.index) * 3) + what  # 0 shape, 1 activation, 2 gradient

    def send(self, tensor: torch.Tensor, micro: int, link: Link, with_shape: bool) -> None:
        tensor = tensor.detach().contiguous()
        if with_shape:
            header = torch.zeros(_MAX_DIMS + 1, dtype=torch.long, device=tensor.device)
            header[0] = tensor.dim()
            header[1 : tensor.dim() + 1] = torch.tensor(tensor.shape)
            self.pending.append((header, dist.isend(header, self._peer(link), tag=self._tag(micro, link, 0))))
        what = 1 if with_shape else 2
        self.pending.append((tensor, dist.isend(tensor, self._peer(link), tag=self._tag(micro, link, what))))

    def receive(self, micro: int, link: Link, like: torch.Tensor | None, device) -> torch.Tensor:
        if like is None:  # an activation: its shape first
            header = torch.empty(_MAX_DIMS + 1, dtype=torch.long, device=device)
            dist.recv(header, self._peer(link), tag=self._tag(micro, link, 0))
            tensor = torch.empty(header[1 : header[0] + 1].tolist(), device=device)
            dist.recv(tensor, self._peer(link), tag=self._tag(micro, link, 1))
            return tensor
        tensor = torch.empty_like(like)
        dist.recv(tensor, self._peer(link), tag=self._tag(micro, link, 2))
        return tensor

    def drain(self) -> None:
        for _, work in self.pending:
            work.wait()
        self.pending.clear()


@dataclass
class StageClock:
    """Where a stage's time went: computing passes, or waiting to receive."""

    busy_s: float = 0.0
    wait_s: float = 0.0


def run_stage(
    graph: PipelineStage,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    scale: float,
    schedule: str,
    clock: StageClock | None = None,
):
    """Forward and backward every micro-batch through ``graph`` (one rank's executable
    graph) in the order ``schedule`` gives its stage; gradients of ``scale * loss``
    accumulate into the graph's parameters. Returns the loss summed on this rank; adds
    compute and receive times to ``clock`` if given."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; one of {', '.join(SCHEDULES)}")
    stages, stage = graph.strategy.pp, graph.stage
    last = stage == stages - 1
    device = graph.device
    wire = _Wire(graph)
    alive: dict[int, tuple[list[torch.Tensor], object]] = {}
    loss = torch.zeros((), device=device)
    clock = clock or StageClock()
    for step in SCHEDULES[schedule](stages, stage, len(micro_batches)):
        m = step.micro
        started = time.perf_counter()
        if step.kind == "F":
            received = [wire.receive(m, link, None, device).requires_grad_() for link in graph.receives]
            computing = time.perf_counter()
            outputs = graph.module(*micro_batches[m], *received)
            if last:
                loss += outputs.detach()
            alive[m] = (received, outputs)
        else:
            received, outputs = alive.pop(m)
            grads = [] if last else [wire.receive(m, link, t, device) for t, link in zip(outputs, graph.sends)]
            computing = time.perf_counter()
            if last:
                (outputs * scale).backward()
            else:
                torch.autograd.backward(list(outputs), grads)
        clock.wait_s += computing - started
        clock.busy_s += time.perf_counter() - computing
        if step.kind == "F" and not last:
            for tensor, link in zip(outputs, graph.sends):
                wire.send(tensor, m, link, with_shape=True)
        if step.kind == "B":
            for tensor, link in zip(received, graph.receives):
                grad = tensor.grad if tensor.grad is not None else torch.zeros_like(tensor)
                wire.send(grad, m, link, with_shape=False)
    wire.drain()
    return loss
