"""Live bytes measured on any device: what the tensors PyTorch allocates inside a block hold, now
and at their peak. CUDA's allocator reports its own peak; on the CPU nothing does, so this counts
it: every operator's outputs are seen through a ``TorchDispatchMode`` (autograd's backward
included), each new storage once, and a storage stops counting when it is freed. Storages made
before the block are left out, and so are views and in-place results, which allocate nothing.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class LiveBytes(TorchDispatchMode):
    """``with LiveBytes() as live:`` counts the block; ``now``: bytes alive that were allocated
    inside it; ``peak``: their most at once."""

    def __init__(self) -> None:
        super().__init__()
        self.now = self.peak = 0
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        given = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for leaf in tree_leaves(out):  # a view or an in-place result holds its input's storage: not new
            if isinstance(leaf, torch.Tensor) and leaf.untyped_storage().data_ptr() not in given:
                self._count(leaf.untyped_storage())
        return out

    def _count(self, storage: torch.UntypedStorage) -> None:
        key = storage.data_ptr()
        if key in self._seen or storage.nbytes() == 0:
            return
        self._seen.add(key)
        self.now += storage.nbytes()
        self.peak = max(self.peak, self.now)
        weakref.finalize(storage, self._free, key, storage.nbytes())

    def _free(self, key: int, nbytes: int) -> None:
        self._seen.discard(key)
        self.now -= nbytes

    def reset_peak(self) -> None:
        """Start a new peak from what is alive now."""
        self.peak = self.now
