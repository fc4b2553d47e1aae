"""Tiny random checkpoints of every family that loads, built by transformers' own classes in
the layout each family's published ``config.json`` sets (no model hub): the oracle of the
family tests. Options are shrunk to the tiny shape (a 12-token window where Gemma 3's is 512,
a rope scaling whose original context fits 64 positions) so that every option acts on the
tests' short sequences."""

from __future__ import annotations

from pathlib import Path

import torch

VOCAB = 128
SHAPE = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6,
    "pad_token_id": None,  # some families default to ids past the tiny vocabulary
}
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
# family -> (transformers config class, causal LM class, options)
FAMILIES: dict[str, tuple[str, str, dict]] = {
    "tinyllama": ("LlamaConfig", "LlamaForCausalLM", {"tie_word_embeddings": False}),
    "smollm2": ("LlamaConfig", "LlamaForCausalLM", {"tie_word_embeddings": True}),
    "llama3.2": ("LlamaConfig", "LlamaForCausalLM", {"tie_word_embeddings": True, "rope_scaling": LLAMA3_ROPE}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"head_dim": 16, "sliding_window": 12}),
    "qwen2.5": ("Qwen2Config", "Qwen2ForCausalLM", {"tie_word_embeddings": True, "rope_scaling": YARN}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16, "tie_word_embeddings": True}),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {
            "head_dim": 16,
            "query_pre_attn_scalar": 12,
            "sliding_window": 12,
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
            "rope_parameters": {
                "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            },
        },
    ),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {"tie_word_embeddings": False}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"partial_rotary_factor": 0.5, "tie_word_embeddings": False}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {"no_rope_layer_interval": 2, "tie_word_embeddings": True}),
    # mixtures of experts: 4 experts, 2 per token; Qwen3-MoE keeps layer 1 dense (mlp_only_layers)
    "qwen3-moe": (
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        {
            "head_dim": 16,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "norm_topk_prob": True,
            "mlp_only_layers": [1],
        },
    ),
    # and a gated shared expert beside them; layer 2 dense (mlp_only_layers)
    "qwen2-moe": (
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",
        {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 48,
            "mlp_only_layers": [2],
        },
    ),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", {"num_experts": 4, "num_experts_per_tok": 2}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    # a sigmoid router with a choice bias, limited to the best 2 of 4 expert groups, scaled; an
    # ungated shared expert; layer 0 dense (first_k_dense_replace); q/k biases and norms, half
    # of each head rotated
    "glm4-moe": (
        "Glm4MoeConfig",
        "Glm4MoeForCausalLM",
        {
            "n_routed_experts": 8,
            "num_experts_per_tok": 3,
            "moe_intermediate_size": 32,
            "n_shared_experts": 1,
            "first_k_dense_replace": 1,
            "n_group": 4,
            "topk_group": 2,
            "routed_scaling_factor": 2.5,
            "use_qk_norm": True,
            "attention_bias": True,
        },
    ),
}
# families whose layers slide: ring attention does not run them yet (refused by name); Ulysses does
SLIDING = ("mistral", "gemma3")


def make_family(directory: Path, family: str, seed: int = 0, **shape):
    """A random ``family`` checkpoint saved into ``directory``, ``SHAPE`` unless ``shape``
    changes it (``benchmarks/families.py`` times a larger one); every weight random (norms and
    biases too), so a misplaced tensor changes the loss. Returns transformers' model."""
    import transformers

    config_class, model_class, options = FAMILIES[family]
    config = getattr(transformers, config_class)(**{**SHAPE, **shape}, **options)
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_((0.0 if family == "gemma3" else 1.0) + 0.2 * torch.randn_like(param))
            else:
                param.normal_(0, 0.1)
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # a router's choice bias, big enough to matter
                buffer.normal_(0, 0.3)
    model.save_pretrained(directory)
    return model


def load_family(directory: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(directory).eval()
