"""Embedding lookup and cross-entropy over a vocabulary split across tensor-parallel ranks."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from hotswitch.backend.models.llama import IGNORE
from hotswitch.backend.runtime.group_module import GroupModule


def vocab_parallel_embedding(tokens: torch.Tensor, weight: torch.Tensor, start: int) -> torch.Tensor:
    """This rank's summand of the embedding: rows for tokens in [start, start + rows), zeros elsewhere."""
    inside = (tokens >= start) & (tokens < start + weight.shape[0])
    rows = F.embedding(torch.where(inside, tokens - start, 0), weight)
    return rows * inside.unsqueeze(-1)


class _VocabParallelLoss(torch.autograd.Function):
    """Summed cross-entropy of logits whose last dim holds vocabulary ``[start, start + n)``
    on this rank (Megatron's vocab-parallel cross-entropy, summed over tokens)."""

    @staticmethod
    def forward(ctx, logits, targets, start, group):
        logits = logits.float()
        peak = logits.max(dim=-1).values
        dist.all_reduce(peak, op=dist.ReduceOp.MAX, group=group)
        shifted = logits - peak.unsqueeze(-1)
        exp = shifted.exp()
        total = exp.sum(dim=-1)
        dist.all_reduce(total, group=group)
        local = targets - start
        mine = (local >= 0) & (local < logits.shape[-1])
        index = torch.where(mine, local, 0).unsqueeze(-1)
        target_logit = torch.where(mine, shifted.gather(-1, index).squeeze(-1), 0.0)
        dist.all_reduce(target_logit, group=group)
        counted = targets != IGNORE
        loss = torch.where(counted, total.log() - target_logit, 0.0).sum()
        ctx.save_for_backward(exp, total, index, mine, counted)
        return loss

    @staticmethod
    def backward(ctx, grad):
        exp, total, index, mine, counted = ctx.saved_tensors
        grad_logits = exp / total.unsqueeze(-1)
        grad_logits.scatter_add_(-1, index, -mine.unsqueeze(-1).to(grad_logits.dtype))
        grad_logits *= (counted.unsqueeze(-1) * grad).to(grad_logits.dtype)
        return grad_logits, None, None, None


class VocabParallelLoss(GroupModule):
    """``token_loss`` for logits split over the vocabulary across ``ranks``."""

    what = "vocab-parallel loss"

    def __init__(self, ranks: tuple[int, ...], start: int):
        super().__init__(ranks)
        self.start = start

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _VocabParallelLoss.apply(logits, targets, self.start, self.bound_group())

    def extra_repr(self) -> str:
        return f"ranks={list(self.ranks)}, vocab_start={self.start}"
