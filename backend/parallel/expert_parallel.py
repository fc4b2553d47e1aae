"""Expert parallelism: a mixture of experts whose experts are split over the ranks of an ep
group (consecutive data-parallel replicas, each with tokens of its own), tokens sent to their
experts' ranks and back by all-to-all with variable counts (``AllToAll``, differentiable: its
backward is the reverse exchange).

Each rank routes its own tokens (the router is replicated), sorts its (token, expert) pairs by
expert, which sorts them by owner too, and sends each owner its pairs' tokens; an owner runs its
experts on what arrives (the kernel in force, ``models.experts``) and sends the outputs back in
the order they came; each rank then sums its tokens' outputs weighted as one device does, in
expert order. Dropless: every pair is sent. An expert's weight gradients, on its owner, cover
every token the group routed to it; the trainer sums them over the ranks holding the same
experts (``Strategy.expert_replica_group``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from hotswitch.backend.models.experts import IN_FORCE, KERNELS, Gate, route
from hotswitch.backend.runtime.group_module import GroupModule


class AllToAll(torch.autograd.Function):
    """Rows of ``x`` to the group's ranks (``send[i]`` rows to rank i, in order), the rows each
    sends back (``receive[i]`` from rank i); the gradient travels the other way."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, send: list[int], receive: list[int], group) -> torch.Tensor:
        ctx.send, ctx.receive, ctx.group = send, receive, group
        out = x.new_empty((sum(receive), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), receive, send, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        back = grad.new_empty((sum(ctx.send), *grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), ctx.send, ctx.receive, group=ctx.group)
        return back, None, None, None


def exchanged(values: torch.Tensor, send: list[int], receive: list[int], group) -> torch.Tensor:
    """``values`` (no gradient) sent as ``AllToAll`` sends rows."""
    out = values.new_empty((sum(receive), *values.shape[1:]))
    dist.all_to_all_single(out, values.contiguous(), receive, send, group=group)
    return out


class ExpertParallel(GroupModule):
    """``routed_experts`` on this rank of ep group ``ranks`` (its ``index`` there), holding the
    ``count / len(ranks)`` experts from ``index * count / len(ranks)`` on."""

    what = "expert parallelism"

    def __init__(self, ranks: tuple[int, ...], index: int, count: int, gate: Gate, layer: int):
        super().__init__(ranks)
        self.layer = layer
        self.index = index
        self.gate = gate
        self.held = count // len(ranks)

    def forward(self, x, router, w1, w2, w3, bias=None) -> torch.Tensor:
        group = self.bound_group()
        tokens = x.reshape(-1, x.shape[-1])
        picked, weights = route(tokens, router, self.gate, self.layer, bias)
        flat = picked.reshape(-1)
        order = torch.argsort(flat, stable=True)  # by expert, so by owner, a token's experts in order
        rows = order // self.gate.per_token
        experts = flat[order]
        send = torch.bincount(experts // self.held, minlength=len(self.ranks))
        receive = exchanged(send, [1] * len(self.ranks), [1] * len(self.ranks), group)
        send_rows, receive_rows = send.tolist(), receive.tolist()
        arrived = AllToAll.apply(tokens[rows], send_rows, receive_rows, group)
        local = exchanged(experts, send_rows, receive_rows, group) - self.index * self.held
        ones = arrived.new_ones(len(local), 1)
        outputs = KERNELS[IN_FORCE["kernel"]](arrived, local[:, None], ones, w1, w2, w3)
        back = AllToAll.apply(outputs, receive_rows, send_rows, group)
        out = torch.zeros_like(tokens).index_add(0, rows, back * weights.reshape(-1)[order, None])
        return out.reshape(x.shape)
