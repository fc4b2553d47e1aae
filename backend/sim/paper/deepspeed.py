"""The paper's DeepSpeed baseline (ZeRO-1/2/3 with Ulysses sequence parallelism), through the
simulator's cost model. How the authors fed it is not in their public code: this takes the
usual Megatron-DeepSpeed GPT feed, documents concatenated into rows of the context with dense
causal attention over the row (an ASSUMPTION, stated with every figure it gives).

Per micro-batch of ``mbs`` rows on one Ulysses group of ``u`` devices (the sequence split over
them, weights whole on each, no tensor or pipeline parallelism):
- compute: the rows' FLOPs over ``u`` devices, matmuls at the efficiency of ``tokens / u``;
- Ulysses: per layer two all-to-alls around attention forward (q, k, v in; the output back) and
  two backward, each device sending (u - 1)/u of its share; a third pass with recompute;
- ZeRO-3: the parameters all-gathered over every device in forward and again in backward, the
  gradients reduce-scattered, every micro-batch; ZeRO-2: the gradients reduce-scattered every
  micro-batch; ZeRO-1: one all-reduce per step;
- the calibrated fixed cost per layer and micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.sim.compute import SimulatedStrategy, flops_parts, ring_s
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.memory import WHOLE, activation_bytes

MBS_SWEEP = (32, 16, 8, 4, 2, 1)
STAGES = (1, 2, 3)


@dataclass(frozen=True)
class DeepSpeedRun:
    zero: int
    ulysses: int
    mbs: int
    recompute: bool
    step_s: float
    memory_bytes: float

    def __str__(self) -> str:
        return f"zero{self.zero} ulysses{self.ulysses} mbs{self.mbs}" + (" recompute" if self.recompute else "")


def _memory(setup: Setup, zero: int, u: int, mbs: int, recompute: bool) -> float:
    c = setup.precision
    n = setup.config.n_params
    world = setup.cluster.world_size
    params = c.param_bytes * n / (world if zero == 3 else 1)
    grads = c.grad_bytes * n / (world if zero >= 2 else 1)
    acts = activation_bytes(setup.config, Strategy(ckpt=recompute), setup.context, c, WHOLE) / u
    return params + grads + c.master_bytes * n / world + mbs * acts


def _micro_batch_s(setup: Setup, sim: SimulatedStrategy, zero: int, u: int, mbs: int) -> float:
    config = setup.config
    spec = setup.spec
    ckpt = sim.strategy.ckpt
    dense, attention = flops_parts(config, setup.context, ckpt)
    tokens = mbs * setup.context
    compute = sim.flops_s(tokens // u, mbs * dense / u, mbs * attention / u)
    per_node = setup.cluster.devices_per_node
    a2a_bw = spec.intra_bw if u <= per_node else min(spec.intra_bw, spec.inter_bw / per_node)
    share = tokens / u * config.dim * setup.precision.param_bytes * (u - 1) / u
    a2a = (3 if ckpt else 2) * 4 * config.n_layers * share / a2a_bw if u > 1 else 0.0
    world = setup.cluster.world_size
    bw = sim.links.dp_bw
    params = setup.precision.param_bytes * config.n_params
    gather = (3 if ckpt else 2) * ring_s(params, world, bw, spec.latency_s, passes=1) if zero == 3 else 0.0
    scatter = ring_s(setup.precision.grad_bytes * config.n_params, world, bw, spec.latency_s, 1) if zero >= 2 else 0.0
    return sim.overhead_s() + compute + a2a + gather + scatter


def deepspeed_step_s(setup: Setup, rows: int, zero: int, u: int, mbs: int, recompute: bool) -> float:
    world = setup.cluster.world_size
    sim = SimulatedStrategy(
        setup.config, Strategy(dp=world, ckpt=recompute), setup.cluster, setup.spec, setup.precision
    )
    per_replica = -(-rows // (world // u))
    micro_batches = -(-per_replica // mbs)
    seconds = micro_batches * _micro_batch_s(setup, sim, zero, u, mbs)
    if zero == 1:
        seconds += ring_s(
            setup.precision.grad_bytes * setup.config.n_params, world, sim.links.dp_bw, setup.spec.latency_s
        )
    return seconds + setup.update_s(Strategy(dp=world))


def deepspeed_sweep(setup: Setup, rows: int) -> DeepSpeedRun:
    """The fastest (ZeRO stage, Ulysses degree, MBS, recompute) that fits; raises, naming the
    limit, when none does. Ulysses degrees divide both the GPUs and the attention heads."""
    world = setup.cluster.world_size
    usable = setup.spec.memory - setup.spec.reserved
    degrees = [u for u in range(1, world + 1) if world % u == 0 and setup.config.n_heads % u == 0]
    best = None
    smallest = None
    for zero in STAGES:
        for u in degrees:
            for recompute in (False, True):
                for mbs in MBS_SWEEP:
                    need = _memory(setup, zero, u, mbs, recompute)
                    smallest = min(smallest or need, need)
                    if need > usable:
                        continue
                    seconds = deepspeed_step_s(setup, rows, zero, u, mbs, recompute)
                    if best is None or seconds < best.step_s:
                        best = DeepSpeedRun(zero, u, mbs, recompute, seconds, need)
    if best is None:
        raise ValueError(
            f"deepspeed-paper: no ZeRO stage and Ulysses degree holds one {setup.context}-token row: it needs at "
            f"least {(smallest or 0) / 2**30:.1f} GiB per device, the limit is {usable / 2**30:.1f} GiB; use more GPUs"
        )
    return best
