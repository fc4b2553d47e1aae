"""A strategy's cost on a described cluster, from FLOPs and bytes: what ``train.profile``
measures on real ranks, computed instead, in the same ``StrategyCost`` form (so ``auto``, the
dispatcher and ``CostModel.step_s`` run unchanged on it).

Per micro-batch on one dp replica (latency through all its pipeline stages):
- compute: the FLOPs it executes (``executed_flops``) over tp devices at the device's
  efficiency for that micro-batch's size;
- tensor parallelism: per layer two collectives forward and two backward (all-reduce, or with
  sequence parallelism all-gather + reduce-scatter: the same bytes; with sp the backward also
  all-gathers the column-parallel linears' inputs again, as the engine does), a ring over the tp group at
  NVLink speed inside a server, at the server's network share across servers; not overlapped
  with compute (Megatron's default);
- pipeline: the activations between stages, forward and backward, split over tp;
- checkpointing: the forward again, with its collectives; selective recompute: the norms' outputs
  and the FFN's activation again, elementwise, at the device's memory bandwidth;
- context parallelism: every FLOP and activation over cp as well (zig-zag chunks balance causal
  attention), and the ring's or Ulysses' traffic (``sim.context_parallel``);
- a mixture of experts: the picked experts' FLOPs as ``models.flops.matmul_params`` counts them,
  each device computing the tokens it routes (tensor parallelism replicates the experts: without
  sp every tp rank computes its replica's whole, with sp its share; a routed layer has only
  attention's tp collectives); expert parallelism leaves a replica's FLOPs as they are, the
  busiest rank of an ep group computing ``imbalance`` times its share, and adds the all-to-alls
  (``sim.expert_parallel``); the experts' gradients are summed over the ranks holding the same
  experts, the rest over the ep group too (as ``train.loop.stages.reduce_over_replicas`` does).
  The grouped kernel's efficiency is the dense matmuls' at the micro-batch's tokens: that ep
  hands each expert ``ep`` times the rows (larger matmuls) is not modelled.
Each collective also pays the device's latency per ring step, and every layer a micro-batch
passes a calibrated fixed cost (kernel launches, synchronisation): the fixed cost of a micro-batch.

Two views of the same costs: ``SimulatedStrategy.cost`` is what the trainer's profile would
measure at its lengths and fit (a quadratic per strategy: ``auto`` plans on it), and
``SimulatedCost`` is the device itself, every micro-batch at its exact seconds (a simulated
step is timed on it). The fit errs where efficiency grows with a micro-batch's size (wide tensor
parallelism at long lengths), as it would on measurements; the paper's baselines
(``sim.paper.megatron``, ``sim.paper.deepspeed``) are timed on the device alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.flops import attended_pairs, matmul_params
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.context_parallel import RING_STEP, ContextTraffic
from hotswitch.backend.sim.device import DeviceSpec
from hotswitch.backend.sim.expert_parallel import ExpertTraffic
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.cost import Quadratic, StrategyCost, per_sequence
from hotswitch.backend.train.planning.memory import (
    activation_bytes,
    device_params,
    expert_params,
    model_state_bytes,
    routed_layers,
)
from hotswitch.backend.train.planning.selective import recompute_traffic_bytes

UPDATE_BYTES = 30  # per parameter, AdamW: fp32 master read+write 8, grad read 4, moments read+write 16, bf16 copy 2


def flops_parts(config: ModelConfig, length: int, ckpt: bool = False) -> tuple[float, float]:
    """(matrix-multiply, attention) FLOPs one sequence executes in forward and backward: 6 per
    matmul weight per token; a fused causal attention kernel (flash attention) computes half the
    L x L scores, forward (2 products) and backward (5, recomputing the scores): 7/12 of PaLM's
    12*layers*dim*L per token. Checkpointing runs the forward twice."""
    dense = 2.0 * matmul_params(config) * length
    attention = attention_forward_flops(config, length)
    again = 2 if ckpt else 1
    return dense * again + 2 * dense, attention * again + 2.5 * attention


def attention_forward_flops(config: ModelConfig, length: int) -> float:
    """One sequence's causal attention forward, every layer: two products over half the scores."""
    return 4.0 * config.q_dim * attended_pairs(config, length)


