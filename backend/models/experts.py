"""A mixture of experts in place of a layer's feed-forward (``ModelConfig.experts``): a router
scores each token over the experts (softmax of a linear map, in fp32; or each expert's sigmoid,
the choice biased and limited to the best expert groups, as GLM-4.5 and DeepSeek-V3 route), the
token goes to its top-k experts (every one of them: dropless, no capacity factor, so nothing is
dropped and the result is one device's), each a SwiGLU, and their outputs are summed weighted
by the picked scores (renormalised and scaled where the family says so), as transformers
computes Qwen3-MoE, Qwen2-MoE, OLMoE, Mixtral and GLM-4.5.

``routed_experts`` is one fx leaf (``torch.fx.wrap``), with one deduction rule: it works token
by token, so tokens split over ranks (data, sequence or context parallel) each route on their
own rank, the router and experts replicated there, each rank's weight gradients a partial sum
over its tokens. The experts run as three grouped matmuls over the tokens sorted by expert
(``torch._grouped_mm``, ``grouped``), or one after another over the tokens routed to each
(``loop``), whichever ``choose_experts`` measured faster on the device; both sum a token's
experts in expert order (transformers' order), to the same values.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import astuple, dataclass

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from hotswitch.backend.models.balance import BALANCE
from hotswitch.backend.models.experts_config import Experts, Scoring


@dataclass(frozen=True)
class Gate:
    """How a router's scores become each token's experts and their weights (``Experts``'s
    router options); traced as ``astuple`` (fx keeps a tuple of constants as one constant)."""

    per_token: int
    normalize: bool
    scoring: Scoring = "softmax"
    groups: int = 1
    group_pick: int = 1
    scale: float = 1.0

    @classmethod
    def of(cls, e: Experts) -> Gate:
        return cls(e.per_token, e.normalize, e.scoring, e.groups, e.group_pick, e.scale)


def route(tokens: torch.Tensor, router: torch.Tensor, gate: Gate, layer: int = 0, bias: torch.Tensor | None = None):
    """Each token's ``gate.per_token`` experts [tokens, k] and their weights (in the tokens'
    dtype), as transformers' routers compute them: softmax scores (in fp32 from the tokens'
    logits) or sigmoid ones (logits in fp32, GLM-4.5's and DeepSeek-V3's), the top-k of the
    scores (plus ``bias`` for the choice only, within the best groups where ``gate.groups`` > 1),
    renormalised where ``gate.normalize``, times ``gate.scale``. In a training step with the
    auxiliary loss on, the probabilities of routed layer ``layer`` also carry its gradient
    (``models.balance``)."""
    if gate.scoring == "sigmoid":
        scores = torch.sigmoid(F.linear(tokens.float(), router.float()))
    else:
        scores = torch.softmax(F.linear(tokens, router), dim=-1, dtype=torch.float32)
    choice = scores.detach() if bias is None else scores.detach() + bias.float()
    if gate.groups > 1:
        choice = best_groups(choice, gate.groups, gate.group_pick)
    picked = torch.topk(choice, gate.per_token, dim=-1).indices
    if BALANCE.routing is not None:  # the same values and gradient, the probabilities balanced first
        scores = BALANCE.balanced(scores, picked, layer)
    weights = scores.gather(-1, picked)
    if gate.normalize:  # the sigmoid routers' denominator has transformers' 1e-20 added
        weights = weights / (weights.sum(dim=-1, keepdim=True) + (1e-20 if gate.scoring == "sigmoid" else 0.0))
    if gate.scale != 1.0:
        weights = weights * gate.scale
    return picked, weights.to(tokens.dtype)


def best_groups(choice: torch.Tensor, groups: int, keep: int) -> torch.Tensor:
    """``choice`` [tokens, experts] with -inf outside each token's ``keep`` best of ``groups``
    expert groups, a group ranked by the sum of its two best scores (DeepSeek-V3's)."""
    per_group = choice.reshape(len(choice), groups, -1)
    ranked = per_group.topk(2, dim=-1).values.sum(-1)
    best = torch.zeros_like(ranked, dtype=torch.bool).scatter_(1, ranked.topk(keep, dim=-1).indices, True)
    return choice.masked_fill(~best.repeat_interleave(choice.shape[1] // groups, dim=1), float("-inf"))


@torch.fx.wrap
def routed_experts(
    x: torch.Tensor,
    router: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    w3: torch.Tensor,
    gate: tuple,
    layer: int = 0,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """The mixture's output for ``x`` [..., dim]: experts ``w1``/``w3`` [experts, width, dim]
    (gate, up) and ``w2`` [experts, dim, width] (down), ``router`` [experts, dim] and its choice
    ``bias`` [experts] where it has one, ``gate`` a ``Gate`` as a tuple; ``layer``: its layer's
    index (the auxiliary loss counts each layer once). On meta tensors (tracing) its shape alone."""
    if x.is_meta:
        return torch.empty_like(x)
    tokens = x.reshape(-1, x.shape[-1])
    picked, weights = route(tokens, router, Gate(*gate), layer, bias)
    return KERNELS[IN_FORCE["kernel"]](tokens, picked, weights, w1, w2, w3).reshape(x.shape)


def loop_experts(tokens, picked, weights, w1, w2, w3) -> torch.Tensor:
    """Each expert in turn over the tokens routed to it (three matmuls an expert)."""
    out = torch.zeros_like(tokens)
    for expert in torch.unique(picked).tolist():
        rows, slot = torch.where(picked == expert)
        h = tokens[rows]
        y = F.linear(F.silu(F.linear(h, w1[expert])) * F.linear(h, w3[expert]), w2[expert])
        out = out.index_add(0, rows, y * weights[rows, slot, None])
    if out.grad_fn is None and tokens.requires_grad:
        # no token for any expert here: the output still depends on ``tokens``, so that backward
        # reaches what made them (an expert-parallel rank's all-to-alls run in every backward)
        out = out + tokens * 0
    return out


def grouped_experts(tokens, picked, weights, w1, w2, w3) -> torch.Tensor:
    """Every expert at once: the (token, expert) pairs sorted by expert, three grouped matmuls
    (``torch._grouped_mm``, one group per expert), then each token's outputs summed back."""
    per_token = picked.shape[1]
    flat = picked.reshape(-1)
    order = torch.argsort(flat, stable=True)  # a token's experts stay in expert order
    rows = order // per_token
    ends = torch.cumsum(torch.bincount(flat, minlength=w1.shape[0]), 0).to(torch.int32)
    h = tokens[rows]
    gate = torch._grouped_mm(h, w1.transpose(1, 2), offs=ends)
    up = torch._grouped_mm(h, w3.transpose(1, 2), offs=ends)
    y = torch._grouped_mm(F.silu(gate) * up, w2.transpose(1, 2), offs=ends)
    return torch.zeros_like(tokens).index_add(0, rows, y * weights.reshape(-1)[order, None])


Kernel = Callable[..., torch.Tensor]
KERNELS: dict[str, Kernel] = {"grouped": grouped_experts, "loop": loop_experts}
IN_FORCE = {"kernel": "loop"}  # the one every routed layer of this process runs (``use_experts``)


def use_experts(kernel: str) -> None:
    """Put ``kernel`` ("grouped" or "loop") in force for every routed layer of this process."""
    if kernel not in KERNELS:
        raise ValueError(f"experts kernel {kernel!r}: choose one of {', '.join(KERNELS)}")
    IN_FORCE["kernel"] = kernel


def choose_experts(experts: Experts, dim: int, tokens: int, device: torch.device, dtype: torch.dtype) -> dict:
    """Time both kernels (forward and backward) on ``tokens`` random tokens of this mixture's
    shape on ``device`` in ``dtype``: {"kernel": the faster, "seconds": each's}; a kernel that
    cannot run there (``torch._grouped_mm`` wants a GPU of compute capability 9.0 for bf16, and
    16-byte aligned rows) is left out."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, dim, generator=g).to(device, dtype).requires_grad_()
    shapes = ((experts.count, experts.ffn_dim, dim), (experts.count, dim, experts.ffn_dim))
    w1, w2, w3 = (torch.randn(shapes[i], generator=g).mul(0.02).to(device, dtype).requires_grad_() for i in (0, 1, 0))
    picked = torch.stack([torch.randperm(experts.count, generator=g)[: experts.per_token] for _ in range(tokens)])
    weights = torch.rand(tokens, experts.per_token, generator=g).to(device, dtype)
    picked = picked.to(device)
    seconds = {}
    for name, kernel in KERNELS.items():

        def step(k: Kernel = kernel) -> None:
            k(x, picked, weights, w1, w2, w3).sum().backward()

        try:
            seconds[name] = _timed(step, device)
        except (RuntimeError, NotImplementedError):  # this device or dtype does not run it
            continue
    return {"kernel": min(seconds, key=lambda k: seconds[k]), "seconds": seconds}


def _timed(run: Callable[[], object], device: torch.device, repeats: int = 3) -> float:
    run()  # warm: kernels chosen, memory grown
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    for _ in range(repeats):
        run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - started) / repeats


class ExpertWeights(nn.Module):
    """The experts' SwiGLU weights, each stacked over the experts."""

    def __init__(self, experts: Experts, dim: int):
        super().__init__()
        count, width = experts.count, experts.ffn_dim
        self.w1 = nn.Parameter(torch.empty(count, width, dim))
        self.w2 = nn.Parameter(torch.empty(count, dim, width))
        self.w3 = nn.Parameter(torch.empty(count, width, dim))


class SharedExpert(nn.Module):
    """The expert every token passes through: a SwiGLU of plain linear maps (``w1`` gate, ``w3``
    up, ``w2`` down), so the traced graph holds ordinary linear nodes and tensor parallelism
    splits it as a dense feed-forward (w1/w3 column-parallel, w2 row-parallel)."""

    def __init__(self, dim: int, width: int):
        super().__init__()
        self.w1 = nn.Linear(dim, width, bias=False)
        self.w2 = nn.Linear(width, dim, bias=False)
        self.w3 = nn.Linear(dim, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Router(nn.Module):
    """A routed layer's linear map to one score per expert (``weight``), and where the mixture has
    one (``Experts.score_bias``) the per-expert bias its choice adds (``score_bias``: it changes
    which experts are picked, never their weights, so no gradient reaches it; ``layout.FROZEN``
    keeps it out of the update)."""

    def __init__(self, experts: Experts, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(experts.count, dim))
        if experts.score_bias:
            self.score_bias = nn.Parameter(torch.zeros(experts.count), requires_grad=False)


class MixtureOfExperts(nn.Module):
    """A routed layer's feed-forward: ``router`` and ``experts``, and where ``Experts`` gives one
    a ``shared`` expert (with its ``shared_gate``, a linear map to one score, where gated) whose
    output is added to the routed one, as transformers' Qwen2MoeSparseMoeBlock computes it."""

    def __init__(self, experts: Experts, dim: int, layer: int = 0):
        super().__init__()
        self.layer = layer  # its layer's index in the model
        self.router = Router(experts, dim)
        self.experts = ExpertWeights(experts, dim)
        if experts.shared_ffn_dim:
            self.shared = SharedExpert(dim, experts.shared_ffn_dim)
            if experts.shared_gate:
                self.shared_gate = nn.Linear(dim, 1, bias=False)
        self.gate = astuple(Gate.of(experts))
        self.has_shared = bool(experts.shared_ffn_dim)
        self.gated = self.has_shared and experts.shared_gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e, r = self.experts, self.router
        bias = getattr(r, "score_bias", None)
        routed = routed_experts(x, r.weight, e.w1, e.w2, e.w3, self.gate, self.layer, bias)
        if not self.has_shared:
            return routed
        shared = self.shared(x)
        if self.gated:
            shared = torch.sigmoid(self.shared_gate(x)) * shared
        return routed + shared  # transformers' order of the sum
