"""One-device training: the reference every distributed run is checked against."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.dist_state import Box
from hotswitch.backend.models.balance import BALANCE
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.llama import build_model
from hotswitch.backend.precision import FP32, Precision, accumulate_into
from hotswitch.backend.train.planning.batching import collate, pack
from hotswitch.backend.train.state.master import InitialValue
from hotswitch.backend.train.state.optim import OptimizerConfig


class ReferenceTrainer:
    """The whole model on one device; each step's loss is the mean over the batch's tokens
    (plus, where a mixture of experts weighs it, its auxiliary loss: ``models.balance``).

    In mixed precision the model holds the fp32 master weights and a copy in the compute dtype
    runs forward and backward, its gradients accumulating in ``precision.grad``, exactly as
    the engine does; the update casts back."""

    def __init__(
        self,
        config: ModelConfig,
        optim: OptimizerConfig,
        seed: int = 0,
        token_budget: int = 4096,
        precision: Precision = FP32,
        initial: InitialValue | None = None,
    ):
        self.model = build_model(config, seed)
        if initial is not None:  # as ``Engine(initial=...)`` starts (a checkpoint's weights)
            with torch.no_grad():
                for name, param in self.model.named_parameters():
                    shape = tuple(param.shape)
                    param.copy_(initial(name, shape, Box((0,) * len(shape), shape)))
        self.optim = optim
        self.precision = precision
        self.optimizer = optim.adamw(self.model.parameters())
        self.token_budget = token_budget
        self.updates = 0
        self.compute = self.model
        self.accumulated = {}
        if precision.mixed:
            self.compute = copy.deepcopy(self.model)
            for name, param in self.compute.named_parameters():
                param.data = param.data.to(precision.compute_dtype)  # buffers (rotary tables) stay fp32
                if param.requires_grad:  # a frozen one (``layout.FROZEN``) gets none, and no update
                    self.accumulated[name] = torch.zeros_like(param, dtype=precision.grad_dtype)
                    param.register_post_accumulate_grad_hook(accumulate_into(self.accumulated[name]))

    def step(self, batch: list[Sequence], before_update: Callable[[nn.Module], None] | None = None) -> float:
        """Train one batch; its mean token loss. ``before_update(model)`` sees the accumulated
        gradients before they are clipped; ``grad_norm`` is then their norm."""
        total = sum(s.trained for s in batch)
        self.optimizer.zero_grad(set_to_none=False)
        for buffer in self.accumulated.values():
            buffer.zero_()
        loss = 0.0
        self._balance(len(batch))
        try:
            for group in pack(batch, self.token_budget):
                micro = collate(group)
                BALANCE.begin(micro.sequences)
                part = self.compute(micro.tokens, micro.targets)
                (part * (1.0 / total)).backward()
                loss += part.item()
            aux = BALANCE.weighted_since(0, torch.device("cpu")).item() if BALANCE.weight else 0.0
        finally:
            BALANCE.close()
        self._update(before_update)
        return loss / total + aux

    def _balance(self, sequences: int) -> None:
        """Open the auxiliary loss (``models.balance``) for a step of ``sequences``, if it is on."""
        config = self.model.config
        if config.experts is not None and config.experts.aux_loss_coef:
            BALANCE.start_step(config.experts.aux_loss_coef, config.experts.routed_layers(config.n_layers), sequences)

    @torch.no_grad()
    def evaluate(self, batch: list[Sequence]) -> tuple[float, int]:
        """The token loss summed over ``batch`` and its trained token count, forward only."""
        loss = sum(self.compute(m.tokens, m.targets).item() for m in map(collate, pack(batch, self.token_budget)))
        return loss, sum(s.trained for s in batch)

    def _update(self, before_update: Callable[[nn.Module], None] | None) -> None:
        with torch.no_grad():
            for name, param in self.model.named_parameters():
                if name in self.accumulated:
                    param.grad = self.accumulated[name].to(torch.float32, copy=True)
        if before_update is not None:
            before_update(self.model)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.optim.max_grad_norm, foreach=False)
        self.grad_norm = norm.item()
        self.updates += 1
        self.optim.step(self.optimizer, self.updates)
        if self.compute is not self.model:
            with torch.no_grad():
                for master, copied in zip(self.model.parameters(), self.compute.parameters(), strict=True):
                    copied.copy_(master)
