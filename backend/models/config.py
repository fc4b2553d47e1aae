"""One decoder's shape and options: the tests' tiny model up to the paper's 32B, and the
released families' shapes (Llama, Mistral, Qwen, Gemma, OLMo, Phi, SmolLM) as sets of options.

A family is data, not a class: ``ModelConfig`` carries every option the one decoder
(``models.llama``) computes, and ``models.hf_config`` reads each family's ``config.json`` into
them. Every option is off by default, so a plain LLaMA is the config with no options set.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Literal

from hotswitch.backend.models.experts_config import Experts  # an option of ModelConfig, imported from here too
from hotswitch.backend.models.rope_scaling import RopeScaling  # an option of ModelConfig, imported from here too

QKNorm = Literal["none", "head", "projection"]
NormPlacement = Literal["pre", "post", "sandwich"]
Activation = Literal["silu", "gelu_tanh"]
LayerKind = Literal["full", "sliding"]


@dataclass(frozen=True)
class ModelConfig:
    name: str
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    max_seq_len: int = 4096
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    # the output head is the input embedding: one parameter, ``tok_embeddings.weight``
    tie_embeddings: bool = False
    family: str = "llama"  # the Hugging Face model_type it reads from and exports to
    # -- options of the one decoder (all off by default: a plain LLaMA) --------------------
    # a head's width where it is not dim / n_heads (Mistral Nemo, Qwen3, Gemma 3)
    head_dim: int | None = None
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    partial_rotary: float = 1.0  # the share of each head that rotary embedding rotates (Phi-4-mini)
    local_rope_theta: float | None = None  # sliding-window layers' own rope_theta, unscaled (Gemma 3)
    no_rope_layers: tuple[int, ...] = ()  # layers that apply no rotary embedding (SmolLM3)
    qkv_bias: bool = False  # biases on the q, k and v projections (Qwen2.5)
    o_bias: bool = False  # a bias on the attention output projection
    mlp_bias: bool = False  # biases on the three feed-forward projections
    qk_norm: QKNorm = "none"  # RMSNorm of q and k: per head (Qwen3, Gemma 3) or per projection (OLMo 2)
    norm_placement: NormPlacement = "pre"  # pre (LLaMA), post (OLMo 2), pre and post (Gemma)
    norm_offset: float = 0.0  # RMSNorm scales by (offset + weight): Gemma's 1 + weight
    embed_scale: float = 1.0  # the input embedding is multiplied by it (Gemma: sqrt(dim))
    activation: Activation = "silu"  # the feed-forward gate
    attention_scale: float | None = None  # scores scaled by it, not 1/sqrt(head_dim) (Gemma)
    sliding_window: int | None = None  # tokens a sliding-window layer's query sees, itself included
    layer_kinds: tuple[LayerKind, ...] = ()  # per layer, full or sliding attention (empty: all full)
    experts: Experts | None = None  # mixture-of-experts feed-forwards (Qwen3-MoE, Qwen2-MoE, OLMoE, Mixtral)

    def __post_init__(self) -> None:
        if self.head_dim is None and self.dim % self.n_heads:
            raise ValueError(f"{self.name}: dim {self.dim} is not a multiple of n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.layer_kinds and len(self.layer_kinds) != self.n_layers:
            raise ValueError(f"{self.name}: {len(self.layer_kinds)} layer kinds for {self.n_layers} layers")
        if "sliding" in self.layer_kinds and not self.sliding_window:
            raise ValueError(f"{self.name}: sliding layers need a sliding_window")
        if self.experts is not None:
            self.experts.check(self.name)
        if self.rotary_dim % 2 or self.rotary_dim > self.head_size:
            raise ValueError(
                f"{self.name}: partial_rotary={self.partial_rotary} of head_dim {self.head_size} is "
                f"{self.rotary_dim} channels; it must be even and at most head_dim"
            )

    @property
    def head_size(self) -> int:
        """A head's width: ``head_dim`` where given, else dim / n_heads."""
        return self.head_dim or self.dim // self.n_heads

    @property
    def q_dim(self) -> int:
        """The width of the query projection (n_heads x head_size), which may differ from dim."""
        return self.n_heads * self.head_size

    @property
    def rotary_dim(self) -> int:
        """The channels of each head that rotary embedding rotates (the rest pass through)."""
        return int(self.head_size * self.partial_rotary)

    def routed(self, layer: int) -> bool:
        """Whether ``layer``'s feed-forward is a mixture of experts."""
        return self.experts is not None and self.experts.routes(layer)

    @property
    def active_ffn_dim(self) -> int:
        """The feed-forward width a token passes through: a routed layer's picked experts' and its
        shared expert's in all."""
        e = self.experts
        return self.ffn_dim if e is None else e.per_token * e.ffn_dim + e.shared_ffn_dim

    def layer_kind(self, layer: int) -> LayerKind:
        return self.layer_kinds[layer] if self.layer_kinds else "full"

    def window(self, layer: int) -> int | None:
        """The sliding window of ``layer``'s attention, None for full causal attention."""
        return self.sliding_window if self.layer_kind(layer) == "sliding" else None

    def with_(self, **changes) -> ModelConfig:
        return replace(self, **changes)

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter's global shape, in module order (torchtitan's names): the model's
        ``named_parameters`` without building it, so that planning needs no torch
        (tests/backend/models/test_shapes.py holds the two equal). A tied head is no
        parameter of its own: the head reads ``tok_embeddings.weight``."""
        shapes: dict[str, tuple[int, ...]] = {"tok_embeddings.weight": (self.vocab_size, self.dim)}
        for i in range(self.n_layers):
            shapes.update(self._layer_shapes(f"layers.{i}.", self.routed(i)))
        shapes["norm.weight"] = (self.dim,)
        if not self.tie_embeddings:
            shapes["output.weight"] = (self.vocab_size, self.dim)
        return shapes

    def _layer_shapes(self, p: str, routed: bool = False) -> dict[str, tuple[int, ...]]:
        dim = self.dim
        q = self.q_dim
        kv = self.n_kv_heads * self.head_size
        ffn = self.ffn_dim
        shapes: dict[str, tuple[int, ...]] = {}
        if self.norm_placement != "post":
            shapes[p + "attention_norm.weight"] = (dim,)
        shapes[p + "attention.wq.weight"] = (q, dim)
        shapes[p + "attention.wk.weight"] = (kv, dim)
        shapes[p + "attention.wv.weight"] = (kv, dim)
        if self.qkv_bias:
            shapes.update({p + "attention.bq": (q,), p + "attention.bk": (kv,), p + "attention.bv": (kv,)})
        if self.qk_norm != "none":
            width = self.head_size if self.qk_norm == "head" else None
            shapes[p + "attention.q_norm.weight"] = (width or q,)
            shapes[p + "attention.k_norm.weight"] = (width or kv,)
        shapes[p + "attention.wo.weight"] = (dim, q)
        if self.o_bias:
            shapes[p + "attention.bo"] = (dim,)
        if self.norm_placement != "pre":
            shapes[p + "attention_out_norm.weight"] = (dim,)
        if self.norm_placement != "post":
            shapes[p + "ffn_norm.weight"] = (dim,)
        if routed:
            shapes.update(self._expert_shapes(p))
        else:
            shapes[p + "feed_forward.w1.weight"] = (ffn, dim)
            shapes[p + "feed_forward.w2.weight"] = (dim, ffn)
            shapes[p + "feed_forward.w3.weight"] = (ffn, dim)
        if self.mlp_bias and not routed:
            shapes.update({p + "feed_forward.b1": (ffn,), p + "feed_forward.b2": (dim,), p + "feed_forward.b3": (ffn,)})
        if self.norm_placement != "pre":
            shapes[p + "ffn_out_norm.weight"] = (dim,)
        return shapes

    def _expert_shapes(self, p: str) -> dict[str, tuple[int, ...]]:
        """A routed layer's router and its experts' SwiGLU weights, stacked over the experts; its
        shared expert's (plain matrices, as a dense feed-forward's) and gate where it has them."""
        assert self.experts is not None
        count, width, dim = self.experts.count, self.experts.ffn_dim, self.dim
        shapes = {
            p + "feed_forward.router.weight": (count, dim),
            p + "feed_forward.experts.w1": (count, width, dim),
            p + "feed_forward.experts.w2": (count, dim, width),
            p + "feed_forward.experts.w3": (count, width, dim),
        }
        shared = self.experts.shared_ffn_dim
        if shared:
            shapes[p + "feed_forward.shared.w1.weight"] = (shared, dim)
            shapes[p + "feed_forward.shared.w2.weight"] = (dim, shared)
            shapes[p + "feed_forward.shared.w3.weight"] = (shared, dim)
        if shared and self.experts.shared_gate:
            shapes[p + "feed_forward.shared_gate.weight"] = (1, dim)
        if self.experts.score_bias:
            shapes[p + "feed_forward.router.score_bias"] = (count,)
        return shapes

    @functools.cached_property
    def n_params(self) -> int:
        """Distinct parameters: a tied head counts once (computed once per configuration: the
        simulator asks for it thousands of times)."""
        shapes = self.param_shapes()
        total = 0
        for shape in shapes.values():
            count = 1
            for n in shape:
                count *= n
            total += count
        return total


# The paper trains with GPT-2 BPE padded to 30592 tokens; LLaMA-2 shapes otherwise. "7b",
# "13b" and "32b" are those paper shapes; "llama2-7b", "llama2-13b" and "llama3-8b" are the
# released models' shapes (real vocabularies, LLaMA-3's grouped-query heads and rope_theta),
# which their Hugging Face checkpoints load into.
PAPER_VOCAB = 30592

SLIDING_5_1: tuple[LayerKind, ...] = ("sliding",) * 5 + ("full",)  # Gemma 3: five local layers to one global


def _llama3_rope(factor: float) -> RopeScaling:
    return RopeScaling("llama3", factor, low_freq_factor=1.0, high_freq_factor=4.0, original_max_positions=8192)


def _released() -> tuple[ModelConfig, ...]:
    """The released families' shapes as their published config.json files set them (weights
    aside): presets to simulate and size clusters with; ``hf:DIR`` reads the same from a folder."""
    return (*_llama_and_qwen3(), *_other_families())


def _llama_and_qwen3() -> tuple[ModelConfig, ...]:
    llama32 = ModelConfig(
        "llama3.2-1b",
        vocab_size=128256,
        dim=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        ffn_dim=8192,
        max_seq_len=131072,
        rope_theta=500000.0,
        rope_scaling=_llama3_rope(32.0),
        tie_embeddings=True,
    )
    qwen3 = ModelConfig(
        "qwen3-8b",
        vocab_size=151936,
        dim=4096,
        n_layers=36,
        n_heads=32,
        n_kv_heads=8,
        ffn_dim=12288,
        head_dim=128,
        max_seq_len=40960,
        rope_theta=1e6,
        qk_norm="head",
        family="qwen3",
    )
    return (
        llama32,
        llama32.with_(name="llama3.2-3b", dim=3072, n_layers=28, n_heads=24),
        ModelConfig(
            "llama3.1-8b",
            vocab_size=128256,
            dim=4096,
            n_layers=32,
            n_heads=32,
            n_kv_heads=8,
            ffn_dim=14336,
            max_seq_len=131072,
            rope_theta=500000.0,
            rope_scaling=_llama3_rope(8.0),
        ),
        qwen3.with_(name="qwen3-1.7b", dim=2048, n_layers=28, n_heads=16, ffn_dim=6144, tie_embeddings=True),
        qwen3,
    )


def _other_families() -> tuple[ModelConfig, ...]:
    return (
        ModelConfig(
            "qwen2.5-7b", vocab_size=152064, dim=3584, n_layers=28, n_heads=28, n_kv_heads=4, ffn_dim=18944,
            max_seq_len=32768, rope_theta=1e6, qkv_bias=True, family="qwen2",
        ),
        ModelConfig(
            "mistral-7b", vocab_size=32768, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14336,
            max_seq_len=32768, rope_theta=1e6, family="mistral",
        ),
        ModelConfig(
            "gemma3-4b", vocab_size=262208, dim=2560, n_layers=34, n_heads=8, n_kv_heads=4, head_dim=256,
            ffn_dim=10240, max_seq_len=131072, norm_eps=1e-6, rope_theta=1e6, rope_scaling=RopeScaling("linear", 8.0),
            local_rope_theta=10000.0, qk_norm="head", norm_placement="sandwich", norm_offset=1.0,
            embed_scale=2560**0.5, activation="gelu_tanh", attention_scale=256**-0.5, sliding_window=1024,
            layer_kinds=(SLIDING_5_1 * 6)[:34], tie_embeddings=True, family="gemma3_text",
        ),
        ModelConfig(
            "olmo2-7b", vocab_size=100352, dim=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_dim=11008,
            max_seq_len=4096, norm_eps=1e-6, rope_theta=500000.0, qk_norm="projection", norm_placement="post",
            family="olmo2",
        ),
        ModelConfig(
            "smollm3-3b", vocab_size=128256, dim=2048, n_layers=36, n_heads=16, n_kv_heads=4, ffn_dim=11008,
            max_seq_len=65536, norm_eps=1e-6, rope_theta=5e6, tie_embeddings=True,
            no_rope_layers=tuple(range(3, 36, 4)), family="smollm3",
        ),
        ModelConfig(
            "qwen3-30b-a3b", vocab_size=151936, dim=2048, n_layers=48, n_heads=32, n_kv_heads=4, head_dim=128,
            ffn_dim=6144, max_seq_len=40960, rope_theta=1e6, qk_norm="head", family="qwen3_moe",
            experts=Experts(count=128, per_token=8, ffn_dim=768, normalize=True),
        ),
        ModelConfig(
            "qwen1.5-moe-a2.7b", vocab_size=151936, dim=2048, n_layers=24, n_heads=16, n_kv_heads=16, ffn_dim=5632,
            max_seq_len=8192, rope_theta=1e6, qkv_bias=True, family="qwen2_moe",
            experts=Experts(count=60, per_token=4, ffn_dim=1408, shared_ffn_dim=5632, shared_gate=True),
        ),
        ModelConfig(
            "olmoe-1b-7b", vocab_size=50304, dim=2048, n_layers=16, n_heads=16, n_kv_heads=16, ffn_dim=1024,
            max_seq_len=4096, qk_norm="projection", family="olmoe",
            experts=Experts(count=64, per_token=8, ffn_dim=1024),
        ),
        ModelConfig(
            "mixtral-8x7b", vocab_size=32000, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14336,
            max_seq_len=32768, rope_theta=1e6, family="mixtral",
            experts=Experts(count=8, per_token=2, ffn_dim=14336, normalize=True),
        ),
        ModelConfig(
            "glm4.5-air", vocab_size=151552, dim=4096, n_layers=46, n_heads=96, n_kv_heads=8, head_dim=128,
            ffn_dim=10944, max_seq_len=131072, norm_eps=1e-5, rope_theta=1e6, partial_rotary=0.5, qkv_bias=True,
            family="glm4_moe",
            experts=Experts(
                count=128, per_token=8, ffn_dim=1408, normalize=True, layers=tuple(range(1, 46)),
                shared_ffn_dim=1408, scoring="sigmoid", score_bias=True,
            ),
        ),
    )  # fmt: skip


CONFIGS: dict[str, ModelConfig] = {
    c.name: c
    for c in (
        ModelConfig("tiny", vocab_size=512, dim=64, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=160, max_seq_len=1024),
        ModelConfig(
            "tiny-moe",
            vocab_size=512,
            dim=64,
            n_layers=4,
            n_heads=8,
            n_kv_heads=4,
            ffn_dim=160,
            max_seq_len=1024,
            family="qwen3_moe",
            qk_norm="head",
            experts=Experts(count=8, per_token=2, ffn_dim=48, normalize=True),
        ),
        ModelConfig("125m", vocab_size=32000, dim=768, n_layers=12, n_heads=12, n_kv_heads=12, ffn_dim=2048),
        ModelConfig("1b", vocab_size=32000, dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_dim=5632),
        ModelConfig("7b", vocab_size=PAPER_VOCAB, dim=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_dim=11008),
        ModelConfig("13b", vocab_size=PAPER_VOCAB, dim=5120, n_layers=40, n_heads=40, n_kv_heads=40, ffn_dim=13824),
        ModelConfig("32b", vocab_size=PAPER_VOCAB, dim=6656, n_layers=60, n_heads=64, n_kv_heads=64, ffn_dim=17920),
        ModelConfig("llama2-7b", vocab_size=32000, dim=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_dim=11008),
        ModelConfig("llama2-13b", vocab_size=32000, dim=5120, n_layers=40, n_heads=40, n_kv_heads=40, ffn_dim=13824),
        ModelConfig(
            "llama3-8b",
            vocab_size=128256,
            dim=4096,
            n_layers=32,
            n_heads=32,
            n_kv_heads=8,
            ffn_dim=14336,
            max_seq_len=8192,
            rope_theta=500000.0,
        ),
        *_released(),
    )
}


def get_config(name: str | ModelConfig) -> ModelConfig:
    """The preset called ``name`` (``tiny``, ``7b``, ``llama3.2-1b``, ``qwen3-8b``..., any case),
    or ``name`` itself when it is a ``ModelConfig``; ValueError listing the presets otherwise."""
    if isinstance(name, ModelConfig):
        return name
    try:
        return CONFIGS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(CONFIGS)}") from None
