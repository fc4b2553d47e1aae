"""Rank functions for the context-parallel attention tests (importable by spawned processes)."""

import torch
import torch.distributed as dist

from hotswitch.backend.models.documents import row_positions, unpacked_positions
from hotswitch.backend.parallel.ring_attention import RingAttention
from hotswitch.backend.parallel.ulysses import UlyssesAttention
from hotswitch.backend.parallel.zigzag import zigzag_shard

BATCH, HEADS, KV_HEADS, HEAD_DIM, LENGTH = 2, 8, 4, 8, 11  # an odd length: padded per chunk
DOCUMENTS = ([3, 6, 2], [1, 9, 1])  # each row's documents when packed: they straddle the chunks


def positions(cp: int, packed: bool) -> torch.Tensor:
    """The whole padded rows' positions: one document per row, or ``DOCUMENTS`` back to back."""
    padded = LENGTH + -LENGTH % (2 * cp)
    if not packed:
        return unpacked_positions(BATCH, padded)
    return torch.stack([row_positions(lengths, padded) for lengths in DOCUMENTS])


def inputs(cp: int) -> tuple[torch.Tensor, ...]:
    """q, k, v [batch, padded length, heads, d] and an upstream gradient that is zero on the
    padding (what the loss gives), the same on every rank."""
    padded = LENGTH + -LENGTH % (2 * cp)
    generator = torch.Generator().manual_seed(cp)
    q, k, v, grad = (
        torch.randn(BATCH, padded, heads, HEAD_DIM, generator=generator) for heads in (HEADS, KV_HEADS, KV_HEADS, HEADS)
    )
    grad[:, LENGTH:] = 0
    return q, k, v, grad


def attention_shards(rank: int, world: int) -> dict:
    """(flavour, cp, packed) -> this rank's output and q, k, v gradients, zig-zag shards."""
    groups = {2: [dist.new_group([0, 1]), dist.new_group([2, 3])], 4: [dist.group.WORLD]}
    out = {}
    for cp, made in groups.items():
        index, first = rank % cp, rank - rank % cp
        for flavour in (RingAttention, UlyssesAttention):
            for packed in (False, True):
                module = flavour(tuple(range(first, first + cp)), index)
                module.bind(made[rank // cp])
                q, k, v, grad = (zigzag_shard(x, index, cp) for x in inputs(cp))
                q, k, v = (x.requires_grad_() for x in (q, k, v))
                y = module(q, k, v, positions(cp, packed))
                y.backward(grad)
                out[flavour.__name__, cp, packed] = (y.detach(), q.grad, k.grad, v.grad)
    return out
