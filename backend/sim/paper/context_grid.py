"""Context parallelism at paper scale: ``auto`` with cp layouts against ``auto`` without, on the
paper's models and datasets from 4K to 128K tokens. The one definition of the figures
``benchmarks/context.py`` and notebook 6 show.

Both arms run the same search (``sim.contenders.run_auto``) on the same batch and the same
device model; only the candidates differ. Both prune candidates by one sequence's time alone as
well as by throughput (``auto.pareto``'s ``latency_aware``): otherwise the cp layouts, which
that rule always protects, would be measured against a search that drops the wide tensor-parallel
layouts which shorten a long document too. Switches are taken at their time bound
(``sim.switch_bound``) in both, so a 32-GPU cell takes seconds, not minutes. Documents longer
than the context are truncated at it, as the paper does at 4K-32K; how many documents are that
long is the datasets' tail assumption (``sim.datasets``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from hotswitch.backend.models.config import get_config
from hotswitch.backend.sim.contenders import Contender, run_auto, sim_candidates
from hotswitch.backend.sim.datasets import batch_lengths
from hotswitch.backend.sim.floor import fastest_alone, plan_floor
from hotswitch.backend.sim.paper.grid import versus_sequential_auto
from hotswitch.backend.sim.scenario import LONG_CONTEXT, Setup
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.dispatch import instantiation_strategy

CONTEXTS = (65536, 131072, 4096, 8192, 16384, 32768)  # the goal's long contexts first
SETTINGS = (("7b", 8), ("7b", 16), ("7b", 32), ("13b", 8), ("13b", 16), ("13b", 32))
LONG = 65536  # from here on, the goal is a speedup
GOAL_LONG = 1.3  # auto with cp over auto without it, where the context is LONG or more


def context_setup(
    model: str, gpus: int, dataset: str, context: int, cp: bool, device: str = "A800", seed: int = 0
) -> Setup:
    """One cell's setup: the paper's global batch of ``dataset`` truncated at ``context``."""
    config = get_config(model).with_(max_seq_len=LONG_CONTEXT)  # every cell's: cells share their switch bounds
    lengths = batch_lengths(dataset, context, seed=seed)
    return Setup(
        config, gpus, context, lengths, device=device, planned_switches=False, context_parallel=cp, latency_aware=True
    )


def _plan(c: Contender) -> str | None:
    return str(c.plan) if c.plan else None


def _auto(setup: Setup, quick: bool) -> Contender:
    """``run_auto``; ``quick``: one search, from the trainer's instantiation (seconds, not minutes)."""
    return run_auto(setup, [instantiation_strategy(sim_candidates(setup))] if quick else None)


def longest_alone(setup: Setup, instantiation: Strategy | None) -> tuple[float | None, str | None]:
    """The batch's longest document trained alone: its seconds on the device under the fastest
    of the arm's candidate layouts that holds it (with ``instantiation``'s master weights), and
    that layout.
    Where cp hardly beats this without it, no plan can gain much from cp on that document."""
    if instantiation is None:
        return None, None
    candidates = sim_candidates(setup)
    on_device = setup.exact_model(setup.cost_model(candidates, instantiation))
    found = fastest_alone(on_device, candidates, max(setup.lengths))
    return (found[0], str(found[1])) if found else (None, None)


def context_row(
    model: str,
    gpus: int,
    dataset: str,
    context: int,
    device: str = "A800",
    quick: bool = False,
    seed: int = 0,
    side_by_side: bool = False,
) -> dict:
    """One cell: both arms' step time and plan, the speedup and whether it meets its goal.
    ``quick``: each arm searches from the trainer's instantiation only; ``seed``: the batch's;
    ``side_by_side``: also a third arm, ``auto`` with cp and device groups (``groups_arm``)."""
    plain = context_setup(model, gpus, dataset, context, False, device, seed)
    without = _auto(plain, quick)
    setup = context_setup(model, gpus, dataset, context, True, device, seed)
    with_cp = _auto(setup, quick)
    alone = longest_alone(plain, without.instantiation)
    alone_cp = longest_alone(setup, with_cp.instantiation)
    speedup = without.step_s / with_cp.step_s if without.step_s and with_cp.step_s else None
    goal = GOAL_LONG if context >= LONG else 1.0
    return {
        "model": model,
        "gpus": gpus,
        "dataset": dataset,
        "context": context,
        "seed": seed,
        "tokens": sum(setup.lengths),
        "longest": max(setup.lengths),
        "over_32k": sum(n > 32768 for n in setup.lengths),
        "longest_alone_s": alone[0],
        "longest_alone_layout": alone[1],
        "longest_alone_cp_s": alone_cp[0],
        "longest_alone_cp_layout": alone_cp[1],
        "longest_alone_gain": alone[0] / alone_cp[0] if alone[0] and alone_cp[0] else None,
        "auto_s": without.step_s,
        "auto_plan": _plan(without),
        "auto_cp_s": with_cp.step_s,
        "auto_cp_plan": _plan(with_cp),
        "uses_cp": bool(with_cp.plan and any(s.cp > 1 for s in with_cp.plan.strategies)),
        "speedup": speedup,
        "goal": goal,
        "meets_goal": speedup is not None and speedup >= goal - 1e-9,
        "why": without.why or with_cp.why or None,
        **ceiling(setup, without, side_by_side),
        **(groups_arm(setup, quick, without, with_cp) if side_by_side else {}),
    }


