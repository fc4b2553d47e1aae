"""Ring attention over a context-parallel group, on the zig-zag layout (``parallel.zigzag``).

Every rank keeps its queries; keys and values travel round the ring (rank ``i`` sends to
``i + 1`` and receives from ``i - 1``), and after ``cp`` steps each rank has attended its two
chunks to every chunk before them. With zig-zag chunks each step is the same work on every
rank: at step 0 a rank attends to its own chunks causally; to a lower rank's k/v both its
chunks attend the early chunk only; to a higher rank's k/v only its late chunk attends, to
both. Partial results merge by their log-sum-exp (online softmax), so the output equals one
device's causal attention up to summation order.

Packed rows (several documents back to back, ``models.documents``) keep every block's
documents apart: each rank has the whole rows' positions, so for every block it knows where
each of its queries' and the visiting keys' documents start, and masks the rest
(``block_mask``; such blocks run as explicit matmuls).

Backward sends k/v round the ring once more, together with their accumulated gradients,
which every rank adds its share to; after the last step each rank receives its own dk/dv.

Each step's transfers are one ``batch_isend_irecv`` (send to the next rank, receive from the
previous), posted before the step's compute and waited after it: every rank posts the same
sequence of batches, so NCCL matches them in order and cannot deadlock; gloo uses the tags.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from hotswitch.backend.models.documents import counts_from_zero, same_document
from hotswitch.backend.parallel.attention_blocks import block_backward, block_forward, grouped, merge, ungrouped
from hotswitch.backend.parallel.zigzag import zigzag_positions
from hotswitch.backend.runtime.group_module import GroupModule

_KV = 1  # tags: k/v, their gradients
_GRADS = 2


class _Pending:
    def __init__(self, requests: list[dist.Work], received: torch.Tensor):
        self.requests = requests
        self.received = received

    def wait(self) -> torch.Tensor:
        for request in self.requests:
            request.wait()
        return self.received


class Ring:
    """Rank ``index`` of the cp group ``ranks`` (global ranks, in ring order) over ``group``."""

    def __init__(self, ranks: tuple[int, ...], index: int, group: dist.ProcessGroup):
        self.size = len(ranks)
        self.index = index
        self.group = group
        self.next = ranks[(index + 1) % self.size]
        self.previous = ranks[(index - 1) % self.size]

    def shift(self, tensor: torch.Tensor, tag: int) -> _Pending:
        """Start sending ``tensor`` to the next rank and receiving the previous rank's."""
        received = torch.empty_like(tensor)
        ops = [
            dist.P2POp(dist.isend, tensor, self.next, self.group, tag),
            dist.P2POp(dist.irecv, received, self.previous, self.group, tag),
        ]
        return _Pending(dist.batch_isend_irecv(ops), received)


def ring_block(step: int, index: int, size: int, chunk: int) -> tuple[slice, slice, bool]:
    """(query rows, key columns, causal) that rank ``index`` of a ring of ``size`` attends at
    ``step``, from the k/v it then holds (``chunk``: tokens per zig-zag chunk)."""
    source = (index - step) % size
    if step == 0:
        return slice(None), slice(None), True
    if source < index:
        return slice(None), slice(0, chunk), False
    return slice(chunk, None), slice(None), False


def block_mask(
    positions: torch.Tensor | None, step: int, index: int, size: int, rows: slice, cols: slice
) -> torch.Tensor | None:
    """[batch, queries, keys]: which of the visiting keys each query of the block sees (same
    document, not later), from the whole rows' ``positions``; None for rows of one document."""
    if positions is None:
        return None
    local = positions.shape[1] // size
    q_index = zigzag_positions(index, size, local)[rows]
    k_index = zigzag_positions((index - step) % size, size, local)[cols]
    return same_document(q_index, positions[:, q_index], k_index, positions[:, k_index])


