"""The paper's Megatron-LM baseline as its authors ran it (public repository
``Sakura-gh/Megatron-LM``: ``benchmark/llama_baseline.sh`` on branch ``llama``,
``generate_benchmark_scripts.py`` on branch ``sync_files``), through the simulator's cost model:

- one document per sample; ``--sequence-packing``: the MBS documents of a micro-batch are packed
  without padding and attend each to itself (varlen flash attention);
- MBS fixed per run and swept (32, 16, 8, 4, 2, 1): a run must hold MBS documents of the full
  context, whatever the batch holds;
- each data-parallel rank takes a contiguous slice of the 512 documents (no sorting, no
  balancing by predicted time); micro-batches of MBS consecutive documents through 1F1B;
- distributed optimizer (the master weights and moments sharded over dp); no recompute (the
  ``+recompute`` variant checkpoints every layer, for when the engine's activations need it).

The same step is what ``sim.paper.calibrate`` fits the device model on, against the authors' logs.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.compute import SimulatedStrategy, update_seconds
from hotswitch.backend.sim.device import DeviceSpec
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.cost import pipelined_s
from hotswitch.backend.train.planning.memory import WHOLE, activation_bytes, model_state_bytes

MBS_SWEEP = (32, 16, 8, 4, 2, 1)


@dataclass(frozen=True)
class MegatronRun:
    strategy: Strategy
    mbs: int
    step_s: float
    memory_bytes: float  # peak per device: model states, sharded optimizer, MBS full-context documents


def megatron_step_s(
    config: ModelConfig,
    cluster: Cluster,
    spec: DeviceSpec,
    precision: Precision,
    strategy: Strategy,
    mbs: int,
    lengths: list[int],
) -> float:
    """One step of ``lengths`` (documents, or padded rows) as the fork runs it."""
    sim = SimulatedStrategy(config, strategy, cluster, spec, precision)
    share = -(-len(lengths) // strategy.dp)
    replicas = [lengths[r * share : (r + 1) * share] for r in range(strategy.dp)]
    slowest = 0.0
    for docs in replicas:
        latencies = [sim.documents_s(docs[i : i + mbs]) for i in range(0, len(docs), mbs)]
        slowest = max(slowest, pipelined_s(latencies, 1.0 / strategy.pp))
    sync = sim.sync_s() if strategy.dp > 1 else 0.0
    return slowest + sync + update_seconds(config, cluster, spec, precision, strategy)


def megatron_memory(
    config: ModelConfig, spec: DeviceSpec, precision: Precision, strategy: Strategy, mbs: int, context: int
) -> float:
    """Peak bytes per device of a run that must hold ``mbs`` documents of ``context`` tokens."""
    s = strategy
    master = precision.master_bytes * config.n_params / (s.tp * s.pp * s.dp)
    return (
        master + model_state_bytes(config, s, precision) + mbs * activation_bytes(config, s, context, precision, WHOLE)
    )


def megatron_sweep(
    config: ModelConfig,
    cluster: Cluster,
    spec: DeviceSpec,
    precision: Precision,
    layouts: list[Strategy],
    lengths: list[int],
    context: int,
    recompute: bool = False,
) -> MegatronRun:
    """The fastest (layout, MBS) of the sweep that holds MBS full-context documents; raises,
    naming the limit, when none does."""
    usable = spec.memory - spec.reserved
    best = None
    smallest = None
    for layout in layouts:
        s = Strategy(layout.dp, layout.tp, layout.pp, sp=layout.tp > 1, ckpt=recompute)
        for mbs in MBS_SWEEP:
            need = megatron_memory(config, spec, precision, s, mbs, context)
            smallest = min(smallest or need, need)
            if need > usable:
                continue
            seconds = megatron_step_s(config, cluster, spec, precision, s, mbs, lengths)
            if best is None or seconds < best.step_s:
                best = MegatronRun(s, mbs, seconds, need)
    if best is None:
        what = "with recompute" if recompute else "without recompute"
        raise ValueError(
            f"megatron-paper {what}: no layout of {', '.join(str(s) for s in layouts) or 'none'} holds even MBS 1 "
            f"of {context}-token documents: it needs at least {(smallest or 0) / 2**30:.1f} GiB per device, the "
            f"limit is {usable / 2**30:.1f} GiB ({spec.name} less {spec.reserved / 2**30:.0f} GiB reserved); "
            "use more GPUs, a shorter context, or the +recompute variant"
        )
    return best
