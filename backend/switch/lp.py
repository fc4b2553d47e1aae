"""Fractional min-max assignment of slice bytes to senders, as a linear program.

Slices that share a receiver and an owner set form one demand; the LP splits
each demand's bytes among its owners freely. Minimising the busiest link gives
a lower bound that no real plan can beat, and its solution is what the
balanced planner rounds into a real plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hotswitch.backend.cluster import Cluster


@dataclass(frozen=True)
class Demand:
    receiver: int
    owners: tuple[int, ...]
    bytes: int


@dataclass(frozen=True)
class Assignment:
    value: float  # the minimised maximum: seconds ("time") or bytes ("bytes")
    flows: dict[tuple[int, int], float]  # (demand index, owner) -> bytes


def min_max_assignment(demands: list[Demand], cluster: Cluster, objective: str) -> Assignment:
    """``objective="time"``: minimise the predicted switch time (per-device intra-node links,
    per-node NICs, each direction). ``objective="bytes"``: minimise the most bytes any rank sends."""
    from scipy.optimize import linprog  # 1.6 s of CPU to import: only where a switch is planned
    from scipy.sparse import coo_matrix

    if objective not in ("time", "bytes"):
        raise ValueError(f"objective must be 'time' or 'bytes', got {objective!r}")
    if not demands:
        return Assignment(0.0, {})
    scale = max(d.bytes for d in demands)
    variables = [(g, o) for g, d in enumerate(demands) for o in d.owners]
    n = len(variables) + 1  # the last variable is the maximum being minimised
    rows = []
    cols = []
    vals = []
    row_count = 0

    def add_rows(keys_of):
        # one "sum(coefficient * x) - max <= 0" row per key
        nonlocal row_count
        index: dict = {}
        for col, (g, o) in enumerate(variables):
            for key, coefficient in keys_of(demands[g].receiver, o):
                if key not in index:
                    index[key] = row_count + len(index)
                rows.append(index[key])
                cols.append(col)
                vals.append(coefficient)
        for row in index.values():
            rows.append(row)
            cols.append(n - 1)
            vals.append(-1.0)
        row_count += len(index)

    node = cluster.node_of
    if objective == "bytes":
        add_rows(lambda r, o: [(o, 1.0)])
    else:
        intra = scale / cluster.intra_bw
        inter = scale / cluster.inter_bw
        add_rows(lambda r, o: [(("send", o), intra), (("recv", r), intra)] if node(r) == node(o) else [])
        add_rows(lambda r, o: [] if node(r) == node(o) else [(("out", node(o)), inter), (("in", node(r)), inter)])
    a_ub = coo_matrix((vals, (rows, cols)), shape=(row_count, n)).tocsr()
    a_eq = coo_matrix(
        ([1.0] * len(variables), ([g for g, _ in variables], list(range(len(variables))))),
        shape=(len(demands), n),
    ).tocsr()
    b_eq = np.array([d.bytes / scale for d in demands])
    cost = np.zeros(n)
    cost[-1] = 1.0
    result = linprog(cost, A_ub=a_ub, b_ub=np.zeros(row_count), A_eq=a_eq, b_eq=b_eq, method="highs")
    if result.status != 0:
        raise RuntimeError(f"the switch assignment LP failed: {result.message}")
    flows = {var: float(x) * scale for var, x in zip(variables, result.x[:-1]) if x > 1e-12}
    value = float(result.x[-1]) * (scale if objective == "bytes" else 1.0)
    return Assignment(value, flows)
