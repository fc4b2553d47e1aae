"""A switch's seconds without planning it: the time bound of moving each rank's missing part of
its destination shard, for ``auto``'s search on large simulated clusters (planning every pair it
asks about takes minutes at 32 GPUs; the planner's plans are within 1.0-1.17x of this bound,
DESIGN.md). The contenders' reported steps still use the planner's plans (``sim.switches``).

A strategy's parameters are modelled as layers split evenly over pp stages and every tensor
split evenly over tp (embeddings counted as layers); a rank holds the cell (stage, tp slice) of
its coordinates. A destination rank receives what it lacks: from a rank on its own server when
one holds the cell (NVLink, per receiving device), else over the server's network (shared).
Gradients move the other way round: each source rank delivers its shard, so the same bound
holds with source and destination exchanged.
"""

from __future__ import annotations

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.strategy import Strategy


def _overlap(a: int, of_a: int, b: int, of_b: int) -> float:
    """Length of [a/of_a, (a+1)/of_a) inside [b/of_b, (b+1)/of_b), over the second's length."""
    lo = max(a / of_a, b / of_b)
    hi = min((a + 1) / of_a, (b + 1) / of_b)
    return max(0.0, hi - lo) * of_b


def _parts(src: Strategy, dst: Strategy, rank: int, on_node: set[tuple[int, int]]) -> tuple[float, float, int]:
    """(fraction of its dst shard ``rank`` lacks that its server holds, that it does not, cells)."""
    p = dst.coords(rank).pp
    t = dst.coords(rank).tp
    sp, st = (src.coords(rank).pp, src.coords(rank).tp) if rank in src.ranks else (-1, -1)  # idle: owns nothing
    near = 0.0
    far = 0.0
    cells = 0
    for ps in range(src.pp):
        for ts in range(src.tp):
            part = _overlap(ps, src.pp, p, dst.pp) * _overlap(ts, src.tp, t, dst.tp)
            if part <= 0 or (ps, ts) == (sp, st):
                continue
            cells += 1
            near, far = (near + part, far) if (ps, ts) in on_node else (near, far + part)
    return near, far, cells


def bound_seconds(
    src: Strategy, dst: Strategy, cluster: Cluster, total_bytes: float, latency_s: float, partial: bool = False
) -> float:
    """Seconds to bring every ``dst`` rank its shard of ``total_bytes`` from ``src``'s layout.
    ``partial``: the destination is partial over its dp replicas (accumulated gradients): each
    region needs landing once among the replicas of its cell, the most local of them taking it."""
    per_node = cluster.devices_per_node
    on_node: dict[int, set[tuple[int, int]]] = {rank // per_node: set() for rank in dst.ranks}
    for rank in src.ranks:  # a device group's ranks, or every device
        p = src.coords(rank).pp
        t = src.coords(rank).tp
        on_node.setdefault(rank // per_node, set()).add((p, t))
    shard = total_bytes / (dst.tp * dst.pp)
    parts = {rank: _parts(src, dst, rank, on_node[rank // per_node]) for rank in dst.ranks}
    if partial:  # per cell: the replica lacking least, its lack shared by the cell's replicas
        cells: dict[tuple[int, int], list[int]] = {}
        for rank in dst.ranks:
            p = dst.coords(rank).pp
            t = dst.coords(rank).tp
            cells.setdefault((p, t), []).append(rank)
        for ranks in cells.values():
            near, far, n = min((parts[r] for r in ranks), key=lambda x: x[0] + x[1])
            for r in ranks:
                parts[r] = (near / len(ranks), far / len(ranks), n)
    intra = 0.0
    inter: dict[int, float] = {}  # bytes leaving each node
    for rank, (near, far, _) in parts.items():
        intra = max(intra, near * shard / cluster.intra_bw)
        inter[rank // per_node] = inter.get(rank // per_node, 0.0) + far * shard
    network = max(inter.values(), default=0.0) / cluster.inter_bw
    return max(intra, network) + 2 * max(n for _, _, n in parts.values()) * latency_s
