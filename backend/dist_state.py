"""DistState (HotSPa's DStates): how a global tensor is laid out over a device group.

A DistState is a device group arranged as a mesh plus one placement per mesh
dim: ``Shard(d)`` splits tensor dim ``d`` evenly along that mesh dim,
``Replicate()`` copies the tensor, ``Partial()`` means each position holds a
summand of the tensor. Several mesh dims may shard the same tensor dim; the
later mesh dim then splits the earlier one's chunk further (as in DTensor).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import prod


@dataclass(frozen=True)
class Shard:
    dim: int

    def __str__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True)
class Replicate:
    def __str__(self) -> str:
        return "R"


@dataclass(frozen=True)
class Partial:
    def __str__(self) -> str:
        return "P"


Placement = Shard | Replicate | Partial


@dataclass(frozen=True)
class Box:
    """A dense sub-block of a global tensor: ``offset`` and ``shape`` per dim."""

    offset: tuple[int, ...]
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return prod(self.shape)

    def intersect(self, other: Box) -> Box | None:
        offset = []
        shape = []
        for a0, an, b0, bn in zip(self.offset, self.shape, other.offset, other.shape):
            lo = max(a0, b0)
            hi = min(a0 + an, b0 + bn)
            if hi <= lo:
                return None
            offset.append(lo)
            shape.append(hi - lo)
        return Box(tuple(offset), tuple(shape))

    def slices(self) -> tuple[slice, ...]:
        """Index that selects this box from the tensor it is a block of."""
        return tuple(slice(o, o + n) for o, n in zip(self.offset, self.shape))

    def relative_to(self, outer: Box) -> Box:
        """This box in the coordinates of ``outer`` (which must contain it)."""
        return Box(tuple(a - b for a, b in zip(self.offset, outer.offset)), self.shape)

    def __str__(self) -> str:
        return "[" + ", ".join(f"{o}:{o + n}" for o, n in zip(self.offset, self.shape)) + "]"


@dataclass(frozen=True)
class DistState:
    """``devices`` lists global ranks in row-major order of ``mesh``."""

    devices: tuple[int, ...]
    mesh: tuple[int, ...]
    placements: tuple[Placement, ...]

    def __post_init__(self) -> None:
        if len(self.mesh) != len(self.placements):
            raise ValueError(f"{len(self.mesh)} mesh dims but {len(self.placements)} placements")
        if prod(self.mesh) != len(self.devices) or len(set(self.devices)) != len(self.devices):
            raise ValueError(f"mesh {self.mesh} needs {prod(self.mesh)} distinct devices, got {self.devices}")

    @classmethod
    def replicated(cls, devices: tuple[int, ...]) -> DistState:
        return cls(tuple(devices), (len(devices),), (Replicate(),))

    @cached_property
    def _index(self) -> dict[int, int]:
        return {rank: i for i, rank in enumerate(self.devices)}

    def holds(self, rank: int) -> bool:
        return rank in self._index

    def coords(self, rank: int) -> tuple[int, ...]:
        index = self._index[rank]
        out = []
        for size in reversed(self.mesh):
            out.append(index % size)
            index //= size
        return tuple(reversed(out))

    def check(self, shape: tuple[int, ...], name: str = "tensor") -> None:
        """Raise if ``shape`` cannot be laid out this way, naming the dim and the fix."""
        split = list(shape)
        for size, placement in zip(self.mesh, self.placements):
            if not isinstance(placement, Shard):
                continue
            if not 0 <= placement.dim < len(shape):
                raise ValueError(f"{name}: Shard({placement.dim}) but the tensor has {len(shape)} dims {tuple(shape)}")
            if split[placement.dim] % size:
                raise ValueError(
                    f"{name}: dim {placement.dim} of size {shape[placement.dim]} cannot be split evenly "
                    f"into {size} parts here; choose a degree that divides {shape[placement.dim]}"
                )
            split[placement.dim] //= size

    def local_box(self, rank: int, shape: tuple[int, ...]) -> Box:
        """The block of the global tensor of ``shape`` that ``rank`` holds."""
        offset = [0] * len(shape)
        extent = list(shape)
        for coord, size, placement in zip(self.coords(rank), self.mesh, self.placements):
            if isinstance(placement, Shard):
                extent[placement.dim] //= size
                offset[placement.dim] += coord * extent[placement.dim]
        return Box(tuple(offset), tuple(extent))

    def partial_index(self, rank: int) -> int:
        """Which summand ``rank`` holds (0 when no mesh dim is Partial)."""
        index = 0
        for coord, size, placement in zip(self.coords(rank), self.mesh, self.placements):
            if isinstance(placement, Partial):
                index = index * size + coord
        return index

    @property
    def partial_count(self) -> int:
        return prod(size for size, p in zip(self.mesh, self.placements) if isinstance(p, Partial))

    def __str__(self) -> str:
        placements = ",".join(str(p) for p in self.placements)
        return f"<{placements} on {list(self.devices)} mesh {list(self.mesh)}>"
