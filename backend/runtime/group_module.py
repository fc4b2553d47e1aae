"""``GroupModule``: a module of an executable graph that communicates over a set of ranks.

Graphs are compiled before any process group exists, so such a module is created unbound,
knowing only its ``ranks`` (global, in group order); the executable graph's ``bind`` hands it
the group's process group (``ProcessGroups[ranks]``). Running an unbound one is an error that
says so."""

from __future__ import annotations

from torch import nn


class GroupModule(nn.Module):
    """``ranks`` and, once bound, ``group``; ``bound_group()`` in ``forward``. ``what`` names the
    module in the unbound error."""

    what = "a collective"

    def __init__(self, ranks: tuple[int, ...]):
        super().__init__()
        self.ranks = tuple(ranks)
        self.group = None

    def bind(self, group) -> None:
        self.group = group

    def bound_group(self):
        """The process group; raises where ``bind`` has not been called."""
        if self.group is None:
            raise RuntimeError(f"{self.what} over ranks {list(self.ranks)} has no process group; call bind() first")
        return self.group
