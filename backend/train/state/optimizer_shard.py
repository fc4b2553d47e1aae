"""A distributed optimizer's part of the flat buffers (Megatron's distributed optimizer, ZeRO-1):
the instantiation strategy's replicas (dp x cp, as Megatron shards over its data-parallel
group with context parallelism: cp ranks hold the same weights) each update one contiguous
part of the flat parameter buffer, holding the fp32 master weights and AdamW's moments of that part only,
then all-gather the updated parameters.

The gradients every replica holds at the update are already summed over the replicas (the
step reduces them before switching them into the master layout), so a replica reads its part
of them in place: no reduce-scatter is needed here, and the hot switches move the same bytes as
without sharding. AdamW is element-wise, so updating a part equals updating the whole.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist


class DataParallelShard:
    """Replica ``replica`` of ``replicas``'s range ``[lo, hi)`` of a flat buffer of ``numel``
    elements: parts of ``ceil(numel / replicas)``, the last one shorter. ``group`` gives the
    data-parallel process group when a collective runs (the engine rebuilds its groups when
    its strategies change)."""

    def __init__(self, numel: int, replicas: int, replica: int, group: Callable[[], object]):
        self.numel = numel
        self.replicas = replicas
        self.group = group
        self.chunk = -(-numel // replicas)
        self.lo = min(numel, replica * self.chunk)
        self.hi = min(numel, self.lo + self.chunk)

    def part(self, flat: torch.Tensor) -> torch.Tensor:
        """This replica's part of ``flat`` (a view)."""
        return flat[self.lo : self.hi]

    @torch.no_grad()
    def gather_into(self, part: torch.Tensor, flat: torch.Tensor) -> None:
        """Every replica's ``part`` (cast to ``flat``'s dtype) into ``flat`` (collective over the replicas)."""
        send = torch.zeros(self.chunk, dtype=flat.dtype, device=flat.device)
        send[: self.hi - self.lo] = part
        parts = [torch.empty_like(send) for _ in range(self.replicas)]
        dist.all_gather(parts, send, group=self.group())
        for i, received in enumerate(parts):
            lo = min(self.numel, i * self.chunk)
            hi = min(self.numel, lo + self.chunk)
            flat[lo:hi].copy_(received[: hi - lo])

    def gathered(self, part: torch.Tensor) -> torch.Tensor:
        """The whole flat buffer whose parts the replicas hold (collective over the replicas)."""
        flat = torch.empty(self.numel, dtype=part.dtype, device=part.device)
        self.gather_into(part, flat)
        return flat
