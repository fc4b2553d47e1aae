"""The one decoder in plain torch: no parallel code, traceable by ``torch.fx``.

Every family is this model with options (``ModelConfig``): rotary kinds and partial rotary,
layers without rotary, head_dim apart from dim / heads, projection biases, q/k RMSNorm per
head or per projection, norms before, after or around each sublayer, Gemma's ``1 + weight``
norms, embedding scale and GELU gate, sliding-window layers, a head tied to the embedding,
mixture-of-experts feed-forwards (``models.experts``).
Options that are off add no node to the traced graph.

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

import functools
import zlib
from typing import Any, cast

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
from hotswitch.backend.models.experts import MixtureOfExperts
from hotswitch.backend.models.lean_ops import RMSNormFunction, RotaryFunction
from hotswitch.backend.models.no_init import skip_default_init
from hotswitch.backend.models.rotary import rotary_buffers

# the projections' bias parameters, and a router's choice bias, by attribute
BIASES = ("bq", "bk", "bv", "bo", "b1", "b2", "b3", "score_bias")
SDPA_GQA = torch.torch_version.TorchVersion(torch.__version__) >= "2.5"  # scaled_dot_product_attention(enable_gqa=)


@torch.fx.wrap
def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotate-half rotary embedding of ``x`` [batch, seq, heads, head_dim] at each token's
    position in its document (``positions`` [batch, seq]), in fp32 (the tables are fp32), back
    in x's dtype; tables narrower than half a head rotate its first channels only (partial
    rotary embedding); keeps no activation for backward."""
    return RotaryFunction.apply(x, *gather_tables(cos, sin, positions))


@torch.fx.wrap
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float = 0.0) -> torch.Tensor:
    """RMSNorm over the last dim scaled by ``offset + weight``, in fp32, back in x's dtype;
    keeps x and 1/rms for backward."""
    return RMSNormFunction.apply(x, weight, eps, offset)


@torch.fx.wrap
def add_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A projection's bias [features] added over x's last dim (one rule: the bias is split
    where the features are)."""
    return x + bias


@torch.fx.wrap
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    """``x`` times a constant, the constant first rounded to x's dtype (as transformers scales
    Gemma's embedding)."""
    return x * torch.tensor(factor, dtype=x.dtype)


@torch.fx.wrap
def causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor, window: int | None = None
) -> torch.Tensor:
    """Causal attention over [batch, seq, heads, head_dim] that never crosses a document
    (``positions`` [batch, seq]): rows of one document each in one fused call, packed rows one
    fused call per document (exact on every device), or where chosen one call of flash's
    variable-length kernel (``attention.varlen``) or FlexAttention's (``attention.flex``; GPUs).
    ``window``: each query sees its last ``window`` tokens only (itself included)."""
    documents = spans(positions)
    if documents is None:
        return fused_causal_attention(q, k, v, window)
    if window is None and in_force().documents == "varlen":
        return varlen_causal_attention(q, k, v, positions)
    if window is None and in_force().documents == "flex":
        return flex_causal_attention(q, k, v, positions)
    return per_document(functools.partial(fused_causal_attention, window=window), q, k, v, documents)


def fused_causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None
) -> torch.Tensor:
    """Causal attention over [batch, seq, heads, head_dim]; k and v may have fewer heads
    (grouped-query attention): each serves ``heads // kv_heads`` consecutive query heads.
    One ``scaled_dot_product_attention`` call with ``enable_gqa`` (no copies of k and v), or
    with k and v repeated where the choice in force was faster so, so the fused kernels (flash,
    memory-efficient, cuDNN; CPU's flash too) engage and no L x L score matrix is kept for
    backward. The kernel is the one in force
    (``attention.kernels``); one that plans per shape sees the length rounded up, the rows
    padded on the right (no real query sees a padded key) and the output cut back. A sliding
    ``window`` shorter than the rows is a band mask beside the causal one."""
    length = q.shape[1]
    if in_force().rounds_lengths and rounded(length) > length:
        extra = (0, 0, 0, 0, 0, rounded(length) - length)
        padded_q, padded_k, padded_v = (F.pad(x, extra) for x in (q, k, v))
        return fused_causal_attention(padded_q, padded_k, padded_v, window)[:, :length]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    options: dict[str, Any] = {"is_causal": True}
    if window is not None and window < length:
        options = {"attn_mask": sliding_window_mask(length, window, q.device)}
    if q.shape[1] != k.shape[1] and SDPA_GQA and not in_force().repeats_heads:
        options["enable_gqa"] = True  # where this PyTorch takes it and the choice keeps heads grouped
    elif q.shape[1] != k.shape[1]:  # PyTorch 2.4, or a kernel faster so: the copies enable_gqa avoids
        repeat = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    with sdpa_kernel(attention_backends()):
        return F.scaled_dot_product_attention(q, k, v, **options).transpose(1, 2)


def sliding_window_mask(length: int, window: int, device: torch.device) -> torch.Tensor:
    """[length, length] True where query i may see key j: j <= i and j > i - window."""
    i = torch.arange(length, device=device)[:, None]
    j = torch.arange(length, device=device)[None, :]
    return (j <= i) & (j > i - window)


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
    def __init__(self, dim: int, eps: float, offset: float = 0.0):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.offset = offset
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps, self.offset)


def _bias(width: int, on: bool) -> nn.Parameter | None:
    return nn.Parameter(torch.zeros(width)) if on else None


