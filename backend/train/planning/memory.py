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
  parallelism, the shard with it (``parallel.sequence_parallel_linear`` all-gathers it again in
  backward): 2 * c * dim, split with sp. With sp and tp this is Megatron's 34 * dim / tp for
  LLaMA shapes, in bf16 (ffn = 8/3 dim, kv = dim);
- once per sequence position, the head: the final norm and the output layer's input as above,
  and what the loss keeps (``loss_kept_bytes``). With sp, the first block's input is a view of
  the embedding's whole all-reduced output on gloo (its reduce-scatter is an all-reduce and a chunk).
- at the peak, not kept: what the loss's backward holds (``loss_peak_bytes``).

The loss is the engine's ``models.chunked_loss`` (``CHUNKED``): it keeps the logits in the compute
dtype over vocab / tp and an fp32 log-sum-exp and the int64 target per token; its backward holds
the logits' gradient in the compute dtype and one chunk's fp32 softmax. ``WHOLE`` is
``F.cross_entropy`` over fp32 logits, as Megatron-LM and DeepSpeed run it and as the engine ran
it when the H200 peaks of ``sim.paper.measured_h200`` were taken: the fp32 log-probabilities kept,
and in backward their gradient and the logits' in fp32 (8 bytes an entry, measured on one H200:
peak minus the rest of the model grew by 256,042 bytes a token for the 1b preset, 8 x its
vocabulary: 256,000). tests/backend/models/test_chunked_loss.py holds both against the live bytes
PyTorch allocates on the CPU.

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

A mixture of experts (``ModelConfig.experts``): tensor parallelism replicates the experts and
routes every token a tp rank holds (``layout.TP_PLAN``), so a routed layer's feed-forward is split
over tp only with sequence parallelism, and its experts' weights not at all; expert parallelism
(``ep``) splits the experts' weights and gradients over the ep group. Per token a routed layer
keeps, beside what ``4 * width`` counts for each picked expert, its tokens' permuted copies (the
kernel's input) and the experts' outputs (read by the routing weights' backward): ``2 * k * dim``
in the compute dtype. Under ep the busiest rank of the group receives ``imbalance`` times the
mean of the routed rows, and at the peak one layer's dispatch buffers travel (the rows sent and
the rows received, ``2 * k * dim`` again). The master weights and moments live on the
instantiation strategy, which holds every expert (``dispatch.instantiation_strategy``). These
routed-layer terms are counted from the tensors the kernels keep (``models.experts``,
``parallel.expert_parallel``), not yet held against measured bytes as the dense ones are.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final, Literal

from hotswitch.backend.cluster import GIB
from hotswitch.backend.layout import is_expert
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.loss_chunks import CHUNK_BYTES, chunk_rows
from hotswitch.backend.precision import FP32, Precision
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.context import in_flight_bytes, local_tokens
from hotswitch.backend.train.planning.selective import recomputed_bytes

FP32_BYTES = 4
TARGET_BYTES = 8  # the int64 targets
VOCAB_PARALLEL_LOSS_BYTES = 15  # WHOLE over tp: a sum (fp32), an index (int64) and two masks
CHUNKED: Final = "chunked"
WHOLE: Final = "whole"
Loss = Literal["chunked", "whole"]


def loss_kept_bytes(entries: float, precision: Precision, tp: int = 1, loss: Loss = CHUNKED) -> float:
    """What the loss keeps for backward per token, over ``entries`` vocabulary entries a rank."""
    if loss == CHUNKED:
        return precision.param_bytes * entries + FP32_BYTES + TARGET_BYTES
    return FP32_BYTES * entries + (VOCAB_PARALLEL_LOSS_BYTES if tp > 1 else TARGET_BYTES)


