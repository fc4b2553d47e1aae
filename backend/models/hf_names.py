"""Our parameter names <-> a Hugging Face family's tensor names, the fused tensors some
families store (Phi-3's ``qkv_proj`` and ``gate_up_proj``: split on load, fused on export), and
the experts that mixture-of-experts checkpoints store one tensor each (stacked on load into one
parameter per projection, unstacked on export).

Each of our parameters is a ``Stored`` slice: the rows ``[start, start + rows)`` of one stored
tensor (the whole tensor where nothing is fused), or the stack of ``experts`` stored tensors
(one per expert, named with ``{expert}``), so any box of a parameter is read straight from the
files, and the fused tensors are rebuilt by concatenating their parts in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.models.config import ModelConfig

# our name (after "layers.N.") -> Hugging Face's (after "model.layers.N."), shared by all families
_LAYER_NAMES = {
    "attention_norm.weight": "input_layernorm.weight",
    "attention.wq.weight": "self_attn.q_proj.weight",
    "attention.wk.weight": "self_attn.k_proj.weight",
    "attention.wv.weight": "self_attn.v_proj.weight",
    "attention.bq": "self_attn.q_proj.bias",
    "attention.bk": "self_attn.k_proj.bias",
    "attention.bv": "self_attn.v_proj.bias",
    "attention.q_norm.weight": "self_attn.q_norm.weight",
    "attention.k_norm.weight": "self_attn.k_norm.weight",
    "attention.wo.weight": "self_attn.o_proj.weight",
    "attention.bo": "self_attn.o_proj.bias",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "feed_forward.w1.weight": "mlp.gate_proj.weight",
    "feed_forward.w2.weight": "mlp.down_proj.weight",
    "feed_forward.w3.weight": "mlp.up_proj.weight",
    "feed_forward.b1": "mlp.gate_proj.bias",
    "feed_forward.b2": "mlp.down_proj.bias",
    "feed_forward.b3": "mlp.up_proj.bias",
}
# where a family names a norm otherwise: OLMo 2 normalises sublayer outputs, Gemma both ends
_NORMS = {
    "olmo2": {
        "attention_out_norm.weight": "post_attention_layernorm.weight",
        "ffn_out_norm.weight": "post_feedforward_layernorm.weight",
    },
    "gemma3_text": {
        "attention_out_norm.weight": "post_attention_layernorm.weight",
        "ffn_norm.weight": "pre_feedforward_layernorm.weight",
        "ffn_out_norm.weight": "post_feedforward_layernorm.weight",
    },
}
# a routed layer's router and experts (``{expert}``: each expert's own tensor, stacked in ours)
_QWEN_EXPERTS = {
    "feed_forward.router.weight": "mlp.gate.weight",
    "feed_forward.experts.w1": "mlp.experts.{expert}.gate_proj.weight",
    "feed_forward.experts.w2": "mlp.experts.{expert}.down_proj.weight",
    "feed_forward.experts.w3": "mlp.experts.{expert}.up_proj.weight",
}
_EXPERTS = {
    "qwen3_moe": _QWEN_EXPERTS,
    "qwen2_moe": {  # and a shared expert, gated
        **_QWEN_EXPERTS,
        "feed_forward.shared.w1.weight": "mlp.shared_expert.gate_proj.weight",
        "feed_forward.shared.w2.weight": "mlp.shared_expert.down_proj.weight",
        "feed_forward.shared.w3.weight": "mlp.shared_expert.up_proj.weight",
        "feed_forward.shared_gate.weight": "mlp.shared_expert_gate.weight",
    },
    "olmoe": _QWEN_EXPERTS,
    "glm4_moe": {  # a sigmoid router's choice bias, and ungated shared experts
        **_QWEN_EXPERTS,
        "feed_forward.router.score_bias": "mlp.gate.e_score_correction_bias",
        "feed_forward.shared.w1.weight": "mlp.shared_experts.gate_proj.weight",
        "feed_forward.shared.w2.weight": "mlp.shared_experts.down_proj.weight",
        "feed_forward.shared.w3.weight": "mlp.shared_experts.up_proj.weight",
    },
    "mixtral": {
        "feed_forward.router.weight": "block_sparse_moe.gate.weight",
        "feed_forward.experts.w1": "block_sparse_moe.experts.{expert}.w1.weight",
        "feed_forward.experts.w2": "block_sparse_moe.experts.{expert}.w2.weight",
        "feed_forward.experts.w3": "block_sparse_moe.experts.{expert}.w3.weight",
    },
}
# fused tensors (Phi-3): the stored name and our parts, in their order along dim 0
_FUSED = {
    "phi3": {
        "self_attn.qkv_proj.weight": ("attention.wq.weight", "attention.wk.weight", "attention.wv.weight"),
        "mlp.gate_up_proj.weight": ("feed_forward.w1.weight", "feed_forward.w3.weight"),
    }
}
_TOP_NAMES = {
    "tok_embeddings.weight": "model.embed_tokens.weight",
    "norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
# tensors some checkpoints carry that hold no weights (recomputed from the config)
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


@dataclass(frozen=True)
class Stored:
    """Where our parameter lies in a checkpoint: rows ``start:start + rows`` of ``name``
    (``rows`` None: the whole tensor)."""

    name: str
    start: int = 0
    rows: int | None = None
    experts: int = 0  # above 0: our parameter stacks this many tensors, ``name`` formatted with each

    def names(self) -> list[str]:
        """The stored tensors our parameter reads: one, or each expert's in order."""
        if not self.experts:
            return [self.name]
        return [self.name.format(expert=e) for e in range(self.experts)]


def hf_name(name: str, family: str = "llama") -> str:
    """The Hugging Face tensor name of our parameter ``name`` in ``family`` (e.g.
    ``layers.0.attention.wq.weight`` -> ``model.layers.0.self_attn.q_proj.weight``); a fused
    part is named by its own, unfused name."""
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    head, layer, rest = name.split(".", 2)
    names = {**_LAYER_NAMES, **_NORMS.get(family, {}), **_EXPERTS.get(family, {})}
    if head != "layers" or rest not in names:
        raise ValueError(f"parameter {name!r} has no Hugging Face name; is it a parameter of our Transformer?")
    return f"model.layers.{layer}.{names[rest]}"


def stored_layout(config: ModelConfig) -> dict[str, Stored]:
    """Each of ``config``'s parameters' place in a checkpoint of its family."""
    shapes = config.param_shapes()
    layout = {name: Stored(hf_name(name, config.family)) for name in shapes}
    for name, stored in layout.items():
        if "{expert}" in stored.name:
            layout[name] = Stored(stored.name, experts=shapes[name][0])
    for layer in range(config.n_layers):
        prefix = f"layers.{layer}."
        for fused, parts in _FUSED.get(config.family, {}).items():
            start = 0
            for part in parts:
                rows = shapes[prefix + part][0]
                layout[prefix + part] = Stored(f"model.layers.{layer}.{fused}", start, rows)
                start += rows
    return layout


def stored_parts(config: ModelConfig) -> dict[str, list[tuple[str, int | None]]]:
    """Stored tensor name -> what an export concatenates (in order) into it: our parameters
    whole (None), or one expert of a stacked one (its index)."""
    groups: dict[str, list[tuple[str, int | None]]] = {}
    for name, stored in stored_layout(config).items():
        if stored.experts:
            for expert, tensor in enumerate(stored.names()):
                groups[tensor] = [(name, expert)]
        else:
            groups.setdefault(stored.name, []).append((name, None))
    return groups
