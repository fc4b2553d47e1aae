"""Selective recompute in the planning models: what a ``sel`` strategy drops from the
activations it keeps, and what recomputing it moves (``graph.selective_recompute`` does it).

Per token and layer on one device, in the compute dtype's bytes ``c``: the two RMSNorm outputs
(``c * dim`` each; split over tp with sequence parallelism, whole on every tp rank without) and
the FFN's ``silu(w1 x)`` and ``silu(w1 x) * w3 x`` (``c * ffn`` each, split over tp). Counted
on real ranks, the measurement drops exactly these bytes (tests/backend/train/planning/
test_memory_measured.py). Recomputing them is elementwise: it reads the kept inputs and writes
the dropped values once, no matmul, so it is priced by memory traffic, not FLOPs.
"""

from __future__ import annotations

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import Precision
from hotswitch.backend.strategy import Strategy


def recomputed_bytes(config: ModelConfig, strategy: Strategy, precision: Precision) -> float:
    """Bytes per token and layer that ``strategy`` (if ``sel``) frees after forward and
    computes again in backward, on one device; 0 for other strategies."""
    if not strategy.sel:
        return 0.0
    c = precision.param_bytes
    region = strategy.tp if strategy.sp else 1
    return 2 * c * config.dim / region + 2 * c * config.ffn_dim / strategy.tp


def recompute_traffic_bytes(config: ModelConfig, strategy: Strategy, precision: Precision) -> float:
    """Bytes per token and layer the recomputation reads and writes on one device: each norm
    reads its input and writes its output, silu and the product read the two up-projections and
    write the two values (twice what is dropped; the weights' and the reuse of silu's output
    within the product are left out)."""
    return 2 * recomputed_bytes(config, strategy, precision)
