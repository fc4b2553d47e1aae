"""Attention on one block of queries against one block of keys, returning the log-sum-exp of
every query row, so that blocks computed apart merge exactly (online softmax); and the
block's backward from the merged output and log-sum-exp (flash attention's recurrences).

Tensors are [batch, kv_heads, group, length, head_dim] for queries (``group`` query heads per
key-value head) and [batch, kv_heads, 1, length, head_dim] for keys and values. Blocks run in
``block_dtype``: a GPU's bf16/fp16 inputs as they are, everything else in fp32; the running
output and log-sum-exp they merge into are always fp32. A block runs PyTorch's fused kernel
where one returns the log-sum-exp and takes the merged output and log-sum-exp back in its
backward: flash attention on CPU and for a GPU's half precision, memory-efficient attention
for a GPU's fp32 (flash has no fp32). Elsewhere, and for a block with a ``mask`` (packed
documents: [batch, queries, keys], True where a key is visible), the same formulas run as
explicit matmuls, keys and values shared by their query heads without copies; a query row
that sees no key of a block gets a zero output and a log-sum-exp of -inf, which merges as
nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_ATEN = torch.ops.aten
_CPU_FLASH = getattr(_ATEN, "_scaled_dot_product_flash_attention_for_cpu", None)
_CPU_FLASH_BACKWARD = getattr(_ATEN, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
_HALF = (torch.bfloat16, torch.float16)
_LSE_ALIGN = 32  # memory-efficient attention pads each row's log-sum-exp to this many


def block_dtype(x: torch.Tensor) -> torch.dtype:
    """What a block of ``x`` computes in: a GPU's half precision as it is, else fp32."""
    return x.dtype if x.is_cuda and x.dtype in _HALF else torch.float32


def kernel(q: torch.Tensor) -> str:
    """Which implementation runs a block of ``q``: "cpu-flash", "flash", "efficient" or "matmul"."""
    if q.device.type == "cpu":
        return "cpu-flash" if _CPU_FLASH is not None and _CPU_FLASH_BACKWARD is not None else "matmul"
    if q.is_cuda:
        return "flash" if q.dtype in _HALF else "efficient"
    return "matmul"


def _heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """[batch, kv_heads, g, length, d] (g is 1 or ``group``) -> [batch, kv_heads x group, length, d],
    a view where one serves: a GPU's kernels read any strides whose last is 1."""
    b, kv, _, length, d = x.shape
    flat = x.expand(b, kv, group, length, d).reshape(b, kv * group, length, d)
    return flat if x.is_cuda and flat.stride(-1) == 1 else flat.contiguous()


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool, mask: torch.Tensor | None = None) -> torch.Tensor:
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if mask is not None:  # [batch, queries, keys] over every head
        return scores.masked_fill(~mask.to(q.device)[:, None, None], float("-inf"))
    if causal:  # a square block: query i and key i are the same position
        lq, lk = scores.shape[-2:]
        hidden = torch.ones(lq, lk, dtype=torch.bool, device=q.device).triu(1 + lk - lq)
        scores = scores.masked_fill(hidden, float("-inf"))
    return scores


def _fused_forward(
    kind: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, log-sum-exp [batch, heads, length]) of a fused kernel on [batch, heads, length, d]."""
    if kind == "cpu-flash":
        assert _CPU_FLASH is not None  # kernel() picks "cpu-flash" only where it exists
        return _CPU_FLASH(q, k, v, 0.0, causal)[:2]
    if kind == "flash":
        return _ATEN._scaled_dot_product_flash_attention(q, k, v, 0.0, causal)[:2]
    out, lse = _ATEN._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal)[:2]
    return out, lse[..., : q.shape[2]]


def _fused_backward(
    kind: str,
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of a fused kernel, given the merged output and log-sum-exp of these rows."""
    if kind == "cpu-flash":
        assert _CPU_FLASH_BACKWARD is not None  # kernel() picks "cpu-flash" only where it exists
        return _CPU_FLASH_BACKWARD(grad_out, q, k, v, out, lse, 0.0, causal)
    seed = torch.zeros((), dtype=torch.long, device=q.device)  # no dropout: the rng state is unread
    if kind == "flash":
        return _ATEN._scaled_dot_product_flash_attention_backward(
            grad_out, q, k, v, out, lse, None, None, q.shape[2], k.shape[2], 0.0, causal, seed, seed
        )[:3]
    lse = F.pad(lse, (0, -lse.shape[-1] % _LSE_ALIGN)).contiguous()
    return _ATEN._scaled_dot_product_efficient_attention_backward(
        grad_out, q, k, v, None, out, lse, seed, seed, 0.0, [True, True, True, False], causal
    )[:3]


