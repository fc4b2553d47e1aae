"""The devices a job runs on: nodes x devices per node, memory and link bandwidths."""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
GIB = 2**30


@dataclass(frozen=True)
class Cluster:
    """A homogeneous cluster. Global rank ``r`` lives on node ``r // devices_per_node``.

    ``intra_bw`` is what one device can send to peers on its own node (bytes/s);
    ``inter_bw`` is one node's network bandwidth, shared by all its devices (bytes/s).
    """

    nodes: int
    devices_per_node: int
    device: str = "cpu"
    memory: int = 16 * GIB
    intra_bw: float = 10 * GB
    inter_bw: float = 10 * GB

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.devices_per_node < 1:
            raise ValueError(
                f"a cluster needs at least one node and one device per node, "
                f"got nodes={self.nodes}, devices_per_node={self.devices_per_node}"
            )
        if self.intra_bw <= 0 or self.inter_bw <= 0:
            raise ValueError(f"bandwidths must be positive, got intra={self.intra_bw}, inter={self.inter_bw}")

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    def node_of(self, rank: int) -> int:
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is outside this cluster of {self.world_size} devices")
        return rank // self.devices_per_node

    def same_node(self, a: int, b: int) -> bool:
        return self.node_of(a) == self.node_of(b)

    @classmethod
    def local(cls, devices: int, nodes: int = 1, device: str = "cpu", memory: int = 16 * GIB) -> Cluster:
        """This machine's ``devices`` ranks, optionally split into ``nodes`` virtual nodes
        so that intra- and inter-node logic can be exercised on one host."""
        if devices % nodes:
            raise ValueError(f"{devices} devices cannot be split evenly into {nodes} virtual nodes")
        return cls(nodes=nodes, devices_per_node=devices // nodes, device=device, memory=memory)

    @classmethod
    def a800(cls, nodes: int = 4, devices_per_node: int = 8) -> Cluster:
        """The HotSPa testbed: servers of 8 x A800-80G, NVLink 400 GB/s, InfiniBand 200 GB/s per server."""
        return cls(
            nodes=nodes,
            devices_per_node=devices_per_node,
            device="A800-80G",
            memory=80 * GIB,
            intra_bw=400 * GB,
            inter_bw=200 * GB,
        )

    @classmethod
    def of_gpus(cls, gpus: int) -> Cluster:
        """The paper's A800 cluster with ``gpus`` devices (8 per server)."""
        if gpus <= 8:
            return cls.a800(nodes=1, devices_per_node=gpus)
        if gpus % 8:
            raise ValueError(f"{gpus} GPUs do not fill whole 8-GPU servers; use a multiple of 8")
        return cls.a800(nodes=gpus // 8)
