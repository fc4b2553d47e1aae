"""Ring attention over a context-parallel group, on the zig-zag layout (``runtime.zigzag``).

Every rank keeps its queries; keys and values travel round the ring (rank ``i`` sends to
``i + 1`` and receives from ``i - 1``), and after ``cp`` steps each rank has attended its two
chunks to every chunk before them. With zig-zag chunks each step is the same work on every
rank: at step 0 a rank attends to its own chunks causally; to a lower rank's k/v both its
chunks attend the early chunk only; to a higher rank's k/v only its late chunk attends, to
both. Partial results merge by their log-sum-exp (online softmax), so the output equals one
device's causal attention up to summation order.

Backward sends k/v round the ring once more, together with their accumulated gradients,
which every rank adds its share to; after the last step each rank receives its own dk/dv.

Each step's transfers are one ``batch_isend_irecv`` (send to the next rank, receive from the
previous), posted before the step's compute and waited after it: every rank posts the same
sequence of batches, so NCCL matches them in order and cannot deadlock; gloo uses the tags.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from hotswitch.backend.runtime.attention_blocks import block_backward, block_forward, grouped, merge, ungrouped
from hotswitch.backend.runtime.group_module import GroupModule

_KV, _GRADS = 1, 2  # tags: k/v, their gradients


class _Pending:
    def __init__(self, requests, received: torch.Tensor):
        self.requests, self.received = requests, received

    def wait(self) -> torch.Tensor:
        for request in self.requests:
            request.wait()
        return self.received


class Ring:
    """Rank ``index`` of the cp group ``ranks`` (global ranks, in ring order) over ``group``."""

    def __init__(self, ranks: tuple[int, ...], index: int, group):
        self.size, self.index, self.group = len(ranks), index, group
        self.next, self.previous = ranks[(index + 1) % self.size], ranks[(index - 1) % self.size]

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


class RingAttentionFunction(torch.autograd.Function):
    """forward: causal attention of the ring's zig-zag shards, k/v sent round; backward: k/v
    and their gradients sent round, each rank receiving its own dk/dv last."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: Ring) -> torch.Tensor:
        heads, chunk = k.shape[2], q.shape[1] // 2
        queries = grouped(q, heads)
        out = torch.zeros_like(queries, dtype=torch.float32)  # blocks merge in fp32 (``merge``)
        lse = torch.full(queries.shape[:-1], float("-inf"), device=q.device)
        kv = torch.stack([k, v]).contiguous()
        for step in range(ring.size):
            pending = ring.shift(kv, _KV) if step < ring.size - 1 else None
            rows, cols, causal = ring_block(step, ring.index, ring.size, chunk)
            keys, values = grouped(kv[0], heads)[..., cols, :], grouped(kv[1], heads)[..., cols, :]
            block_out, block_lse = block_forward(queries[..., rows, :], keys, values, causal)
            merge(out[..., rows, :], lse[..., rows], block_out, block_lse)
            kv = pending.wait() if pending else kv
        ctx.ring = ring
        ctx.save_for_backward(q, k, v, out.to(queries.dtype), lse)  # as a block's backward reads it
        return ungrouped(out, q.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        ring, heads, chunk = ctx.ring, k.shape[2], q.shape[1] // 2
        queries, grad_out = grouped(q, heads), grouped(grad, heads)
        dq = torch.zeros_like(queries, dtype=torch.float32)
        kv = torch.stack([k, v]).contiguous()
        grads: _Pending | None = None
        for step in range(ring.size):
            pending = ring.shift(kv, _KV) if step < ring.size - 1 else None
            rows, cols, causal = ring_block(step, ring.index, ring.size, chunk)
            keys, values = grouped(kv[0], heads), grouped(kv[1], heads)
            block = block_backward(
                queries[..., rows, :],
                keys[..., cols, :],
                values[..., cols, :],
                grad_out[..., rows, :],
                out[..., rows, :],
                lse[..., rows],
                causal,
            )
            dq[..., rows, :] += block[0]
            dkv = torch.zeros((2, *keys.shape), device=q.device) if grads is None else grads.wait()
            dkv[0][..., cols, :] += block[1]
            dkv[1][..., cols, :] += block[2]
            grads = ring.shift(dkv, _GRADS)  # on to the next rank; the last shift brings our own home
            kv = pending.wait() if pending else kv
        dkv = grads.wait()
        return ungrouped(dq, q.dtype), ungrouped(dkv[0], k.dtype), ungrouped(dkv[1], v.dtype), None


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

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self.bound_group()  # raises, naming the ranks, where bind was not called
        if q.shape[1] % 2:
            raise ValueError(f"a zig-zag shard holds two equal chunks; got {q.shape[1]} tokens (pad to 2 x cp)")
        return RingAttentionFunction.apply(q, k, v, self.ring)

    def extra_repr(self) -> str:
        return f"ring, ranks={list(self.ranks)}, index={self.index}"
