"""The zig-zag layout of context parallelism: how a row's tokens are dealt to a cp group.

A row of ``L`` tokens is padded on the right to a multiple of ``2 * cp`` (padding per chunk,
never refused: causal attention keeps real tokens from seeing the padding, and ignored targets
keep it out of the loss) and cut into ``2 * cp`` equal chunks; rank ``i`` of the cp group holds
chunks ``i`` and ``2 * cp - 1 - i`` of every row, in that order. Under causal attention an early
chunk has little to attend to and a late one much, so every rank gets the same work (Megatron
context parallelism's load balancing). Rotary embedding reads each token's position in its
document from the whole row's positions (``models.documents``; every rank of the group has
them), so a shard computes exactly what one device computes on those tokens.

The logical graph writes this split ``Shard(1)`` over the cp mesh dim; the chunks a rank holds
are the zig-zag pair, not the contiguous block ``DistState.local_box`` names. Activations are
never switched between strategies, so no box of them is ever moved by that description.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hotswitch.backend.data.tokenizer import IGNORE
from hotswitch.backend.models.documents import gather_tables, pad_positions, unpacked_positions
from hotswitch.backend.models.lean_ops import RotaryFunction


def zigzag_positions(index: int, cp: int, local_length: int, device=None) -> torch.Tensor:
    """The true positions of the ``local_length`` tokens rank ``index`` of ``cp`` holds."""
    chunk = local_length // 2
    early = torch.arange(index * chunk, (index + 1) * chunk, device=device)
    late = torch.arange((2 * cp - 1 - index) * chunk, (2 * cp - index) * chunk, device=device)
    return torch.cat([early, late])


def zigzag_shard(x: torch.Tensor, index: int, cp: int, dim: int = 1) -> torch.Tensor:
    """Rank ``index``'s two chunks of ``x`` along ``dim`` (whose size ``2 * cp`` divides)."""
    chunks = x.chunk(2 * cp, dim=dim)
    return torch.cat([chunks[index], chunks[2 * cp - 1 - index]], dim=dim)


def zigzag_unshard(shards: list[torch.Tensor], dim: int = 1) -> torch.Tensor:
    """The whole tensor from every rank's ``zigzag_shard``, in cp-group order."""
    early = [s.chunk(2, dim=dim)[0] for s in shards]
    late = [s.chunk(2, dim=dim)[1] for s in reversed(shards)]
    return torch.cat(early + late, dim=dim)


def pad_to(tokens: torch.Tensor, targets: torch.Tensor, multiple: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad rows on the right to a length divisible by ``multiple`` (ignored targets)."""
    extra = -tokens.shape[1] % multiple
    if not extra:
        return tokens, targets
    return F.pad(tokens, (0, extra), value=0), F.pad(targets, (0, extra), value=IGNORE)


def pad_rows(
    tokens: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor | None, multiple: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``pad_to`` with the rows' positions (one document per row when None) continued over
    the padding."""
    if positions is None:
        positions = unpacked_positions(*tokens.shape)
    extra = -tokens.shape[1] % multiple
    return (*pad_to(tokens, targets, multiple), pad_positions(positions, extra))


def shard_micro_batch(
    tokens: torch.Tensor, targets: torch.Tensor, index: int, cp: int, multiple: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``index``'s zig-zag share of a micro-batch, padded first to a multiple of
    ``2 * cp * multiple`` (``multiple``: tp with sequence parallelism, which splits the shard)."""
    tokens, targets = pad_to(tokens, targets, 2 * cp * multiple)
    return zigzag_shard(tokens, index, cp), zigzag_shard(targets, index, cp)


def zigzag_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor, index: int, cp: int
) -> torch.Tensor:
    """Rotary embedding of rank ``index``'s zig-zag shard ``x`` [batch, seq, heads, head_dim] at
    its tokens' positions in their documents, taken from the whole rows' ``positions``
    [batch, 2 * cp * (seq // 2)]."""
    return RotaryFunction.apply(x, *gather_tables(cos, sin, zigzag_shard(positions, index, cp)))
