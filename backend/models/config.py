"""Shapes of LLaMA-style decoders: the tests' tiny model up to the paper's 32B, and the
released LLaMA-2/3 shapes with their real vocabularies (for Hugging Face checkpoints)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace


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
    # the output head is the input embedding (one tensor): models.hf loads such checkpoints
    # for evaluation; the engine cannot lay them out (see ``param_shapes``)
    tie_embeddings: bool = False

    def __post_init__(self) -> None:
        if self.dim % self.n_heads:
            raise ValueError(f"{self.name}: dim {self.dim} is not a multiple of n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def with_(self, **changes) -> ModelConfig:
        return replace(self, **changes)

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter's global shape, in module order (torchtitan's names): the model's
        ``named_parameters`` without building it, so that planning needs no torch
        (tests/backend/models/test_shapes.py holds the two equal). Raises for tied
        embeddings: the engine keeps the embedding (first pipeline stage) and the head (last)
        as two parameters, so every layout, graph and plan refuses a tied config here."""
        if self.tie_embeddings:
            raise ValueError(
                f"{self.name}: tie_embeddings=True (one tensor for the input embedding and the output head) "
                "cannot be trained by the engine, which keeps them as two parameters on different pipeline "
                "stages; evaluate it with models.hf.load_pretrained, or train it untied with "
                "config.with_(tie_embeddings=False) (models.hf.hf_initializer then starts both from the embedding)"
            )
        return self._shapes()

    def _shapes(self) -> dict[str, tuple[int, ...]]:
        kv = self.n_kv_heads * self.head_dim
        shapes: dict[str, tuple[int, ...]] = {"tok_embeddings.weight": (self.vocab_size, self.dim)}
        for i in range(self.n_layers):
            p = f"layers.{i}."
            shapes[p + "attention_norm.weight"] = (self.dim,)
            shapes[p + "attention.wq.weight"] = (self.dim, self.dim)
            shapes[p + "attention.wk.weight"] = (kv, self.dim)
            shapes[p + "attention.wv.weight"] = (kv, self.dim)
            shapes[p + "attention.wo.weight"] = (self.dim, self.dim)
            shapes[p + "ffn_norm.weight"] = (self.dim,)
            shapes[p + "feed_forward.w1.weight"] = (self.ffn_dim, self.dim)
            shapes[p + "feed_forward.w2.weight"] = (self.dim, self.ffn_dim)
            shapes[p + "feed_forward.w3.weight"] = (self.ffn_dim, self.dim)
        shapes["norm.weight"] = (self.dim,)
        shapes["output.weight"] = (self.vocab_size, self.dim)
        return shapes

    @functools.cached_property
    def n_params(self) -> int:
        """Distinct parameters: a tied head counts once (computed once per configuration: the
        simulator asks for it thousands of times)."""
        shapes = self._shapes()
        if self.tie_embeddings:
            del shapes["output.weight"]
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

CONFIGS: dict[str, ModelConfig] = {
    c.name: c
    for c in (
        ModelConfig("tiny", vocab_size=512, dim=64, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=160, max_seq_len=1024),
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
    )
}


def get_config(name: str | ModelConfig) -> ModelConfig:
    if isinstance(name, ModelConfig):
        return name
    try:
        return CONFIGS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(CONFIGS)}") from None
