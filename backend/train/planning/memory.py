"""Memory per device, estimated from the model's shapes: what a strategy's model states and one
sequence's activations take. On CPU the per-device budget is declared, and these estimates
decide what fits (so that long sequences need tensor parallelism just as on GPUs); on CUDA the
profile measures activations instead. ``train.memory_measure`` counts the same bytes on real
ranks, and tests/backend/train/planning/test_memory_measured.py holds the two within 10%.

Per token and layer the activations autograd keeps for backward are, in bytes (c: the compute
dtype's size; attention is one fused ``scaled_dot_product_attention``: no L x L scores are kept,
only q, k, v, the output and a log-sum-exp per head; the norms and rotary embedding are the
lean Functions of ``models.lean_ops``, which keep no fp32 copies):

- inside attention and the FFN, split over tp: c * (4*ffn + 2*dim + 2*kv) + 4 * heads;
- the two norms, split over tp only with sequence parallelism: each its input (c * dim) and one
  fp32 inverse RMS per token;
- the normed inputs of the column-parallel linears: whole on every tp rank without sequence
  parallelism, the shard with it (``runtime.sequence_parallel_linear`` all-gathers it again in
  backward): 2 * c * dim, split with sp. With sp and tp this is Megatron's 34 * dim / tp for
  LLaMA shapes, in bf16 (ffn = 8/3 dim, kv = dim);
- once per sequence position, the head: the fp32 softmax over vocab / tp, the final norm and the
  output layer's input as above, and the targets (int64; vocabulary-parallel loss keeps its
  per-token sums and masks too). With sp, the first block's input is a view of the embedding's
  whole all-reduced output on gloo (its reduce-scatter is an all-reduce and a chunk).
- at the peak, not kept: while the loss runs backward, the gradients of the log-probabilities and
  of the logits, fp32 over vocab / tp (``LOSS_PEAK_BYTES``, measured on a GPU).

With activation checkpointing a block keeps only its inputs (the residual stream, dim, split with
sp; without sp tensor parallelism adds the partial sum its all-reduce reads), and one block's
activations live again while it is recomputed in backward. Pipeline stages hold fewer layers
but, under 1F1B, the first keeps up to ``pp`` micro-batches in flight: the worst case is no
saving, which is what is counted (and ``pp`` heads, for the last stage). Selective recompute
(``sel``) keeps a layer's activations less the norms' outputs and the FFN's activation
(``planning.selective.recomputed_bytes``); at its peak one layer's recomputed values live again.

Context parallelism (``cp``) splits every sequence: a rank keeps only its two zig-zag chunks'
activations (``planning.context.local_tokens``: the length over cp, each chunk padded), the head's
included, plus at its peak what travels in flight (``planning.context.in_flight_bytes``: ring
attention's key/value blocks, or Ulysses' all-to-all buffers). Model states are replicated over
cp as over dp.
"""

from __future__ import annotations

from collections.abc import Mapping

from hotswitch.backend.cluster import GIB
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import FP32, Precision
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.context import in_flight_bytes, local_tokens
from hotswitch.backend.train.planning.selective import recomputed_bytes

FP32_BYTES = 4
TARGET_BYTES = 8  # cross-entropy keeps the int64 targets
VOCAB_PARALLEL_LOSS_BYTES = 15  # runtime.vocab_parallel keeps a sum (fp32), an index (int64) and two masks
# At the loss, beside the kept fp32 log-probabilities, their gradient and the logits' gradient live
# in fp32: the peak's only term that grows with tokens beyond what is kept. Measured on one H200
# in bf16 (benchmarks/precision.py --device cuda): peak minus the rest of the model grows by
# 256,042 bytes a token for the 1b preset (8 x its vocabulary: 256,000) and 243,652 for the 7b
# shape (8 x 30,592: 244,736).
LOSS_PEAK_BYTES = 2 * FP32_BYTES


def _per_token(config: ModelConfig, strategy: Strategy, precision: Precision) -> tuple[float, float]:
    """(bytes one layer keeps, bytes the head keeps) per token on one device."""
    dim, kv, c, f = config.dim, config.n_kv_heads * config.head_dim, precision.param_bytes, FP32_BYTES
    tp, region = strategy.tp, strategy.tp if strategy.sp else 1
    inside = c * (4 * config.ffn_dim + 2 * dim + 2 * kv) + f * config.n_heads
    norms = 2 * (c * dim + f)
    linear_inputs = 2 * c * dim
    layer = inside / tp + (norms + linear_inputs) / region
    loss = VOCAB_PARALLEL_LOSS_BYTES if tp > 1 else TARGET_BYTES
    head = f * config.vocab_size / tp + (c * dim + f + c * dim) / region + loss
    return layer, head


