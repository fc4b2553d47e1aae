"""Context parallelism's traffic on a simulated cluster, per micro-batch of one cp group.

A cp group's ranks are ``tp`` apart in the (pp, dp, cp, tp) mesh: it stays inside a server
while ``cp x tp`` devices fit one, else it spans ``cp x tp / devices per server`` servers.

- Ring attention (``cp{N}``): per layer, forward passes every rank's key/value block round the
  ring in ``cp - 1`` steps, backward passes the blocks again with their gradients (twice the
  bytes), a checkpointed forward once more. Step ``i``'s transfer overlaps block ``i``'s
  attention: each step exposes only what its transfer takes beyond one block's attention (a
  rank's attention work is even over its ``cp`` blocks: zig-zag chunks). A ring crossing servers
  shares each server's network with the other rings crossing it.
- Ulysses (``ul{N}``): per layer forward four all-to-alls (q, k, v from sequence to heads, the
  output back) and four backward, not overlapped; each device sends ``(cp - 1) / cp`` of its
  share, the part bound for other servers through its server's network, which every device of
  the server uses at once. Around every all-to-all a rank copies its parts twice (packed to send,
  put back in order on receipt), at the device's memory bandwidth.
Every ring step and all-to-all also pays the device's latency (counted in the micro-batch's
fixed cost: it does not grow with the tokens).

Splitting attention into blocks is not free either, transfers apart (``RING_STEP``, measured on
an H200 by ``benchmarks/ring_blocks.py`` and fitted by ``sim.paper.calibrate_ring``): every ring step
launches a block's kernels and merges its rows into the running output in fp32, so a rank's
attention takes its share of the whole plus a fixed time and memory traffic per step.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import Precision
from hotswitch.backend.strategy import Strategy

ULYSSES_ALL_TO_ALLS = 4  # per layer and pass: q, k, v to heads; the output back to sequence
ULYSSES_COPIES = 2  # per all-to-all: its parts packed before, put back in order after


@dataclass(frozen=True)
class RingStep:
    """What one ring step of one layer costs a rank beyond its share of the attention, forward
    and backward: ``seconds`` whatever it holds (the block's kernel launches), and
    ``bytes_per_element`` of device memory traffic per element of its local bf16 queries (heads x
    tokens x head_dim: the merge, the casts, the shorter kernels)."""

    seconds: float
    bytes_per_element: float

    def split_s(self, heads: int, local_tokens: float, head_dim: int, cp: int, hbm_bw: float) -> float:
        """A rank's ``cp`` steps of one layer, forward and backward, for ``heads`` of its own."""
        return cp * (self.seconds + self.bytes_per_element * heads * local_tokens * head_dim / hbm_bw)


RING_STEP = RingStep(seconds=3.40e-4, bytes_per_element=71.4)  # the fit of sim.paper.calibrate_ring


def members_per_server(strategy: Strategy, cluster: Cluster) -> int:
    """How many ranks of one cp group share a server."""
    return min(strategy.cp, max(1, cluster.devices_per_node // strategy.tp))


def ring_bandwidth(strategy: Strategy, cluster: Cluster) -> float:
    """Bytes/s one rank sends to the next of its cp ring: NVLink inside a server; across
    servers the server's network shared by the rings leaving it at once."""
    if strategy.cp * strategy.tp <= cluster.devices_per_node:
        return cluster.intra_bw
    shared = cluster.inter_bw * members_per_server(strategy, cluster) / cluster.devices_per_node
    return min(cluster.intra_bw, shared)


def all_to_all_s(nbytes: float, strategy: Strategy, cluster: Cluster) -> float:
    """One all-to-all over the cp group of ``nbytes`` per device, without latency (``exchange_s``)."""
    return exchange_s(nbytes, strategy.cp, members_per_server(strategy, cluster), cluster)


def exchange_s(nbytes: float, ranks: int, here: int, cluster: Cluster) -> float:
    """One all-to-all of ``nbytes`` per device over a group of ``ranks``, ``here`` of them on each
    server, every device of a server in such a group at once, without latency: each sends
    ``1 / ranks`` of its bytes to every other member; the slower of its NVLink part and its
    server's network carrying every device's off-server part."""
    intra = nbytes * (here - 1) / ranks / cluster.intra_bw
    inter = cluster.devices_per_node * nbytes * (ranks - here) / ranks / cluster.inter_bw
    return max(intra, inter)


@dataclass(frozen=True)
class ContextTraffic:
    """What one strategy's context parallelism adds to a micro-batch on one cluster."""

    config: ModelConfig
    strategy: Strategy
    cluster: Cluster
    precision: Precision

    @property
    def forward_passes(self) -> int:
        return 2 if self.strategy.ckpt else 1

    @property
    def layer_passes(self) -> int:
        """Passes through every layer: forward (again when checkpointed) and backward."""
        return self.config.n_layers * (self.forward_passes + 1)

    def kv_block_bytes(self, tokens: int) -> float:
        """One rank's keys and values for a micro-batch of ``tokens`` (its share: over cp and tp)."""
        s = self.strategy
        kv = self.config.n_kv_heads * self.config.head_size
        return 2 * tokens / s.cp * kv / s.tp * self.precision.param_bytes

    def ring_exposed_s(self, tokens: int, attention_s: float) -> float:
        """Ring transfers a micro-batch of ``tokens`` leaves exposed, given its attention's
        seconds on one device (forward and backward, every layer; 1 : 2.5 as ``flops_parts``)."""
        s = self.strategy
        layers = self.config.n_layers
        if s.cp == 1 or s.ulysses:
            return 0.0
        bw = ring_bandwidth(s, self.cluster)
        forward_block = attention_s / 3.5 / layers / s.cp  # one block's forward attention, one layer
        send = self.kv_block_bytes(tokens) / bw
        forward = max(0.0, send - forward_block)
        backward = max(0.0, 2 * send - 2.5 * forward_block)  # keys, values and their gradients
        return layers * (s.cp - 1) * (self.forward_passes * forward + backward)

    def ulysses_bytes(self, tokens: int) -> float:
        """What one rank's four all-to-alls of one layer and pass carry for a micro-batch of
        ``tokens``: its share of q, k, v and the attention's output (0 without Ulysses)."""
        s = self.strategy
        if s.cp == 1 or not s.ulysses:
            return 0.0
        kv = self.config.n_kv_heads * self.config.head_size
        return tokens / s.cp * (2 * self.config.q_dim + 2 * kv) / s.tp * self.precision.param_bytes

    def ulysses_s(self, tokens: int) -> float:
        """The all-to-alls of a micro-batch of ``tokens``, forward (again when checkpointed) and
        backward, every layer."""
        return self.layer_passes * all_to_all_s(self.ulysses_bytes(tokens), self.strategy, self.cluster)

    def ulysses_copy_bytes(self, tokens: int) -> float:
        """Device memory Ulysses' re-layouts move on one rank (``parallel.ulysses``): each
        all-to-all's parts are packed before it (a copy) and put back in order after it
        (another), each read and written once; every layer, forward (again when checkpointed)
        and backward. Counted, not measured: like the ring's merges, they run at the memory's
        bandwidth."""
        return ULYSSES_COPIES * 2 * self.ulysses_bytes(tokens) * self.layer_passes

    def seconds(self, tokens: int, attention_s: float) -> float:
        """Ring or Ulysses traffic of a micro-batch, as it adds to its time (latency apart)."""
        return self.ring_exposed_s(tokens, attention_s) + self.ulysses_s(tokens)

    def latency_steps(self) -> int:
        """Messages per micro-batch whose latency is paid whatever the tokens: ring steps (keys
        and values forward, again with their gradients backward) or all-to-alls' peers."""
        s = self.strategy
        layers = self.config.n_layers
        if s.cp == 1:
            return 0
        if s.ulysses:
            return self.layer_passes * ULYSSES_ALL_TO_ALLS * (s.cp - 1)
        return layers * (self.forward_passes + 2) * (s.cp - 1)
