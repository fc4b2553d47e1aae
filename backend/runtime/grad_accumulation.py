"""How a graph's gradients reach its strategy's gradient buffer.

Where parameters and gradients share a dtype, each parameter's ``.grad`` is its view of the
buffer and autograd adds into it in place. Where they do not (bf16 parameters, fp32 gradients:
Megatron's ``main_grad``), a post-accumulate hook adds each micro-batch's gradient into the
view as it is produced.

A step used to zero the whole buffer first, then add every gradient to those zeros: a write and
a read of the buffer (8 bytes a parameter in fp32) that change nothing. After ``restart`` (in
place of the zeroing) the first gradient a view receives is copied into it instead, which is
the same value (0 + g = g exactly), and ``settle`` zeroes the views that received none (a
parameter this rank's micro-batches never reached) before anything reads the buffer.
"""

from __future__ import annotations

import torch

from hotswitch.backend.runtime.flat_buffer import FlatBuffer


class GradAccumulation:
    """``grads``' views, filled by ``hook(name)`` from parameters of another dtype (or, in the
    same dtype, by autograd itself: ``restart`` then zeroes and ``settle`` has nothing to do)."""

    def __init__(self, grads: FlatBuffer, hooked: bool):
        self.grads = grads
        self.hooked = hooked
        self.unwritten: set[str] = set()  # views whose next gradient is copied, not added

    def hook(self, name: str):
        """A post-accumulate-grad hook for parameter ``name``: its gradient into its view."""

        def accumulate(param: torch.Tensor) -> None:
            assert param.grad is not None  # the hook runs once the gradient is accumulated
            view = self.grads.views[name]
            if name in self.unwritten:
                view.copy_(param.grad)
                self.unwritten.discard(name)
            else:
                view.add_(param.grad)
            param.grad = None

        return accumulate

    def restart(self) -> None:
        """Start accumulating from zero, as if the buffer were zeroed (it is, without hooks)."""
        if self.hooked:
            self.unwritten = set(self.grads.views)
        else:
            self.grads.flat.zero_()

    def settle(self) -> None:
        """Zero the views no gradient reached since ``restart``: the buffer is then whole."""
        for name in self.unwritten:
            self.grads.views[name].zero_()
        self.unwritten = set()
