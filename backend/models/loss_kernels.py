"""The cross-entropy's passes over the logits as plain formulas, and each as one
``torch.compile``d kernel (``compiled``): what a run with ``compile`` on computes its loss with
(``chunked_loss``, ``fused``).

Eager, each pass is several kernels with fp32 chunks between them: forward casts a chunk to fp32
and takes its log-sum-exp (a maximum, a subtraction, an exponential and a sum, each a pass over
fp32), backward subtracts, exponentiates, scatters the target's -1, scales and casts back.
About 58 bytes of memory traffic per token and vocabulary entry in bf16: at 32K tokens over
32,000 entries some 60 GB, about 14 ms of an H200's bandwidth. Compiled, forward reads the
logits (in their own dtype, once or twice) and writes one fp32 value per token; backward reads
them and writes the gradient: 6 to 8 bytes an entry, and no fp32 chunk at all, so all tokens go
in one call.

The arithmetic is the eager passes' (fp32 inside, the gradient rounded once to the logits'
dtype), so the two agree to fp32 rounding. Sizes are symbolic (``dynamic=True``): one compile
serves every micro-batch length and every vocabulary shard.
"""

from __future__ import annotations

from functools import cache

import torch


def log_sum_exp(logits: torch.Tensor) -> torch.Tensor:
    """Each token's fp32 log-sum-exp of ``logits`` [tokens, entries]."""
    return torch.logsumexp(logits.float(), dim=-1)


def exp_sum(logits: torch.Tensor, peak: torch.Tensor) -> torch.Tensor:
    """Each token's fp32 sum of ``exp(logits - peak)`` (``peak`` [tokens]: a vocabulary shard's
    part of a log-sum-exp taken over every shard)."""
    return (logits.float() - peak.unsqueeze(-1)).exp().sum(dim=-1)


def gradient(logits, lse, index, mine, scale) -> torch.Tensor:
    """The loss's gradient over ``logits`` [tokens, entries], in their dtype: (softmax - the
    target's one-hot where ``mine``) x ``scale`` [tokens, 1]; ``index`` [tokens, 1] each token's
    target within these entries."""
    softmax = (logits.float() - lse.unsqueeze(-1)).exp()
    target = (torch.arange(logits.shape[-1], device=logits.device) == index) & mine.unsqueeze(-1)
    return ((softmax - target.float()) * scale).to(logits.dtype)


@cache
def compiled(fn):
    """``fn`` (one of the passes above) as one compiled kernel, shared by every caller."""
    return torch.compile(fn, dynamic=True)
