"""RMSNorm and rotary embedding as autograd Functions that keep only what backward needs.

Autograd through the plain formulas keeps every fp32 intermediate (the upcast input, the
normalised values, the rotated halves): about 12 x dim bytes per token and layer in bf16 that
Megatron does not keep. Both ops compute in fp32 inside and keep

- RMSNorm: its input (in the input's dtype) and the per-token inverse RMS (one fp32 each);
  backward recomputes the normalised values from them;
- rotary embedding: nothing but the tables (model buffers, not activations): a rotation's
  gradient is the rotation by the opposite angle.

Forward values are those of the plain formulas (fp32 inside, cast to the input's dtype), so a
one-device run with these ops is the reference every strategy is checked against.
"""

from __future__ import annotations

import torch


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` in ``dtype``, never through a conversion that changes nothing: under
    ``torch.compile`` in PyTorch 2.11, an autograd Function whose forward returns such a no-op
    ``.to``/``.float()`` (an alias of its own result) gives its inputs zero gradients; an fp32
    run then silently trains only what lies outside the compiled runs."""
    return x if x.dtype == dtype else x.to(dtype)


def _rms_inverse(x: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _gain(weight: torch.Tensor, offset: float) -> torch.Tensor:
    """The norm's scale in fp32: ``weight``, or ``offset + weight`` (Gemma's ``1 + weight``)."""
    return weight.float() + offset if offset else weight.float()


class RMSNormFunction(torch.autograd.Function):
    """forward: x / rms(x) * (offset + weight) in fp32, cast to x's dtype; backward: from x and
    1/rms only."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float = 0.0) -> torch.Tensor:
        xf = x.float()
        inverse = _rms_inverse(xf, eps)
        ctx.save_for_backward(x, weight, inverse)
        ctx.offset = offset
        return cast(xf * inverse * _gain(weight, offset), x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight, inverse = ctx.saved_tensors
        normed = x.float() * inverse
        g = grad.float()
        grad_weight = (g * normed).flatten(0, -2).sum(0).to(weight.dtype) if ctx.needs_input_grad[1] else None
        gw = g * _gain(weight, ctx.offset)
        grad_x = inverse * (gw - normed * (gw * normed).mean(-1, keepdim=True))
        return grad_x.to(x.dtype), grad_weight, None, None


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half rotation of ``x`` [batch, seq, heads, head_dim] by the tables' angles, in fp32.
    Tables narrower than half a head rotate its first ``2 * width`` channels only (partial
    rotary embedding); the rest pass through."""
    rotated = 2 * cos.shape[-1]
    if rotated < x.shape[-1]:
        return torch.cat([_rotate(x[..., :rotated], cos, sin), x[..., rotated:].float()], dim=-1)
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class RotaryFunction(torch.autograd.Function):
    """forward: rotate each head pair by its position's angle; backward: rotate the gradient back."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        seq = x.shape[1]  # tables [positions, half] from 0, or [batch, seq, half] at each token's
        cos, sin = cos[..., :seq, None, :], sin[..., :seq, None, :]
        ctx.save_for_backward(cos, sin)
        return cast(_rotate(x, cos, sin), x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        cos, sin = ctx.saved_tensors
        return _rotate(grad, cos, -sin).to(grad.dtype), None, None
