"""Every process group any strategy needs, created once, up front, on every rank."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist

from hotswitch.backend.strategy import Strategy


def strategy_rank_sets(strategies: Iterable[Strategy]) -> set[tuple[int, ...]]:
    """Every tensor-, context- and data-parallel group, every replica group (dp x cp, where
    gradients are summed) and token group (cp, times tp under sp) of every rank under each
    strategy; under expert parallelism its expert groups and expert replica groups too."""
    out: set[tuple[int, ...]] = set()
    for s in strategies:
        for rank in s.ranks:
            groups = [s.tp_group(rank), s.cp_group(rank), s.dp_group(rank), s.replica_group(rank), s.token_group(rank)]
            if s.ep > 1:  # tokens to their experts and back; the experts' gradients summed
                groups += [s.ep_group(rank), s.expert_replica_group(rank)]
            out.update(group for group in groups if len(group) > 1)
    return out


class ProcessGroups:
    """Groups keyed by their ranks. ``new_group`` is collective, so every rank creates
    every group, in the same (sorted) order, whether or not it belongs to it."""

    def __init__(self, rank_sets: Iterable[tuple[int, ...]] = (), backend: str | None = None):
        self.backend = backend
        self._groups = {tuple(range(dist.get_world_size())): dist.group.WORLD}
        self.add(rank_sets)

    def add(self, rank_sets: Iterable[tuple[int, ...]]) -> None:
        """Create the groups not made yet (collective: every rank passes the same sets)."""
        for ranks in sorted({tuple(r) for r in rank_sets} - set(self._groups)):
            self._groups[ranks] = dist.new_group(list(ranks), backend=self.backend)

    def __getitem__(self, ranks: tuple[int, ...]):
        try:
            return self._groups[tuple(ranks)]
        except KeyError:
            raise KeyError(f"no process group for ranks {list(ranks)}; create it up front with ProcessGroups") from None


def init_from_env(device: str = "cpu") -> None:
    """Join the job's default process group from torchrun's environment, if not joined yet:
    gloo on CPU; on CUDA, NCCL for CUDA tensors and gloo for the few CPU ones (timings,
    broadcast objects), each rank on its own GPU (``cuda:LOCAL_RANK``)."""
    if dist.is_initialized():
        return
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
        dist.init_process_group("cpu:gloo,cuda:nccl")
    else:
        dist.init_process_group("gloo")
