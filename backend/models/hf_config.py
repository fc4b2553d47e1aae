"""Hugging Face ``config.json`` <-> ``ModelConfig``, for every family the one decoder computes.

A family is a ``model_type`` and the options its config sets (``FAMILIES``): Llama (2, 3.x,
SmolLM2), Mistral, Qwen2.5, Qwen3, OLMo 2, Gemma 3 (text), Phi-3/Phi-4-mini, SmolLM3, and the
mixtures of experts Qwen3-MoE, Qwen2-MoE, OLMoE, Mixtral and GLM-4.5 (``hf_config_moe``). Both
transformers 4 keys (``rope_theta``, ``rope_scaling``) and 5 ones (``rope_parameters``, per
layer type for Gemma 3) are read. Nothing is silently ignored: a key that would change the
computation and that the decoder does not compute is refused naming it; a key we know
changes nothing (token ids, dtype, cache settings) passes; any other key is listed once in a
warning as ignored.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hotswitch.backend.models.config import Experts, ModelConfig, RopeScaling
from hotswitch.backend.models.hf_config_keys import READ, SETTINGS
from hotswitch.backend.models.hf_config_moe import experts_of


@dataclass(frozen=True)
class Family:
    """What a ``model_type``'s config implies beyond its keys."""

    architecture: str
    qkv_bias: bool = False  # q/k/v biases whatever the config says (Qwen2)
    qk_norm: str = "none"
    norm_placement: str = "pre"
    gemma: bool = False  # 1 + weight norms, sqrt(dim) embedding scale, query_pre_attn_scalar
    sliding: str = "none"  # how layers are sliding where layer_types is absent: all, qwen, gemma, smollm3
    fused: bool = False  # q/k/v and gate/up stored as one tensor each (Phi-3)
    experts: str = (
        "none"  # how its config gives a mixture of experts: qwen, qwen2, olmoe, mixtral, glm4 (hf_config_moe)
    )
    o_bias: bool = True  # attention_bias biases the output projection too (not GLM-4.5's)
    partial_rotary: float = 1.0  # partial_rotary_factor where the config leaves it out


FAMILIES: dict[str, Family] = {
    "llama": Family("LlamaForCausalLM"),
    "mistral": Family("MistralForCausalLM", sliding="all"),
    "qwen2": Family("Qwen2ForCausalLM", qkv_bias=True, sliding="qwen"),
    "qwen3": Family("Qwen3ForCausalLM", qk_norm="head", sliding="qwen"),
    "olmo2": Family("Olmo2ForCausalLM", qk_norm="projection", norm_placement="post"),
    "gemma3_text": Family("Gemma3ForCausalLM", qk_norm="head", norm_placement="sandwich", gemma=True, sliding="gemma"),
    "phi3": Family("Phi3ForCausalLM", fused=True, sliding="all"),
    "smollm3": Family("SmolLM3ForCausalLM", sliding="smollm3"),
    "qwen3_moe": Family("Qwen3MoeForCausalLM", qk_norm="head", sliding="qwen", experts="qwen"),
    "qwen2_moe": Family("Qwen2MoeForCausalLM", qkv_bias=True, sliding="qwen2_moe", experts="qwen2"),
    "olmoe": Family("OlmoeForCausalLM", qk_norm="projection", experts="olmoe"),
    "mixtral": Family("MixtralForCausalLM", sliding="all", experts="mixtral"),
    # q/k norms where use_qk_norm; the checkpoints' multi-token-prediction layers are not trained
    "glm4_moe": Family("Glm4MoeForCausalLM", experts="glm4", o_bias=False, partial_rotary=0.5),
}
EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
SHARED_KEY = "shared_expert_intermediate_size"  # read where the family has a shared expert, else refused

HARMLESS = SETTINGS | READ
# keys that change the computation, with the value under which they change nothing
NEUTRAL = {
    "attention_dropout": 0.0,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "final_logit_softcapping": None,
    "attn_logit_softcapping": None,
    "use_bidirectional_attention": False,
    "quantization_config": None,
    "num_experts": 0,
    "num_local_experts": 0,
    "n_routed_experts": 0,
    "router_jitter_noise": 0.0,
    "clip_qkv": None,
    "shared_expert_intermediate_size": 0,
}
WHY = {
    "router_jitter_noise": "the router's training noise is not computed; give 0",
    "clip_qkv": "q/k/v clipping is not computed; give null",
    SHARED_KEY: "a shared expert is read for qwen2_moe; this family's checkpoints have none, give 0",
}
_warned: set[frozenset[str]] = set()


def _refuse(where: Any, option: str, value: Any, why: str) -> ValueError:
    return ValueError(f"{where}: unsupported Hugging Face option {option}={value!r} ({why})")


def _family(raw: dict[str, Any], where: Any) -> Family:
    model_type = raw.get("model_type")
    if model_type not in FAMILIES:
        loads = ", ".join(FAMILIES)
        raise _refuse(where, "model_type", model_type, f"the families that load are {loads}")
    family = FAMILIES[model_type]
    other = [a for a in raw.get("architectures") or [] if a != family.architecture]
    if other:
        raise _refuse(where, "architectures", other, f"a {model_type} checkpoint loads as {family.architecture}")
    return family


