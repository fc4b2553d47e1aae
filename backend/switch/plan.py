"""A switch plan: every slice's sender and receiver, fused per peer, and what it costs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import cached_property

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.dist_state import Box


@dataclass(frozen=True)
class Transfer:
    """``box`` of ``name`` goes from ``sender`` to ``receiver`` (a local copy when equal).
    ``accumulate``: the slice is one summand and is added to the destination."""

    name: str
    box: Box
    sender: int
    receiver: int
    accumulate: bool = False

    @property
    def local(self) -> bool:
        return self.sender == self.receiver


@dataclass(frozen=True)
class Message:
    """Slices sent from ``sender`` to ``receiver`` in one buffer, in order. Messages of one
    sender with identical contents share ``buffer`` (packed once, sent to each)."""

    sender: int
    receiver: int
    transfers: tuple[Transfer, ...]
    buffer: int

    @property
    def numel(self) -> int:
        return sum(t.box.numel for t in self.transfers)


@dataclass(frozen=True)
class RankTraffic:
    send_intra: int = 0
    send_inter: int = 0
    recv_intra: int = 0
    recv_inter: int = 0

    @property
    def send(self) -> int:
        return self.send_intra + self.send_inter


@dataclass(frozen=True)
class SwitchPlan:
    """Transfers in canonical order (tensor order, then slice offset, then receiver).
    ``fused``: all slices between two ranks travel in one message, in that order;
    otherwise every slice is a message of its own."""

    algorithm: str
    cluster: Cluster
    itemsize: int
    names: tuple[str, ...]
    transfers: tuple[Transfer, ...]
    zero_first: frozenset[tuple[int, str]] = field(default_factory=frozenset)
    fused: bool = True
    plan_s: float = 0.0

    def adding(self) -> SwitchPlan:
        """The same moves, every slice added to what its destination holds and nothing zeroed
        first: another device group's gradients merged into those already switched there."""
        transfers = tuple(replace(t, accumulate=True) for t in self.transfers)
        return replace(self, transfers=transfers, zero_first=frozenset())

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        """The remote transfers grouped into messages, ordered by (sender, receiver)."""
        groups = defaultdict(list)
        for t in self.transfers:
            if not t.local:
                groups[t.sender, t.receiver].append(t)
        parts = [
            ((sender, receiver), chunk)
            for (sender, receiver), ts in sorted(groups.items())
            for chunk in ([tuple(ts)] if self.fused else [(t,) for t in ts])
        ]
        buffers: dict[tuple, int] = {}
        return tuple(
            Message(s, r, ts, buffers.setdefault((s, tuple((t.name, t.box) for t in ts)), len(buffers)))
            for (s, r), ts in parts
        )

    @cached_property
    def traffic(self) -> list[RankTraffic]:
        counts = [[0, 0, 0, 0] for _ in range(self.cluster.world_size)]
        for t in self.transfers:
            if t.local:
                continue
            size = t.box.numel * self.itemsize
            inter = not self.cluster.same_node(t.sender, t.receiver)
            counts[t.sender][inter] += size
            counts[t.receiver][2 + inter] += size
        return [RankTraffic(*c) for c in counts]

    @property
    def bytes_moved(self) -> int:
        return sum(r.send for r in self.traffic)

    @property
    def packed_bytes(self) -> int:
        """Bytes packed into send buffers once identical buffers are deduplicated."""
        return sum({m.buffer: m.numel for m in self.messages}.values()) * self.itemsize

    @property
    def max_send(self) -> int:
        return max(r.send for r in self.traffic)

    @property
    def time_s(self) -> float:
        return predicted_time(self.traffic, self.cluster)

    def summary(self) -> dict:
        return {
            "algorithm": self.algorithm,
            "transfers": len(self.transfers),
            "messages": len(self.messages),
            "bytes_moved": self.bytes_moved,
            "packed_bytes": self.packed_bytes,
            "max_send": self.max_send,
            "time_s": self.time_s,
            "plan_s": self.plan_s,
        }


def predicted_time(traffic: list[RankTraffic], cluster: Cluster) -> float:
    """Transfer time if every device moves intra-node bytes at ``intra_bw`` (each way)
    and every node's inter-node bytes share its NIC's ``inter_bw`` (each way);
    intra- and inter-node transfers overlap."""
    node_send = [0] * cluster.nodes
    node_recv = [0] * cluster.nodes
    intra = 0
    for rank, r in enumerate(traffic):
        intra = max(intra, r.send_intra, r.recv_intra)
        node_send[cluster.node_of(rank)] += r.send_inter
        node_recv[cluster.node_of(rank)] += r.recv_inter
    return max(intra / cluster.intra_bw, max(node_send + node_recv) / cluster.inter_bw)
