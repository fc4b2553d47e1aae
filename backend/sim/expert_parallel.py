"""Expert parallelism's traffic on a simulated cluster, per micro-batch of one ep group.

An ep group is ``ep`` consecutive data-parallel replicas (``Strategy.ep_group``): its ranks are
``cp x tp`` apart in the (pp, dp, cp, tp) mesh, inside a server while ``ep x cp x tp`` devices fit
one, else spread over servers. Every rank routes the tokens it holds (tensor parallelism
replicates the experts, so without sequence parallelism each tp rank routes, sends and computes
its replica's tokens whole; with sp its share) and, per routed layer, as
``parallel.expert_parallel`` runs it:

- forward: the rows' counts (a few integers), the routed rows (``k x dim`` per token, the
  compute dtype), the rows' expert ids (one int64 each) and the experts' outputs back: four
  all-to-alls, two of them carrying rows; a checkpointed forward runs them again;
- backward: the outputs' gradients to the experts and the rows' gradients back: two more.

Each all-to-all sends ``(ep - 1) / ep`` of a rank's rows to its peers (``context_parallel.
exchange_s``: NVLink inside a server, the server's network shared by its devices across servers,
the two at once), and none overlaps compute. The group waits for its busiest rank, which
receives (and so computes, and sends back) ``imbalance`` times the mean rows: routing is not
even. ``uniform_imbalance`` is that factor where every token picks its ``k`` experts uniformly,
the expectation of the most loaded of ``ep`` ranks (a normal approximation of the multinomial
counts, Blom's plotting position for the expected maximum); routing random tokens through
``models.experts.route`` with the engine's initial router weights gives the same within a
percent (``benchmarks/moe_sim.py`` measures both in its run). A trained router balanced by its
auxiliary loss is even on average but varies between micro-batches: give ``Setup.imbalance``
to price that. Every all-to-all also pays the device's latency once per peer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.context_parallel import exchange_s
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.memory import routed_layers

ID_BYTES = 8  # a routed row's expert id travels as int64
SMALL_EXCHANGES = 2  # per routed layer and forward pass: the counts and the ids (bytes apart)


def uniform_imbalance(rows: float, ep: int) -> float:
    """The expected busiest of ``ep`` ranks' routed rows over the mean, where each of the
    group's ``ep x rows`` rows lands on a rank uniformly (1 for ep 1): ``1 + z * sqrt((1 - 1/ep)
    / rows)``, ``z`` the expected maximum of ``ep`` standard normals."""
    if ep == 1 or rows <= 0:
        return 1.0
    z = NormalDist().inv_cdf((ep - 0.375) / (ep + 0.25))
    return 1.0 + z * math.sqrt((1 - 1 / ep) / rows)


def routed_rows(config: ModelConfig, strategy: Strategy, tokens: float) -> float:
    """(token, expert) rows a device routes for a micro-batch of ``tokens``: its share of the
    tokens (over cp, and over tp with sp) times the experts per token (0 without experts)."""
    if config.experts is None:
        return 0.0
    split = strategy.tp if strategy.sp else 1
    return tokens / strategy.cp / split * config.experts.per_token


@dataclass(frozen=True)
class ExpertTraffic:
    """What one strategy's expert parallelism adds to a micro-batch on one cluster (nothing
    without ep). ``imbalance``: the busiest rank's rows over the mean."""

    config: ModelConfig
    strategy: Strategy
    cluster: Cluster
    precision: Precision
    imbalance: float = 1.0

    @property
    def active(self) -> bool:
        return self.strategy.ep > 1 and self.config.experts is not None

    @property
    def forward_passes(self) -> int:
        return 2 if self.strategy.ckpt else 1

    @property
    def row_exchanges(self) -> int:
        """All-to-alls carrying rows per routed layer: dispatch and combine each forward pass,
        their gradients backward."""
        return 2 * self.forward_passes + 2

    def members_per_server(self) -> int:
        """How many ranks of one ep group share a server."""
        s = self.strategy
        return min(s.ep, max(1, self.cluster.devices_per_node // (s.cp * s.tp)))

    def row_bytes(self, tokens: float) -> float:
        """What the busiest rank of the group sends (and receives) in one row exchange."""
        return routed_rows(self.config, self.strategy, tokens) * self.config.dim * self.precision.param_bytes

    def exchange_s(self, nbytes: float) -> float:
        """One all-to-all over the ep group of ``nbytes`` per device, without latency."""
        return exchange_s(nbytes * self.imbalance, self.strategy.ep, self.members_per_server(), self.cluster)

    def seconds(self, tokens: float) -> float:
        """The all-to-alls of a micro-batch of ``tokens``, every routed layer (latency apart)."""
        if not self.active:
            return 0.0
        rows = self.row_exchanges * self.exchange_s(self.row_bytes(tokens))
        ids = self.forward_passes * self.exchange_s(routed_rows(self.config, self.strategy, tokens) * ID_BYTES)
        return routed_layers(self.config) * (rows + ids)

    def latency_steps(self) -> int:
        """Messages per micro-batch whose latency is paid whatever the tokens: every all-to-all's
        peers, the counts' and ids' included."""
        if not self.active:
            return 0
        exchanges = self.row_exchanges + SMALL_EXCHANGES * self.forward_passes
        return routed_layers(self.config) * exchanges * (self.strategy.ep - 1)
