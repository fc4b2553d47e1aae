"""Run a switch plan on one rank: one ``batch_isend_irecv`` round over its wires.

Binding a plan to a rank's source and destination buffers works out once which
wires go straight from the source buffer and into the destination buffer and
which are packed (see ``wire.py``); ``run()`` then only issues the transfers,
copies what the rank already owns while they are in flight, and unpacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.switch.plan import SwitchPlan
from hotswitch.backend.switch.wire import Wire, WireLayout


def _apply(target: torch.Tensor, piece: torch.Tensor, accumulate: bool) -> None:
    if accumulate:
        target.add_(piece)
    else:
        target.copy_(piece)


@dataclass
class _Recv:
    peer: int
    buffer: torch.Tensor
    unpack: list[tuple[torch.Tensor, bool]]  # (destination view, accumulate) per slice; empty when received in place


class BoundSwitch:
    """A plan bound to one rank's buffers; ``run()`` performs the switch."""

    def __init__(self, plan: SwitchPlan, rank: int, src: FlatBuffer, dst: FlatBuffer):
        if src.flat.dtype != dst.flat.dtype:
            raise ValueError(f"source buffer is {src.flat.dtype} but destination is {dst.flat.dtype}")
        if plan.itemsize != src.flat.element_size():
            raise ValueError(f"plan counts {plan.itemsize}-byte elements but the buffers hold {src.flat.dtype}")
        if set(plan.names) != set(src.layout) or set(plan.names) != set(dst.layout):
            raise ValueError("the buffers hold other tensors than the plan moves; bind the plan made for these layouts")
        self.plan = plan
        self.rank = rank
        self.zero = [dst.views[name] for r, name in sorted(plan.zero_first) if r == rank]
        self.local = [
            (src.region(t.name, t.box), dst.region(t.name, t.box), t.accumulate)
            for t in plan.transfers
            if t.local and t.sender == rank
        ]
        self.pack: list[tuple[torch.Tensor, list[torch.Tensor]]] = []  # send buffers filled at each run
        self.sends: list[tuple[int, torch.Tensor]] = []
        self.recvs: list[_Recv] = []
        wires = WireLayout(src.layout, dst.layout)
        packed: dict[tuple, torch.Tensor] = {}
        for m in plan.messages:
            if rank not in (m.sender, m.receiver):
                continue
            for wire in wires.wires(m):
                if m.sender == rank:
                    self.sends.append((m.receiver, self._send_buffer(wire, src, packed)))
                else:
                    self.recvs.append(self._recv_buffer(m.sender, wire, dst))

    @property
    def predicted_s(self) -> float:
        """The planner's predicted transfer time on the plan's cluster."""
        return self.plan.time_s

    def _send_buffer(self, wire: Wire, src: FlatBuffer, packed: dict) -> torch.Tensor:
        if wire.src_start is not None:
            return src.flat.narrow(0, wire.src_start, wire.numel)
        content = tuple((t.name, t.box) for t in wire.transfers)
        if content not in packed:  # identical contents for several receivers are packed once
            packed[content] = torch.empty(wire.numel, dtype=src.flat.dtype, device=src.flat.device)
            self.pack.append((packed[content], [src.region(t.name, t.box) for t in wire.transfers]))
        return packed[content]

    def _recv_buffer(self, sender: int, wire: Wire, dst: FlatBuffer) -> _Recv:
        if wire.dst_start is not None:
            return _Recv(sender, dst.flat.narrow(0, wire.dst_start, wire.numel), [])
        staging = torch.empty(wire.numel, dtype=dst.flat.dtype, device=dst.flat.device)
        return _Recv(sender, staging, [(dst.region(t.name, t.box), t.accumulate) for t in wire.transfers])

    def run(self, group: dist.ProcessGroup | None = None) -> None:
        for view in self.zero:
            view.zero_()
        for buffer, views in self.pack:
            torch.cat([v.reshape(-1) for v in views], out=buffer)
        ops = [dist.P2POp(dist.isend, buffer, peer, group) for peer, buffer in self.sends]
        ops += [dist.P2POp(dist.irecv, r.buffer, r.peer, group) for r in self.recvs]
        requests = dist.batch_isend_irecv(ops) if ops else []
        for source, target, accumulate in self.local:  # overlaps with the transfers in flight
            _apply(target, source, accumulate)
        for request in requests:
            request.wait()
        for r in self.recvs:
            offset = 0
            for view, accumulate in r.unpack:
                _apply(view, r.buffer[offset : offset + view.numel()].view(view.shape), accumulate)
                offset += view.numel()
