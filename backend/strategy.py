"""A parallel strategy: data, context, tensor, pipeline and expert degrees (and Megatron
sequence parallelism, recompute) and the rank mesh they imply."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, NamedTuple

_TOKEN = re.compile(r"(dp|ep|cp|ul|tp|pp)(\d+)|(sp|ckpt|sel)")
_FLAGS = ("sp", "ckpt", "sel")


def _first_rank(text: str, where: str, size: int) -> int:
    """The first rank of ``@a-b`` or ``@a``, checked against the strategy's ``size`` devices."""
    match = re.fullmatch(r"\s*(\d+)(?:\s*-\s*(\d+))?\s*", where)
    if match is None:
        raise ValueError(f"cannot parse the ranks of {text!r}: write them like 'tp2@2-3' (first-last) or 'tp2@2'")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first + size - 1
    if last - first + 1 != size:
        raise ValueError(
            f"{text!r} places {size} devices on ranks {first}-{last} ({last - first + 1}); make them match"
        )
    return first


class Coords(NamedTuple):
    """A rank's place in a strategy's (pp, dp, cp, tp) mesh."""

    pp: int
    dp: int
    cp: int
    tp: int


@dataclass(frozen=True)
class Strategy:
    """dp x cp x tp x pp ranks arranged as a (pp, dp, cp, tp) mesh with tp varying fastest and cp
    next, so that tensor-parallel groups are runs of consecutive ranks (inside one node whenever
    tp divides the devices per node) and context-parallel groups stay as close as the node allows.
    ``cp``: context parallelism, every rank of a cp group holds two zig-zag chunks of every
    sequence (load-balanced causal attention); ``ulysses`` selects DeepSpeed-Ulysses (two
    all-to-alls re-shard attention from sequence to heads) instead of ring attention for that
    dim (written ``ul{N}``). Parameters are replicated over cp as over dp; gradients are reduced
    over dp x cp. ``sp``: the tensor-parallel ranks also split the activations of the norm and
    residual regions along the sequence. ``ckpt``: activation checkpointing per transformer block
    (only a block's input is kept for backward, its inside recomputed); ``sel``: Megatron's
    selective recompute (attention's core is recomputed, matmul outputs kept). They change no
    layout, only time and memory. ``first``: None for a strategy over all of a job's devices;
    else the rank where a device group starts (written ``@2-3``), a strategy over part of the
    devices trained side by side with other groups on disjoint ranks; its mesh covers ``ranks``.
    ``ep``: expert parallelism, a mixture of experts' experts split over ``ep`` consecutive of
    the ``dp`` data-parallel replicas (``dp`` counts them all: ``dp2ep2`` is written with ep as
    a factor of its own and holds ``dp=4``); tokens travel to their experts' replicas and back
    (``parallel.expert_parallel``)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    sp: bool = False
    ckpt: bool = False
    cp: int = 1
    ulysses: bool = False
    sel: bool = False
    first: int | None = None
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "cp", "ep"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.first is not None and (not isinstance(self.first, int) or self.first < 0):
            raise ValueError(f"a device group's first rank must be an integer >= 0, got {self.first!r}")
        if self.sp and self.tp == 1:
            raise ValueError(f"{self}: sequence parallelism splits over the tensor-parallel ranks; it needs tp > 1")
        if self.ckpt and self.sel:
            raise ValueError(
                f"{self}: selective recompute (sel) and full activation checkpointing (ckpt) exclude each other; "
                "choose one"
            )
        if self.dp % self.ep:
            raise ValueError(
                f"ep={self.ep} must divide the data-parallel replicas (dp={self.dp}): the experts split over "
                f"replicas; choose ep dividing {self.dp}, or write dp{self.ep}ep{self.ep} for {self.ep} replicas"
            )
        if self.ulysses and self.cp == 1:
            raise ValueError("ulysses is a flavour of context parallelism; it needs cp > 1 (write ul2, ul4, ...)")

    @cached_property
    def _hash(self) -> int:  # computed once: strategies key every cost table the plan search reads
        # ints only: a rank receives strategies pickled with their cached hash, and before
        # Python 3.12 hash(None) differs between processes
        first = -1 if self.first is None else self.first
        return hash((self.dp, self.tp, self.pp, self.sp, self.ckpt, self.cp, self.ulysses, self.sel, first, self.ep))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def parse(cls, text: str | Strategy) -> Strategy:
        """Parse ``"dp2tp2pp1"``; missing degrees are 1 (``"tp4"`` is dp1tp4pp1); ``cp2`` is
        ring-attention context parallelism and ``ul2`` its Ulysses flavour (``"dp2cp2tp2"``); a
        trailing ``sp`` turns on sequence parallelism (``"dp2tp2sp"``), a trailing ``ckpt``
        activation checkpointing (``"dp4ckpt"``, ``"dp2tp2spckpt"``) or ``sel`` selective
        recompute (``"tp4spsel"``); ``@2-3`` (or ``@2``) places it on ranks 2-3 as a device group
        (``"tp2@2-3"``)."""
        if isinstance(text, Strategy):
            return text
        spec, placed, where = text.strip().lower().partition("@")
        spec = spec.strip()
        degrees: dict[str, Any] = {}  # degrees (int) and flags (bool), by keyword of Strategy
        position = 0
        for match in _TOKEN.finditer(spec):
            name = match.group(1) or match.group(3)
            flags_after = _FLAGS[_FLAGS.index(name) :] if name in _FLAGS else _FLAGS
            if match.start() != position or name in degrees or any(f in degrees for f in flags_after):
                break
            degrees[name] = True if name in _FLAGS else int(match.group(2))
            position = match.end()
        if set(degrees) <= set(_FLAGS) or position != len(spec) or {"cp", "ul"} <= set(degrees):
            raise ValueError(
                f"cannot parse strategy {text!r}: write it like 'dp2cp2tp2pp1' (each of dp, cp or ul, tp, pp at "
                "most once), with 'sp' (sequence parallelism) and then 'ckpt' (activation checkpointing) or "
                "'sel' (selective recompute) at the end"
            )
        if "ul" in degrees:
            degrees["cp"], degrees["ulysses"] = degrees.pop("ul"), True
        if "ep" in degrees:  # written as a factor of its own: dp2ep2 is 4 data-parallel replicas
            degrees["dp"] = degrees.get("dp", 1) * degrees["ep"]
        strategy = cls(**degrees)
        return replace(strategy, first=_first_rank(text, where, strategy.world_size)) if placed else strategy

    def __str__(self) -> str:
        context = (f"ul{self.cp}" if self.ulysses else f"cp{self.cp}") if self.cp > 1 else ""
        flags = ("sp" if self.sp else "") + ("ckpt" if self.ckpt else "") + ("sel" if self.sel else "")
        where = "" if self.first is None else f"@{self.first}-{self.ranks[-1]}"
        experts = f"ep{self.ep}" if self.ep > 1 else ""
        return f"dp{self.dp // self.ep}{experts}{context}tp{self.tp}pp{self.pp}{flags}{where}"

    @property
    def world_size(self) -> int:
        return self.dp * self.cp * self.tp * self.pp

    @property
    def is_group(self) -> bool:
        """Whether the strategy is a device group over part of the job's devices."""
        return self.first is not None

    @property
    def offset(self) -> int:
        """The global rank of the strategy's mesh origin (0 unless a device group)."""
        return self.first or 0

    @property
    def ranks(self) -> range:
        """The global ranks of the strategy's devices."""
        return range(self.offset, self.offset + self.world_size)

    @property
    def mesh_shape(self) -> tuple[int, int, int, int]:
        return (self.pp, self.dp, self.cp, self.tp)

    @property
    def replicas(self) -> int:
        """Model replicas a gradient is summed over: dp x cp (cp splits sequences, not the model)."""
        return self.dp * self.cp

    @property
    def row_multiple(self) -> int:
        """A micro-batch's rows are padded to a multiple of this: sequence parallelism splits a
        row over tp ranks, context parallelism into 2 x cp zig-zag chunks (of that)."""
        return (self.tp if self.sp else 1) * (2 * self.cp if self.cp > 1 else 1)

    def rank_of(self, pp: int, dp: int, cp: int, tp: int) -> int:
        return self.offset + ((pp * self.dp + dp) * self.cp + cp) * self.tp + tp

    def coords(self, rank: int) -> Coords:
        """(pp, dp, cp, tp) coordinates of a global rank."""
        if rank not in self.ranks:
            raise ValueError(f"rank {rank} is outside {self} (ranks {self.offset}-{self.ranks[-1]})")
        rank -= self.offset
        tp = rank % self.tp
        rest = rank // self.tp
        cp, rest = rest % self.cp, rest // self.cp
        return Coords(rest // self.dp, rest % self.dp, cp, tp)

    @cached_property
    def stage_ranks(self) -> tuple[tuple[int, ...], ...]:
        """The ranks of each pipeline stage, in (dp, cp, tp) mesh order."""
        size = self.dp * self.cp * self.tp
        return tuple(tuple(range(self.offset + s * size, self.offset + (s + 1) * size)) for s in range(self.pp))

    def tp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank_of(c.pp, c.dp, c.cp, t) for t in range(self.tp))

    def cp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank_of(c.pp, c.dp, k, c.tp) for k in range(self.cp))

    def token_group(self, rank: int) -> tuple[int, ...]:
        """The ranks a sequence's tokens are split over with ``rank``'s: its cp group, times its
        tp group under sequence parallelism (each holds its part of the rows' positions)."""
        c = self.coords(rank)
        tps = range(self.tp) if self.sp else (c.tp,)
        return tuple(self.rank_of(c.pp, c.dp, k, t) for k in range(self.cp) for t in tps)

    def dp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank_of(c.pp, d, c.cp, c.tp) for d in range(self.dp))

    def replica_group(self, rank: int) -> tuple[int, ...]:
        """The ranks holding the same parameter shard: dp x cp, where gradients are reduced."""
        c = self.coords(rank)
        return tuple(self.rank_of(c.pp, d, k, c.tp) for d in range(self.dp) for k in range(self.cp))

    def ep_group(self, rank: int) -> tuple[int, ...]:
        """The ranks the experts are split over with ``rank`` (consecutive data-parallel replicas),
        between which tokens travel to their experts and back."""
        c = self.coords(rank)
        first = c.dp - c.dp % self.ep
        return tuple(self.rank_of(c.pp, d, c.cp, c.tp) for d in range(first, first + self.ep))

    def expert_replica_group(self, rank: int) -> tuple[int, ...]:
        """The ranks holding the same experts as ``rank`` (its replica group, every ep-th): where
        the experts' gradients are summed."""
        c = self.coords(rank)
        replicas = range(c.dp % self.ep, self.dp, self.ep)
        return tuple(self.rank_of(c.pp, d, k, c.tp) for d in replicas for k in range(self.cp))

    def replica_index(self, rank: int) -> int:
        """This rank's place in its ``replica_group``."""
        c = self.coords(rank)
        return c.dp * self.cp + c.cp

    def check_cp_divides(self, world_size: int) -> None:
        """Raise, naming the fix, where the context-parallel degree does not divide the devices."""
        if world_size % self.cp:
            raise ValueError(
                f"strategy {self}: cp={self.cp} does not divide the {world_size} devices; choose a context-parallel "
                f"degree dividing {world_size}"
            )

    def check_fits(self, world_size: int) -> None:
        """Raise unless the strategy spans all ``world_size`` devices (or, as a device group
        placed with ``@``, lies within them)."""
        if self.is_group:
            if self.ranks[-1] >= world_size:
                raise ValueError(
                    f"device group {self} needs ranks {self.offset}-{self.ranks[-1]} but the cluster has "
                    f"{world_size} devices (0-{world_size - 1}); place it within them"
                )
            return
        self.check_cp_divides(world_size)
        if self.world_size != world_size:
            raise ValueError(
                f"strategy {self} uses {self.world_size} devices but the cluster has {world_size}; "
                f"choose degrees whose product dp*cp*tp*pp is {world_size}"
            )
