"""Rank function for the measured-memory tests (importable by spawned processes)."""

from hotswitch.backend.models.config import get_config
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.memory_measure import measured_activation_bytes


def measure(rank: int, world: int, strategies: list[str], lengths: list[int], precisions: list[str]) -> dict:
    """{(strategy, length, precision): bytes kept for backward, on the busiest rank}."""
    out = {}
    for precision in precisions:
        for name in strategies:
            s = Strategy.parse(name)
            engine = Engine(get_config("tiny"), [s], s, engine_run(1024, seed=0, precision=precision))
            for length in lengths:
                out[name, length, precision] = measured_activation_bytes(engine, s, length)
    return out
