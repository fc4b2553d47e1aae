"""Communication as autograd Functions named after their math (Megatron's ``mappings.py``):
each backward is visibly its forward's conjugate.

==================  ==========================================  ===================  ==========================
kind                Function                                    forward              backward
==================  ==========================================  ===================  ==========================
``copy``            ``CopyToParallelRegion``                    identity             sum partial gradients
``all_reduce``      ``ReduceFromParallelRegion``                sum partial values   identity
``all_reduce_ar``   ``ReduceToParallelRegion``                  sum partial values   sum partial gradients
``split``           ``ScatterToParallelRegion``                 keep own shard       concatenate grad shards
``all_gather``      ``GatherFromParallelRegion``                concatenate shards   keep own shard
``all_gather_rs``   ``GatherFromSequenceParallelRegion``        concatenate shards   reduce-scatter gradients
``reduce_scatter``  ``ReduceScatterToSequenceParallelRegion``   sum, keep own shard  concatenate grad shards
==================  ==========================================  ===================  ==========================

With sequence parallelism, the column-parallel linears after an ``all_gather_rs`` keep its
shard, not its output (``sequence_parallel_linear``): their backward all-gathers the shard once
more for the weight gradients, so that pair is an all-gather in forward and an all-gather plus
a reduce-scatter in backward.

The kinds are what the graph's deduction rules ask for and what graph summaries show;
``COLLECTIVES`` maps each to its Function. They run along any mesh dim (a "parallel
region" is the group of ranks along it), every Function as ``apply(x, dim, group)``.
A ``Collective`` module is created unbound (compiling needs no process group) and gets
its group from ``bind``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, get_args

import torch
import torch.distributed as dist

from hotswitch.backend.runtime.group_module import GroupModule

CommKind = Literal["all_reduce", "all_reduce_ar", "copy", "all_gather", "all_gather_rs", "split", "reduce_scatter"]
KINDS: tuple[CommKind, ...] = get_args(CommKind)


def _all_reduce(x: torch.Tensor, group) -> torch.Tensor:
    x = x.contiguous()
    dist.all_reduce(x, group=group)
    return x


def all_gather_along(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


def _chunk(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    size = dist.get_world_size(group)
    if x.shape[dim] % size:
        raise ValueError(f"cannot split dim {dim} of size {x.shape[dim]} evenly over {size} ranks")
    return x.chunk(size, dim=dim)[dist.get_rank(group)].contiguous()


def reduce_scatter_along(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Sum over the group, keep this rank's shard of ``dim``: NCCL's ``reduce_scatter_tensor``
    (along dim 0 of a moved view); gloo has none, so there an all-reduce then a local chunk
    gives the same values."""
    if x.is_cuda and "nccl" in str(dist.get_backend(group)):
        size = dist.get_world_size(group)
        if x.shape[dim] % size:
            raise ValueError(f"cannot split dim {dim} of size {x.shape[dim]} evenly over {size} ranks")
        whole = x.movedim(dim, 0).contiguous()
        shard = torch.empty((whole.shape[0] // size, *whole.shape[1:]), dtype=x.dtype, device=x.device)
        dist.reduce_scatter_tensor(shard, whole, group=group)
        return shard.movedim(0, dim).contiguous()
    return _chunk(_all_reduce(x.clone(), group), dim, group)


class CopyToParallelRegion(torch.autograd.Function):
    """forward: identity; backward: all-reduce (sum) the partial gradients."""

    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.clone(), ctx.group), None, None


class ReduceFromParallelRegion(torch.autograd.Function):
    """forward: all-reduce (sum) the partial values; backward: identity."""

    @staticmethod
    def forward(ctx, x, dim, group):
        return _all_reduce(x.clone(), group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


class ReduceToParallelRegion(torch.autograd.Function):
    """forward: all-reduce (sum) the partial values; backward: all-reduce the partial gradients
    (a sum read straight by tensor-parallel linears: a family without a norm before them)."""

    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.group = group
        return _all_reduce(x.clone(), group)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.clone(), ctx.group), None, None


class ScatterToParallelRegion(torch.autograd.Function):
    """forward: keep this rank's chunk of ``dim``; backward: all-gather the gradient chunks."""

    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim = dim
        ctx.group = group
        return _chunk(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        return all_gather_along(grad, ctx.dim, ctx.group), None, None


class GatherFromParallelRegion(torch.autograd.Function):
    """forward: all-gather the chunks along ``dim``; backward: keep this rank's gradient chunk."""

    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim = dim
        ctx.group = group
        return all_gather_along(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        return _chunk(grad, ctx.dim, ctx.group), None, None


class GatherFromSequenceParallelRegion(torch.autograd.Function):
    """forward: all-gather the chunks along ``dim``; backward: reduce-scatter the partial gradients."""

    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim = dim
        ctx.group = group
        return all_gather_along(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        return reduce_scatter_along(grad, ctx.dim, ctx.group), None, None


class ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """forward: reduce-scatter (sum, keep this rank's chunk of ``dim``); backward: all-gather the gradient."""

    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim = dim
        ctx.group = group
        return reduce_scatter_along(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        return all_gather_along(grad, ctx.dim, ctx.group), None, None


COLLECTIVES: Mapping[CommKind, type[torch.autograd.Function]] = MappingProxyType(
    {
        "copy": CopyToParallelRegion,
        "all_reduce": ReduceFromParallelRegion,
        "all_reduce_ar": ReduceToParallelRegion,
        "split": ScatterToParallelRegion,
        "all_gather": GatherFromParallelRegion,
        "all_gather_rs": GatherFromSequenceParallelRegion,
        "reduce_scatter": ReduceScatterToSequenceParallelRegion,
    }
)


class Collective(GroupModule):
    """One collective of kind ``kind`` over the ranks ``ranks`` (global ranks, in group order)."""

    def __init__(self, kind: CommKind, ranks: tuple[int, ...], dim: int | None = None):
        super().__init__(ranks)
        if kind not in COLLECTIVES:
            raise ValueError(f"unknown collective {kind!r}; one of {', '.join(KINDS)}")
        self.kind = kind
        self.dim = dim
        self.what = kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return COLLECTIVES[self.kind].apply(x, self.dim, self.bound_group())

    def extra_repr(self) -> str:
        dim = "" if self.dim is None else f", dim={self.dim}"
        return f"{self.kind}, ranks={list(self.ranks)}{dim}"