def loss_peak_bytes(
    entries: float, tokens: float, precision: Precision, loss: Loss = CHUNKED, chunk_bytes: int = CHUNK_BYTES
) -> float:
    """What the loss's backward holds beyond what it keeps, for ``tokens`` over ``entries``
    vocabulary entries a rank: the logits' gradient whole and, chunked, in a dtype narrower than
    fp32, one chunk's fp32 softmax (in fp32 it is computed in the gradient itself). The chunk is a
    GPU's (``loss_chunks``): on a CPU, whose chunks are smaller, an upper bound."""
    if loss == WHOLE:
        return 2 * FP32_BYTES * entries * tokens
    chunk = min(tokens, chunk_rows(round(entries), chunk_bytes)) * entries * FP32_BYTES
    return precision.param_bytes * entries * tokens + (chunk if precision.param_bytes < FP32_BYTES else 0.0)


def _per_token(
    config: ModelConfig, strategy: Strategy, precision: Precision, loss: Loss, imbalance: float = 1.0
) -> tuple[float, float]:
    """(bytes one layer keeps, averaged over the layers, bytes the head keeps) per token on one device."""
    dim = config.dim
    kv = config.n_kv_heads * config.head_size
    c = precision.param_bytes
    f = FP32_BYTES
    tp = strategy.tp
    region = strategy.tp if strategy.sp else 1
    inside = c * (2 * config.q_dim + 2 * kv) + f * config.n_heads
    if config.qk_norm != "none":  # each q/k norm keeps its input and one inverse RMS per row it norms
        rows = config.n_heads + config.n_kv_heads if config.qk_norm == "head" else 2
        inside += c * (config.q_dim + kv) + f * rows
    norms = (2 if config.norm_placement != "sandwich" else 4) * (c * dim + f)
    linear_inputs = 2 * c * dim
    layer = inside / tp + (norms + linear_inputs) / region + _feed_forward_bytes(config, strategy, precision, imbalance)
    head = loss_kept_bytes(config.vocab_size / tp, precision, tp, loss) + (c * dim + f + c * dim) / region
    return layer, head


def _feed_forward_bytes(config: ModelConfig, strategy: Strategy, precision: Precision, imbalance: float) -> float:
    """What the feed-forwards keep per token on one device, averaged over the layers: a dense
    one ``4 * ffn`` split over tp; a routed one its picked experts' (with the permuted copies and
    outputs), split over tp only with sp and under ep at the busiest rank's load, plus a shared
    expert's, split as a dense one."""
    c = precision.param_bytes
    dense = 4 * c * config.ffn_dim / strategy.tp
    e = config.experts
    if e is None:
        return dense
    width = e.per_token * e.ffn_dim
    shared = config.active_ffn_dim - width  # a shared expert's width (0 without one)
    load = imbalance if strategy.ep > 1 else 1.0
    routed = c * (4 * width + 2 * e.per_token * config.dim) * load / (strategy.tp if strategy.sp else 1)
    routed += 4 * c * shared / strategy.tp
    count = routed_layers(config)
    return (dense * (config.n_layers - count) + routed * count) / config.n_layers


def routed_layers(config: ModelConfig) -> int:
    """How many layers' feed-forward is a mixture of experts."""
    return sum(config.routed(i) for i in range(config.n_layers))


def dispatch_bytes(config: ModelConfig, strategy: Strategy, precision: Precision, imbalance: float = 1.0) -> float:
    """Per token, what one routed layer's dispatch holds at its peak under ep (0 without): the
    rows it sends and the busiest rank's rows received, each ``k * dim`` in the compute dtype."""
    e = config.experts
    if e is None or strategy.ep == 1:
        return 0.0
    split = strategy.tp if strategy.sp else 1
    return precision.param_bytes * e.per_token * config.dim * (1 + imbalance) / split


def kept_activation_bytes(
    config: ModelConfig,
    strategy: Strategy,
    length: int,
    precision: Precision = FP32,
    loss: Loss = CHUNKED,
    imbalance: float = 1.0,
) -> float:
    """What one sequence keeps from forward to backward on one device (what
    ``memory_measure.measured_activation_bytes`` counts); ``imbalance``: under ep, the busiest
    rank's routed rows over the mean."""
    length = local_tokens(length, strategy.cp)  # a cp rank keeps its own zig-zag chunks only
    layer, head = _per_token(config, strategy, precision, loss, imbalance)
    layer -= recomputed_bytes(config, strategy, precision)  # sel: dropped in forward, recomputed in backward
    c = precision.param_bytes
    region = strategy.tp if strategy.sp else 1
    # with sp on gloo, the first block's input is a view of the embedding's whole output
    first = c * config.dim * (1 - 1 / strategy.tp) if strategy.sp else 0.0
    if strategy.ckpt:
        # the residual stream; without sp, tensor parallelism also hands each block the
        # un-reduced partial sum its all-reduce reads
        inputs = 1 if strategy.sp or strategy.tp == 1 else 2
        block_input = inputs * c * config.dim / region
        return length * (config.n_layers * block_input + first + strategy.pp * head)
    return length * (config.n_layers * layer + first + strategy.pp * head)  # the last stage: pp heads in flight


