"""Hugging Face LLaMA ``config.json`` <-> ``ModelConfig``, and parameter names between the two.

Only what our ``Transformer`` computes is accepted: a LLaMA decoder with SiLU gates, no
biases, RMSNorm, plain rotary embedding (any ``rope_theta``, no scaling), grouped-query
heads, tied or separate embeddings. Anything else is refused naming the option, rather than
loaded into a model that would compute something else. Both the transformers 4 keys
(``rope_theta``, ``rope_scaling``) and the 5 ones (``rope_parameters``) are read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hotswitch.backend.models.config import ModelConfig

# our name (after "layers.N.") -> Hugging Face's (after "model.layers.N.")
_LAYER_NAMES = {
    "attention_norm.weight": "input_layernorm.weight",
    "attention.wq.weight": "self_attn.q_proj.weight",
    "attention.wk.weight": "self_attn.k_proj.weight",
    "attention.wv.weight": "self_attn.v_proj.weight",
    "attention.wo.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "feed_forward.w1.weight": "mlp.gate_proj.weight",
    "feed_forward.w2.weight": "mlp.down_proj.weight",
    "feed_forward.w3.weight": "mlp.up_proj.weight",
}
_TOP_NAMES = {
    "tok_embeddings.weight": "model.embed_tokens.weight",
    "norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
# tensors some checkpoints carry that hold no weights (recomputed from the config)
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def hf_name(name: str) -> str:
    """The Hugging Face tensor name of our parameter ``name`` (e.g. ``layers.0.attention.wq.weight``
    -> ``model.layers.0.self_attn.q_proj.weight``)."""
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    head, layer, rest = name.split(".", 2)
    if head != "layers" or rest not in _LAYER_NAMES:
        raise ValueError(f"parameter {name!r} has no Hugging Face LLaMA name; is it a parameter of our Transformer?")
    return f"model.layers.{layer}.{_LAYER_NAMES[rest]}"


def _refuse(directory: Any, option: str, value: Any, why: str) -> ValueError:
    return ValueError(
        f"{directory}: unsupported Hugging Face option {option}={value!r} ({why}); "
        "only plain LLaMA checkpoints load (see hotswitch.backend.models.hf_config)"
    )


def _rope(raw: dict[str, Any], where: Any) -> float:
    """``rope_theta`` from either key style; refuses any rope scaling."""
    params = raw.get("rope_parameters") or {}
    scaling = raw.get("rope_scaling") or {}
    for key, rope in (("rope_parameters", params), ("rope_scaling", scaling)):
        kind = rope.get("rope_type", rope.get("type", "default"))
        if kind != "default":
            raise _refuse(where, f"{key}.rope_type", kind, "only unscaled rotary embedding is implemented")
    return float(params.get("rope_theta", raw.get("rope_theta", 10000.0)))


def _check_supported(raw: dict[str, Any], where: Any) -> None:
    if raw.get("model_type") != "llama":
        raise _refuse(where, "model_type", raw.get("model_type"), "only 'llama' is implemented")
    other = [a for a in raw.get("architectures") or [] if a != "LlamaForCausalLM"]
    if other:
        raise _refuse(where, "architectures", other, "only LlamaForCausalLM is implemented")
    if raw.get("hidden_act", "silu") != "silu":
        raise _refuse(where, "hidden_act", raw["hidden_act"], "the feed-forward gate is SiLU")
    for option in ("attention_bias", "mlp_bias"):
        if raw.get(option):
            raise _refuse(where, option, raw[option], "our projections have no bias")
    if raw.get("attention_dropout", 0.0):
        raise _refuse(where, "attention_dropout", raw["attention_dropout"], "our attention has no dropout")
    heads, dim = raw["num_attention_heads"], raw["hidden_size"]
    if raw.get("head_dim") not in (None, dim // heads):
        why = f"a head must be hidden_size / num_attention_heads = {dim // heads} wide"
        raise _refuse(where, "head_dim", raw["head_dim"], why)


def config_from_dict(raw: dict[str, Any], name: str = "hf", where: Any = "config.json") -> ModelConfig:
    """``ModelConfig`` of a parsed Hugging Face LLaMA ``config.json``; ``ValueError`` naming the
    first unsupported option."""
    _check_supported(raw, where)
    try:
        return ModelConfig(
            name,
            vocab_size=raw["vocab_size"],
            dim=raw["hidden_size"],
            n_layers=raw["num_hidden_layers"],
            n_heads=raw["num_attention_heads"],
            n_kv_heads=raw.get("num_key_value_heads") or raw["num_attention_heads"],
            ffn_dim=raw["intermediate_size"],
            max_seq_len=raw.get("max_position_embeddings", 2048),
            norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=_rope(raw, where),
            tie_embeddings=bool(raw.get("tie_word_embeddings", False)),
        )
    except KeyError as missing:
        raise ValueError(f"{where}: config.json lacks {missing}, which a LLaMA config must give") from None


def config_from_hf(directory: str | Path) -> ModelConfig:
    """The ``ModelConfig`` of the Hugging Face LLaMA checkpoint in ``directory`` (named
    ``hf:<folder name>``); ``FileNotFoundError`` without ``config.json``, ``ValueError``
    naming any option our model does not implement."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{directory}: no config.json; pass the folder of a Hugging Face checkpoint "
            "(config.json beside model.safetensors or model.safetensors.index.json)"
        )
    return config_from_dict(json.loads(path.read_text()), f"hf:{Path(directory).name}", directory)


def config_to_dict(config: ModelConfig) -> dict[str, Any]:
    """A ``config.json`` that ``transformers.LlamaConfig`` reads as ``config`` (both key styles)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": config.vocab_size,
        "hidden_size": config.dim,
        "intermediate_size": config.ffn_dim,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "head_dim": config.head_dim,
        "max_position_embeddings": config.max_seq_len,
        "rms_norm_eps": config.norm_eps,
        "rope_theta": config.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta},
        "tie_word_embeddings": config.tie_embeddings,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
    }
