"""Communication as autograd Functions: each backward is visibly its forward's conjugate.

=================  ===========================  ===========================
name               forward                      backward
=================  ===========================  ===========================
``all_reduce``     sum partial values           identity
``copy``           identity                     sum partial gradients
``all_gather``     concatenate shards           keep own shard
``all_gather_rs``  concatenate shards           reduce-scatter gradients
``split``          keep own shard               concatenate gradient shards
``reduce_scatter`` sum, keep own shard          concatenate gradient shards
=================  ===========================  ===========================

A ``Collective`` module is created unbound (compiling needs no process group)
and gets its group from ``bind``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


def _all_reduce(x: torch.Tensor, group) -> torch.Tensor:
    x = x.contiguous()
    dist.all_reduce(x, group=group)
    return x


def _all_gather(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


def _chunk(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    size = dist.get_world_size(group)
    if x.shape[dim] % size:
        raise ValueError(f"cannot split dim {dim} of size {x.shape[dim]} evenly over {size} ranks")
    return x.chunk(size, dim=dim)[dist.get_rank(group)].contiguous()


def _reduce_scatter(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    # gloo has no reduce-scatter; an all-reduce then a local chunk gives the same values
    return _chunk(_all_reduce(x.clone(), group), dim, group)


class AllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x.clone(), group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.clone(), ctx.group), None


class AllGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group, reduce_grad):
        ctx.dim, ctx.group, ctx.reduce_grad = dim, group, reduce_grad
        return _all_gather(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        local = _reduce_scatter(grad, ctx.dim, ctx.group) if ctx.reduce_grad else _chunk(grad, ctx.dim, ctx.group)
        return local, None, None, None


class Split(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim, ctx.group = dim, group
        return _chunk(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather(grad, ctx.dim, ctx.group), None, None


class ReduceScatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim, ctx.group = dim, group
        return _reduce_scatter(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather(grad, ctx.dim, ctx.group), None, None


KINDS = ("all_reduce", "copy", "all_gather", "all_gather_rs", "split", "reduce_scatter")


class Collective(nn.Module):
    """One collective over the ranks ``ranks`` (global ranks, in group order)."""

    def __init__(self, kind: str, ranks: tuple[int, ...], dim: int | None = None):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown collective {kind!r}; one of {', '.join(KINDS)}")
        self.kind, self.ranks, self.dim = kind, tuple(ranks), dim
        self.group = None

    def bind(self, group) -> None:
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.group is None:
            raise RuntimeError(f"{self.kind} over ranks {list(self.ranks)} has no process group; call bind() first")
        if self.kind == "all_reduce":
            return AllReduce.apply(x, self.group)
        if self.kind == "copy":
            return Copy.apply(x, self.group)
        if self.kind in ("all_gather", "all_gather_rs"):
            return AllGather.apply(x, self.dim, self.group, self.kind == "all_gather_rs")
        if self.kind == "split":
            return Split.apply(x, self.dim, self.group)
        return ReduceScatter.apply(x, self.dim, self.group)

    def extra_repr(self) -> str:
        dim = "" if self.dim is None else f", dim={self.dim}"
        return f"{self.kind}, ranks={list(self.ranks)}{dim}"
