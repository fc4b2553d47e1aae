"""A pipeline stage's point-to-point traffic, in an order that cannot deadlock on NCCL.

NCCL matches the sends and receives between two ranks in the order they are posted (tags are
ignored), and a blocking send waits for its receive. Sends after one pass and receives before
the next are therefore posted together, as one ``batch_isend_irecv`` group (Megatron's
``send_forward_recv_backward``): between a pass and the next, a stage makes one *exchange*.
Within an exchange, operations are sorted by (peer, micro-batch, link, kind), which both ends
compute alike. An activation's shape and dtype travel first, in a fixed-size header exchanged as
its own batch, so its receiver can allocate it; gradients come back in the shapes and dtypes the
receiver knows.
``exchanges`` is pure: tests check the ordering and progress rules over every stage pair.
Gloo keeps the same order (and uses the tags).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist

_MAX_DIMS = 7
_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)  # an activation's, by header code
Kind = Literal["act", "grad"]


@dataclass(frozen=True, order=True)
class P2P:
    """One transfer of a stage: to or from ``peer`` (a stage), micro-batch ``micro``, link
    ``link`` (every stage numbers the crossings alike)."""

    peer: int
    micro: int
    link: int
    kind: Kind
    send: bool


def pass_traffic(kind: str, micro: int, receives, sends) -> tuple[list[P2P], list[P2P]]:
    """(what a pass needs received before it, what it sends after it); ``receives`` and
    ``sends`` are the stage's links (``peer_stage``, ``index``)."""
    if kind == "F":
        return [P2P(r.peer_stage, micro, r.index, "act", False) for r in receives], [
            P2P(s.peer_stage, micro, s.index, "act", True) for s in sends
        ]
    return [P2P(s.peer_stage, micro, s.index, "grad", False) for s in sends], [
        P2P(r.peer_stage, micro, r.index, "grad", True) for r in receives
    ]


def exchanges(passes: Sequence, receives, sends) -> list[list[P2P]]:
    """One exchange before each pass and one after the last: what the previous pass sends and
    what the next needs, sorted."""
    out: list[list[P2P]] = []
    pending: list[P2P] = []
    for p in passes:
        needs, produces = pass_traffic(p.kind, p.micro, receives, sends)
        out.append(sorted(pending + needs))
        pending = produces
    out.append(sorted(pending))
    return out


class Exchanger:
    """Carries out a stage's exchanges on rank ``rank`` (stages ``width`` ranks apart)."""

    def __init__(self, rank: int, stage: int, width: int, crossings: int):
        self.rank = rank
        self.stage = stage
        self.width = width
        self.crossings = max(crossings, 1)

    def _peer(self, op: P2P) -> int:
        return self.rank + (op.peer - self.stage) * self.width

    def _tag(self, op: P2P, part: int) -> int:  # 0 header, 1 activation, 2 gradient
        return (op.micro * self.crossings + op.link) * 3 + part

    def run(self, ops: list[P2P], outgoing: dict[P2P, torch.Tensor], like: dict[P2P, torch.Tensor], device):
        """Send ``outgoing[op]`` for each send; return {op: tensor} for each receive (activations
        as their headers say, gradients as ``like[op]``). Two batches: headers, then data."""
        headers = {}
        batch = []
        for op in ops:
            if op.kind == "act" and op.send:
                headers[op] = _header(outgoing[op])
                batch.append(dist.P2POp(dist.isend, headers[op], self._peer(op), tag=self._tag(op, 0)))
            elif op.kind == "act":
                headers[op] = torch.empty(_MAX_DIMS + 2, dtype=torch.long, device=device)
                batch.append(dist.P2POp(dist.irecv, headers[op], self._peer(op), tag=self._tag(op, 0)))
        _wait(batch)
        received = {}
        batch = []
        for op in ops:
            part = 1 if op.kind == "act" else 2
            if op.send:
                tensor = outgoing[op].detach().contiguous()
                batch.append(dist.P2POp(dist.isend, tensor, self._peer(op), tag=self._tag(op, part)))
                continue
            if op.kind == "act":
                header = headers[op].tolist()
                received[op] = torch.empty(header[1 : header[0] + 1], dtype=_DTYPES[header[-1]], device=device)
            else:
                received[op] = torch.empty_like(like[op])
            batch.append(dist.P2POp(dist.irecv, received[op], self._peer(op), tag=self._tag(op, part)))
        _wait(batch)
        return received


def _header(tensor: torch.Tensor) -> torch.Tensor:
    """[dims, the shape (padded to ``_MAX_DIMS``), the dtype's index in ``_DTYPES``]."""
    header = torch.zeros(_MAX_DIMS + 2, dtype=torch.long, device=tensor.device)
    header[0] = tensor.dim()
    header[1 : tensor.dim() + 1] = torch.tensor(tensor.shape)
    header[-1] = _DTYPES.index(tensor.dtype)
    return header


def _wait(batch: list) -> None:
    if batch:
        for request in dist.batch_isend_irecv(batch):
            request.wait()
