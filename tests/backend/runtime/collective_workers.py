"""Rank functions for the collective tests (importable by spawned processes)."""

import torch
import torch.distributed as dist

from hotswitch.backend.runtime.collectives import KINDS, Collective


def rank_input(rank: int) -> torch.Tensor:
    return torch.arange(8.0).reshape(4, 2) + 10 * rank


def rank_grad(rank: int, shape: tuple[int, ...]) -> torch.Tensor:
    return (rank + 1) * torch.arange(float(torch.Size(shape).numel())).reshape(shape)


def every_collective(rank: int, world: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """kind -> (forward output, gradient of the input) of each collective along dim 0."""
    out = {}
    for kind in KINDS:
        x = rank_input(rank).requires_grad_()
        collective = Collective(kind, tuple(range(world)), dim=0)
        collective.bind(dist.group.WORLD)
        y = collective(x)
        y.backward(rank_grad(rank, tuple(y.shape)))
        out[kind] = (y.detach(), x.grad)
    return out
