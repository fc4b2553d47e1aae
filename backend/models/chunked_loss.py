"""Cross-entropy that never holds the fp32 gradient of the logits whole.

``F.cross_entropy`` over logits cast to fp32 keeps the fp32 log-probabilities for backward (4
bytes per token and vocabulary entry), and its backward holds their gradient and the logits'
gradient in fp32 at once (8 bytes more): for the 1b preset's 32,000 entries at 32K tokens, 12.6
GB at the loss alone, the largest term of a long sequence's peak. Here forward keeps the logits
as they come (the compute dtype: 2 bytes an entry in bf16) and one fp32 log-sum-exp per token;
backward rebuilds the softmax a chunk of tokens at a time (``loss_chunks``: 256 MiB of fp32 on a
GPU, 4 MiB on a CPU) and writes each chunk's gradient into the logits' gradient, in the logits'
dtype. The fp32 values are the
ones ``F.cross_entropy`` computes, so loss and gradient agree with it to fp32 rounding.

Over a vocabulary split across tensor-parallel ranks (Megatron's vocab-parallel cross-entropy),
the same Function reduces each token's maximum, sum of exponentials and target logit over the
ranks' shards: three all-reduces, whatever the number of chunks.

``fused`` (a run with ``compile`` on): each pass over the logits is one compiled kernel
(``loss_kernels``) that keeps no fp32 chunk, so all tokens go at once; same values to fp32 rounding.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from hotswitch.backend.data.tokenizer import IGNORE
from hotswitch.backend.models import loss_kernels
from hotswitch.backend.models.loss_chunks import chunk_bytes as default_chunk_bytes
from hotswitch.backend.models.loss_chunks import chunk_rows


def _chunks(tokens: int, rows: int) -> list[slice]:
    return [slice(i, min(i + rows, tokens)) for i in range(0, tokens, rows)]


def _log_sum_exp(flat: torch.Tensor, rows: int, group, fused: bool) -> torch.Tensor:
    """Each token's fp32 log-sum-exp of its logits, over every rank's shard in ``group``."""
    if group is None and fused:
        return loss_kernels.compiled(loss_kernels.log_sum_exp)(flat)
    if group is None:
        return torch.cat([loss_kernels.log_sum_exp(flat[part]) for part in _chunks(flat.shape[0], rows)])
    peak = flat.amax(dim=-1).float()  # the largest logit is one of the logits: exact in any dtype
    dist.all_reduce(peak, op=dist.ReduceOp.MAX, group=group)
    if fused:
        total = loss_kernels.compiled(loss_kernels.exp_sum)(flat, peak)
    else:
        total = torch.cat([loss_kernels.exp_sum(flat[part], peak[part]) for part in _chunks(flat.shape[0], rows)])
    dist.all_reduce(total, group=group)
    return peak + total.log()


def _targets_here(targets: torch.Tensor, start: int, entries: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Which tokens' targets lie in this shard's ``[start, start + entries)``, and their index in it."""
    local = targets - start
    mine = (local >= 0) & (local < entries) & (targets != IGNORE)
    return mine, torch.where(mine, local, 0).unsqueeze(-1)


class ChunkedCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of ``logits`` [..., entries] at ``targets`` [...] (``IGNORE``
    skipped). With ``group``, ``logits`` hold vocabulary ``[start, start + entries)`` of a
    vocabulary split across the group's ranks, and the loss is the whole vocabulary's on every
    rank. ``fused``: through compiled kernels, all tokens at once (``rows`` unused)."""

    @staticmethod
    def forward(ctx, logits, targets, rows: int, start: int = 0, group=None, fused: bool = False):
        flat = logits.flatten(0, -2)
        flat_targets = targets.flatten()
        lse = _log_sum_exp(flat, rows, group, fused)
        mine, index = _targets_here(flat_targets, start, flat.shape[-1])
        target_logit = torch.where(mine, flat.gather(-1, index).squeeze(-1).float(), 0.0)
        if group is not None:
            dist.all_reduce(target_logit, group=group)
        loss = torch.where(flat_targets != IGNORE, lse - target_logit, 0.0).sum()
        ctx.save_for_backward(logits, targets, lse)
        ctx.rows = rows
        ctx.start = start
        ctx.fused = fused
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        logits, targets, lse = ctx.saved_tensors
        flat = logits.flatten(0, -2)
        flat_targets = targets.flatten()
        mine, index = _targets_here(flat_targets, ctx.start, flat.shape[-1])
        scale = ((flat_targets != IGNORE) * grad).float().unsqueeze(-1)
        if ctx.fused:
            out = loss_kernels.compiled(loss_kernels.gradient)(flat, lse, index, mine, scale)
        else:
            out = torch.empty_like(flat)
            for part in _chunks(flat.shape[0], ctx.rows):
                _gradient(out[part], flat[part], lse[part], index[part], mine[part], scale[part])
        return out.view_as(logits), None, None, None, None, None


def _gradient(out, logits, lse, index, mine, scale) -> None:
    """One chunk's gradient, (softmax - the target's one-hot, where here) x scale, computed in
    fp32 into ``out``: in place where ``out`` is fp32, else in one fp32 chunk that dies with the call."""
    softmax = out if out.dtype == torch.float32 else torch.empty_like(out, dtype=torch.float32)
    torch.sub(logits, lse.unsqueeze(-1), out=softmax).exp_()
    softmax.scatter_add_(-1, index, -mine.unsqueeze(-1).float())
    softmax.mul_(scale)
    if softmax is not out:
        out.copy_(softmax)


def chunked_cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    start: int = 0,
    group=None,
    chunk_bytes: int | None = None,
    fused: bool = False,
) -> torch.Tensor:
    """The summed cross-entropy over ``logits`` (this rank's vocabulary shard with ``group``), in
    chunks of ``chunk_bytes`` of fp32 (default: the device's, ``loss_chunks.chunk_bytes``), or
    ``fused``: through compiled kernels that keep no fp32 chunk (``loss_kernels``)."""
    rows = chunk_rows(logits.shape[-1], chunk_bytes or default_chunk_bytes(logits.device.type))
    return ChunkedCrossEntropy.apply(logits, targets, rows, start, group, fused)
