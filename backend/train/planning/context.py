"""Context parallelism in planning: how a ``cp`` strategy splits a sequence, what it holds in
flight, which cp layouts ``auto`` considers, and the checks made before anything launches.

A cp group of ``cp`` ranks cuts every sequence into ``2 * cp`` zig-zag chunks (each padded to
the same length, never refused), rank ``i`` holding chunks ``i`` and ``2cp - 1 - i`` so that
causal attention's work is even. Ring attention (``cp{N}``) passes key/value blocks round the
group; Ulysses (``ul{N}``) re-shards q, k, v from sequence to heads with all-to-alls and so needs
the heads each tensor-parallel rank holds, and its kv heads, divisible by ``cp``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from hotswitch.backend.layout import ulysses_fits
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import Precision
from hotswitch.backend.strategy import Strategy

__all__ = ["check_context", "context_candidates", "in_flight_bytes", "local_tokens", "one_flavour", "ulysses_fits"]


def local_tokens(length: int, cp: int) -> int:
    """Tokens one cp rank holds of a ``length``-token sequence: two zig-zag chunks, each chunk
    padded to ``ceil(length / 2cp)`` (the whole sequence where ``cp`` is 1)."""
    if cp == 1:
        return length
    return 2 * -(-length // (2 * cp))


def in_flight_bytes(config: ModelConfig, strategy: Strategy, length: int, precision: Precision) -> float:
    """What context parallelism holds on top of a sequence's kept activations, at its peak on one
    device (one layer at a time): for ring attention two sets of the travelling blocks (the one
    being used, the one arriving), in backward the keys, values and their gradients (4 tensors);
    for Ulysses the all-to-all buffers of q, k, v and the output in the other layout."""
    if strategy.cp == 1:
        return 0.0
    c = precision.param_bytes
    tp = strategy.tp
    kv = config.n_kv_heads * config.head_size
    tokens = local_tokens(length, strategy.cp)
    if strategy.ulysses:
        return c * tokens * (2 * config.q_dim + 2 * kv) / tp
    return 2 * 4 * c * tokens * kv / tp


def check_context(config: ModelConfig, strategy: Strategy, world: int) -> tuple[Strategy, str | None]:
    """``strategy`` as it will run on ``world`` ranks, and a notice where it changed: raises,
    naming the fix, where ``cp`` does not divide the world size; Ulysses whose heads cannot be
    split over ``cp`` falls back to ring attention of the same degree, with a notice."""
    strategy.check_cp_divides(world)
    if strategy.ulysses and not ulysses_fits(config, strategy):
        ring = replace(strategy, ulysses=False)
        return ring, (
            f"{strategy}: Ulysses cannot split {config.name}'s {config.n_heads} heads / {config.n_kv_heads} kv heads "
            f"(per tp rank: {config.n_heads // strategy.tp} / {config.n_kv_heads // strategy.tp}) over cp="
            f"{strategy.cp}; running ring attention instead ({ring})"
        )
    return strategy, None


def context_candidates(config: ModelConfig, world: int, fits=None) -> list[Strategy]:
    """The cp layouts ``auto`` considers on ``world`` devices: cp of 2 and up (powers of two)
    beside tp (with sequence parallelism where tp > 1) and dp, no pipeline (a pipeline does not
    shorten one long sequence's latency, cp does); each with ring attention, and with Ulysses
    where the heads allow. ``fits(strategy)`` drops layouts the model cannot take (tp must
    divide its heads...)."""
    out = []
    cp = 2
    while cp <= world:
        for tp in range(1, world // cp + 1):
            if world % (cp * tp):
                continue
            ring = Strategy(dp=world // (cp * tp), tp=tp, cp=cp, sp=tp > 1)
            if fits is not None and not fits(ring):
                continue
            out.append(ring)
            if ulysses_fits(config, ring):
                out.append(replace(ring, ulysses=True))
        cp *= 2
    return out


def one_flavour(
    strategies: Sequence[Strategy], seconds: Mapping[Strategy, Sequence[float]], longest: Mapping[Strategy, int]
) -> list[Strategy]:
    """``strategies`` with each layout offered both with ring attention and with Ulysses cut to
    the one the cost model prefers: the one holding longer sequences (``longest``, capped at what
    the batch needs), else the faster over the batch (``seconds`` per length), ring on a tie."""

    def rank(s: Strategy) -> tuple:
        return (-longest[s], sum(seconds[s]), s.ulysses)

    out = []
    for s in strategies:
        twin = replace(s, ulysses=not s.ulysses) if s.cp > 1 else None
        if twin is None or twin not in longest or rank(s) < rank(twin):
            out.append(s)
    return out
