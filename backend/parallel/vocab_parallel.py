"""Embedding lookup and cross-entropy over a vocabulary split across tensor-parallel ranks."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hotswitch.backend.models.chunked_loss import chunked_cross_entropy
from hotswitch.backend.runtime.group_module import GroupModule


def vocab_parallel_embedding(tokens: torch.Tensor, weight: torch.Tensor, start: int) -> torch.Tensor:
    """This rank's summand of the embedding: rows for tokens in [start, start + rows), zeros elsewhere."""
    inside = (tokens >= start) & (tokens < start + weight.shape[0])
    rows = F.embedding(torch.where(inside, tokens - start, 0), weight)
    return rows * inside.unsqueeze(-1)


class VocabParallelLoss(GroupModule):
    """``token_loss`` for logits split over the vocabulary across ``ranks`` (Megatron's
    vocab-parallel cross-entropy, summed over tokens, ``chunked_loss``'s memory); ``fused``:
    through compiled kernels."""

    what = "vocab-parallel loss"

    def __init__(self, ranks: tuple[int, ...], start: int, fused: bool = False):
        super().__init__(ranks)
        self.start = start
        self.fused = fused

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return chunked_cross_entropy(logits, targets, self.start, self.bound_group(), fused=self.fused)

    def extra_repr(self) -> str:
        return f"ranks={list(self.ranks)}, vocab_start={self.start}" + (", fused" if self.fused else "")
