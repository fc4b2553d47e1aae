"""A packed micro-batch's attention in one kernel call: flash attention's variable-length
kernel, which takes every document of every row as its own sequence (cumulative offsets), so a
query sees only the keys at or before it in its own document, however many documents a row
holds. It is what flash-attn's ``flash_attn_varlen_func`` does, through PyTorch's own build
of the kernel (``aten::_flash_attention_forward`` with ``cum_seq_q``/``cum_seq_k``, as
``torch.nn.attention.varlen`` calls it), so no extra package is needed.

One fused call per document (``documents.per_document``) launches a kernel per document and
layer: a RefinedWeb-like row of 16K tokens holds dozens of documents, and on an H200 the 1b
model's step on such batches ran slower than transformers' padded rows (issue 41's run). Here a
row costs one call whatever it holds. CUDA only, in bf16 or fp16 (flash's dtypes); where it
refuses, the measured choice (``attention.kernels.choose``) keeps another way, and on the CPU
packed rows keep ``per_document``, the exact reference this kernel is tested against.
"""

from __future__ import annotations

import torch

from hotswitch.backend.models.documents import NewestMicroBatch, spans

_OFFSETS = NewestMicroBatch()


def varlen_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Causal attention over [batch, seq, heads, head_dim] that never crosses a document of
    ``positions`` [batch, seq] (on the host), in one call; k and v may have fewer heads
    (grouped-query attention: flash's kernel serves each key head to its group of query heads)."""
    rows, length, heads, dim = q.shape
    offsets, longest = document_offsets(positions, q.device)
    flat = [x.reshape(rows * length, x.shape[2], dim) for x in (q, k, v)]
    out = VarlenAttention.apply(*flat, offsets, longest)
    return out.view(rows, length, heads, dim)


def document_offsets(positions: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, int]:
    """Where each document of ``positions``' rows starts in the rows laid end to end, and the
    row ends (int32 on ``device``), with the longest document; built once a micro-batch (every
    layer reads the same). A padded row's padding joins its last document, as causal attention
    lets it: no real query sees it."""

    def build() -> tuple[torch.Tensor, int]:
        length = positions.shape[1]
        rows = spans(positions) or [[(0, length)] for _ in range(positions.shape[0])]
        bounds = [r * length + a for r, row in enumerate(rows) for a, _ in row] + [len(rows) * length]
        longest = max(b - a for row in rows for a, b in row)
        return torch.tensor(bounds, dtype=torch.int32).to(device, non_blocking=True), longest

    return _OFFSETS.get(positions, str(device), build)


class VarlenAttention(torch.autograd.Function):
    """Causal flash attention over documents laid end to end ([tokens, heads, head_dim]), cut
    at ``offsets``; keeps q, k, v, the output and the fp32 log-sum-exp for backward, as SDPA's
    flash kernel does."""

    @staticmethod
    def forward(ctx, q, k, v, offsets, longest):
        out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
            q, k, v, offsets, offsets, longest, longest, 0.0, True, False
        )
        ctx.save_for_backward(q, k, v, out, lse, offsets, rng, unused)
        ctx.longest = longest
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse, offsets, rng, unused = ctx.saved_tensors
        grads = torch.ops.aten._flash_attention_backward(
            grad.contiguous(), q, k, v, out, lse, offsets, offsets, ctx.longest, ctx.longest, 0.0, True, rng, unused
        )
        return *grads, None, None
