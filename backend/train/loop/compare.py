"""Hot switching against the best static strategy, on every rank: what ``hotswitch demo`` and
tutorial 3 run. First hot switching, then the static strategy the cost model predicts fastest
among those that fit the memory budget, from the same initial weights on the same batches.

Every training event carries ``run`` ("hot switching" or the static strategy's name). Between
the two runs rank 0 emits ``{"type": "statics", "time": ..., "predicted_step_s": {strategy:
seconds}, "infeasible": {strategy: longest sequence it holds}, "chosen": strategy}``.
"""

from __future__ import annotations

from typing import Protocol

from hotswitch.backend.train.loop.events import event
from hotswitch.backend.train.run.recipe import batches, build

HOT = "hot switching"


class RankContext(Protocol):
    """What ``compare`` uses of its ``job``: any object with these three members will do. In a
    ``%%train`` body (or ``hotswitch demo``) it is the rank's ``WorkerContext``."""

    rank: int

    def emit(self, event: dict) -> None:
        """Send one event (a JSON-able dict with a "type") to wherever the run is watched."""

    def control(self) -> list[dict]:
        """Control commands received since the last call (rank 0 only); never blocks."""


def compare(spec: dict, job: RankContext) -> None:
    """``spec`` is a recipe spec (``hotswitch.backend.train.run.recipe``) with a ``memory_budget``;
    its ``plan`` is ignored. ``job`` is the rank's context: only ``job.rank``, ``job.emit`` and
    ``job.control`` are used (see ``RankContext``)."""
    hot, run = build({**spec, "plan": "auto"}, _tagged(job, HOT), job.control)
    hot.train(run.steps)
    cost = hot.cost
    longest = run.data.max_len
    assert cost is not None, "an auto plan is made on a cost model"
    del hot
    stream = batches(run, run.model.architecture())
    steps = [[s.length for s in stream.next_batch()] for _ in range(run.steps)]
    predicted = {
        s: sum(cost.static_step_s(s, lengths) for lengths in steps) / len(steps)
        for s in cost.strategies
        if cost.fits(s, longest)
    }
    chosen = min(predicted, key=predicted.__getitem__)
    if job.rank == 0:
        infeasible = {str(s): cost.longest(s, longest) for s in cost.strategies if s not in predicted}
        statics = {str(s): t for s, t in predicted.items()}
        job.emit(event("statics", predicted_step_s=statics, infeasible=infeasible, chosen=str(chosen)))
    # fits() was checked with the same cost model: no second profile; micro-batches packed by it
    static, _ = build({**spec, "plan": str(chosen), "memory_budget": None}, _tagged(job, str(chosen)), job.control)
    static.use_cost(cost)
    static.train(run.steps)


def _tagged(job: RankContext, run: str):
    return lambda event: job.emit({**event, "run": run})
