"""Layered drawing of a DAG: longest-path layers, then barycentric ordering within layers.

Pure: names and edges in, coordinates out; no plotting. Sources without inputs (parameters,
buffers) are pulled down to just above their first consumer so they do not all crowd layer 0.
"""

from __future__ import annotations

from collections.abc import Sequence

SWEEPS = 4


def layers_of(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Layer of every node: the head of an edge is strictly below its tail.

    ``nodes`` may come in any order; a cycle raises ``ValueError`` naming a node on it.
    """
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    succs: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        preds[b].append(a)
        succs[a].append(b)
    layer: dict[str, int] = {}
    for n in topological_order(nodes, preds, succs):
        layer[n] = 1 + max((layer[p] for p in preds[n]), default=-1)
    for n in nodes:  # pull sources down next to their first consumer
        if not preds[n] and succs[n]:
            layer[n] = max(0, min(layer[s] for s in succs[n]) - 1)
    return layer


def topological_order(nodes: Sequence[str], preds: dict[str, list[str]], succs: dict[str, list[str]]) -> list[str]:
    """Kahn's order, stable: among ready nodes the one listed first goes first."""
    waiting = {n: len(preds[n]) for n in nodes}
    ready = [n for n in nodes if not waiting[n]]
    order = []
    while ready:
        n = ready.pop(0)
        order.append(n)
        for s in succs[n]:
            waiting[s] -= 1
            if not waiting[s]:
                ready.append(s)
    if len(order) != len(nodes):
        stuck = next(n for n in nodes if waiting[n])
        raise ValueError(f"the graph has a cycle through {stuck!r}; a layered drawing needs a DAG")
    return order


def order_layers(layer: dict[str, int], edges: Sequence[tuple[str, str]], sweeps: int = SWEEPS) -> list[list[str]]:
    """Nodes of each layer, ordered to reduce edge crossings (barycentre of neighbours)."""
    rows: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for n, k in layer.items():
        rows[k].append(n)
    up: dict[str, list[str]] = {n: [] for n in layer}
    down: dict[str, list[str]] = {n: [] for n in layer}
    for a, b in edges:
        down[a].append(b)
        up[b].append(a)
    for sweep in range(sweeps):
        forward = sweep % 2 == 0
        indices = range(1, len(rows)) if forward else range(len(rows) - 2, -1, -1)
        neighbours = up if forward else down
        for k in indices:
            rows[k] = _by_barycentre(rows[k], neighbours, _positions(rows))
    return rows


def _positions(rows: list[list[str]]) -> dict[str, float]:
    return {n: i - (len(row) - 1) / 2 for row in rows for i, n in enumerate(row)}


def _by_barycentre(row: list[str], neighbours: dict[str, list[str]], position: dict[str, float]) -> list[str]:
    def barycentre(n: str) -> float:
        near = [position[m] for m in neighbours[n]]
        return sum(near) / len(near) if near else position[n]

    # ties keep the current order (sorted is stable), so repeated sweeps settle
    return sorted(row, key=barycentre)


def dag_layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, tuple[float, float]]:
    """(x, y) of every node: y = -layer (top to bottom), x centred within the layer."""
    rows = order_layers(layers_of(nodes, edges), edges)
    return {n: (x, -float(k)) for k, row in enumerate(rows) for n, x in _positions([row]).items()}


def crossings(positions: dict[str, tuple[float, float]], edges: Sequence[tuple[str, str]]) -> int:
    """Pairs of edges between the same two adjacent layers that cross (for judging a layout)."""
    by_gap: dict[tuple[float, float], list[tuple[float, float]]] = {}
    for a, b in edges:
        (xa, ya), (xb, yb) = positions[a], positions[b]
        by_gap.setdefault((ya, yb), []).append((xa, xb))
    count = 0
    for segments in by_gap.values():
        for i, (a0, b0) in enumerate(segments):
            count += sum((a0 - a1) * (b0 - b1) < 0 for a1, b1 in segments[i + 1 :])
    return count
