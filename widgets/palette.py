"""Colours shared by the views: one per graph node kind, one per strategy."""

from __future__ import annotations

from types import MappingProxyType

# Read-only so no view can recolour another's nodes.
KIND_COLORS = MappingProxyType(
    {
        "input": "#4c78a8",
        "param": "#9ecae9",
        "buffer": "#c7c7c7",
        "compute": "#54a24b",
        "comm": "#e45756",
        "dummy": "#8c8c8c",  # drawn open: only the outline shows
        "output": "#b279a2",
        "layer": "#f2cf5b",
    }
)

STRATEGY_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def strategy_color(index: int) -> str:
    """A stable colour for the ``index``-th strategy of a view (cycles after eight)."""
    return STRATEGY_COLORS[index % len(STRATEGY_COLORS)]
