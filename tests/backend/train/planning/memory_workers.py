"""Rank function for the measured-memory tests (importable by spawned processes)."""

from hotswitch.backend.models.config import get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.memory_measure import measured_activation_bytes
from hotswitch.backend.train.state.optim import OptimizerConfig


def measure(rank: int, world: int, strategies: list[str], lengths: list[int], precisions: list[str]) -> dict:
    """{(strategy, length, precision): bytes kept for backward, on the busiest rank}."""
    out = {}
    for precision in precisions:
        for name in strategies:
            s = Strategy.parse(name)
            engine = Engine(get_config("tiny"), [s], s, OptimizerConfig(), 0, 1024, precision=Precision.of(precision))
            for length in lengths:
                out[name, length, precision] = measured_activation_bytes(engine, s, length)
    return out