def _biased(x: torch.Tensor, bias: nn.Parameter | None) -> torch.Tensor:
    return x if bias is None else add_bias(x, bias)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int = 0):
        super().__init__()
        self.head_dim = config.head_size
        q = config.q_dim
        kv = config.n_kv_heads * config.head_size
        self.wq = nn.Linear(config.dim, q, bias=False)
        self.wk = nn.Linear(config.dim, kv, bias=False)
        self.wv = nn.Linear(config.dim, kv, bias=False)
        self.bq, self.bk, self.bv = (_bias(n, config.qkv_bias) for n in (q, kv, kv))
        self.qk_norm = config.qk_norm
        if config.qk_norm != "none":
            per_head = config.qk_norm == "head"
            self.q_norm = RMSNorm(config.head_size if per_head else q, config.norm_eps, config.norm_offset)
            self.k_norm = RMSNorm(config.head_size if per_head else kv, config.norm_eps, config.norm_offset)
        self.wo = nn.Linear(q, config.dim, bias=False)
        self.bo = _bias(config.dim, config.o_bias)
        self.rotary = layer not in config.no_rope_layers
        self.window = config.window(layer)
        # scores times attention_scale, where attention itself scales by 1/sqrt(head_dim)
        self.q_scale = 1.0 if config.attention_scale is None else config.attention_scale * self.head_dim**0.5

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        q = _biased(self.wq(x), self.bq)
        k = _biased(self.wk(x), self.bk)
        v = _biased(self.wv(x), self.bv)
        if self.qk_norm == "projection":
            q, k = self.q_norm(q), self.k_norm(k)
        # (-1, head_dim): the head count follows the input, so a tensor-parallel shard works unchanged
        q, k, v = (t.unflatten(-1, (-1, self.head_dim)) for t in (q, k, v))
        if self.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary:
            q, k = apply_rotary(q, cos, sin, positions), apply_rotary(k, cos, sin, positions)
        if self.q_scale != 1.0:
            q = scale(q, self.q_scale)
        out = causal_attention(q, k, v, positions, self.window)
        return _biased(self.wo(out.flatten(-2)), self.bo)


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.w2 = nn.Linear(config.ffn_dim, config.dim, bias=False)
        self.w3 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.b1, self.b2, self.b3 = (_bias(n, config.mlp_bias) for n in (config.ffn_dim, config.dim, config.ffn_dim))
        self.gelu = config.activation == "gelu_tanh"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = _biased(self.w1(x), self.b1)
        gate = F.gelu(gate, approximate="tanh") if self.gelu else F.silu(gate)
        return _biased(self.w2(gate * _biased(self.w3(x), self.b3)), self.b2)


class TransformerBlock(nn.Module):
    """One layer; norms where the family puts them: before each sublayer (``pre``), on each
    sublayer's output before the residual add (``post``, OLMo 2), or both (``sandwich``, Gemma)."""

    def __init__(self, config: ModelConfig, layer: int = 0):
        super().__init__()
        eps = config.norm_eps
        offset = config.norm_offset
        placement = config.norm_placement
        if placement != "post":
            self.attention_norm = RMSNorm(config.dim, eps, offset)
        self.attention = Attention(config, layer)
        if placement != "pre":
            self.attention_out_norm = RMSNorm(config.dim, eps, offset)
        if placement != "post":
            self.ffn_norm = RMSNorm(config.dim, eps, offset)
        experts = config.experts
        routed = experts is not None and experts.routes(layer)
        self.feed_forward = MixtureOfExperts(experts, config.dim, layer) if routed and experts else FeedForward(config)
        if placement != "pre":
            self.ffn_out_norm = RMSNorm(config.dim, eps, offset)
        self.placement = placement

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        pre, post = self.placement != "post", self.placement != "pre"
        a = self.attention(self.attention_norm(x) if pre else x, cos, sin, positions)
        h = x + (self.attention_out_norm(a) if post else a)
        f = self.feed_forward(self.ffn_norm(h) if pre else h)
        return h + (self.ffn_out_norm(f) if post else f)


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(TransformerBlock(config, i) for i in range(config.n_layers))
        self.norm = RMSNorm(config.dim, config.norm_eps, config.norm_offset)
        if not config.tie_embeddings:  # tied: the head reads the embedding's one Parameter
            self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        for name, table in rotary_buffers(config, self.tok_embeddings.weight.device).items():
            self.register_buffer(name, table, persistent=False)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of the final hidden states."""
        if self.config.tie_embeddings:
            return F.linear(x, self.tok_embeddings.weight)
        return self.output(x)

    def _tables(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.config.local_rope_theta is not None and self.config.layer_kind(layer) == "sliding":
            return cast(torch.Tensor, self.rope_local_cos), cast(torch.Tensor, self.rope_local_sin)
        return cast(torch.Tensor, self.rope_cos), cast(torch.Tensor, self.rope_sin)

    def forward(
        self, tokens: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The summed token loss; ``positions`` [rows, length] (on the host) place packed
        documents, by default every row is one document."""
        return token_loss(self.logits(tokens, positions), targets)

    def logits(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The next-token logits [rows, length, vocab] of ``tokens`` (what the loss reads; for
        evaluation and generation)."""
        if positions is None:
            positions = unpacked_positions(*tokens.shape)
        x = self.tok_embeddings(tokens)
        if self.config.embed_scale != 1.0:
            x = scale(x, self.config.embed_scale)
        for i, layer in enumerate(self.layers):
            x = layer(x, *self._tables(i), positions)
        return self.head(self.norm(x))


def init_param(name: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """The initial value of parameter ``name``: a function of (name, shape, seed) only, so that
    any rank can initialise its shard of any layout to what one device would hold. Norms start
    at one and biases at zero (a router's choice bias too, as transformers starts it)."""
    if name.endswith("norm.weight"):
        return torch.ones(shape)
    if name.rsplit(".", 1)[-1] in BIASES:
        return torch.zeros(shape)
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
