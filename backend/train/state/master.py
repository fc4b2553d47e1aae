"""The master weights: the instantiation strategy's parameters, AdamW over them, and the
update that ends every step. Other strategies only ever hold copies and accumulate gradients;
this is the one place weights change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from hotswitch.backend.dist_state import Box, Replicate
from hotswitch.backend.models.llama import init_param
from hotswitch.backend.precision import FP32, Precision
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.train.loop.strategy_state import StrategyState
from hotswitch.backend.train.state.optim import OptimizerConfig

ADAM_MOMENTS = ("exp_avg", "exp_avg_sq")


@dataclass(frozen=True)
class OptimizerState:
    """AdamW's state on one rank: the step count and, per parameter of the master layout, this
    rank's box of ``exp_avg`` and ``exp_avg_sq`` (zeros before the first update)."""

    step: float
    moments: dict[str, dict[str, torch.Tensor]]


InitialValue = Callable[[str, tuple[int, ...], Box], torch.Tensor]
"""``initial(name, full_shape, box)``: this rank's ``box`` of parameter ``name``'s initial value
(e.g. ``models.hf.hf_initializer(dir)``, which reads only that box of a checkpoint)."""


class Master:
    """``state``'s parameters initialised from ``seed`` (the same values as one device's model),
    or by ``initial`` when given, as AdamW parameters.

    In fp32 the master weights are ``state``'s own parameter buffer and their gradients its
    gradient buffer. In mixed precision (``precision.mixed``) ``weights`` is a separate fp32
    buffer in ``state``'s layout: ``state`` computes with a bf16 copy, refreshed after every
    update, and the update reads its gradient buffer (cast to fp32 first when gradients
    accumulate in bf16)."""

    def __init__(
        self,
        state: StrategyState,
        optim: OptimizerConfig,
        seed: int,
        rank: int,
        initial: InitialValue | None = None,
        precision: Precision = FP32,
    ):
        self.state, self.optim, self.rank, self.precision = state, optim, rank, precision
        device = state.params.flat.device
        self.weights = FlatBuffer(state.layout, rank, device=device) if precision.mixed else state.params
        grads = state.grads
        if grads.flat.dtype != torch.float32:
            grads = FlatBuffer(state.layout, rank, device=device)
        self.grads = grads
        with torch.no_grad():
            for name, box in self.weights.boxes.items():
                shape = state.layout[name].shape
                value = init_param(name, shape, seed)[box.slices()] if initial is None else initial(name, shape, box)
                self.weights.views[name].copy_(value)
        self.refresh()
        self.params = {n: nn.Parameter(view) for n, view in self.weights.views.items()}
        for name, param in self.params.items():
            param.grad = self.grads.views[name]
        self.optimizer = optim.adamw(list(self.params.values()))
        self.updates = 0  # the learning-rate schedule's position

    @torch.no_grad()
    def refresh(self) -> None:
        """Make the strategy's compute copy equal the master weights (cast): after an update,
        and after weights were loaded (a no-op in fp32, where they are one buffer)."""
        if self.weights is not self.state.params:
            self.state.params.flat.copy_(self.weights.flat)

    def _counts_once(self, name: str) -> bool:
        """Whether this rank's box of ``name`` is the one counted in a global sum: dp replicas
        hold copies, and tp replicas of replicated weights (norms) too."""
        _, replica, tp = self.state.strategy.coords(self.rank)
        replicated = self.state.layout[name].state.placements[1] == Replicate()
        return replica == 0 and (tp == 0 or not replicated)

    def grad_norm(self) -> float:
        """The global L2 norm of the accumulated gradients (collective), every element once."""
        self._take_grads()
        grads = self.grads
        squares = torch.zeros((), dtype=torch.float64, device=grads.flat.device)
        for name, grad in grads.views.items():
            if self._counts_once(name):
                squares += grad.double().pow(2).sum()
        dist.all_reduce(squares)
        return squares.sqrt().item()

    def clip_and_update(self) -> float:
        """Clip the gradients to ``max_grad_norm`` over every rank and step AdamW (collective);
        the norm before clipping."""
        norm = self.grad_norm()
        self.grads.flat.mul_(min(self.optim.max_grad_norm / (norm + 1e-6), 1.0))
        self.updates += 1
        self.optim.step(self.optimizer, self.updates)
        self.refresh()
        return norm

    @torch.no_grad()
    def _take_grads(self) -> None:
        """The accumulated gradients in fp32 for the update (bf16 ones cast; idempotent)."""
        if self.grads is not self.state.grads:
            self.grads.flat.copy_(self.state.grads.flat)

    # The fp32 master weights and AdamW's moments live whole on every data-parallel replica of
    # the instantiation strategy (Megatron's distributed optimizer would shard them over dp).
    sharded = False

    def optimizer_bytes(self) -> int:
        """Bytes this rank holds for the update: fp32 master weights and AdamW's moments."""
        moments = sum(
            t.numel() * t.element_size()
            for state in self.optimizer.state.values()
            for key, t in state.items()
            if key in ADAM_MOMENTS
        )
        return self.weights.flat.numel() * self.weights.flat.element_size() + moments

    def optimizer_state(self) -> OptimizerState:
        """AdamW's state on this rank; its tensors are the optimizer's own where they exist."""
        step, moments = 0.0, {}
        for name, param in self.params.items():
            state = self.optimizer.state.get(param, {})
            step = float(state["step"]) if "step" in state else step
            moments[name] = {k: state[k] if k in state else torch.zeros_like(param) for k in ADAM_MOMENTS}
        return OptimizerState(step, moments)

    def load_optimizer_state(self, state: OptimizerState) -> None:
        """Take ``state`` (copied) as AdamW's, as if its steps had run here (the schedule too)."""
        self.updates = int(state.step)
        for name, param in self.params.items():
            self.optimizer.state[param] = {
                "step": torch.tensor(state.step),
                **{k: state.moments[name][k].detach().clone() for k in ADAM_MOMENTS},
            }

    def global_params(self) -> dict[str, torch.Tensor]:
        """Full parameters gathered on every rank (collective; tests and small models only)."""
        return self._gather(self.weights)

    def global_grads(self) -> dict[str, torch.Tensor]:
        """Full accumulated gradients gathered on every rank (collective; tests and small models)."""
        self._take_grads()
        return self._gather(self.grads)

    def _gather(self, buffer: FlatBuffer) -> dict[str, torch.Tensor]:
        out = {}
        for name, p in self.state.layout.items():
            full = torch.zeros(p.shape, dtype=buffer.flat.dtype, device=buffer.flat.device)
            if name in buffer.views and self._counts_once(name):  # one copy of every element
                full[buffer.boxes[name].slices()] = buffer.views[name]
            dist.all_reduce(full)
            out[name] = full.cpu()
        return out
