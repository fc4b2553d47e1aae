"""Attention on one block of queries against one block of keys, returning the log-sum-exp of
every query row, so that blocks computed apart merge exactly (online softmax); and the
block's backward from the merged output and log-sum-exp (flash attention's recurrences).

Tensors are [batch, kv_heads, group, length, head_dim] for queries (``group`` query heads per
key-value head) and [batch, kv_heads, 1, length, head_dim] for keys and values; everything runs
in fp32. On CPU a block runs PyTorch's fused flash kernel, which returns the log-sum-exp (its
backward takes the merged output and log-sum-exp as they are); elsewhere the same formulas run
as explicit matmuls, keys and values shared by their query heads without copies.
"""

from __future__ import annotations

import torch

_CPU_FLASH = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
_CPU_FLASH_BACKWARD = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)


def _fused(q: torch.Tensor) -> bool:
    return q.device.type == "cpu" and _CPU_FLASH is not None and _CPU_FLASH_BACKWARD is not None


def _heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """[batch, kv_heads, g, length, d] (g is 1 or ``group``) -> [batch, kv_heads x group, length, d]."""
    b, kv, _, length, d = x.shape
    return x.expand(b, kv, group, length, d).reshape(b, kv * group, length, d).contiguous()


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:  # a square block: query i and key i are the same position
        lq, lk = scores.shape[-2:]
        mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).triu(1 + lk - lq)
        scores = scores.masked_fill(mask, float("-inf"))
    return scores


def block_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool):
    """(softmax(q k^T / sqrt(d)) v, logsumexp of every query row) over this block's keys;
    ``causal`` only for a square block whose rows and columns are the same positions."""
    if _fused(q):
        group = q.shape[2]
        out, lse = _CPU_FLASH(_heads(q, group), _heads(k, group), _heads(v, group), 0.0, causal)
        return out.view(q.shape), lse.view(q.shape[:-1])
    scores = _scores(q, k, causal)
    lse = scores.logsumexp(-1)
    return torch.exp(scores - lse.unsqueeze(-1)) @ v, lse


def merge(out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor, block_lse: torch.Tensor) -> None:
    """Fold a block's result into the running (``out``, ``lse``) of the same query rows, in place."""
    merged = torch.logaddexp(lse, block_lse)
    out.mul_(torch.exp(lse - merged).unsqueeze(-1)).add_(block_out * torch.exp(block_lse - merged).unsqueeze(-1))
    lse.copy_(merged)


def block_backward(q, k, v, grad_out, out, lse, causal: bool):
    """The block's share of (dq, dk, dv), given the whole attention's ``out`` and row ``lse``
    (merged over every block) for these query rows."""
    group = q.shape[2]
    if _fused(q):
        flat = [_heads(x, group) for x in (grad_out, q, k, v, out)]
        dq, dk, dv = _CPU_FLASH_BACKWARD(*flat, _heads(lse.unsqueeze(-1), group).squeeze(-1), 0.0, causal)
        per_kv = (*k.shape[:2], group, *k.shape[3:])
        return dq.view(q.shape), dk.view(per_kv).sum(2, keepdim=True), dv.view(per_kv).sum(2, keepdim=True)
    delta = (grad_out * out).sum(-1)
    probs = torch.exp(_scores(q, k, causal) - lse.unsqueeze(-1))
    dv = (probs.transpose(-1, -2) @ grad_out).sum(2, keepdim=True)
    dscores = probs * (grad_out @ v.transpose(-1, -2) - delta.unsqueeze(-1)) * q.shape[-1] ** -0.5
    dq = dscores @ k
    dk = (dscores.transpose(-1, -2) @ q).sum(2, keepdim=True)
    return dq, dk, dv


def grouped(x: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """[batch, seq, heads, head_dim] -> [batch, kv_heads, heads // kv_heads, seq, head_dim] in fp32."""
    b, s, h, d = x.shape
    return x.float().permute(0, 2, 1, 3).reshape(b, kv_heads, h // kv_heads, s, d)


def ungrouped(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The inverse of ``grouped``, cast to ``dtype``."""
    b, kv, g, s, d = x.shape
    return x.reshape(b, kv * g, s, d).permute(0, 2, 1, 3).to(dtype)
