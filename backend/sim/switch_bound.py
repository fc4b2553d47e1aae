"""A switch's seconds without planning it: the time bound of moving each rank's missing part of
its destination shard, for ``auto``'s search on large simulated clusters (planning every pair it
asks about takes minutes at 32 GPUs; the planner's plans are within 1.0-1.17x of this bound,
DESIGN.md). The contenders' reported steps still use the planner's plans (``sim.switches``).

A strategy's parameters are modelled as layers split evenly over pp stages and every tensor
split evenly over tp (embeddings counted as layers); a rank holds the cell (stage, tp slice) of
its coordinates. A mixture's routed experts are split over ep instead and replicated over tp: a
rank holds their cell (stage, ep slice); both kinds' bytes add up on each rank and server. A
destination rank receives what it lacks: from a rank on its own server when
one holds the cell (NVLink, per receiving device), else over the server's network (shared).
Gradients move the other way round: each source rank delivers its shard, so the same bound
holds with source and destination exchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.strategy import Strategy


def _overlap(a: int, of_a: int, b: int, of_b: int) -> float:
    """Length of [a/of_a, (a+1)/of_a) inside [b/of_b, (b+1)/of_b), over the second's length."""
    lo = max(a / of_a, b / of_b)
    hi = min((a + 1) / of_a, (b + 1) / of_b)
    return max(0.0, hi - lo) * of_b


Cell = Callable[[Strategy, int], tuple[int, int, int, int]]  # rank -> (stage, slice, stages, slices)


def dense_cell(s: Strategy, rank: int) -> tuple[int, int, int, int]:
    """Where a rank's share of a dense tensor lies: its pipeline stage and tp slice."""
    c = s.coords(rank)
    return c.pp, c.tp, s.pp, s.tp


def expert_cell(s: Strategy, rank: int) -> tuple[int, int, int, int]:
    """Where a rank's share of the experts lies: its stage and its slice of the ep group (tp
    replicates the experts; without ep every rank of a stage holds them all)."""
    c = s.coords(rank)
    return c.pp, c.dp % s.ep, s.pp, s.ep


def _parts(
    src: Strategy, dst: Strategy, rank: int, on_node: set[tuple[int, int]], cell: Cell
) -> tuple[float, float, int]:
    """(fraction of its dst shard ``rank`` lacks that its server holds, that it does not, cells)."""
    p, t, stages, slices = cell(dst, rank)
    sp, st = cell(src, rank)[:2] if rank in src.ranks else (-1, -1)  # idle: owns nothing
    _, _, src_stages, src_slices = cell(src, src.offset)
    near = 0.0
    far = 0.0
    cells = 0
    for ps in range(src_stages):
        for ts in range(src_slices):
            part = _overlap(ps, src_stages, p, stages) * _overlap(ts, src_slices, t, slices)
            if part <= 0 or (ps, ts) == (sp, st):
                continue
            cells += 1
            near, far = (near + part, far) if (ps, ts) in on_node else (near, far + part)
    return near, far, cells


def _lacks(src: Strategy, dst: Strategy, cluster: Cluster, partial: bool, cell: Cell) -> dict[int, tuple]:
    """Per ``dst`` rank, ``_parts`` of one kind of tensor laid out by ``cell``; ``partial``: each
    region landing once among the replicas of its cell, the most local of them taking it."""
    per_node = cluster.devices_per_node
    on_node: dict[int, set[tuple[int, int]]] = {rank // per_node: set() for rank in dst.ranks}
    for rank in src.ranks:  # a device group's ranks, or every device
        on_node.setdefault(rank // per_node, set()).add(cell(src, rank)[:2])
    parts = {rank: _parts(src, dst, rank, on_node[rank // per_node], cell) for rank in dst.ranks}
    if partial:  # per cell: the replica lacking least, its lack shared by the cell's replicas
        cells: dict[tuple[int, int], list[int]] = {}
        for rank in dst.ranks:
            cells.setdefault(cell(dst, rank)[:2], []).append(rank)
        for ranks in cells.values():
            near, far, n = min((parts[r] for r in ranks), key=lambda x: x[0] + x[1])
            for r in ranks:
                parts[r] = (near / len(ranks), far / len(ranks), n)
    return parts


def bound_seconds(
    src: Strategy,
    dst: Strategy,
    cluster: Cluster,
    total_bytes: float,
    latency_s: float,
    partial: bool = False,
    expert_bytes: float = 0.0,
) -> float:
    """Seconds to bring every ``dst`` rank its shard of ``total_bytes`` from ``src``'s layout, of
    which ``expert_bytes`` are routed experts' (split over ep, replicated over tp). ``partial``:
    the destination is partial over its dp replicas (accumulated gradients)."""
    per_node = cluster.devices_per_node
    kinds = [(total_bytes - expert_bytes, dense_cell), (expert_bytes, expert_cell)]
    near = dict.fromkeys(dst.ranks, 0.0)
    inter: dict[int, float] = {}  # bytes leaving each node
    cells = dict.fromkeys(dst.ranks, 0)
    for nbytes, cell in kinds:
        if nbytes <= 0:
            continue
        _, _, stages, slices = cell(dst, dst.offset)
        shard = nbytes / (stages * slices)
        for rank, (here, there, n) in _lacks(src, dst, cluster, partial, cell).items():
            near[rank] += here * shard
            inter[rank // per_node] = inter.get(rank // per_node, 0.0) + there * shard
            cells[rank] += n
    intra = max(near.values(), default=0.0) / cluster.intra_bw
    network = max(inter.values(), default=0.0) / cluster.inter_bw
    return max(intra, network) + 2 * max(cells.values(), default=0) * latency_s
