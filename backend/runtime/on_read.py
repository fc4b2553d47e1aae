"""Micro-batches made as a schedule reaches them: a sequence whose items are computed when read,
and the copy of a host tensor to the device that waits on nothing queued there.

A step's group used to be collated whole, each micro-batch moved to the device with a blocking
copy, before the first forward ran: on a GPU the device sat idle for all of it (about 6 ms for a
66K-token batch of documents at a 16K budget). Read one at a time, the host collates micro-batch
``m + 1`` while the device computes ``m``; the copies go through pinned memory, so that none of
them waits for the kernels queued before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar, overload

import torch

Item = TypeVar("Item")
Made = TypeVar("Made")


class OnRead(Sequence[Made]):
    """``make(items[i])`` for each ``i``, computed at each read (a schedule reads each once;
    the values are not kept, so a read micro-batch's tensors go when its passes are done)."""

    def __init__(self, make: Callable[[Item], Made], items: Sequence[Item]):
        self.make = make
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Made: ...

    @overload
    def __getitem__(self, index: slice) -> list[Made]: ...

    def __getitem__(self, index: int | slice) -> Made | list[Made]:
        if isinstance(index, slice):
            return [self.make(item) for item in self.items[index]]
        return self.make(self.items[index])


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` (on the host) on ``device``: on a GPU through pinned memory without waiting
    for the device (PyTorch keeps the pinned block until the copy is done), elsewhere as is."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
