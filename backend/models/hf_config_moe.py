"""A mixture-of-experts family's ``config.json`` -> ``Experts``: which layers route, the experts'
width, whether the picked weights are renormalised, and a shared expert where the family has one
(Qwen2-MoE's, gated). ``hf_config`` reads the rest of the config and refuses what is not
computed; the writing side is ``hf_config_out``.

How each family gives its mixture (``Family.experts``):

- ``qwen`` (Qwen3-MoE): ``moe_intermediate_size`` wide experts, routed in every
  ``decoder_sparse_step``-th layer but ``mlp_only_layers``, ``norm_topk_prob``;
- ``qwen2`` (Qwen2-MoE): the same, and a shared expert ``shared_expert_intermediate_size`` wide
  whose output a ``shared_expert_gate`` scales;
- ``olmoe``: ``intermediate_size`` wide experts in every layer, ``norm_topk_prob``;
- ``mixtral``: ``intermediate_size`` wide experts in every layer, always renormalised;
- ``glm4`` (GLM-4.5): ``moe_intermediate_size`` wide experts from layer ``first_k_dense_replace``
  on, ``n_shared_experts`` of that width as one ungated shared expert, a sigmoid router with its
  ``e_score_correction_bias``, group-limited (``n_group``, ``topk_group``), ``norm_topk_prob``
  and ``routed_scaling_factor``; transformers adds no auxiliary loss for it.
"""

from __future__ import annotations

from typing import Any

from hotswitch.backend.models.config import Experts

QWEN_KINDS = ("qwen", "qwen2")  # the kinds whose layers route by decoder_sparse_step / mlp_only_layers


# router_aux_loss_coef where a config leaves it out: transformers' default for the kind
AUX_LOSS_COEF = {"qwen": 0.001, "qwen2": 0.001, "olmoe": 0.01, "mixtral": 0.001}


def routed_layers(raw: dict[str, Any]) -> list[int]:
    """The layers a Qwen-MoE config routes: every ``decoder_sparse_step``-th but its
    ``mlp_only_layers`` (as transformers' Qwen2MoeDecoderLayer and Qwen3MoeDecoderLayer pick)."""
    step, dense = int(raw.get("decoder_sparse_step", 1)), set(raw.get("mlp_only_layers") or [])
    return [i for i in range(raw["num_hidden_layers"]) if i not in dense and (i + 1) % step == 0]


def experts_of(raw: dict[str, Any], kind: str, count: int) -> Experts | None:
    """The mixture of ``count`` experts that a ``kind`` family's config ``raw`` sets (None where
    every layer is dense); a key the kind must give and ``raw`` lacks raises ``KeyError``."""
    if kind == "glm4":
        return glm4_experts(raw, count)
    width = raw["moe_intermediate_size"] if kind in QWEN_KINDS else raw["intermediate_size"]
    layers: tuple[int, ...] = ()
    if kind in QWEN_KINDS:
        routed = routed_layers(raw)
        if not routed:
            return None
        layers = () if len(routed) == raw["num_hidden_layers"] else tuple(routed)
    normalize = kind == "mixtral" or bool(raw.get("norm_topk_prob", False))
    shared = int(raw["shared_expert_intermediate_size"]) if kind == "qwen2" else 0
    return Experts(
        int(count),
        int(raw.get("num_experts_per_tok", 2)),
        int(width),
        normalize,
        layers,
        shared_ffn_dim=shared,
        shared_gate=kind == "qwen2",
        aux_loss_coef=aux_loss_coef(raw, kind),
    )


def glm4_experts(raw: dict[str, Any], count: int) -> Experts | None:
    """GLM-4.5's mixture (as transformers' Glm4MoeMoE and Glm4MoeTopkRouter compute it)."""
    layers, first = raw["num_hidden_layers"], int(raw.get("first_k_dense_replace", 1))
    if first >= layers:
        return None
    width = int(raw["moe_intermediate_size"])
    return Experts(
        int(count),
        int(raw.get("num_experts_per_tok", 8)),
        width,
        bool(raw.get("norm_topk_prob", True)),
        tuple(range(first, layers)) if first else (),
        shared_ffn_dim=width * int(raw.get("n_shared_experts", 1)),
        scoring="sigmoid",
        score_bias=True,
        groups=int(raw.get("n_group", 1)),
        group_pick=int(raw.get("topk_group", 1)),
        scale=float(raw.get("routed_scaling_factor", 1.0)),
    )


def aux_loss_coef(raw: dict[str, Any], kind: str) -> float:
    """The load-balancing auxiliary loss's weight where the config has transformers add it
    (``output_router_logits``), else 0 (``models.balance``)."""
    if not raw.get("output_router_logits"):
        return 0.0
    return float(raw.get("router_aux_loss_coef", AUX_LOSS_COEF[kind]))
