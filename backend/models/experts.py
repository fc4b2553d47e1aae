"""A mixture of experts in place of a layer's feed-forward (``ModelConfig.experts``): a router
scores each token over the experts (softmax of a linear map, in fp32), the token goes to its
top-k experts (every one of them: dropless, no capacity factor, so nothing is dropped and the
result is one device's), each a SwiGLU, and their outputs are summed weighted by the picked
probabilities (renormalised where the family says so), as transformers computes Qwen3-MoE,
OLMoE and Mixtral.

``routed_experts`` is one fx leaf (``torch.fx.wrap``), with one deduction rule: it works token
by token, so tokens split over ranks (data, sequence or context parallel) each route on their
own rank, the router and experts replicated there, each rank's weight gradients a partial sum
over its tokens. Experts run one after another over the tokens routed to them, in expert order
(the order transformers sums them in).
"""

from __future__ import annotations

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from hotswitch.backend.models.config import Experts


def route(tokens: torch.Tensor, router: torch.Tensor, per_token: int, normalize: bool):
    """Each token's ``per_token`` experts [tokens, k] and their weights (in the tokens' dtype):
    the top-k of the router's softmax, in fp32, renormalised to sum to one where ``normalize``."""
    logits = F.linear(tokens, router)
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    weights, picked = torch.topk(probs, per_token, dim=-1)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return picked, weights.to(logits.dtype)


@torch.fx.wrap
def routed_experts(
    x: torch.Tensor,
    router: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    w3: torch.Tensor,
    per_token: int,
    normalize: bool,
) -> torch.Tensor:
    """The mixture's output for ``x`` [..., dim]: experts ``w1``/``w3`` [experts, width, dim]
    (gate, up) and ``w2`` [experts, dim, width] (down), ``router`` [experts, dim]. On meta
    tensors (tracing) its shape alone."""
    if x.is_meta:
        return torch.empty_like(x)
    tokens = x.reshape(-1, x.shape[-1])
    picked, weights = route(tokens, router, per_token, normalize)
    out = torch.zeros_like(tokens)
    for expert in torch.unique(picked).tolist():
        rows, slot = torch.where(picked == expert)
        h = tokens[rows]
        y = F.linear(F.silu(F.linear(h, w1[expert])) * F.linear(h, w3[expert]), w2[expert])
        out.index_add_(0, rows, y * weights[rows, slot, None])
    return out.reshape(x.shape)


class ExpertWeights(nn.Module):
    """The experts' SwiGLU weights, each stacked over the experts."""

    def __init__(self, experts: Experts, dim: int):
        super().__init__()
        count, width = experts.count, experts.ffn_dim
        self.w1 = nn.Parameter(torch.empty(count, width, dim))
        self.w2 = nn.Parameter(torch.empty(count, dim, width))
        self.w3 = nn.Parameter(torch.empty(count, width, dim))


class MixtureOfExperts(nn.Module):
    """A routed layer's feed-forward: ``router`` and ``experts``."""

    def __init__(self, experts: Experts, dim: int):
        super().__init__()
        self.router = nn.Linear(dim, experts.count, bias=False)
        self.experts = ExpertWeights(experts, dim)
        self.per_token = experts.per_token
        self.normalize = experts.normalize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.experts
        return routed_experts(x, self.router.weight, e.w1, e.w2, e.w3, self.per_token, self.normalize)
