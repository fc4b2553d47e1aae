"""DeepSpeed-Ulysses attention over a context-parallel group, on the zig-zag layout.

Two all-to-alls re-shard attention: q, k and v go from a sequence shard of every head to the
whole sequence of ``heads / cp`` heads (put back in natural order), each rank runs ordinary
causal attention on its heads (document by document in packed rows: every rank has the
whole rows' positions), and the output goes back to the rank's zig-zag sequence shard
of every head. Needs the query and key-value head counts (per tensor-parallel rank) divisible
by cp; ``layout.context_flavour`` falls back to ring attention where they are not.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from hotswitch.backend.models.llama import causal_attention
from hotswitch.backend.parallel.zigzag import zigzag_shard, zigzag_unshard
from hotswitch.backend.runtime.group_module import GroupModule


def _exchange(parts: list[torch.Tensor], group) -> list[torch.Tensor]:
    """Part i to rank i, and rank i's part for this rank back in place i (the parts are of one
    shape). One ``all_to_all_single`` of the parts stacked: gloo runs it in every PyTorch this
    project supports, where its list form ``all_to_all`` came only later (2.11 refuses it)."""
    stacked = torch.stack(parts)
    received = torch.empty_like(stacked)
    dist.all_to_all_single(received, stacked, group=group)
    return list(received.unbind(0))


def seq_to_heads(x: torch.Tensor, group) -> torch.Tensor:
    """[batch, zig-zag shard, heads, d] -> [batch, whole sequence, heads / cp, d]."""
    size = dist.get_world_size(group)
    return zigzag_unshard(_exchange(list(x.chunk(size, dim=2)), group), dim=1)


def heads_to_seq(x: torch.Tensor, group) -> torch.Tensor:
    """[batch, whole sequence, heads / cp, d] -> [batch, zig-zag shard, heads, d]."""
    size = dist.get_world_size(group)
    return torch.cat(_exchange([zigzag_shard(x, r, size) for r in range(size)], group), dim=2)


class Reshard(torch.autograd.Function):
    """forward: the all-to-all from a sequence shard of all heads to all the sequence of some
    heads (``to_heads``) or back; backward: the other one."""

    @staticmethod
    def forward(ctx, x, group, to_heads: bool):
        ctx.group = group
        ctx.to_heads = to_heads
        return (seq_to_heads if to_heads else heads_to_seq)(x, group)

    @staticmethod
    def backward(ctx, grad):
        return (heads_to_seq if ctx.to_heads else seq_to_heads)(grad, ctx.group), None, None


class UlyssesAttention(GroupModule):
    """Causal attention of a cp group's zig-zag shards [batch, seq, heads, head_dim] by heads;
    created unbound, ``bind`` gives it the group's process group."""

    what = "Ulysses"

    def __init__(self, ranks: tuple[int, ...], index: int, window: int | None = None):
        super().__init__(ranks)
        self.index = index  # window: a sliding-window layer's (the heads see whole rows)
        self.window = window

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``positions``: the whole rows' (``models.documents``), as the heads' attention sees them."""
        group = self.bound_group()
        for name, x in (("query", q), ("key-value", k)):
            if x.shape[2] % len(self.ranks):
                raise ValueError(f"Ulysses over {len(self.ranks)} ranks cannot split {x.shape[2]} {name} heads")
        q, k, v = (Reshard.apply(x, group, True) for x in (q, k, v))
        return Reshard.apply(causal_attention(q, k, v, positions, self.window), group, False)

    def extra_repr(self) -> str:
        window = f", window={self.window}" if self.window is not None else ""
        return f"ulysses, ranks={list(self.ranks)}, index={self.index}{window}"
