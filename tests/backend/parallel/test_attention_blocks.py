"""Attention computed block by block and merged by log-sum-exp equals one causal attention,
forward and backward, on every kernel a block can run: CPU flash, the explicit matmuls, and on
a GPU flash (bf16) and memory-efficient attention (fp32)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hotswitch.backend.parallel import attention_blocks
from hotswitch.backend.parallel.attention_blocks import blockwise, grouped, kernel

CHUNKS, CHUNK, HEADS, KV_HEADS, HEAD_DIM = 3, 24, 4, 2, 16
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def _inputs(device: str, dtype: torch.dtype):
    """q, k, v and the output's gradient laid out as ring attention holds them: [batch, seq,
    heads, d] rows viewed as [batch, kv_heads, group, seq, d] (``grouped``)."""
    g = torch.Generator().manual_seed(0)
    length = CHUNKS * CHUNK
    raw = [torch.randn(2, length, heads, HEAD_DIM, generator=g) for heads in (HEADS, KV_HEADS, KV_HEADS, HEADS)]
    return [grouped(x.to(device, dtype), KV_HEADS) for x in raw]


def _one_causal_attention(q, k, v, grad):
    """Output and (dq, dk, dv) of one fp64 causal attention over the whole sequence."""
    q, k, v = (x.double().requires_grad_() for x in (q, k, v))
    group = q.shape[2]
    flat = [x.expand(*q.shape[:2], group, *x.shape[3:]).flatten(1, 2) for x in (q, k, v)]
    out = F.scaled_dot_product_attention(*flat, is_causal=True).view(q.shape)
    out.backward(grad.double())
    return out.detach(), (q.grad, k.grad, v.grad)


def _blockwise(q, k, v, grad):
    """The same attention as chunk-by-chunk blocks: query chunk i against key chunks 0..i
    (causal on the diagonal), merged; then every block's backward from the merged rows."""
    chunks = [slice(i * CHUNK, (i + 1) * CHUNK) for i in range(CHUNKS)]
    blocks = [(rows, cols, i == j) for i, rows in enumerate(chunks) for j, cols in enumerate(chunks[: i + 1])]
    return blockwise(q, k, v, grad, blocks)


CASES = [
    pytest.param("cpu", torch.float32, "cpu-flash", 1e-5, id="cpu-flash"),
    pytest.param("cpu", torch.float32, "matmul", 1e-5, id="matmul"),
    pytest.param("cuda", torch.float32, "efficient", 1e-5, id="gpu-efficient-fp32", marks=GPU),
    pytest.param("cuda", torch.bfloat16, "flash", 3e-2, id="gpu-flash-bf16", marks=GPU),
]


@pytest.mark.parametrize("device, dtype, expected_kernel, tolerance", CASES)
def test_blocks_merged_equal_one_causal_attention(monkeypatch, device, dtype, expected_kernel, tolerance):
    q, k, v, grad = _inputs(device, dtype)
    if expected_kernel == "matmul":
        monkeypatch.setattr(attention_blocks, "kernel", lambda q: "matmul")
    assert attention_blocks.kernel(q) == expected_kernel
    out, grads = _blockwise(q, k, v, grad)
    want_out, want_grads = _one_causal_attention(q, k, v, grad)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), want_out, atol=tolerance, rtol=tolerance)
    for got, want, name in zip(grads, want_grads, ("dq", "dk", "dv")):
        torch.testing.assert_close(
            got.double(), want, atol=tolerance, rtol=tolerance, msg=lambda m, n=name: f"{n}: {m}"
        )


def test_the_kernel_follows_device_and_dtype():
    assert kernel(torch.zeros(1)) == "cpu-flash"
    assert grouped(torch.zeros(1, 4, 2, 8, dtype=torch.bfloat16), 2).dtype == torch.float32  # CPU computes fp32
