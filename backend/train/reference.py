"""One-device training: the reference every distributed run is checked against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.llama import build_model
from hotswitch.backend.train.batching import collate, pack


@dataclass(frozen=True)
class OptimizerConfig:
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.1
    eps: float = 1e-8
    max_grad_norm: float = 1.0

    def adamw(self, params) -> torch.optim.AdamW:
        return torch.optim.AdamW(
            params, lr=self.lr, betas=self.betas, weight_decay=self.weight_decay, eps=self.eps, foreach=False
        )


class ReferenceTrainer:
    """The whole model on one device; each step's loss is the mean over the batch's tokens."""

    def __init__(self, config: ModelConfig, optim: OptimizerConfig, seed: int = 0, token_budget: int = 4096):
        self.model = build_model(config, seed)
        self.optim = optim
        self.optimizer = optim.adamw(self.model.parameters())
        self.token_budget = token_budget

    def step(self, batch: list[Sequence], before_update: Callable[[nn.Module], None] | None = None) -> float:
        """Train one batch; its mean token loss. ``before_update(model)`` sees the accumulated
        gradients before they are clipped; ``grad_norm`` is then their norm."""
        total = sum(s.length for s in batch)
        self.optimizer.zero_grad(set_to_none=False)
        loss = 0.0
        for group in pack(batch, self.token_budget):
            micro = collate(group)
            part = self.model(micro.tokens, micro.targets)
            (part * (1.0 / total)).backward()
            loss += part.item()
        if before_update is not None:
            before_update(self.model)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.optim.max_grad_norm, foreach=False)
        self.grad_norm = norm.item()
        self.optimizer.step()
        return loss / total