def kept_activation_bytes(config: ModelConfig, strategy: Strategy, length: int, precision: Precision = FP32) -> float:
    """What one sequence keeps from forward to backward on one device (what
    ``memory_measure.measured_activation_bytes`` counts)."""
    length = local_tokens(length, strategy.cp)  # a cp rank keeps its own zig-zag chunks only
    layer, head = _per_token(config, strategy, precision)
    layer -= recomputed_bytes(config, strategy, precision)  # sel: dropped in forward, recomputed in backward
    c, region = precision.param_bytes, strategy.tp if strategy.sp else 1
    # with sp on gloo, the first block's input is a view of the embedding's whole output
    first = c * config.dim * (1 - 1 / strategy.tp) if strategy.sp else 0.0
    if strategy.ckpt:
        # the residual stream; without sp, tensor parallelism also hands each block the
        # un-reduced partial sum its all-reduce reads
        inputs = 1 if strategy.sp or strategy.tp == 1 else 2
        block_input = inputs * c * config.dim / region
        return length * (config.n_layers * block_input + first + strategy.pp * head)
    return length * (config.n_layers * layer + first + strategy.pp * head)  # the last stage: pp heads in flight


def activation_bytes(config: ModelConfig, strategy: Strategy, length: int, precision: Precision = FP32) -> float:
    """Activations one sequence needs on one device at its peak: what it keeps for backward,
    with checkpointing one block recomputed on top, the loss's gradients over the vocabulary
    (``LOSS_PEAK_BYTES``); with context parallelism what travels."""
    kept = kept_activation_bytes(config, strategy, length, precision)
    if strategy.ckpt:
        kept += local_tokens(length, strategy.cp) * _per_token(config, strategy, precision)[0]
    tokens = local_tokens(length, strategy.cp)
    kept += tokens * recomputed_bytes(config, strategy, precision)  # sel: one layer's
    kept += tokens * LOSS_PEAK_BYTES * config.vocab_size / strategy.tp  # the loss's gradients, one micro-batch's
    return kept + in_flight_bytes(config, strategy, length, precision)


def model_state_bytes(config: ModelConfig, strategy: Strategy, precision: Precision = FP32) -> float:
    """Parameters (the compute copy) and gradients of one strategy's shard (master weights and
    AdamW moments live on the instantiation strategy only and are counted there)."""
    return (precision.param_bytes + precision.grad_bytes) * config.n_params / (strategy.tp * strategy.pp)


def budget_holding(config: ModelConfig, strategy: Strategy, length: int, precision: Precision = FP32) -> float:
    """The per-device memory budget at which ``strategy`` just holds sequences of ``length``
    (benchmarks and the demo declare budgets this way on CPU)."""
    return model_state_bytes(config, strategy, precision) + activation_bytes(config, strategy, length, precision)


def gib(size: float) -> str:
    """``size`` bytes in GiB, with the digits that tell small sizes apart: "0.0123 GiB"."""
    return f"{size / GIB:.3g} GiB"


def check_budget_holds_states(
    config: ModelConfig, longest: Mapping[Strategy, int], budget: float, precision: Precision = FP32
) -> None:
    """Raise ValueError, naming the strategy, the GiB its model states need and the fix, when
    ``budget`` (bytes per device) does not exceed the model states (``model_state_bytes``) of a
    strategy of ``longest`` (each mapped to the longest sequence it is sent): such a strategy
    holds no sequence at all, whatever its length."""
    states = {s: model_state_bytes(config, s, precision) for s in longest}
    worst = max(states, key=states.__getitem__)
    if states[worst] < budget:
        return
    holding = budget_holding(config, worst, longest[worst], precision)
    raise ValueError(
        f"a memory budget of {gib(budget)} per device is below what the model states of {worst} "
        f"alone need: {gib(states[worst])} per device (the {precision} parameters and gradients of {config.name}, "
        f"split over tp x pp = {worst.tp * worst.pp}); raise memory_budget above {states[worst]:.0f} bytes "
        f"(by the model's shapes about {holding:.0f} bytes, {gib(holding)}, hold its sequences of up to "
        f"{longest[worst]} tokens) or use a strategy that shards the model states (more tp or pp)"
    )
