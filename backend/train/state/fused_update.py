"""A step's update in one compiled kernel: AdamW over the flat master buffer, the clip folded in,
the compute copy written in the same pass; what a run with ``compile`` on updates with.

Eager, an update of the flat buffers is four passes over them: the clip multiplies the gradients
(read and write, 8 bytes a parameter), PyTorch's fused AdamW reads weights, gradients and both
moments and writes three of them back (28 bytes), and in mixed precision the bf16 compute copy is
cast from the fp32 weights (6 bytes). The master weights, their gradients and (here) AdamW's
moments each lie in one flat buffer, so all of it is one element-wise kernel: read four, write
three and the copy, 30 bytes a parameter in bf16 against 42. On an H200 the eager update's
norm, clip and AdamW kernels took 15 ms of a 1b step (their bytes need about 9 at its bandwidth)
and the copy 1.4 more; by the byte count the norm and this kernel take about 7 (at the 7B shape
with 8 layers about 16 against some 36).

The clip factor is computed on the device from the norm (``min(1, max / (norm + 1e-6))``, in
fp32 as the eager multiply rounds it), so a gradient within the norm is multiplied by exactly 1.
The arithmetic is PyTorch's AdamW's (``torch.optim.adamw``'s single-tensor formulas): the same
values to fp32 rounding. The gradients are read, not clipped in place.

AdamW's state stays where checkpoints, the memory account and ``Master.optimizer_state`` read
it, in ``optimizer.state`` per parameter: here the moments are views of two flat buffers, taken
over (copied in) from whatever a loaded checkpoint put there, zero where the state was cleared.
"""

from __future__ import annotations

from functools import cache

import torch
from torch import nn

from hotswitch.backend.runtime.on_read import to_device
from hotswitch.backend.train.state.optim import OptimizerConfig

MOMENTS = ("exp_avg", "exp_avg_sq")


def adamw(weights, grads, exp_avg, exp_avg_sq, scalars, copy=None) -> None:
    """One AdamW update of flat ``weights`` in place from ``grads`` x the clip; ``scalars``, fp32:
    [clip, 1 - lr x weight decay, lr / (1 - beta1^step), sqrt(1 - beta2^step), 1 - beta1, beta2,
    1 - beta2, eps]; ``copy``, if given, receives the updated weights in its dtype."""
    grad = grads * scalars[0]
    weights.mul_(scalars[1])
    exp_avg.lerp_(grad, scalars[4])
    exp_avg_sq.mul_(scalars[5]).add_(scalars[6] * grad * grad)
    denom = exp_avg_sq.sqrt() / scalars[3] + scalars[7]
    weights.sub_(scalars[2] * (exp_avg / denom))
    if copy is not None:
        copy.copy_(weights)


@cache
def compiled_adamw():
    """``adamw`` as one compiled kernel, for every size: a process updates buffers of many sizes
    (a strategy's shard, a warm pool's next model), and compiled per size the ninth would fail
    (dynamo's recompile limit, under ``fullgraph``). Every number is in ``scalars``, so new
    settings compile nothing either; only another dtype of ``copy`` does."""
    return torch.compile(adamw, dynamic=True, fullgraph=True)


class FusedUpdate:
    """AdamW with ``optim``'s settings over ``params`` (views, back to back, of the flat
    ``weights``; their gradients the same views of ``grads``), keeping its state in
    ``optimizer.state`` as ``torch.optim.AdamW`` does; ``copy``: a flat compute copy of the
    weights, rewritten by each update (None where the weights are what computes)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        params: list[nn.Parameter],
        weights: torch.Tensor,
        grads: torch.Tensor,
        optim: OptimizerConfig,
        copy: torch.Tensor | None = None,
    ):
        self.optimizer = optimizer
        self.params = params
        self.optim = optim
        self.weights = weights
        self.grads = grads
        self.copy = copy
        self.flat: dict[str, torch.Tensor] = {}  # the moments' buffers, made at the first update
        self.views: dict[str, list[torch.Tensor]] = {}

    def step(self, update: int, norm: torch.Tensor) -> None:
        """The ``update``-th update at its scheduled rate, the gradients clipped by ``norm`` (a
        0-d tensor on the weights' device: their global norm)."""
        count = self._adopted_step()
        count += 1  # one tensor that every parameter's state holds
        step = float(count)
        o = self.optim
        lr = o.lr_at(update)
        beta1, beta2 = o.betas
        host = [1.0 - lr * o.weight_decay, lr / (1 - beta1**step), (1 - beta2**step) ** 0.5, 1 - beta1, beta2]
        host += [1 - beta2, o.eps]
        clip = (o.max_grad_norm / (norm.double() + 1e-6)).clamp(max=1.0).float().reshape(1)
        scheduled = to_device(torch.tensor(host, dtype=torch.float32), self.weights.device)  # waits on nothing
        scalars = torch.cat([clip, scheduled])
        moments = [self.flat[key] for key in MOMENTS]
        compiled_adamw()(self.weights, self.grads, *moments, scalars, self.copy)

    def scratch(self) -> FusedUpdate:
        """An update of copies of these buffers (gradients zero, state fresh): it costs what
        this one does, and timing it changes nothing here."""
        weights = nn.Parameter(self.weights.detach().clone())
        copy = None if self.copy is None else torch.empty_like(self.copy)
        optimizer = self.optim.adamw([weights])
        return FusedUpdate(optimizer, [weights], weights.detach(), torch.zeros_like(self.grads), self.optim, copy)

    def _adopted_step(self) -> torch.Tensor:
        """AdamW's step count, one tensor shared by every parameter's state, once the moments in
        ``optimizer.state`` are views of the flat buffers: as they stay from update to update
        (checked, nothing done), else taken over: zero where the state holds none (a fresh or
        cleared optimizer), copied in where it holds other tensors (a loaded checkpoint)."""
        if not self.flat:
            self.flat = {key: torch.zeros_like(self.weights) for key in MOMENTS}
            self.views = {key: [self._view(self.flat[key], p) for p in self.params] for key in MOMENTS}
        state = self.optimizer.state
        first = self.params[0]
        if all(state.get(p, {}).get(key) is self.views[key][i] for key in MOMENTS for i, p in enumerate(self.params)):
            return state[first]["step"]
        count = torch.tensor(float(state[first]["step"]) if first in state else 0.0)
        for i, param in enumerate(self.params):
            held = state.get(param, {})
            for key in MOMENTS:
                view = self.views[key][i]
                if key in held and held[key] is not view:
                    view.copy_(held[key])
                elif key not in held:
                    view.zero_()
            state[param] = {"step": count, **{key: self.views[key][i] for key in MOMENTS}}
        return count

    def _view(self, flat: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
        """``param``'s place (a view of ``weights``) in another buffer laid out as ``weights``."""
        start = param.storage_offset() - self.weights.storage_offset()
        return flat[start : start + param.numel()].view_as(param)
