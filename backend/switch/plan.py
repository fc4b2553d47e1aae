"""A switch plan: every slice's sender and receiver, fused per peer, and what it costs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
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
    Messages between two ranks are fused in that order; a message identical to
    another of the same sender is packed once (``buffer_id``)."""

    algorithm: str
    cluster: Cluster
    itemsize: int
    names: tuple[str, ...]
    transfers: tuple[Transfer, ...]
    zero_first: frozenset[tuple[int, str]] = field(default_factory=frozenset)
    plan_s: float = 0.0

    @cached_property
    def messages(self) -> dict[tuple[int, int], tuple[Transfer, ...]]:
        """(sender, receiver) -> transfers fused into one message, for sender != receiver."""
        fused = defaultdict(list)
        for t in self.transfers:
            if not t.local:
                fused[t.sender, t.receiver].append(t)
        return {peers: tuple(ts) for peers, ts in sorted(fused.items())}

    @cached_property
    def buffer_ids(self) -> dict[tuple[int, int], int]:
        """Messages of one sender with identical contents share a buffer id."""
        ids: dict[tuple[int, int], int] = {}
        seen: dict[tuple, int] = {}
        for (sender, receiver), ts in self.messages.items():
            content = (sender, tuple((t.name, t.box) for t in ts))
            ids[sender, receiver] = seen.setdefault(content, len(seen))
        return ids

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
        sizes = {}
        for peers, ts in self.messages.items():
            sizes[self.buffer_ids[peers]] = sum(t.box.numel for t in ts) * self.itemsize
        return sum(sizes.values())

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
