"""One contiguous tensor per (layout, rank) holding the rank's blocks as views."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from hotswitch.backend.dist_state import Box
from hotswitch.backend.layout import TensorLayout


def flat_offsets(layout: Mapping[str, TensorLayout], rank: int) -> dict[str, tuple[int, Box]]:
    """Where each tensor ``rank`` holds starts in its flat buffer, and which block it is:
    blocks back to back in layout order. Any rank can compute any other rank's."""
    out = {}
    offset = 0
    for name, t in layout.items():
        if t.state.holds(rank):
            box = t.state.local_box(rank, tuple(t.shape))
            out[name] = (offset, box)
            offset += box.numel
    return out


def span_in(box: Box, block: Box, start: int) -> int | None:
    """Flat offset of ``box`` inside a row-major ``block`` stored from ``start``, or None
    when ``box`` is not one contiguous range there."""
    rel = box.relative_to(block)
    partial = [d for d in range(len(block.shape)) if rel.shape[d] != block.shape[d]]
    if partial and any(rel.shape[d] != 1 for d in range(partial[-1])):
        return None
    offset = start
    stride = 1
    for d in reversed(range(len(block.shape))):
        offset += rel.offset[d] * stride
        stride *= block.shape[d]
    return offset


class FlatBuffer:
    """``views[name]`` is this rank's block ``boxes[name]`` of each tensor it holds, laid
    out back to back in ``flat`` in layout order (see ``flat_offsets``)."""

    def __init__(
        self,
        layout: Mapping[str, TensorLayout],
        rank: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ):
        self.layout = layout
        self.rank = rank
        offsets = flat_offsets(layout, rank)
        self.boxes: dict[str, Box] = {name: box for name, (_, box) in offsets.items()}
        self.flat = torch.zeros(sum(b.numel for b in self.boxes.values()), dtype=dtype, device=device)
        self.views: dict[str, torch.Tensor] = {
            name: self.flat[start : start + box.numel].view(box.shape) for name, (start, box) in offsets.items()
        }

    @property
    def allocated(self) -> bool:
        return self.flat.untyped_storage().nbytes() > 0 or self.flat.numel() == 0

    def release(self) -> None:
        """Free the memory; ``flat``, ``views`` and every view taken of them stay bound to it
        and read undefined values once ``allocate`` brings it back."""
        self.flat.untyped_storage().resize_(0)

    def allocate(self) -> None:
        if not self.allocated:
            self.flat.untyped_storage().resize_(self.flat.numel() * self.flat.element_size())

    def region(self, name: str, box: Box) -> torch.Tensor:
        """The view of global block ``box`` of ``name`` (which this rank must hold)."""
        return self.views[name][box.relative_to(self.boxes[name]).slices()]

    @torch.no_grad()
    def load_global(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Fill every view from the full global tensors (tests and initialisation)."""
        for name, box in self.boxes.items():
            self.views[name].copy_(tensors[name][box.slices()])
