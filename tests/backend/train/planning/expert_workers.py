"""Rank functions for the expert-parallel profile tests (importable by spawned processes)."""

import torch
import torch.distributed as dist

from hotswitch.backend.models.config import get_config
from hotswitch.backend.models.experts import Gate
from hotswitch.backend.parallel.expert_parallel import ExpertParallel
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.measure_experts import first_forwards, imbalance, replay, seen_sends
from hotswitch.backend.train.planning.profile import profile

STRATEGIES = ("dp4", "ep4", "dp2ep2")
LENGTHS = [32, 64]


def profiled(rank: int, world: int) -> dict:
    """The tiny-moe model profiled afresh under ``STRATEGIES``: its cost model's expert exchanges."""
    strategies = [Strategy.parse(s) for s in STRATEGIES]
    engine = Engine(get_config("tiny-moe"), strategies, strategies[0], engine_run(256, seed=0))
    cost = profile(engine, strategies, LENGTHS, budget=float("inf"), use_cache=False)
    return cost.expert_exchanges()


def skewed(rank: int, world: int) -> tuple[float, float]:
    """One mixture of 8 experts split over every rank, whose router sends every token to experts
    0 and 1 (rank 0's): the imbalance ``measure_experts`` reads off its forward, then that of an
    even router (each rank's tokens to its own experts), and the replayed exchange run once."""
    torch.manual_seed(rank)
    module = ExpertParallel(tuple(range(world)), rank, 8, Gate(2, True), 0)
    module.bind(dist.group.WORLD)
    dim, width, held = 16, 8, 8 // world
    x = torch.randn(10, dim)
    x[:, 0] = 1.0
    weights = [torch.randn(held, width, dim), torch.randn(held, dim, width), torch.randn(held, width, dim)]
    out = []
    for favourite in (0, 2 * rank):  # all to rank 0's experts; then each rank's own
        router = torch.zeros(8, dim)
        router[favourite, 0], router[favourite + 1, 0] = 10.0, 9.0
        with seen_sends([module]) as seen:
            module(x, router, *weights)
        sends = first_forwards(seen)
        out.append(imbalance(sends))
        replay(sends)()
    return out[0], out[1]
