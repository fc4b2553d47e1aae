"""The bandwidth-aware planner: round the time-optimal fractional assignment into a plan.

Each demand's bytes are dealt to its owners in the LP's proportions, in slice
order; a slice that straddles two owners' shares is cut along its first dim
with more than one row, so the plan's link loads track the fractional optimum
to within a row per owner.
"""

from __future__ import annotations

from collections import defaultdict

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.dist_state import Box
from hotswitch.backend.switch.lp import Demand, min_max_assignment
from hotswitch.backend.switch.needs import Need, SwitchNeeds
from hotswitch.backend.switch.plan import Transfer


def group_demands(needs: SwitchNeeds, itemsize: int) -> tuple[list[Demand], list[list[Need]]]:
    """Remote needs grouped by (receiver, owners); local ones are free and left out."""
    groups: dict[tuple[int, tuple[int, ...]], list[Need]] = defaultdict(list)
    for need in needs.needs:
        if need.receiver not in need.owners:
            groups[need.receiver, need.owners].append(need)
    keys = sorted(groups)
    demands = [Demand(r, owners, sum(n.box.numel for n in groups[r, owners]) * itemsize) for r, owners in keys]
    return demands, [groups[k] for k in keys]


def split_box(box: Box, rows: int) -> tuple[Box, Box]:
    """Cut ``box`` after ``rows`` rows of its first dim longer than one."""
    dim = next(i for i, n in enumerate(box.shape) if n > 1)
    head_shape = (*box.shape[:dim], rows, *box.shape[dim + 1 :])
    tail_offset = (*box.offset[:dim], box.offset[dim] + rows, *box.offset[dim + 1 :])
    tail_shape = (*box.shape[:dim], box.shape[dim] - rows, *box.shape[dim + 1 :])
    return Box(box.offset, head_shape), Box(tail_offset, tail_shape)


def _deal(needs: list[Need], shares: list[tuple[int, float]], itemsize: int) -> list[Transfer]:
    out = []
    queue = [(n, n.box) for n in needs]
    owner_index = 0
    left = shares[0][1]
    while queue:
        need, box = queue.pop(0)
        sender = shares[owner_index][0]
        size = box.numel * itemsize
        last = owner_index == len(shares) - 1
        if last or size <= left + 0.5 * itemsize:
            out.append(Transfer(need.name, box, sender, need.receiver, need.accumulate))
            left -= size
            continue
        dim = next((i for i, n in enumerate(box.shape) if n > 1), None)
        row_bytes = size // box.shape[dim] if dim is not None else size
        rows = round(left / row_bytes) if dim is not None else 0
        if dim is not None and 0 < rows < box.shape[dim]:  # rows is 0 without a dim
            head, tail = split_box(box, rows)
            out.append(Transfer(need.name, head, sender, need.receiver, need.accumulate))
            queue.insert(0, (need, tail))
        else:
            queue.insert(0, (need, box))
        owner_index += 1
        left += shares[owner_index][1]
    return out


def balanced_transfers(needs: SwitchNeeds, cluster: Cluster, itemsize: int) -> list[Transfer]:
    demands, groups = group_demands(needs, itemsize)
    flows = min_max_assignment(demands, cluster, "time").flows
    out = [Transfer(n.name, n.box, n.receiver, n.receiver, n.accumulate) for n in needs.needs if n.receiver in n.owners]
    for g, (demand, group) in enumerate(zip(demands, groups)):
        shares = [(o, flows.get((g, o), 0.0)) for o in demand.owners]
        shares = [s for s in shares if s[1] > 0] or shares[:1]
        out.extend(_deal(group, shares, itemsize))
    return out
