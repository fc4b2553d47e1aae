"""``ModelConfig`` -> Hugging Face ``config.json``: what an export writes, so that transformers
loads the trained model as its own family (``model_type``) with every option the run computed
(the reading side is ``hf_config``)."""

from __future__ import annotations

from typing import Any

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.hf_config import FAMILIES


def _rope_out(config: ModelConfig) -> dict[str, Any]:
    s = config.rope_scaling
    rope: dict[str, Any] = {"rope_type": s.kind, "rope_theta": config.rope_theta}
    if s.kind != "default":
        rope["factor"] = s.factor
    if s.kind == "llama3":
        rope.update(low_freq_factor=s.low_freq_factor, high_freq_factor=s.high_freq_factor)
    if s.kind in ("llama3", "yarn"):
        rope["original_max_position_embeddings"] = s.original_max_positions
    if s.kind == "yarn":
        rope.update(attention_factor=s.attention_factor, beta_fast=s.beta_fast, beta_slow=s.beta_slow)
        rope["truncate"] = s.truncate
    if config.partial_rotary != 1.0 or FAMILIES[config.family].partial_rotary != 1.0:
        rope["partial_rotary_factor"] = config.partial_rotary
    if config.local_rope_theta is None:
        return {"rope_parameters": rope}
    local = {"rope_type": "default", "rope_theta": config.local_rope_theta}
    return {"rope_parameters": {"full_attention": rope, "sliding_attention": local}}


def _experts_out(config: ModelConfig) -> dict[str, Any]:
    """A mixture of experts as its family's config gives it, the auxiliary loss on where it
    weighs one (``output_router_logits`` and its ``router_aux_loss_coef``)."""
    experts = config.experts
    assert experts is not None
    if config.family == "glm4_moe":
        return _glm4_experts_out(config)
    count = "num_local_experts" if config.family == "mixtral" else "num_experts"
    out: dict[str, Any] = {
        count: experts.count,
        "num_experts_per_tok": experts.per_token,
        "output_router_logits": bool(experts.aux_loss_coef),
    }
    if experts.aux_loss_coef:
        out["router_aux_loss_coef"] = experts.aux_loss_coef
    if config.family != "mixtral":
        out["norm_topk_prob"] = experts.normalize
    if config.family in ("qwen3_moe", "qwen2_moe"):
        dense = [i for i in range(config.n_layers) if not experts.routes(i)]
        out.update(moe_intermediate_size=experts.ffn_dim, decoder_sparse_step=1, mlp_only_layers=dense)
    if config.family == "qwen2_moe":
        out["shared_expert_intermediate_size"] = experts.shared_ffn_dim
    return out


def _glm4_experts_out(config: ModelConfig) -> dict[str, Any]:
    """GLM-4.5's mixture: routed from ``first_k_dense_replace`` on, its shared experts a multiple of
    the experts' width."""
    experts = config.experts
    assert experts is not None
    routed = [i for i in range(config.n_layers) if experts.routes(i)]
    first = routed[0] if routed else config.n_layers
    if routed != list(range(first, config.n_layers)) or experts.shared_ffn_dim % experts.ffn_dim:
        raise ValueError(
            f"{config.name}: a glm4_moe config routes every layer from first_k_dense_replace on, its shared "
            f"experts a multiple of the experts' width; this mixture (layers {routed}, shared width "
            f"{experts.shared_ffn_dim}) has no glm4_moe config.json"
        )
    return {
        "n_routed_experts": experts.count,
        "num_experts_per_tok": experts.per_token,
        "moe_intermediate_size": experts.ffn_dim,
        "first_k_dense_replace": first,
        "n_shared_experts": experts.shared_ffn_dim // experts.ffn_dim,
        "norm_topk_prob": experts.normalize,
        "n_group": experts.groups,
        "topk_group": experts.group_pick,
        "routed_scaling_factor": experts.scale,
        "use_qk_norm": config.qk_norm == "head",
        "num_nextn_predict_layers": 0,  # none trained, none written
    }


def config_to_dict(config: ModelConfig) -> dict[str, Any]:
    """A ``config.json`` that transformers reads as ``config``, of its family's ``model_type``."""
    family = FAMILIES[config.family]
    out: dict[str, Any] = {
        "architectures": [family.architecture],
        "model_type": config.family,
        "vocab_size": config.vocab_size,
        "hidden_size": config.dim,
        "intermediate_size": config.ffn_dim,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "head_dim": config.head_size,
        "max_position_embeddings": config.max_seq_len,
        "rms_norm_eps": config.norm_eps,
        **_rope_out(config),
        "tie_word_embeddings": config.tie_embeddings,
        ("hidden_activation" if family.gemma else "hidden_act"): (
            "gelu_pytorch_tanh" if config.activation == "gelu_tanh" else "silu"
        ),
    }
    if config.experts is not None:
        out.update(_experts_out(config))
    if config.family not in ("llama", "olmo2", "olmoe", "glm4_moe"):
        out["sliding_window"] = config.sliding_window
    if family.sliding in ("qwen", "gemma", "smollm3", "qwen2_moe"):
        out["layer_types"] = [f"{config.layer_kind(i)}_attention" for i in range(config.n_layers)]
    if config.partial_rotary != 1.0 or family.partial_rotary != 1.0:
        out["partial_rotary_factor"] = config.partial_rotary
    if config.family == "glm4_moe":  # its attention_bias biases q, k and v only
        out["attention_bias"] = config.qkv_bias
    elif config.family != "gemma3_text":
        out.update(attention_bias=config.o_bias, mlp_bias=config.mlp_bias)
    if family.gemma:
        assert config.attention_scale is not None  # every Gemma config sets it
        scalar = round(config.attention_scale**-2, 6)
        out["query_pre_attn_scalar"] = int(scalar) if scalar == int(scalar) else scalar
    if config.family in ("qwen2", "qwen3", "smollm3", "qwen2_moe"):
        out["use_sliding_window"] = config.sliding_window is not None
    if config.family == "qwen2_moe":
        out["qkv_bias"] = config.qkv_bias
    if config.family == "smollm3":
        out["no_rope_layers"] = [int(i not in config.no_rope_layers) for i in range(config.n_layers)]
    return out
