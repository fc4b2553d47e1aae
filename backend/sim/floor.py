"""The least a step can take: a floor under every plan ``auto`` could choose, sequential or side
by side, so that a speedup goal can be set against what the layouts allow at all.

Two bounds, each below any plan over the candidate layouts, and the floor is the larger:
- the batch's work: each sequence trained by its fastest layout (over every device, or as a
  device group, counted at its share of the cluster), in a full micro-batch of its own length
  with the pipelines full (``CostModel.sequence_s``);
- the batch's longest sequence trained alone on the fastest layout that holds it: no step ends
  before it does.
Both on the device's own seconds, with the memory the most generous instantiation leaves.
Everything else a step pays is left out: pipeline fill and drain beside other work, switches,
gradient syncs, the update, replicas or groups waiting for each other. A real step takes more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from hotswitch.backend.sim.contenders import group_candidates, sim_candidates
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.cost import CostModel
from hotswitch.backend.train.planning.dispatch import instantiation_strategy


def step_floor(setup: Setup, candidates: Sequence[Strategy]) -> float:
    """Seconds no plan over ``candidates`` can beat on ``setup``'s batch: the larger of
    ``work_floor`` and ``longest_alone``."""
    cost = _roomiest(setup, candidates)
    return max(work_floor(setup, candidates, cost), longest_alone(setup, candidates, cost))


def plan_floor(setup: Setup) -> float:
    """``step_floor`` over the layouts ``auto`` weighs on ``setup``: ``sim_candidates`` (with the
    cp layouts where ``setup.context_parallel``) and, where ``setup.side_by_side``, device groups."""
    return step_floor(setup, sim_candidates(setup) + (group_candidates(setup) if setup.side_by_side else []))


def _roomiest(setup: Setup, candidates: Sequence[Strategy]) -> CostModel:
    """The candidates' device seconds under the instantiation that leaves them the most memory."""
    roomiest = max((instantiation_strategy([s]) for s in candidates if not s.is_group), key=setup.budget)
    return setup.exact_model(setup.cost_model(list(candidates), roomiest))


def work_floor(setup: Setup, candidates: Sequence[Strategy], cost: CostModel) -> float:
    """The sum over the batch of each sequence's least cluster-seconds among ``candidates``
    (device groups among them weighted by the devices they hold)."""
    world = setup.cluster.world_size
    total = 0.0
    for length, count in Counter(setup.lengths).items():
        total += count * _least(
            (cost.sequence_s(s, length) * s.world_size / world for s in candidates if cost.fits(s, length)),
            length,
            setup,
        )
    return total


def longest_alone(setup: Setup, candidates: Sequence[Strategy], cost: CostModel) -> float:
    """The batch's longest sequence in a micro-batch of its own on the fastest candidate that
    holds it."""
    n = max(setup.lengths)
    found = fastest_alone(cost, candidates, n)
    return _least([found[0]] if found else [], n, setup)


def fastest_alone(cost: CostModel, candidates: Sequence[Strategy], length: int) -> tuple[float, Strategy] | None:
    """The seconds of one sequence of ``length`` in a micro-batch of its own on the fastest of
    ``candidates`` that holds it under ``cost`` (a device's exact seconds), and that layout;
    None where none holds it."""
    seconds = {s: cost.strategies[s].micro_batch_s(1, length) for s in candidates if cost.fits(s, length)}
    best = min(seconds, key=seconds.__getitem__, default=None)
    return (seconds[best], best) if best is not None else None


def _least(seconds: Iterable[float], length: int, setup: Setup) -> float:
    least = min(seconds, default=None)
    if least is None:
        raise ValueError(f"no candidate layout holds a sequence of {length} tokens on {setup.gpus} devices")
    return least
