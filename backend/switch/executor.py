"""Run a switch plan on one rank: one ``batch_isend_irecv`` round over fused buffers.

Binding a plan to a rank's source and destination buffers works out once which
messages can be sent straight from the source buffer and received straight
into the destination buffer (their slices are back to back there) and which
need packing; running it then only issues the transfers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.switch.plan import SwitchPlan, Transfer


def _span(views: list[torch.Tensor], flat: torch.Tensor) -> torch.Tensor | None:
    """The one range of ``flat`` the views cover back to back, or None."""
    start = views[0].storage_offset()
    end = start
    for v in views:
        same_storage = v.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
        if not (same_storage and v.is_contiguous() and v.storage_offset() == end):
            return None
        end += v.numel()
    return flat.narrow(0, start - flat.storage_offset(), end - start)


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
        self.plan, self.rank = plan, rank
        self.zero = [dst.views[name] for r, name in sorted(plan.zero_first) if r == rank]
        self.local = [
            (src.region(t.name, t.box), dst.region(t.name, t.box), t.accumulate)
            for t in plan.transfers
            if t.local and t.sender == rank
        ]
        packed: dict[int, torch.Tensor] = {}
        self.pack: list[tuple[torch.Tensor, list[torch.Tensor]]] = []  # send buffers filled at each run
        self.sends: list[tuple[int, torch.Tensor]] = []
        self.recvs: list[_Recv] = []
        for (sender, receiver), transfers in plan.messages.items():
            if sender == rank:
                buffer_id = plan.buffer_ids[sender, receiver]
                if buffer_id not in packed:
                    packed[buffer_id] = self._send_buffer(transfers, src)
                self.sends.append((receiver, packed[buffer_id]))
            elif receiver == rank:
                self.recvs.append(self._recv_buffer(sender, transfers, dst))

    def _send_buffer(self, transfers: tuple[Transfer, ...], src: FlatBuffer) -> torch.Tensor:
        views = [src.region(t.name, t.box) for t in transfers]
        span = _span(views, src.flat)
        if span is None:
            span = torch.empty(sum(v.numel() for v in views), dtype=src.flat.dtype, device=src.flat.device)
            self.pack.append((span, views))
        return span

    def _recv_buffer(self, sender: int, transfers: tuple[Transfer, ...], dst: FlatBuffer) -> _Recv:
        views = [dst.region(t.name, t.box) for t in transfers]
        if not any(t.accumulate for t in transfers):
            span = _span(views, dst.flat)
            if span is not None:
                return _Recv(sender, span, [])
        staging = torch.empty(sum(v.numel() for v in views), dtype=dst.flat.dtype, device=dst.flat.device)
        return _Recv(sender, staging, [(v, t.accumulate) for v, t in zip(views, transfers)])

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
                piece = r.buffer[offset : offset + view.numel()].view(view.shape)
                _apply(view, piece, accumulate)
                offset += view.numel()
