"""Shapes of LLaMA-style decoders: the tests' tiny model up to the paper's 32B."""

from __future__ import annotations

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
        (tests/backend/models/test_shapes.py holds the two equal)."""
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

    @property
    def n_params(self) -> int:
        total = 0
        for shape in self.param_shapes().values():
            count = 1
            for n in shape:
                count *= n
            total += count
        return total


# The paper trains with GPT-2 BPE padded to 30592 tokens; LLaMA-2 shapes otherwise.
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
    )
}


def get_config(name: str | ModelConfig) -> ModelConfig:
    if isinstance(name, ModelConfig):
        return name
    try:
        return CONFIGS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(CONFIGS)}") from None
