"""A parallel strategy: data, tensor and pipeline degrees (and Megatron sequence
parallelism) and the rank mesh they imply."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

_TOKEN = re.compile(r"(dp|tp|pp)(\d+)|(sp|ckpt)")
_FLAGS = ("sp", "ckpt")


@dataclass(frozen=True)
class Strategy:
    """dp x tp x pp ranks arranged as a (pp, dp, tp) mesh with tp varying fastest,
    so that tensor-parallel groups are runs of consecutive ranks (inside one node
    whenever tp divides the devices per node). ``sp``: the tensor-parallel ranks also
    split the activations of the norm and residual regions along the sequence. ``ckpt``:
    activation checkpointing per transformer block (only a block's input is kept for backward,
    its inside recomputed); it changes no layout, only time and memory."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    sp: bool = False
    ckpt: bool = False

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.sp and self.tp == 1:
            raise ValueError(f"{self}: sequence parallelism splits over the tensor-parallel ranks; it needs tp > 1")
        object.__setattr__(self, "_hash", hash((self.dp, self.tp, self.pp, self.sp, self.ckpt)))

    def __hash__(self) -> int:  # computed once: strategies key every cost table the plan search reads
        return self._hash

    @classmethod
    def parse(cls, text: str | Strategy) -> Strategy:
        """Parse ``"dp2tp2pp1"``; missing degrees are 1 (``"tp4"`` is dp1tp4pp1); a trailing
        ``sp`` turns on sequence parallelism (``"dp2tp2sp"``), a trailing ``ckpt`` activation
        checkpointing (``"dp4ckpt"``, ``"dp2tp2spckpt"``)."""
        if isinstance(text, Strategy):
            return text
        spec = text.strip().lower()
        degrees: dict[str, int | bool] = {}
        position = 0
        for match in _TOKEN.finditer(spec):
            name = match.group(1) or match.group(3)
            flags_after = _FLAGS[_FLAGS.index(name) :] if name in _FLAGS else _FLAGS
            if match.start() != position or name in degrees or any(f in degrees for f in flags_after):
                break
            degrees[name] = True if name in _FLAGS else int(match.group(2))
            position = match.end()
        if set(degrees) <= set(_FLAGS) or position != len(spec):
            raise ValueError(
                f"cannot parse strategy {text!r}: write it like 'dp2tp2pp1' (each of dp, tp, pp at most once), "
                "with 'sp' (sequence parallelism) and then 'ckpt' (activation checkpointing) at the end"
            )
        return cls(**degrees)

    def __str__(self) -> str:
        return f"dp{self.dp}tp{self.tp}pp{self.pp}" + ("sp" if self.sp else "") + ("ckpt" if self.ckpt else "")

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def mesh_shape(self) -> tuple[int, int, int]:
        return (self.pp, self.dp, self.tp)

    def rank_of(self, pp: int, dp: int, tp: int) -> int:
        return (pp * self.dp + dp) * self.tp + tp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(pp, dp, tp) coordinates of a global rank."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is outside {self} ({self.world_size} ranks)")
        return rank // (self.dp * self.tp), rank // self.tp % self.dp, rank % self.tp

    @cached_property
    def stage_ranks(self) -> tuple[tuple[int, ...], ...]:
        """The ranks of each pipeline stage, in (dp, tp) mesh order."""
        size = self.dp * self.tp
        return tuple(tuple(range(s * size, (s + 1) * size)) for s in range(self.pp))

    def tp_group(self, rank: int) -> tuple[int, ...]:
        pp, dp, _ = self.coords(rank)
        return tuple(self.rank_of(pp, dp, t) for t in range(self.tp))

    def dp_group(self, rank: int) -> tuple[int, ...]:
        pp, _, tp = self.coords(rank)
        return tuple(self.rank_of(pp, d, tp) for d in range(self.dp))

    def check_fits(self, world_size: int) -> None:
        if self.world_size != world_size:
            raise ValueError(
                f"strategy {self} uses {self.world_size} devices but the cluster has {world_size}; "
                f"choose degrees whose product dp*tp*pp is {world_size}"
            )