def ceiling(setup: Setup, without: Contender, side_by_side: bool) -> dict:
    """The floor under every plan with cp (``sim.floor``: the batch's least work, or its longest
    document alone; device groups among the layouts with ``side_by_side``) and so the most any
    of them could gain over ``auto`` without cp: where this is under the goal, no plan meets it."""
    floor = plan_floor(setup.weighing(setup.context_parallel, side_by_side))
    return {"floor_cp_s": floor, "speedup_ceiling": without.step_s / floor if without.step_s else None}


def groups_arm(setup: Setup, quick: bool, without: Contender, with_cp: Contender) -> dict:
    """``auto`` with the cp layouts and device groups side by side (two groups, or the best
    sequential plan's longest bucket then two): against sequential ``auto`` with cp
    (``vs_sequential_auto``) and against ``auto`` without cp (``groups_speedup``)."""
    groups = _auto(replace(setup, side_by_side=True), quick)

    def over(other: Contender) -> float | None:
        return other.step_s / groups.step_s if other.step_s and groups.step_s else None

    return {
        "auto_groups_s": groups.step_s,
        "auto_groups_plan": _plan(groups),
        "vs_sequential_auto": over(with_cp),
        "groups_speedup": over(without),
    }


def context_grid(
    settings: Iterable[tuple[str, int]] = SETTINGS,
    datasets: Iterable[str] = ("commoncrawl", "github"),
    contexts: Iterable[int] = CONTEXTS,
    device: str = "A800",
    progress: Callable[[dict, int, int], None] | None = None,
    seed: int = 0,
    side_by_side: bool = False,
) -> list[dict]:
    """``context_row`` for every cell, calling ``progress(row, done, total)`` after each; cells go
    context by context in the order given (the long ones first, if given first)."""
    cells = [(m, g, d, c) for c in contexts for m, g in settings for d in datasets]
    rows = []
    for model, gpus, dataset, context in cells:
        rows.append(context_row(model, gpus, dataset, context, device, seed=seed, side_by_side=side_by_side))
        if progress:
            progress(rows[-1], len(rows), len(cells))
    return rows


def context_summary(rows: list[dict]) -> dict:
    """Which cells meet their goal: >= 1.3x at 64K and beyond, never slower below; and, at 64K
    and beyond, the range of what cp gains on the batch's longest document alone."""
    long = [r for r in rows if r["context"] >= LONG]
    short = [r for r in rows if r["context"] < LONG]
    speedups = [r["speedup"] for r in long if r["speedup"]]
    gains = [r["longest_alone_gain"] for r in long if r.get("longest_alone_gain")]
    return {
        "cells": len(rows),
        "long_cells_meeting_1_3x": sum(r["meets_goal"] for r in long),
        "long_cells": len(long),
        "long_speedup_min": min(speedups, default=None),
        "long_speedup_max": max(speedups, default=None),
        "long_speedup_mean": sum(speedups) / len(speedups) if speedups else None,
        "long_missing": [
            f"{r['model']}/{r['gpus']}/{r['dataset']}/{r['context']}" for r in long if not r["meets_goal"]
        ],
        "short_never_slower": all(r["meets_goal"] for r in short),
        "short_slowest": min((r["speedup"] for r in short if r["speedup"]), default=None),
        "cells_using_cp": sum(r["uses_cp"] for r in rows),
        "long_longest_alone_gain": [min(gains, default=None), max(gains, default=None)],
        "long_cells_whose_ceiling_reaches_1_3x": sum((r.get("speedup_ceiling") or 0) >= GOAL_LONG for r in long),
        **groups_summary(long),
    }


def groups_summary(long: list[dict]) -> dict:
    """At 64K and beyond, with the groups arm: its gain over sequential ``auto`` with cp, and
    the cells where it reaches the 1.3x goal over ``auto`` without cp (nothing without the arm)."""
    versus = versus_sequential_auto(long)
    if not versus:
        return {}
    return {
        **{f"long_{key}": value for key, value in versus.items()},
        "long_cells_meeting_1_3x_with_groups": sum((r.get("groups_speedup") or 0) >= GOAL_LONG - 1e-9 for r in long),
    }
