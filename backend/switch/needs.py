"""What every receiver needs for a switch: the slices of each tensor and who owns them.

A slice is the intersection of a block of the source partition with a block of
the destination partition. A destination rank needs every slice of its block;
each slice may be held by several source ranks (replicas), any of which can
send it. A ``Partial`` source has several summands per block: the receiver needs
one copy of each and adds them up. A ``Partial`` destination keeps the value on
the first summand's ranks and zeros on the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.dist_state import Box, DistState
from hotswitch.backend.layout import TensorLayout


@dataclass(frozen=True)
class Need:
    """``receiver`` needs ``box`` of ``name``; any of ``owners`` can send it."""

    name: str
    box: Box
    receiver: int
    owners: tuple[int, ...]
    accumulate: bool


@dataclass(frozen=True)
class SwitchNeeds:
    names: tuple[str, ...]
    needs: tuple[Need, ...]
    zero_first: frozenset[tuple[int, str]]  # (rank, name) destinations set to zero before any slice lands


def validate(src: Mapping[str, TensorLayout], dst: Mapping[str, TensorLayout], cluster: Cluster) -> None:
    """Raise before any communication if the two layouts cannot be switched."""
    missing = sorted(set(src) - set(dst))
    extra = sorted(set(dst) - set(src))
    if missing or extra:
        raise ValueError(
            f"source and destination hold different tensors: only in source {missing[:5]}, "
            f"only in destination {extra[:5]}; switch layouts of the same model"
        )
    for name, s in src.items():
        d = dst[name]
        if tuple(s.shape) != tuple(d.shape):
            raise ValueError(f"{name}: shape {tuple(s.shape)} in the source but {tuple(d.shape)} in the destination")
        for side, layout in (("source", s), ("destination", d)):
            outside = [r for r in layout.state.devices if not 0 <= r < cluster.world_size]
            if outside:
                raise ValueError(
                    f"{name}: the {side} places it on ranks {outside} but the cluster has "
                    f"{cluster.world_size} devices; use a strategy that fits the cluster"
                )
            layout.state.check(tuple(layout.shape), f"{name} ({side} {layout.state})")


def _blocks(shape: tuple[int, ...], state: DistState) -> dict[tuple[Box, int], list[int]]:
    """(block, summand) -> ranks holding it."""
    blocks: dict[tuple[Box, int], list[int]] = {}
    for rank in state.devices:
        blocks.setdefault((state.local_box(rank, shape), state.partial_index(rank)), []).append(rank)
    return blocks


def _layout_needs(shape: tuple[int, ...], src: DistState, dst: DistState):
    accumulate = src.partial_count > 1
    sources = _blocks(shape, src)
    out: list[tuple[Box, int, tuple[int, ...]]] = []  # (piece, receiver, owners)
    zero: list[int] = []
    for (box, summand), ranks in _blocks(shape, dst).items():
        if summand:
            zero.extend(ranks)
            continue
        if accumulate:
            zero.extend(ranks)
        for (src_box, _), owners in sources.items():
            piece = box.intersect(src_box)
            if piece is not None:
                out.extend((piece, receiver, tuple(owners)) for receiver in ranks)
    out.sort(key=lambda n: (n[0].offset, n[1]))
    return out, zero, accumulate


def switch_needs(src: Mapping[str, TensorLayout], dst: Mapping[str, TensorLayout], cluster: Cluster) -> SwitchNeeds:
    validate(src, dst, cluster)
    cache: dict = {}
    needs: list[Need] = []
    zero_first: set[tuple[int, str]] = set()
    for name, s in src.items():
        d = dst[name]
        key = (tuple(s.shape), s.state, d.state)
        if key not in cache:
            cache[key] = _layout_needs(*key)
        pieces, zero, accumulate = cache[key]
        needs.extend(Need(name, box, receiver, owners, accumulate) for box, receiver, owners in pieces)
        zero_first.update((rank, name) for rank in zero)
    return SwitchNeeds(tuple(src), tuple(needs), frozenset(zero_first))
