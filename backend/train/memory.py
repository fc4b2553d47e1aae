"""Memory per device, estimated from the model's shapes: what a strategy's model states and one
sequence's activations take. On CPU the per-device budget is declared, and these estimates
decide what fits (so that long sequences need tensor parallelism just as on GPUs); on CUDA the
profile measures activations instead."""

from __future__ import annotations

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy


def activation_bytes(config: ModelConfig, strategy: Strategy, length: int) -> float:
    """Activations one sequence keeps for backward on one device (fp32, attention scores
    materialised as on CPU). Per layer and token, ~(6*dim + 3*ffn) values inside attention
    and the FFN are split over tp; the ~4*dim of the norm and residual regions only with
    sequence parallelism; logits (twice) are vocab-split. Pipeline stages hold fewer
    layers but, under 1F1B, the first keeps up to ``pp`` micro-batches in flight: the
    worst case is no saving, which is what is counted."""
    split = config.n_layers * (6 * config.dim + 3 * config.ffn_dim + config.n_heads * length) + 2 * config.vocab_size
    regions = config.n_layers * 4 * config.dim
    return 4.0 * length * (split / strategy.tp + regions / (strategy.tp if strategy.sp else 1))


def model_state_bytes(config: ModelConfig, strategy: Strategy) -> float:
    """fp32 parameters and gradients of one strategy's shard (master and AdamW moments live
    on the instantiation strategy only and are counted there)."""
    return 8.0 * config.n_params / (strategy.tp * strategy.pp)


def budget_holding(config: ModelConfig, strategy: Strategy, length: int) -> float:
    """The per-device memory budget at which ``strategy`` just holds sequences of ``length``
    (benchmarks and the demo declare budgets this way on CPU)."""
    return model_state_bytes(config, strategy) + activation_bytes(config, strategy, length)
