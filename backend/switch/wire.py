"""How a plan's messages travel: zero-copy runs where the flat buffers allow, one packed rest.

A fused message between two ranks holds slices in canonical order. Where
consecutive slices lie back to back in the sender's source buffer, they can be
sent from it directly; where they lie back to back in the receiver's destination
buffer, they can be received into it directly. A run of such slices becomes a
wire of its own; every other slice of the message travels in one packed wire.
Sender and receiver compute the same wires from the two layouts, so they agree
on what each wire holds without talking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hotswitch.backend.layout import TensorLayout
from hotswitch.backend.runtime.flat_buffer import flat_offsets, span_in
from hotswitch.backend.switch.plan import Message, Transfer

# Runs smaller than this go into the packed wire: copying them costs less than a message.
MIN_RUN_ELEMENTS = 16384


@dataclass(frozen=True)
class Wire:
    transfers: tuple[Transfer, ...]
    src_start: int | None  # the run's offset in the sender's source buffer, if contiguous there
    dst_start: int | None  # ... in the receiver's destination buffer

    @property
    def numel(self) -> int:
        return sum(t.box.numel for t in self.transfers)


class WireLayout:
    """Splits messages into wires given the source and destination layouts."""

    def __init__(self, src: Mapping[str, TensorLayout], dst: Mapping[str, TensorLayout]):
        self.src = src
        self.dst = dst
        self._offsets: dict[tuple[str, int], dict] = {}

    def _span(self, side: str, rank: int, t: Transfer) -> int | None:
        key = (side, rank)
        if key not in self._offsets:
            self._offsets[key] = flat_offsets(self.src if side == "src" else self.dst, rank)
        start, block = self._offsets[key][t.name]
        return span_in(t.box, block, start)

    def wires(self, message: Message) -> list[Wire]:
        runs: list[list] = []  # [transfers, src_start, src_end, dst_start, dst_end]
        for t in message.transfers:
            s = self._span("src", message.sender, t)
            d = None if t.accumulate else self._span("dst", message.receiver, t)
            run = runs[-1] if runs else None
            keeps_src = run is not None and run[1] is not None and s == run[2]
            keeps_dst = run is not None and run[3] is not None and d == run[4]
            src_ok = run is not None and (run[1] is None or keeps_src)
            dst_ok = run is not None and (run[3] is None or keeps_dst)
            if run is not None and src_ok and dst_ok and (keeps_src or keeps_dst):
                run[0].append(t)
                run[2] = None if run[1] is None else run[2] + t.box.numel
                run[4] = None if run[3] is None else run[4] + t.box.numel
            else:
                n = t.box.numel
                runs.append([[t], s, None if s is None else s + n, d, None if d is None else d + n])
        wires = []
        packed = []
        for transfers, s, _, d, _ in runs:
            if (s is None and d is None) or sum(t.box.numel for t in transfers) < MIN_RUN_ELEMENTS:
                packed.extend(transfers)
            else:
                wires.append(Wire(tuple(transfers), s, d))
        if packed:
            wires.append(Wire(tuple(packed), None, None))
        return wires
