"""Column-parallel linears under sequence parallelism that keep their input's shard, not the
gathered input (Megatron's ``LinearWithGradAccumulationAndAsyncCommunication`` with
``sequence_parallel``): the all-gather before them runs once in forward, and once more in
backward for the weight gradients.

Autograd would keep the gathered input of every linear that reads it (q, k and v; the FFN's
two up-projections; the head), which is tp times the shard. Here each linear keeps the shard
(shared by all of them, counted once) and the gather's module re-gathers it on the first
weight gradient that needs it; the other linears of that gather reuse the result, which is
dropped when the gather's own backward runs (after every reader's, since it sums their input
gradients). A backward pass runs to its end before another starts on the same stage, so one
slot per gather is enough; under activation checkpointing the shard a reader unpacks is the
recomputed one, which the slot holds just the same. One all-gather more per gather in
backward: the pair is in the collectives table.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hotswitch.backend.runtime.collectives import Collective, all_gather_along, reduce_scatter_along


def _identity(shard: torch.Tensor) -> tuple:
    """The shard's identity across autograd's unpacking (which may hand back another object)."""
    return (shard.untyped_storage().data_ptr(), shard.storage_offset(), tuple(shard.shape))


class _Gather(torch.autograd.Function):
    """forward: all-gather the shards; backward: reduce-scatter the gradient; drop the input
    gathered again for its readers (their backward has run)."""

    @staticmethod
    def forward(ctx, shard, dim, group, gather):
        ctx.dim = dim
        ctx.group = group
        ctx.gather = gather
        return all_gather_along(shard, dim, group)

    @staticmethod
    def backward(ctx, grad):
        ctx.gather.forget()
        return reduce_scatter_along(grad, ctx.dim, ctx.group), None, None, None


class SequenceParallelGather(Collective):
    """The ``all_gather_rs`` before column-parallel linears, able to gather a shard again in
    backward (``regather``), once for all its readers."""

    dim: int  # always given, unlike other collectives'

    def __init__(self, ranks: tuple[int, ...], dim: int):
        super().__init__("all_gather_rs", ranks, dim)
        self.regathered: tuple[tuple, torch.Tensor] | None = None  # (the shard's identity, gathered)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Gather.apply(x, self.dim, self.bound_group(), self)

    def regather(self, shard: torch.Tensor) -> torch.Tensor:
        identity = _identity(shard)
        if self.regathered is None or self.regathered[0] != identity:
            self.regathered = (identity, all_gather_along(shard, self.dim, self.group))
        return self.regathered[1]

    def forget(self) -> None:
        self.regathered = None


class _LinearKeepingShard(torch.autograd.Function):
    """forward: ``whole @ weight.T``, keeping ``shard`` (not ``whole``); backward: the input's
    gradient from the weight, the weight's from the input gathered again."""

    @staticmethod
    def forward(ctx, whole, shard, weight, gather):
        ctx.save_for_backward(shard, weight)
        ctx.gather = gather
        return F.linear(whole, weight)

    @staticmethod
    def backward(ctx, grad):
        shard, weight = ctx.saved_tensors
        grad_whole = grad.matmul(weight) if ctx.needs_input_grad[0] else None
        grad_weight = None
        if ctx.needs_input_grad[2]:
            whole = ctx.gather.regather(shard)
            grad_weight = grad.flatten(0, -2).t().matmul(whole.flatten(0, -2)).to(weight.dtype)
        return grad_whole, None, grad_weight, None


class GatheredLinear(nn.Module):
    """A column-parallel linear reading ``gather``'s output: ``(whole, shard, weight) -> output``."""

    def __init__(self, gather: SequenceParallelGather):
        super().__init__()
        self.gather = gather

    def forward(self, whole: torch.Tensor, shard: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return _LinearKeepingShard.apply(whole, shard, weight, self.gather)

    def extra_repr(self) -> str:
        return "linear keeping the sequence-parallel shard"
