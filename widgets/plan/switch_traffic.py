"""Plain figures of a switch plan: the sender x receiver byte matrix and the fused-message rows."""

from __future__ import annotations

from hotswitch.backend.switch.plan import SwitchPlan


def byte_matrix(plan: SwitchPlan) -> list[list[int]]:
    """``m[sender][receiver]``: bytes sent between two ranks; local copies are not counted,
    so the matrix sums to ``plan.bytes_moved``."""
    world = plan.cluster.world_size
    matrix = [[0] * world for _ in range(world)]
    for t in plan.transfers:
        if not t.local:
            matrix[t.sender][t.receiver] += t.box.numel * plan.itemsize
    return matrix


def message_rows(plan: SwitchPlan) -> list[dict]:
    """One row per fused message: peers, whether it crosses nodes, slices, bytes, shared buffer."""
    senders_of_buffer: dict[int, int] = {}
    for m in plan.messages:
        senders_of_buffer[m.buffer] = senders_of_buffer.get(m.buffer, 0) + 1
    return [
        {
            "sender": m.sender,
            "receiver": m.receiver,
            "link": "intra" if plan.cluster.same_node(m.sender, m.receiver) else "inter",
            "slices": len(m.transfers),
            "bytes": m.numel * plan.itemsize,
            "buffer": m.buffer,
            "buffer_shared_by": senders_of_buffer[m.buffer],
            "tensors": len({t.name for t in m.transfers}),
        }
        for m in plan.messages
    ]