def expert_flops(config: ModelConfig, length: int, ckpt: bool = False) -> float:
    """The picked experts' part of ``flops_parts``' matmul FLOPs for one sequence (0 without experts)."""
    e = config.experts
    if e is None:
        return 0.0
    weights = 3 * config.dim * e.ffn_dim * e.per_token * routed_layers(config)
    return (2 * (2 if ckpt else 1) + 4) * weights * length


def executed_flops(config: ModelConfig, length: int, ckpt: bool = False) -> float:
    """All FLOPs of ``flops_parts``."""
    return sum(flops_parts(config, length, ckpt))


@dataclass(frozen=True)
class Links:
    """Per-device bandwidth of each kind of group of one strategy on one cluster (``dp_bw``: the
    replica group, dp x cp, that reduces gradients; under ep ``ep_bw``: the ep group's ring,
    ``expert_dp_bw``: the ranks holding the same experts; cp's own traffic: ``sim.context_parallel``)."""

    tp_bw: float
    dp_bw: float
    pp_bw: float
    ep_bw: float = 0.0
    expert_dp_bw: float = 0.0

    @classmethod
    def of(cls, strategy: Strategy, cluster: Cluster) -> Links:
        """A group within a server talks over NVLink. A ring spanning servers enters and leaves
        each server once, so the server's network is shared by as many rings as cross it at
        once: the server's devices over the group's members on it. Pipeline sends across servers
        share it among all the server's devices."""
        per_node = cluster.devices_per_node
        s = strategy

        def ring_bw(members_per_node: int, spans: bool) -> float:
            shared = cluster.inter_bw * members_per_node / per_node
            return min(cluster.intra_bw, shared) if spans else cluster.intra_bw

        tp = ring_bw(min(s.tp, per_node), s.tp > per_node)
        dp = ring_bw(min(s.replicas, max(1, per_node // s.tp)), s.replicas * s.tp > per_node)  # dp x cp
        pp = ring_bw(1, s.world_size > per_node)
        ep = ring_bw(min(s.ep, max(1, per_node // (s.cp * s.tp))), s.ep * s.cp * s.tp > per_node)
        # every ep-th replica, with its cp ranks (beside each other while cp x tp fit a server)
        beside = s.cp * max(1, per_node // (s.ep * s.cp * s.tp)) if s.cp * s.tp <= per_node else 1
        experts = ring_bw(min(s.replicas // s.ep, beside), s.replicas * s.tp > per_node)
        return cls(tp, dp, pp, ep, experts)


def ring_s(nbytes: float, ranks: int, bandwidth: float, latency: float, passes: int = 2) -> float:
    """A ring collective over ``ranks``: ``passes`` (2 for all-reduce, 1 for all-gather or
    reduce-scatter) times (ranks - 1)/ranks of the bytes, each step paying ``latency``."""
    if ranks == 1:
        return 0.0
    return passes * ((ranks - 1) / ranks * nbytes / bandwidth + (ranks - 1) * latency)


@dataclass(frozen=True)
class SimulatedStrategy:
    """One strategy's micro-batch costs on one cluster (the pieces ``StrategyCost`` sums)."""

    config: ModelConfig
    strategy: Strategy
    cluster: Cluster
    spec: DeviceSpec
    precision: Precision
    imbalance: float = 1.0  # under ep: the busiest rank's routed rows over the mean (``sim.expert_parallel``)

    @property
    def links(self) -> Links:
        return Links.of(self.strategy, self.cluster)

    @property
    def experts(self) -> ExpertTraffic:
        return ExpertTraffic(self.config, self.strategy, self.cluster, self.precision, self.imbalance)

    @property
    def expert_factor(self) -> float:
        """How many times a device computes the experts' FLOPs against the dense ones' 1/tp share:
        tp replicates the experts (split with sp only), the busiest ep rank computes ``imbalance``
        times its share."""
        s = self.strategy
        load = self.imbalance if s.ep > 1 else 1.0
        return load * s.tp / (s.tp if s.sp else 1)

    def flops_s(self, tokens: int, dense: float, attention: float, experts: float = 0.0) -> float:
        """Seconds of a micro-batch of ``tokens`` executing ``dense`` matmul (``experts`` of them
        the routed experts', ``expert_factor``) and ``attention`` FLOPs: matmuls at the
        efficiency of their size, attention at the attention kernel's."""
        s = self.strategy
        spec = self.spec
        efficiency = spec.efficiency(tokens / s.cp, self.config.dim, s.tp)
        dense += experts * (self.expert_factor - 1)
        return (dense / efficiency + attention / spec.attention_mfu) / (s.tp * s.cp) / spec.peak_flops

    def compute_s(self, rows: int, length: int) -> float:
        ckpt = self.strategy.ckpt
        dense, attention = flops_parts(self.config, length, ckpt)
        experts = rows * expert_flops(self.config, length, ckpt)
        return self.flops_s(rows * length, rows * dense, rows * attention, experts) + self.recompute_s(rows * length)

    def recompute_s(self, tokens: int) -> float:
        """Selective recompute (0 without ``sel``): the norms' outputs and the FFN's activation
        computed again in backward, elementwise, at the device's memory bandwidth."""
        traffic = recompute_traffic_bytes(self.config, self.strategy, self.precision)
        return tokens / self.strategy.cp * self.config.n_layers * traffic / self.spec.hbm_bw

    def collectives(self) -> float:
        """Tensor-parallel collectives per micro-batch, in all-reduces' bytes: 4 per layer, 6 with
        checkpointing, one more with sequence parallelism (the two all-gathers again in backward);
        half of that in a routed layer without a shared expert, whose mixture needs none."""
        s = self.strategy
        per_layer = (6 if s.ckpt else 4) + (1 if s.sp else 0)
        e = self.config.experts
        halved = routed_layers(self.config) if e and self.config.active_ffn_dim == e.per_token * e.ffn_dim else 0
        return per_layer * (self.config.n_layers - halved / 2) if s.tp > 1 else 0

    def comm_s(self, tokens: int) -> float:
        """Tensor-parallel and pipeline traffic of a micro-batch of ``tokens``, without latency."""
        s = self.strategy
        links = self.links
        c = self.precision.param_bytes
        activations = tokens / s.cp * self.config.dim * c
        tp = self.collectives() * ring_s(activations, s.tp, links.tp_bw, 0.0)
        pp = 2 * (s.pp - 1) * activations / s.tp / links.pp_bw
        return tp + pp + self.experts.seconds(tokens)

    def overhead_s(self) -> float:
        """What a micro-batch pays whatever it holds: every collective's and p2p's latency, and
        the device's fixed cost per layer (half again for a checkpointed forward)."""
        s = self.strategy
        latency = self.spec.latency_s
        layers = self.config.n_layers * self.spec.layer_overhead_s * (1.5 if s.ckpt else 1.0)
        context = (self.context.latency_steps() + self.experts.latency_steps()) * latency
        return layers + self.collectives() * 2 * (s.tp - 1) * latency + 2 * (s.pp - 1) * latency + context

    @property
    def context(self) -> ContextTraffic:
        return ContextTraffic(self.config, self.strategy, self.cluster, self.precision)

    def context_s(self, lengths: list[int]) -> float:
        """Context parallelism's traffic for a micro-batch of ``lengths`` (0 without cp): ring
        transfers overlap each block's attention, Ulysses' all-to-alls do not; what splitting
        attention costs the ring's blocks, and Ulysses' re-layout copies."""
        s = self.strategy
        if s.cp == 1:
            return 0.0
        forward = sum(attention_forward_flops(self.config, n) for n in lengths)
        forward_s = forward / self.spec.attention_mfu / (s.tp * s.cp) / self.spec.peak_flops
        tokens = sum(lengths)
        copies = self.context.ulysses_copy_bytes(tokens) / self.spec.hbm_bw
        return self.context.seconds(tokens, forward_s) + self.ring_split_s(tokens) + copies

    def ring_split_s(self, tokens: int) -> float:
        """What cutting a micro-batch's attention into ring blocks costs beyond its share
        (``RING_STEP``; 0 for Ulysses, which attends whole sequences): every layer, forward
        and backward (the forward's half again where it is checkpointed), as measured in bf16."""
        s = self.strategy
        c = self.config
        if s.cp == 1 or s.ulysses:
            return 0.0
        passes = 1.5 if s.ckpt else 1.0
        per_layer = RING_STEP.split_s(c.n_heads // s.tp, tokens / s.cp, c.head_size, s.cp, self.spec.hbm_bw)
        return c.n_layers * passes * per_layer

    def documents_s(self, lengths: list[int]) -> float:
        """A micro-batch of whole documents packed without padding, each attending only to
        itself (varlen attention, Megatron-LM's ``--sequence-packing``): latency through all
        stages."""
        ckpt = self.strategy.ckpt
        parts = [flops_parts(self.config, n, ckpt) for n in lengths]
        tokens = sum(lengths)
        experts = expert_flops(self.config, tokens, ckpt)
        compute = self.flops_s(tokens, sum(d for d, _ in parts), sum(a for _, a in parts), experts)
        compute += self.recompute_s(tokens)
        return self.overhead_s() + compute + self.comm_s(tokens) + self.context_s(lengths)

    def micro_batch_s(self, rows: int, length: int) -> float:
        tokens = rows * length
        return self.overhead_s() + self.compute_s(rows, length) + self.comm_s(tokens) + self.context_s([length] * rows)

    def sync_s(self) -> float:
        """Reducing the strategy's gradient shard (``memory.device_params``) over its dp x cp
        replicas (a ring all-reduce); under ep every gradient over the ranks holding the same
        experts, then the rest over the ep group."""
        s = self.strategy
        c = self.precision.grad_bytes
        links = self.links
        nbytes = c * device_params(self.config, s)
        if s.ep == 1:
            return ring_s(nbytes, s.replicas, links.dp_bw, self.spec.latency_s)
        dense = c * (self.config.n_params - expert_params(self.config)) / (s.tp * s.pp)
        same_experts = ring_s(nbytes, s.replicas // s.ep, links.expert_dp_bw, self.spec.latency_s)
        return same_experts + ring_s(dense, s.ep, links.ep_bw, self.spec.latency_s)

    def cost(self, lengths: list[int], token_budget: int) -> StrategyCost:
        """What ``train.profile`` would measure and fit: micro-batches filled to the token budget
        at each length and one of a single shortest sequence, split into a fixed cost and seconds
        per sequence as ``train.planning.measure`` splits them (``per_sequence``); bytes per
        sequence."""
        rows = [max(1, token_budget // n) for n in lengths]
        filled = [self.micro_batch_s(r, n) for r, n in zip(rows, lengths, strict=True)]
        overhead, seconds = per_sequence(self.micro_batch_s(1, lengths[0]), filled, rows)
        memory = [
            activation_bytes(self.config, self.strategy, n, self.precision, imbalance=self.imbalance) for n in lengths
        ]
        return StrategyCost(
            time=Quadratic.fit(lengths, seconds),
            memory=Quadratic.fit(lengths, memory),
            static_bytes=model_state_bytes(self.config, self.strategy, self.precision),
            sync_s=self.sync_s(),
            increment=1.0 / self.strategy.pp,  # 1F1B over balanced stages on separate devices
            overhead=overhead,
        )


def update_seconds(config: ModelConfig, cluster: Cluster, spec: DeviceSpec, precision: Precision, s: Strategy) -> float:
    """AdamW over a device's share of a sharded (distributed) optimizer, bound by memory
    bandwidth, then the updated compute copies gathered over the dp x cp replicas."""
    seconds = UPDATE_BYTES * device_params(config, s) / s.replicas / spec.hbm_bw
    nbytes = precision.param_bytes * device_params(config, s)
    return seconds + ring_s(nbytes, s.replicas, Links.of(s, cluster).dp_bw, spec.latency_s, passes=1)


@dataclass
class SimulatedCost(StrategyCost):
    """A strategy's fitted cost whose micro-batches take what the simulated device takes: the
    fit still deals sequences to replicas and bounds micro-batches (as the trainer's profile
    would), the seconds are exact."""

    simulated: SimulatedStrategy = field(kw_only=True)

    @classmethod
    def of(cls, cost: StrategyCost, simulated: SimulatedStrategy) -> SimulatedCost:
        return cls(**{f.name: getattr(cost, f.name) for f in fields(StrategyCost)}, simulated=simulated)

    def micro_batch_s(self, rows: int, length: int) -> float:
        return self.simulated.micro_batch_s(rows, length)

    def packed_s(self, lengths: Sequence[int]) -> float:
        return self.simulated.documents_s(list(lengths))
