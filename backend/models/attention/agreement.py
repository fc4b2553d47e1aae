"""A way of attending a packed row in one call (flash's variable-length kernel, FlexAttention)
is put in force only where, on this device and dtype, it computes what one fused call per
document does (``documents.per_document``, exact everywhere): forward and gradients, on two
rows of documents whose boundaries fall inside kernel blocks, one of them padded, with grouped
heads as the model has them. Checked once, as the way is chosen (``attention.kernels.choose``):
a kernel that crossed a document, or a PyTorch whose kernel behaves otherwise than the one it
was tested on, is left out with a warning instead of training on wrong attention.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import torch

from hotswitch.backend.models.documents import row_positions

# relative norm of the difference: fp32 summation-order noise, or bf16/fp16 rounding (about
# 4e-3 here); attention that crossed a document is off by tenths
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
LOW_PRECISION_TOLERANCE = 2e-2


def agrees(choice, device: torch.device, dtype: torch.dtype, heads: tuple[int, int, int]) -> bool:
    """Whether ``choice`` (an ``AttentionChoice`` whose ``documents`` is the way checked)
    attends a packed batch as per-document calls do; warns where it does not, or fails."""
    tolerance = TOLERANCE.get(dtype, LOW_PRECISION_TOLERANCE)
    try:
        checked = _attended(choice, device, dtype, heads)
        reference = _attended(replace(choice, documents="per_document"), device, dtype, heads)
    except (RuntimeError, NotImplementedError) as failure:
        warnings.warn(f"packed rows: {choice.documents} failed its check ({failure}); left out", stacklevel=2)
        return False
    error = max(_relative(a, b) for a, b in zip(checked, reference, strict=True))
    if error > tolerance:
        warnings.warn(
            f"packed rows: {choice.documents} attention is {error:.1e} from per-document calls on "
            f"{device} in {dtype} (at most {tolerance:.0e} allowed); left out",
            stacklevel=2,
        )
        return False
    return True


def _attended(choice, device: torch.device, dtype: torch.dtype, heads: tuple[int, int, int]) -> list[torch.Tensor]:
    """The output and the gradients of q, k and v of a fixed packed batch under ``choice``."""
    from hotswitch.backend.models.attention.kernels import use
    from hotswitch.backend.models.llama import causal_attention

    positions = torch.stack([row_positions([70, 100, 30, 56]), row_positions([200], 256)])
    generator = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(2, 256, h, heads[2], generator=generator).to(device, dtype).requires_grad_()
        for h in (heads[0], heads[1], heads[1])
    )
    before = use(choice)
    try:
        out = causal_attention(q, k, v, positions)
        grads = torch.autograd.grad(out.float().square().sum(), (q, k, v))
    finally:
        use(before)
    return [out.detach(), *grads]


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()
