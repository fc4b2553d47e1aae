"""The lean RMSNorm and rotary Functions give the plain formulas' values and gradients, eager
and under ``torch.compile`` in fp32 (where their dtype casts change nothing: PyTorch 2.11's
compiler gave such a Function's inputs zero gradients), and eager in bf16 (compiled bf16 is
``test_compiled_regions``' GPU test)."""

import pytest
import torch

from hotswitch.backend.models.lean_ops import RMSNormFunction, RotaryFunction


def plain(x, weight, cos, sin):
    xf = x.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(x.dtype)
    heads = normed.unflatten(-1, (4, 8)).float()
    x1, x2 = heads.chunk(2, dim=-1)
    c, s = cos[: x.shape[1], None, :], sin[: x.shape[1], None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def lean(x, weight, cos, sin):
    normed = RMSNormFunction.apply(x, weight, 1e-5)
    return RotaryFunction.apply(normed.unflatten(-1, (4, 8)), cos, sin)


def values_and_grads(fn, x, weight, cos, sin):
    x, weight = x.clone().requires_grad_(), weight.clone().requires_grad_()
    out = fn(x + 0.5, weight, cos, sin)  # an input made inside, as between a compiled run's ops
    out.float().square().sum().backward()
    return out.detach(), x.grad, weight.grad


@pytest.mark.parametrize("dtype, rtol, compiled", [(torch.float32, 1e-5, True), (torch.bfloat16, 2e-2, False)])
def test_lean_ops_give_the_plain_formulas_values_and_gradients_eager_and_compiled(dtype, rtol, compiled):
    g = torch.Generator().manual_seed(0)
    x, weight = torch.randn(2, 12, 32, generator=g).to(dtype), torch.randn(32, generator=g).to(dtype)
    angles = torch.outer(torch.arange(16.0), torch.rand(4, generator=g))
    cos, sin = angles.cos(), angles.sin()
    reference = values_and_grads(plain, x, weight, cos, sin)
    ways = {"eager": lean, "compiled": torch.compile(lean, dynamic=False)} if compiled else {"eager": lean}
    for way, fn in ways.items():
        for what, got, want in zip(
            ("values", "x's gradient", "weight's"), values_and_grads(fn, x, weight, cos, sin), reference
        ):
            error = ((got.float() - want.float()).norm() / want.float().norm()).item()
            assert error <= rtol, f"{way}: {what} {error:.2e} from the plain formulas' (relative norm)"
