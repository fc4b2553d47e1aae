"""The ``config.json`` keys ``hf_config`` passes without refusing: those that change nothing the
engine computes, and those it reads."""

# keys that change nothing the engine computes: an export keeps them from its source
SETTINGS = frozenset(
    [
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "transformers_version",
        "initializer_range",
        "use_cache",
        "auto_map",
        "output_attentions",
        "output_hidden_states",
        "return_dict",
        "chunk_size_feed_forward",
        "is_decoder",
        "problem_type",
        "id2label",
        "label2id",
        "_name_or_path",
        "attn_implementation",
        "cache_implementation",
        "base_model_tp_plan",
        "base_model_pp_plan",
        "bos_token",
        "eos_token",
        "tokenizer_class",
    ]
)
# keys this module reads (or that only restate what it reads)
READ = frozenset(
    [
        "torch_dtype",
        "dtype",
        "pretraining_tp",
        "tie_word_embeddings",
        "original_max_position_embeddings",
        "max_window_layers",
        "no_rope_layer_interval",
        "_sliding_window_pattern",
        "sliding_window_pattern",
        "rope_local_base_freq",
        "model_type",
        "architectures",
        "use_sliding_window",
        "sliding_window",
        "layer_types",
        "no_rope_layers",
        "rope_parameters",
        "rope_scaling",
        "rope_theta",
        "partial_rotary_factor",
        "query_pre_attn_scalar",
        "hidden_act",
        "hidden_activation",
        "attention_bias",
        "mlp_bias",
        "head_dim",
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "intermediate_size",
        "max_position_embeddings",
        "rms_norm_eps",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "norm_topk_prob",
        "decoder_sparse_step",
        "mlp_only_layers",
        "qkv_bias",  # Qwen2-MoE's q/k/v biases
        "router_aux_loss_coef",  # weighs the auxiliary loss only where output_router_logits adds it
        "output_router_logits",  # the auxiliary loss on (hf_config_moe.aux_loss_coef)
        "use_qk_norm",  # GLM-4.5's q/k norms, per head
        "first_k_dense_replace",
        "n_shared_experts",
        "routed_scaling_factor",
        "n_group",
        "topk_group",
        "num_nextn_predict_layers",  # multi-token-prediction layers: stored apart, not trained (hf)
        "num_mtp_layers",
    ]
)
