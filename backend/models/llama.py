"""A LLaMA-style decoder in plain torch: no parallel code, traceable by ``torch.fx``.

``Transformer(config)(tokens, targets)`` returns the *sum* of the token losses
(targets equal to ``IGNORE`` are skipped), so that the trainer can scale every
micro-batch by the token count of the whole global batch. Rotary embedding is the
"rotate-half" form (the two halves of a head pair up), which is the form Hugging Face LLaMA
checkpoints are stored for, so they load without permuting q/k rows. A row holds one
document or several back to back (``models.documents``): ``positions`` restart at every
document, rotary embedding reads them, and attention never crosses a document; padding on
the right continues a row's last document, which causal attention keeps real tokens from
seeing. Without ``positions`` every row is one document. Rotary embedding, attention and the
loss are fx leaves (``torch.fx.wrap``) so the traced graph has one node for each, with one
deduction rule each.
"""

from __future__ import annotations

import zlib
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import sdpa_kernel

from hotswitch.backend.models.attention.flex import flex_causal_attention
from hotswitch.backend.models.attention.kernels import attention_backends, in_force, rounded
from hotswitch.backend.models.attention.varlen import varlen_causal_attention
from hotswitch.backend.models.chunked_loss import chunked_cross_entropy
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.documents import gather_tables, per_document, spans, unpacked_positions
from hotswitch.backend.models.lean_ops import RMSNormFunction, RotaryFunction
from hotswitch.backend.models.no_init import skip_default_init

SDPA_GQA = torch.torch_version.TorchVersion(torch.__version__) >= "2.5"  # scaled_dot_product_attention(enable_gqa=)


@torch.fx.wrap
def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotate-half rotary embedding of ``x`` [batch, seq, heads, head_dim] at each token's
    position in its document (``positions`` [batch, seq]), in fp32 (the tables are fp32), back
    in x's dtype; keeps no activation for backward."""
    return RotaryFunction.apply(x, *gather_tables(cos, sin, positions))


@torch.fx.wrap
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, in fp32, back in x's dtype; keeps x and 1/rms for backward."""
    return RMSNormFunction.apply(x, weight, eps)


@torch.fx.wrap
def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Causal attention over [batch, seq, heads, head_dim] that never crosses a document
    (``positions`` [batch, seq]): rows of one document each in one fused call, packed rows one
    fused call per document (exact on every device), or where chosen one call of flash's
    variable-length kernel (``attention.varlen``) or FlexAttention's (``attention.flex``; GPUs)."""
    documents = spans(positions)
    if documents is None:
        return fused_causal_attention(q, k, v)
    if in_force().documents == "varlen":
        return varlen_causal_attention(q, k, v, positions)
    if in_force().documents == "flex":
        return flex_causal_attention(q, k, v, positions)
    return per_document(fused_causal_attention, q, k, v, documents)


def fused_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention over [batch, seq, heads, head_dim]; k and v may have fewer heads
    (grouped-query attention): each serves ``heads // kv_heads`` consecutive query heads.
    One ``scaled_dot_product_attention`` call with ``enable_gqa`` (no copies of k and v), or
    with k and v repeated where the choice in force was faster so, so the fused kernels (flash,
    memory-efficient, cuDNN; CPU's flash too) engage and no L x L score matrix is kept for
    backward. The kernel is the one in force
    (``attention.kernels``); one that plans per shape sees the length rounded up, the rows
    padded on the right (no real query sees a padded key) and the output cut back."""
    length = q.shape[1]
    if in_force().rounds_lengths and rounded(length) > length:
        extra = (0, 0, 0, 0, 0, rounded(length) - length)
        return fused_causal_attention(*(F.pad(x, extra) for x in (q, k, v)))[:, :length]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    options: dict[str, Any] = {}  # enable_gqa where this PyTorch takes it and the choice keeps heads grouped
    if q.shape[1] != k.shape[1] and SDPA_GQA and not in_force().repeats_heads:
        options["enable_gqa"] = True
    elif q.shape[1] != k.shape[1]:  # PyTorch 2.4, or a kernel faster so: the copies enable_gqa avoids
        repeat = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    with sdpa_kernel(attention_backends()):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **options).transpose(1, 2)


@torch.fx.wrap
def token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Sum of cross-entropy over the tokens whose target is not ``IGNORE`` (``chunked_loss``:
    the fp32 gradient of the logits is never whole)."""
    return chunked_cross_entropy(logits, targets)


def fused_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``token_loss`` through compiled kernels (``loss_kernels``), as a run with ``compile`` on
    computes it: the same values to fp32 rounding, a fraction of the memory traffic."""
    return chunked_cross_entropy(logits, targets, fused=True)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.head_dim = config.head_dim
        kv = config.n_kv_heads * config.head_dim
        self.wq = nn.Linear(config.dim, config.dim, bias=False)
        self.wk = nn.Linear(config.dim, kv, bias=False)
        self.wv = nn.Linear(config.dim, kv, bias=False)
        self.wo = nn.Linear(config.dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # (-1, head_dim): the head count follows the input, so a tensor-parallel shard works unchanged
        q = self.wq(x).unflatten(-1, (-1, self.head_dim))
        k = self.wk(x).unflatten(-1, (-1, self.head_dim))
        v = self.wv(x).unflatten(-1, (-1, self.head_dim))
        q, k = apply_rotary(q, cos, sin, positions), apply_rotary(k, cos, sin, positions)
        out = causal_attention(q, k, v, positions)
        return self.wo(out.flatten(-2))


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.w2 = nn.Linear(config.ffn_dim, config.dim, bias=False)
        self.w3 = nn.Linear(config.dim, config.ffn_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attention_norm = RMSNorm(config.dim, config.norm_eps)
        self.attention = Attention(config)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps)
        self.feed_forward = FeedForward(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin, positions)
        return h + self.feed_forward(self.ffn_norm(h))


def rotary_tables(config: ModelConfig, device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    half = config.head_dim // 2
    if torch.device(device or "cpu").type == "meta":  # shapes only (meta arithmetic would import torch._dynamo)
        table = torch.empty(config.max_seq_len, half, device="meta")
        return table, torch.empty_like(table)
    freqs = config.rope_theta ** (-torch.arange(half, dtype=torch.float32, device=device) / half)
    angles = torch.outer(torch.arange(config.max_seq_len, dtype=torch.float32, device=device), freqs)
    return angles.cos(), angles.sin()


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(TransformerBlock(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        if config.tie_embeddings:  # one Parameter: ``named_parameters`` lists the embedding only
            self.output.weight = self.tok_embeddings.weight
        cos, sin = rotary_tables(config, self.output.weight.device)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(
        self, tokens: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The summed token loss; ``positions`` [rows, length] (on the host) place packed
        documents, by default every row is one document."""
        if positions is None:
            positions = unpacked_positions(*tokens.shape)
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, self.rope_cos, self.rope_sin, positions)
        return token_loss(self.output(self.norm(x)), targets)


def init_param(name: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """The initial value of parameter ``name``: a function of (name, shape, seed) only, so that
    any rank can initialise its shard of any layout to what one device would hold."""
    if name.endswith("norm.weight"):
        return torch.ones(shape)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    return torch.randn(shape, generator=generator) * 0.02


def build_model(config: ModelConfig, seed: int = 0, device: str | torch.device = "cpu") -> Transformer:
    """The model with every parameter set by ``init_param`` (on ``meta``: shapes only)."""
    with torch.device(device), skip_default_init():  # every parameter is set below
        model = Transformer(config)
    if str(device) != "meta":
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(init_param(name, tuple(param.shape), seed))
    return model
