"""One rank's executable graph for one strategy (what ``compile.compile_graph`` builds): its
fx module, the parameters it reads from the strategy's flat buffers, the process groups its
collectives bind, and its pipeline links. ``run`` trains micro-batches through it under a
pipeline schedule, ``evaluate`` runs them forward only; both first cut each micro-batch to
this rank's share (``local_share``). A micro-batch is ``(tokens, targets)`` or ``(tokens,
targets, positions)`` (``models.documents``; without them every row is one document).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.fx
from torch import nn

from hotswitch.backend.models.balance import BALANCE
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.rotary import rotary_buffers
from hotswitch.backend.parallel.pipeline import Link, StageClock, run_stage
from hotswitch.backend.parallel.zigzag import pad_rows, zigzag_shard
from hotswitch.backend.runtime.collectives import Collective
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.runtime.grad_accumulation import GradAccumulation
from hotswitch.backend.runtime.on_read import OnRead
from hotswitch.backend.runtime.process_groups import ProcessGroups
from hotswitch.backend.strategy import Strategy


def attr_name(name: str) -> str:
    """The attribute of a compiled module holding parameter ``name``."""
    return name.replace(".", "__")


@dataclass
class ExecGraph:
    """One rank's executable graph for one strategy."""

    config: ModelConfig
    strategy: Strategy
    rank: int
    module: torch.fx.GraphModule
    params: list[str]  # parameter names this graph reads, in order
    bindable: list[str] = field(default_factory=list)  # submodules that need a process group
    receives: list[Link] = field(default_factory=list)  # from earlier stages, in placeholder order
    sends: list[Link] = field(default_factory=list)  # to later stages, in output order
    crossings: int = 0  # p2p nodes in the logical graph: every stage numbers its links among them
    accumulation: GradAccumulation | None = None  # how gradients reach the buffer ``attach`` gave
    token_group: dist.ProcessGroup | None = None  # the process group a sequence's tokens are split over, if any

    @property
    def stage(self) -> int:
        return self.strategy.coords(self.rank)[0]

    @property
    def device(self) -> torch.device:
        """Where ``attach`` put the parameters."""
        return self.module.get_buffer("rope_cos").device  # every stage has the rotary tables

    def rank_sets(self) -> set[tuple[int, ...]]:
        return {getattr(self.module, name).ranks for name in self.bindable}

    def bind(self, groups: ProcessGroups) -> None:
        for name in self.bindable:
            module = getattr(self.module, name)
            module.bind(groups[module.ranks])
        ranks = self.strategy.token_group(self.rank)
        self.token_group = groups[ranks] if len(ranks) > 1 else None

    def attach(self, params: FlatBuffer, grads: FlatBuffer | None = None) -> None:
        """Read parameters from (and, if given, accumulate gradients into) flat buffers. When
        ``grads`` holds another dtype than ``params`` (bf16 parameters, fp32 gradients), each
        micro-batch's gradient is added into it as it is produced, as Megatron's main_grad
        (``grad_accumulation``)."""
        accumulation = None if grads is None else GradAccumulation(grads, grads.flat.dtype != params.flat.dtype)
        self.accumulation = accumulation
        for name in self.params:
            param = nn.Parameter(params.views[name], requires_grad=True)
            if accumulation is not None and accumulation.hooked:
                param.register_post_accumulate_grad_hook(accumulation.hook(name))
            elif grads is not None:
                param.grad = grads.views[name]  # autograd adds into .grad in place
            setattr(self.module, attr_name(name), param)
        for name, table in rotary_buffers(self.config, params.flat.device).items():
            setattr(self.module, name, table)

    def run(
        self,
        micro_batches: Sequence[tuple[torch.Tensor, ...]],
        scale: float,
        schedule: str = "1f1b",
        clock: StageClock | None = None,
    ) -> torch.Tensor:
        """Run the micro-batches (this stage's part, under the pipeline ``schedule``);
        gradients of ``scale * loss`` accumulate. Returns the local loss sum (zero off the
        last stage; with context parallelism, the sum over this rank's tokens). Each micro-batch
        is read once, when the schedule reaches it (``runtime.on_read``)."""
        return run_stage(self, OnRead(lambda m: self.local_share(*m), micro_batches), scale, schedule, clock)

    def restart_grads(self) -> None:
        """Gradients accumulate from zero from here on (the next ``run``s), as if the buffer
        ``attach`` gave were zeroed; ``settle_grads`` must follow before it is read."""
        assert self.accumulation is not None, "attach a gradient buffer first"
        self.accumulation.restart()

    def settle_grads(self) -> None:
        """The gradient buffer whole: views no gradient reached since ``restart_grads`` zeroed."""
        if self.accumulation is not None:
            self.accumulation.settle()

    def evaluate(self, micro_batches: Sequence[tuple[torch.Tensor, ...]]) -> torch.Tensor:
        """The local loss sum of the micro-batches, forward only (call under ``no_grad``):
        every stage's forward passes in order, activations sent on, nothing kept."""
        shares = [self.local_share(*m) for m in micro_batches]
        if self.strategy.pp == 1:
            return sum((self.module(*share) for share in shares), torch.zeros((), device=self.device))
        return run_stage(self, shares, 0.0, "forward")

    def local_share(
        self, tokens: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """What this rank computes of a micro-batch: with context parallelism its zig-zag chunks
        of every row (padded per chunk), with sequence parallelism rows padded to a multiple of
        tp; and the positions of the whole (padded) rows, which every rank reads whole."""
        tokens, targets, positions = pad_rows(tokens, targets, positions, self.strategy.row_multiple)
        BALANCE.localize(self.token_share)
        cp = self.strategy.cp
        if cp > 1:
            index = self.strategy.coords(self.rank).cp
            return zigzag_shard(tokens, index, cp), zigzag_shard(targets, index, cp), positions
        return tokens, targets, positions

    def token_share(self, per_token: torch.Tensor) -> torch.Tensor:
        """The positions of ``per_token`` [rows, length] (a value per token of a micro-batch) that
        this rank's layers see between attention blocks: its zig-zag chunks under cp, and of them
        its contiguous part under sp; padding (-1) where ``local_share`` pads the rows."""
        extra = -per_token.shape[1] % self.strategy.row_multiple
        padded = torch.nn.functional.pad(per_token, (0, extra), value=-1)
        c = self.strategy.coords(self.rank)
        if self.strategy.cp > 1:
            padded = zigzag_shard(padded, c.cp, self.strategy.cp)
        return padded.chunk(self.strategy.tp, dim=1)[c.tp] if self.strategy.sp else padded

    def forward_backward(self, tokens: torch.Tensor, targets: torch.Tensor, scale: float) -> torch.Tensor:
        """One micro-batch through every stage; gradients of ``scale * loss`` accumulate."""
        return self.run([(tokens, targets)], scale)

    def summary(self) -> dict:
        nodes = []
        for n in self.module.graph.nodes:
            if n.op == "call_module":
                kind = "comm" if isinstance(getattr(self.module, n.target), Collective) else "compute"
                op = repr(getattr(self.module, n.target)).split("(", 1)[-1].rstrip(")")
            else:
                kind = {"placeholder": "input", "get_attr": "param", "output": "output"}.get(n.op, "compute")
                op = getattr(n.target, "__name__", str(n.target))
            nodes.append({"name": n.name, "kind": kind, "op": op, "inputs": [a.name for a in n.all_input_nodes]})
        return {"strategy": str(self.strategy), "rank": self.rank, "nodes": nodes}
