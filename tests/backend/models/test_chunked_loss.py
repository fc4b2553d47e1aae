"""The chunked cross-entropy: the loss and gradient of ``F.cross_entropy`` (one device, and over a
vocabulary split across gloo ranks), a chunk of tokens at a time; and the bytes it holds, counted
live on the CPU, against the memory model, beside what ``F.cross_entropy`` over fp32 logits holds."""

import pytest
import torch
import torch.nn.functional as F

from hotswitch.backend.data.tokenizer import IGNORE
from hotswitch.backend.models.chunked_loss import chunked_cross_entropy
from hotswitch.backend.models.loss_chunks import chunk_bytes, chunk_rows
from hotswitch.backend.precision import Precision
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.planning.live_bytes import LiveBytes
from hotswitch.backend.train.planning.memory import CHUNKED, WHOLE, loss_kept_bytes, loss_peak_bytes

from .loss_workers import vocab_split_loss

ENTRIES = 40
SMALL_CHUNKS = 4 * ENTRIES * 3  # three tokens a chunk


def batch(dtype):
    gen = torch.Generator().manual_seed(0)
    logits = (4 * torch.randn(3, 11, ENTRIES, generator=gen)).to(dtype)
    targets = torch.randint(0, ENTRIES, (3, 11), generator=gen)
    targets[0, :4] = IGNORE
    targets[2, -1] = IGNORE
    return logits, targets


def whole(logits, targets):
    flat = logits.flatten(0, 1).float()
    return F.cross_entropy(flat, targets.flatten(), ignore_index=IGNORE, reduction="sum")


def loss_and_grad(fn, logits, targets):
    logits = logits.clone().requires_grad_()
    loss = fn(logits, targets)
    loss.backward()
    return loss.detach(), logits.grad


def test_chunks_split_the_tokens():
    assert chunk_rows(ENTRIES, SMALL_CHUNKS) == 3 and chunk_rows(32_000) == 2097 and chunk_rows(10**9) == 1
    assert chunk_rows(32_000, chunk_bytes("cpu")) == 32 and chunk_bytes("cuda") == 1 << 28  # a CPU's stay in cache


def test_the_loss_and_gradient_are_cross_entropy_s_across_chunks():
    logits, targets = batch(torch.float64)
    chunked = loss_and_grad(lambda x, t: chunked_cross_entropy(x, t, chunk_bytes=SMALL_CHUNKS), logits, targets)
    for got, expected in zip(chunked, loss_and_grad(whole, logits, targets)):
        torch.testing.assert_close(got.double(), expected.double(), rtol=1e-6, atol=1e-6)
    assert (chunked[1][0, :4] == 0).all() and chunked[1][1].abs().sum() > 0  # ignored tokens: no gradient


def test_in_bf16_the_gradient_is_the_fp32_gradient_rounded():
    logits, targets = batch(torch.bfloat16)
    loss, grad = loss_and_grad(lambda x, t: chunked_cross_entropy(x, t, chunk_bytes=SMALL_CHUNKS), logits, targets)
    expected_loss, expected_grad = loss_and_grad(whole, logits, targets)
    assert grad.dtype == torch.bfloat16 and abs(loss - expected_loss) <= 1e-5 * expected_loss
    torch.testing.assert_close(grad, expected_grad)  # bf16's tolerance: one rounding apart


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=GPU)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_the_compiled_kernels_give_the_chunked_loss_and_gradient(dtype, device):
    """What a run with ``compile`` on computes (all tokens in one compiled call per pass) against
    the eager chunks: the loss to fp32 rounding, the gradient to fp32 rounding before its one
    rounding to the logits' dtype (in bf16 a value near a rounding boundary may land one bf16
    step apart: bf16's tolerance); over three lengths, which one compile serves."""
    gen = torch.Generator().manual_seed(3)
    for rows, length in [(3, 11), (2, 29), (1, 64)]:
        logits = (4 * torch.randn(rows, length, ENTRIES, generator=gen)).to(device, dtype)
        targets = torch.randint(0, ENTRIES, (rows, length), generator=gen).to(device)
        targets[0, :3] = IGNORE
        chunked = loss_and_grad(lambda x, t: chunked_cross_entropy(x, t, chunk_bytes=SMALL_CHUNKS), logits, targets)
        fused = loss_and_grad(lambda x, t: chunked_cross_entropy(x, t, fused=True), logits, targets)
        torch.testing.assert_close(fused[0], chunked[0], rtol=1e-5, atol=1e-5)
        assert fused[1].dtype == dtype and (fused[1][0, :3] == 0).all()
        if dtype == torch.float32:
            torch.testing.assert_close(fused[1], chunked[1], rtol=1e-5, atol=1e-6)
        else:
            torch.testing.assert_close(fused[1], chunked[1])


