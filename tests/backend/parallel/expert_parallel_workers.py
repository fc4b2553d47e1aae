"""Rank functions for the expert-parallel module tests (importable by spawned processes)."""

import torch
import torch.distributed as dist

from hotswitch.backend.models.experts import Gate, use_experts
from hotswitch.backend.parallel.expert_parallel import ExpertParallel

DIM, WIDTH, EXPERTS = 8, 8, 4  # rows of 32 bytes: torch._grouped_mm wants 16-byte multiples


def starved_rank_backward(rank: int, world: int, kernel: str) -> list[float]:
    """ep2 over 2 ranks, the router sending every token to experts 0 and 1 (rank 0's), so rank
    1's experts get none: three micro-batches forward and backward, each rank's summed input
    gradient per micro-batch (every rank's backward must take part in every all-to-all)."""
    use_experts(kernel)
    g = torch.Generator().manual_seed(rank)
    router = torch.zeros(EXPERTS, DIM)
    router[:2] = 1.0  # experts 0 and 1 score highest for positive tokens
    held = [torch.randn(EXPERTS // world, *shape, generator=g) for shape in ((WIDTH, DIM), (DIM, WIDTH), (WIDTH, DIM))]
    w1, w2, w3 = (t.requires_grad_() for t in held)
    module = ExpertParallel((0, 1), rank, EXPERTS, Gate(2, True), 0)
    module.bind(dist.group.WORLD)
    out = []
    for micro in range(3):
        x = torch.rand(2, 5 + micro, DIM, generator=g).requires_grad_()  # positive: experts 0 and 1
        module(x, router, w1, w2, w3).sum().backward()
        out.append(x.grad.sum().item())
    return out