def block_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(softmax(q k^T / sqrt(d)) v, logsumexp of every query row) over this block's keys;
    ``causal`` only for a square block whose rows and columns are the same positions; ``mask``
    (which keys each query sees) instead of ``causal`` for packed documents."""
    kind = kernel(q)
    if mask is not None:
        scores = _scores(q, k, causal, mask)
        lse = scores.logsumexp(-1)
        return torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0) @ v, lse  # a row seeing nothing: 0
    if kind != "matmul":
        group = q.shape[2]
        out, lse = _fused_forward(kind, _heads(q, group), _heads(k, group), _heads(v, group), causal)
        return out.reshape(q.shape), lse.reshape(q.shape[:-1])
    scores = _scores(q, k, causal)
    lse = scores.logsumexp(-1)
    return torch.exp(scores - lse.unsqueeze(-1)) @ v, lse


def merge(out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor, block_lse: torch.Tensor) -> None:
    """Fold a block's result into the running fp32 (``out``, ``lse``) of the same query rows,
    in place."""
    merged = torch.logaddexp(lse, block_lse)
    out.mul_(torch.exp(lse - merged).unsqueeze(-1)).add_(block_out * torch.exp(block_lse - merged).unsqueeze(-1))
    lse.copy_(merged)


def block_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    grad_out: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The block's share of (dq, dk, dv), given the whole attention's ``out`` (cast once to
    ``q``'s dtype by the caller saves a copy a block) and row ``lse`` (merged over every block,
    fp32) for these query rows; dk and dv summed over their query heads in fp32."""
    group = q.shape[2]
    kind = kernel(q)
    if kind != "matmul" and mask is None:
        flat_grad, flat_q, flat_k, flat_v, flat_out = (_heads(x.to(q.dtype), group) for x in (grad_out, q, k, v, out))
        row_lse = _heads(lse.unsqueeze(-1), group).squeeze(-1).contiguous()  # kernels read it packed
        dq, dk, dv = _fused_backward(kind, flat_grad, flat_q, flat_k, flat_v, flat_out, row_lse, causal)
        per_kv = (*k.shape[:2], group, *k.shape[3:])
        dk, dv = (x.reshape(per_kv).sum(2, keepdim=True, dtype=torch.float32) for x in (dk, dv))
        return dq.reshape(q.shape), dk, dv
    delta = (grad_out * out).sum(-1)
    probs = torch.exp(_scores(q, k, causal, mask) - lse.unsqueeze(-1))
    dv = (probs.transpose(-1, -2) @ grad_out).sum(2, keepdim=True)
    dscores = probs * (grad_out @ v.transpose(-1, -2) - delta.unsqueeze(-1)) * q.shape[-1] ** -0.5
    dq = dscores @ k
    dk = (dscores.transpose(-1, -2) @ q).sum(2, keepdim=True)
    return dq, dk, dv


def blockwise(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad: torch.Tensor, blocks: list[tuple[slice, slice, bool]]
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """``blocks`` (query rows, key columns, causal) on one device as ring attention runs them,
    without the transfers: every block forward, merged; the merged output cast once to ``q``'s
    dtype; every block's backward from it. Returns the fp32 output and fp32 (dq, dk, dv): a
    reference for tests and benchmarks."""
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.full(q.shape[:-1], float("-inf"), device=q.device)
    for rows, cols, causal in blocks:
        merge(
            out[..., rows, :], lse[..., rows], *block_forward(q[..., rows, :], k[..., cols, :], v[..., cols, :], causal)
        )
    saved = out.to(q.dtype)
    grads = [torch.zeros(x.shape, dtype=torch.float32, device=q.device) for x in (q, k, v)]
    for rows, cols, causal in blocks:
        keys = k[..., cols, :]
        values = v[..., cols, :]
        parts = block_backward(
            q[..., rows, :], keys, values, grad[..., rows, :], saved[..., rows, :], lse[..., rows], causal
        )
        for total, where, part in zip(grads, (rows, cols, cols), parts):
            total[..., where, :] += part
    return out, tuple(grads)


def grouped(x: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """[batch, seq, heads, head_dim] -> [batch, kv_heads, heads // kv_heads, seq, head_dim] in
    ``block_dtype``."""
    b, s, h, d = x.shape
    return x.to(block_dtype(x)).permute(0, 2, 1, 3).reshape(b, kv_heads, h // kv_heads, s, d)


def ungrouped(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The inverse of ``grouped``, cast to ``dtype``."""
    b, kv, g, s, d = x.shape
    return x.reshape(b, kv * g, s, d).permute(0, 2, 1, 3).to(dtype)