@pytest.mark.parametrize("fused", [False, True])
def test_a_vocabulary_split_over_ranks_gives_the_whole_loss_and_each_rank_its_slice(fused):
    dtype = torch.float32 if fused else torch.float64  # compiled kernels: fp32 (CPU's Inductor rounds fp64 so too)
    logits, targets = batch(dtype)
    expected_loss, expected_grad = loss_and_grad(whole, logits, targets)
    tolerance = {"rtol": 1e-5, "atol": 1e-6} if fused else {"rtol": 1e-6, "atol": 1e-6}
    split = spawn_ranks(vocab_split_loss, 2, logits, targets, SMALL_CHUNKS // 2, fused)
    for rank, (loss, grad) in enumerate(split):
        torch.testing.assert_close(loss.double(), expected_loss.double(), **tolerance)
        half = ENTRIES // 2
        torch.testing.assert_close(grad, expected_grad[..., rank * half : (rank + 1) * half], **tolerance)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("loss", [CHUNKED, WHOLE])
def test_the_bytes_held_live_are_the_memory_model_s(loss, precision):
    """A head (hidden states times the output layer) and its loss: the bytes kept after forward,
    and those on top at the peak of backward, per token, within 2% of the model (the hidden
    states' and weight's gradients, not the loss's, make the difference)."""
    tokens, entries, dim, p = 1024, 8192, 16, Precision.of(precision)
    chunk_bytes = 4 * entries * 64  # 16 chunks
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(tokens, dim, generator=gen).to(p.compute_dtype).requires_grad_()
    weight = torch.randn(entries, dim, generator=gen).to(p.compute_dtype).requires_grad_()
    targets = torch.randint(0, entries, (tokens,), generator=gen)
    fn = (lambda x, t: chunked_cross_entropy(x, t, chunk_bytes=chunk_bytes)) if loss == CHUNKED else whole
    with LiveBytes() as live:
        value = fn((hidden @ weight.T).unsqueeze(0), targets.unsqueeze(0))
        kept = live.now
        live.reset_peak()
        value.backward()
    predicted_kept = tokens * (loss_kept_bytes(entries, p, 1, loss) - 8)  # the targets were made outside
    predicted_peak = loss_peak_bytes(entries, tokens, p, loss, chunk_bytes)
    assert abs(kept - predicted_kept) <= 0.02 * predicted_kept, (kept, predicted_kept)
    assert abs(live.peak - kept - predicted_peak) <= 0.02 * predicted_peak, (live.peak - kept, predicted_peak)


def test_the_chunked_loss_holds_a_fraction_of_what_whole_fp32_logits_hold():
    """The 1b preset's vocabulary at 32K tokens in bf16: 12.6 GB at the loss becomes 4.5 GB."""
    p, entries, tokens = Precision.of("bf16"), 32_000, 32_768
    held = {loss: tokens * loss_kept_bytes(entries, p, 1, loss) + loss_peak_bytes(entries, tokens, p, loss)
            for loss in (CHUNKED, WHOLE)}  # fmt: skip
    assert held[CHUNKED] < 0.4 * held[WHOLE]


@GPU
def test_on_a_gpu_the_allocator_s_peak_is_the_memory_model_s():
    """The 1b preset's vocabulary, 8K tokens, bf16: what CUDA's allocator holds after forward and
    at the peak of backward, within 2% of the model."""
    tokens, entries, dim, p = 8192, 32_000, 64, Precision.of("bf16")
    device = torch.device("cuda")
    hidden = torch.randn(tokens, dim, device=device, dtype=p.compute_dtype, requires_grad=True)
    weight = torch.randn(entries, dim, device=device, dtype=p.compute_dtype, requires_grad=True)
    targets = torch.randint(0, entries, (1, tokens), device=device)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    value = chunked_cross_entropy((hidden @ weight.T).unsqueeze(0), targets)
    kept = torch.cuda.memory_allocated() - before
    torch.cuda.reset_peak_memory_stats()
    value.backward()
    peak = torch.cuda.max_memory_allocated() - before - kept
    assert abs(kept - tokens * (loss_kept_bytes(entries, p) - 8)) <= 0.02 * kept
    assert abs(peak - loss_peak_bytes(entries, tokens, p)) <= 0.02 * peak