def _check_keys(raw: dict[str, Any], where: Any, family: Family) -> None:
    """Refuse what changes the computation unread; warn once about keys we do not know."""
    for key, neutral in NEUTRAL.items():
        if key in EXPERT_COUNT_KEYS and family.experts != "none":
            continue  # read by ``_experts``
        if key == SHARED_KEY and family.experts == "qwen2":
            continue
        value = raw.get(key, neutral)
        if value not in (neutral, None) and not (neutral is False and value is None):
            why = WHY.get(key, "not computed")
            if key in EXPERT_COUNT_KEYS:
                moe = ", ".join(k for k, f in FAMILIES.items() if f.experts != "none")
                why = f"this family has no mixture of experts here; the mixture-of-experts families that load: {moe}"
            raise _refuse(where, key, value, why)
    unknown = frozenset(k for k in raw if k not in HARMLESS and k not in NEUTRAL)
    if unknown and unknown not in _warned:
        _warned.add(unknown)
        warnings.warn(f"{where}: config.json keys ignored (not read by hotswitch): {sorted(unknown)}", stacklevel=3)


def _rope_dicts(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(full-attention layers' rope parameters, sliding layers' or None), from either key style."""
    params = raw.get("rope_parameters") or {}
    if "full_attention" in params or "sliding_attention" in params:
        return dict(params.get("full_attention") or {}), params.get("sliding_attention")
    merged = {**(raw.get("rope_scaling") or {}), **params}
    merged.setdefault("rope_theta", raw.get("rope_theta", 10000.0))
    local = raw.get("rope_local_base_freq")
    return merged, ({"rope_type": "default", "rope_theta": local} if local is not None else None)


def _scaling(rope: dict[str, Any], raw: dict[str, Any], where: Any) -> RopeScaling:
    kind = rope.get("rope_type", rope.get("type", "default"))
    original = int(rope.get("original_max_position_embeddings") or raw.get("max_position_embeddings", 2048))
    if kind == "default":
        return RopeScaling()
    if kind == "linear":
        return RopeScaling("linear", float(rope["factor"]))
    if kind == "llama3":
        return RopeScaling(
            "llama3",
            float(rope["factor"]),
            float(rope["low_freq_factor"]),
            float(rope["high_freq_factor"]),
            original_max_positions=original,
        )
    if kind == "yarn":
        return _yarn(rope, raw, original)
    raise _refuse(where, "rope_type", kind, "the rotary kinds computed are default, linear, llama3 and yarn")


def _yarn(rope: dict[str, Any], raw: dict[str, Any], original: int) -> RopeScaling:
    factor = rope.get("factor") or raw.get("max_position_embeddings", original) / original

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = rope.get("attention_factor")
    if attention is None and rope.get("mscale") and rope.get("mscale_all_dim"):
        attention = mscale(factor, rope["mscale"]) / mscale(factor, rope["mscale_all_dim"])
    elif attention is None:
        attention = mscale(factor)
    return RopeScaling(
        "yarn",
        float(factor),
        original_max_positions=original,
        attention_factor=float(attention),
        beta_fast=float(rope.get("beta_fast") or 32),
        beta_slow=float(rope.get("beta_slow") or 1),
        truncate=bool(rope.get("truncate", True)),
    )


def _layer_kinds(raw: dict[str, Any], family: Family, layers: int, where: Any) -> tuple[tuple[str, ...], int | None]:
    """Per layer "full" or "sliding", and the window (None where no layer slides)."""
    window = raw.get("sliding_window")
    types = raw.get("layer_types")
    if types is None:
        types = _default_layer_types(raw, family, layers, window)
    kinds = []
    for kind in types:
        if kind not in ("full_attention", "sliding_attention"):
            raise _refuse(where, "layer_types", kind, "layers are full_attention or sliding_attention")
        kinds.append("sliding" if kind == "sliding_attention" else "full")
    if "sliding" not in kinds:
        return (), None
    if not window:
        raise _refuse(where, "sliding_window", window, "sliding_attention layers need a window")
    return tuple(kinds), int(window)


def _default_layer_types(raw: dict[str, Any], family: Family, layers: int, window: int | None) -> list[str]:
    full = "full_attention"
    sliding = "sliding_attention"
    if family.sliding == "all" and window:
        return [sliding] * layers
    if family.sliding == "qwen" and window and raw.get("use_sliding_window"):
        first = raw.get("max_window_layers", layers)
        return [sliding if i >= first else full for i in range(layers)]
    if family.sliding == "qwen2_moe" and window and raw.get("use_sliding_window"):  # every other layer below
        first = raw.get("max_window_layers", layers)
        return [sliding if (i + 1) % 2 and i < first else full for i in range(layers)]
    if family.sliding == "gemma" and window:
        pattern = raw.get("sliding_window_pattern") or raw.get("_sliding_window_pattern") or 6
        return [sliding if (i + 1) % pattern else full for i in range(layers)]
    if family.sliding == "smollm3" and window and raw.get("use_sliding_window"):
        no_rope = raw.get("no_rope_layers") or [1] * layers
        return [sliding if not no_rope[i] else full for i in range(layers)]
    return [full] * layers


def _activation(raw: dict[str, Any], where: Any) -> str:
    key = "hidden_activation" if "hidden_activation" in raw else "hidden_act"
    value = raw.get(key, "silu")
    kinds = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh"}
    if value not in kinds:
        raise _refuse(where, key, value, "the feed-forward gate is SiLU or tanh-approximated GELU")
    return kinds[value]


def _no_rope_layers(raw: dict[str, Any], layers: int) -> tuple[int, ...]:
    """Layers without rotary embedding: SmolLM3's ``no_rope_layers`` holds 1 where rope is used."""
    if raw.get("model_type") != "smollm3":
        return ()
    uses = raw.get("no_rope_layers")
    if uses is None:
        interval = raw.get("no_rope_layer_interval", 4)
        uses = [int((i + 1) % interval != 0) for i in range(layers)]
    return tuple(i for i, used in enumerate(uses) if not used)


def _options(raw: dict[str, Any], family: Family, where: Any) -> dict[str, Any]:
    """The decoder's options that the family and its config set."""
    layers = raw["num_hidden_layers"]
    heads = raw["num_attention_heads"]
    dim = raw["hidden_size"]
    for key in ("rope_scaling", "rope_parameters"):  # whichever transformers reads, none may be refused
        given = raw.get(key) or {}
        if "full_attention" not in given:
            _scaling(given, raw, f"{where}: {key}")
    rope, local = _rope_dicts(raw)
    if local is not None and (local.get("rope_type", "default") != "default"):
        raise _refuse(where, "rope_parameters.sliding_attention.rope_type", local["rope_type"], "local rope unscaled")
    partial = rope.get("partial_rotary_factor", raw.get("partial_rotary_factor", family.partial_rotary))
    kinds, window = _layer_kinds(raw, family, layers, where)
    bias = bool(raw.get("attention_bias", False))
    head_dim = raw.get("head_dim")
    options: dict[str, Any] = {
        "head_dim": head_dim if head_dim not in (None, dim // heads) else None,
        "rope_theta": float(rope.get("rope_theta", 10000.0)),
        "rope_scaling": _scaling(rope, raw, where),
        "partial_rotary": float(partial),
        "local_rope_theta": float(local["rope_theta"]) if local is not None and kinds else None,
        "no_rope_layers": _no_rope_layers(raw, layers),
        "qkv_bias": bool(raw.get("qkv_bias", family.qkv_bias)) or bias,
        "o_bias": bias and family.o_bias,
        "mlp_bias": bool(raw.get("mlp_bias", False)),
        "qk_norm": "head" if raw.get("use_qk_norm") else family.qk_norm,
        "norm_placement": family.norm_placement,
        "activation": _activation(raw, where),
        "sliding_window": window,
        "layer_kinds": kinds,
    }
    if family.gemma:
        scalar = raw.get("query_pre_attn_scalar", 256)
        options.update(norm_offset=1.0, embed_scale=math.sqrt(dim), attention_scale=float(scalar) ** -0.5)
    return options


def _experts(raw: dict[str, Any], family: Family, where: Any) -> Experts | None:
    """The family's mixture of experts as its config sets it (None for a dense family)."""
    if family.experts == "none":
        return None
    count = next((raw[k] for k in EXPERT_COUNT_KEYS if raw.get(k)), None)
    if not count:
        raise _refuse(where, "num_experts", count, f"a {raw['model_type']} config gives its expert count")
    return experts_of(raw, family.experts, int(count))


def config_from_dict(raw: dict[str, Any], name: str = "hf", where: Any = "config.json") -> ModelConfig:
    """``ModelConfig`` of a parsed Hugging Face ``config.json``; ``ValueError`` naming the first
    option the decoder does not compute."""
    family = _family(raw, where)
    _check_keys(raw, where, family)
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
            tie_embeddings=bool(raw.get("tie_word_embeddings", family.gemma)),
            family=raw["model_type"],
            experts=_experts(raw, family, where),
            **_options(raw, family, where),
        )
    except KeyError as missing:
        raise ValueError(
            f"{where}: config.json lacks {missing}, which a {raw['model_type']} config must give"
        ) from None


def config_from_hf(directory: str | Path) -> ModelConfig:
    """The ``ModelConfig`` of the Hugging Face checkpoint in ``directory`` (named ``hf:<folder
    name>``); ``FileNotFoundError`` without ``config.json``, ``ValueError`` naming any option
    the decoder does not compute."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{directory}: no config.json; pass the folder of a Hugging Face checkpoint "
            "(config.json beside model.safetensors or model.safetensors.index.json)"
        )
    return config_from_dict(json.loads(path.read_text()), f"hf:{Path(directory).name}", directory)
