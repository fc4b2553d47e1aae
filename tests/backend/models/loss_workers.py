"""Rank functions for the chunked loss tests (importable by spawned processes)."""

import torch
import torch.distributed as dist

from hotswitch.backend.models.chunked_loss import chunked_cross_entropy


def vocab_split_loss(
    rank: int, world: int, logits: torch.Tensor, targets: torch.Tensor, chunk_bytes: int, fused: bool = False
):
    """The loss over this rank's slice of the vocabulary, and the gradient of that slice."""
    entries = logits.shape[-1] // world
    mine = logits[..., rank * entries : (rank + 1) * entries].clone().requires_grad_()
    loss = chunked_cross_entropy(mine, targets, rank * entries, dist.group.WORLD, chunk_bytes, fused)
    loss.backward()
    return loss.detach(), mine.grad