def activation_bytes(
    config: ModelConfig,
    strategy: Strategy,
    length: int,
    precision: Precision = FP32,
    loss: Loss = CHUNKED,
    imbalance: float = 1.0,
) -> float:
    """Activations one sequence needs on one device at its peak: what it keeps for backward,
    with checkpointing one block recomputed on top, what the loss's backward holds
    (``loss_peak_bytes``); with context parallelism what travels, with expert parallelism one
    layer's dispatch buffers (``dispatch_bytes``)."""
    kept = kept_activation_bytes(config, strategy, length, precision, loss, imbalance)
    tokens = local_tokens(length, strategy.cp)
    if strategy.ckpt:
        kept += tokens * _per_token(config, strategy, precision, loss, imbalance)[0]
    kept += tokens * recomputed_bytes(config, strategy, precision)  # sel: one layer's
    kept += loss_peak_bytes(config.vocab_size / strategy.tp, tokens, precision, loss)  # one micro-batch's
    kept += tokens * dispatch_bytes(config, strategy, precision, imbalance)
    return kept + in_flight_bytes(config, strategy, length, precision)


@functools.lru_cache(maxsize=64)  # planning asks for it per strategy, for the same few configurations
def expert_params(config: ModelConfig) -> int:
    """The routed experts' weights (what ep splits and tp replicates), every layer's."""
    total = 0
    for name, shape in config.param_shapes().items():
        if is_expert(name):
            total += functools.reduce(lambda a, b: a * b, shape, 1)
    return total


def device_params(config: ModelConfig, strategy: Strategy) -> float:
    """Parameters one device of ``strategy`` holds, averaged over its pipeline stages: every one
    split over tp x pp, but the routed experts', split over ep x pp (tp replicates them)."""
    experts = expert_params(config)
    return (config.n_params - experts) / (strategy.tp * strategy.pp) + experts / (strategy.ep * strategy.pp)


def model_state_bytes(config: ModelConfig, strategy: Strategy, precision: Precision = FP32) -> float:
    """Parameters (the compute copy) and gradients of one strategy's shard (``device_params``;
    master weights and AdamW moments live on the instantiation strategy only and are counted there)."""
    return (precision.param_bytes + precision.grad_bytes) * device_params(config, strategy)


def budget_holding(config: ModelConfig, strategy: Strategy, length: int, precision: Precision = FP32) -> float:
    """The per-device memory budget at which ``strategy`` just holds sequences of ``length``
    (benchmarks and the demo declare budgets this way on CPU)."""
    return model_state_bytes(config, strategy, precision) + activation_bytes(config, strategy, length, precision)


def size_text(size: float) -> str:
    """``size`` bytes in the unit that reads best, three significant digits: "4.77 MiB",
    "13.5 GiB", "512 bytes" (a budget of 5e6 is never "0.00 GiB")."""
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.0f} byte{'' if size == 1 else 's'}"


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
        f"a memory budget of {size_text(budget)} per device is below what the model states of {worst} "
        f"alone need: {size_text(states[worst])} per device (the {precision} parameters and gradients of "
        f"{config.name}, "
        f"split over tp x pp = {worst.tp * worst.pp}); raise memory_budget above {states[worst]:.0f} bytes "
        f"(by the model's shapes about {holding:.0f} bytes, {size_text(holding)}, hold its sequences of up to "
        f"{longest[worst]} tokens) or use a strategy that shards the model states (more tp or pp)"
    )
