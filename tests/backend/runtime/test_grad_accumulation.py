"""Gradients into a strategy's buffer: bf16 parameters' gradients added in fp32; after a restart
the first gradient of each view copied in, views no gradient reached zeroed when settled, so the
buffer holds what zeroing and adding would have left, whatever it held before."""

import torch
from torch import nn

from hotswitch.backend import Strategy, get_config, param_layout
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.runtime.grad_accumulation import GradAccumulation

LAYOUT = param_layout(get_config("tiny"), Strategy.parse("dp1"))


def bf16_params(accumulation: GradAccumulation, names: list[str]) -> dict[str, nn.Parameter]:
    params = {}
    for name in names:
        params[name] = nn.Parameter(torch.zeros(LAYOUT[name].shape, dtype=torch.bfloat16))
        params[name].register_post_accumulate_grad_hook(accumulation.hook(name))
    return params


def backward(params: dict[str, nn.Parameter], seed: int) -> dict[str, torch.Tensor]:
    """Each parameter's gradient of a random linear function, as the fp32 values the hook sees."""
    gen = torch.Generator().manual_seed(seed)
    weights = {n: torch.randn(p.shape, generator=gen).to(torch.bfloat16) for n, p in params.items()}
    sum((p * weights[n]).sum() for n, p in params.items()).backward()
    return {n: w.float() for n, w in weights.items()}


def test_after_a_restart_the_buffer_holds_the_sum_of_the_gradients_and_zeros_elsewhere():
    grads = FlatBuffer(LAYOUT, 0)
    grads.flat.fill_(7.0)  # what a released and reallocated buffer may hold
    accumulation = GradAccumulation(grads, hooked=True)
    reached = list(grads.views)[:3]
    params = bf16_params(accumulation, reached)
    accumulation.restart()
    first, second = backward(params, 0), backward(params, 1)
    accumulation.settle()
    for name, view in grads.views.items():
        expected = first[name] + second[name] if name in reached else torch.zeros_like(view)
        assert torch.equal(view, expected), name
        assert name not in reached or params[name].grad is None  # nothing kept on the bf16 parameter


def test_without_a_restart_gradients_add_to_what_the_buffer_holds():
    grads = FlatBuffer(LAYOUT, 0)
    grads.flat.fill_(0.5)  # e.g. gradients switched in from the previous stage
    accumulation = GradAccumulation(grads, hooked=True)
    name = next(iter(grads.views))
    added = backward(bf16_params(accumulation, [name]), 2)
    accumulation.settle()
    assert torch.equal(grads.views[name], 0.5 + added[name])
    assert all((view == 0.5).all() for other, view in grads.views.items() if other != name)


def test_in_one_dtype_a_restart_zeroes_the_buffer():
    grads = FlatBuffer(LAYOUT, 0)
    grads.flat.fill_(3.0)
    GradAccumulation(grads, hooked=False).restart()
    assert (grads.flat == 0).all()
