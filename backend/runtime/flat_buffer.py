"""One contiguous tensor per (strategy, rank) holding the rank's shards as views."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from hotswitch.backend.dist_state import Box
from hotswitch.backend.switch.needs import TensorLayout


class FlatBuffer:
    """``views[name]`` is this rank's block ``boxes[name]`` of each tensor it holds, laid
    out back to back in ``flat`` in layout order."""

    def __init__(
        self,
        layout: Mapping[str, TensorLayout],
        rank: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ):
        self.rank = rank
        self.boxes: dict[str, Box] = {
            name: t.state.local_box(rank, tuple(t.shape)) for name, t in layout.items() if t.state.holds(rank)
        }
        self.flat = torch.zeros(sum(b.numel for b in self.boxes.values()), dtype=dtype, device=device)
        self.views: dict[str, torch.Tensor] = {}
        offset = 0
        for name, box in self.boxes.items():
            self.views[name] = self.flat[offset : offset + box.numel].view(box.shape)
            offset += box.numel

    def region(self, name: str, box: Box) -> torch.Tensor:
        """The view of global block ``box`` of ``name`` (which this rank must hold)."""
        local = box.relative_to(self.boxes[name])
        return self.views[name][local.slices()]

    def load_global(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Fill every view from the full global tensors (tests and initialisation)."""
        for name, box in self.boxes.items():
            self.views[name].copy_(tensors[name][box.slices()])