class RingAttentionFunction(torch.autograd.Function):
    """forward: causal attention of the ring's zig-zag shards, k/v sent round; backward: k/v
    and their gradients sent round, each rank receiving its own dk/dv last."""

    @staticmethod
    def forward(
        ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: Ring, positions: torch.Tensor | None
    ) -> torch.Tensor:
        heads = k.shape[2]
        chunk = q.shape[1] // 2
        queries = grouped(q, heads)
        out = torch.zeros_like(queries, dtype=torch.float32)  # blocks merge in fp32 (``merge``)
        lse = torch.full(queries.shape[:-1], float("-inf"), device=q.device)
        kv = torch.stack([k, v]).contiguous()
        for step in range(ring.size):
            pending = ring.shift(kv, _KV) if step < ring.size - 1 else None
            rows, cols, causal = ring_block(step, ring.index, ring.size, chunk)
            keys = grouped(kv[0], heads)[..., cols, :]
            values = grouped(kv[1], heads)[..., cols, :]
            mask = block_mask(positions, step, ring.index, ring.size, rows, cols)
            block_out, block_lse = block_forward(queries[..., rows, :], keys, values, causal, mask)
            merge(out[..., rows, :], lse[..., rows], block_out, block_lse)
            kv = pending.wait() if pending else kv
        ctx.ring = ring
        ctx.positions = positions
        ctx.save_for_backward(q, k, v, out.to(queries.dtype), lse)  # as a block's backward reads it
        return ungrouped(out, q.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None, None]:
        q, k, v, out, lse = ctx.saved_tensors
        ring = ctx.ring
        heads = k.shape[2]
        chunk = q.shape[1] // 2
        queries = grouped(q, heads)
        grad_out = grouped(grad, heads)
        dq = torch.zeros_like(queries, dtype=torch.float32)
        kv = torch.stack([k, v]).contiguous()
        grads: _Pending | None = None
        for step in range(ring.size):
            pending = ring.shift(kv, _KV) if step < ring.size - 1 else None
            rows, cols, causal = ring_block(step, ring.index, ring.size, chunk)
            keys = grouped(kv[0], heads)
            values = grouped(kv[1], heads)
            block = block_backward(
                queries[..., rows, :],
                keys[..., cols, :],
                values[..., cols, :],
                grad_out[..., rows, :],
                out[..., rows, :],
                lse[..., rows],
                causal,
                block_mask(ctx.positions, step, ring.index, ring.size, rows, cols),
            )
            dq[..., rows, :] += block[0]
            dkv = torch.zeros((2, *keys.shape), device=q.device) if grads is None else grads.wait()
            dkv[0][..., cols, :] += block[1]
            dkv[1][..., cols, :] += block[2]
            grads = ring.shift(dkv, _GRADS)  # on to the next rank; the last shift brings our own home
            kv = pending.wait() if pending else kv
        assert grads is not None  # the loop ran: a ring has at least two ranks
        dkv = grads.wait()
        return ungrouped(dq, q.dtype), ungrouped(dkv[0], k.dtype), ungrouped(dkv[1], v.dtype), None, None


class RingAttention(GroupModule):
    """Causal attention of a context-parallel group's zig-zag shards [batch, seq, heads,
    head_dim] (k and v may have fewer heads), as rank ``index`` of ``ranks``; created unbound,
    ``bind`` gives it the group's process group."""

    what = "ring attention"

    def __init__(self, ranks: tuple[int, ...], index: int):
        if len(ranks) < 2:
            raise ValueError(f"ring attention needs at least two ranks, got {list(ranks)}")
        super().__init__(ranks)
        self.index = index
        self.ring: Ring | None = None

    def bind(self, group) -> None:
        super().bind(group)
        self.ring = Ring(self.ranks, self.index, group)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``positions``: the whole rows' (``models.documents``), [batch, cp x this shard's length]."""
        self.bound_group()  # raises, naming the ranks, where bind was not called
        if q.shape[1] % 2:
            raise ValueError(f"a zig-zag shard holds two equal chunks; got {q.shape[1]} tokens (pad to 2 x cp)")
        documents = None if counts_from_zero(positions) else positions.cpu()
        return RingAttentionFunction.apply(q, k, v, self.ring, documents)

    def extra_repr(self) -> str:
        return f"ring, ranks={list(self.ranks)}, index={self.index}"
