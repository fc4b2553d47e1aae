"""The paper's grid, simulated: one row of figures per (model, GPUs, dataset, context). The one
definition of each figure that ``benchmarks/paper.py``, ``hotswitch simulate`` and notebook 6 show."""

from __future__ import annotations

import math
from collections.abc import Iterable

from hotswitch.backend.sim.datasets import DATASETS, SELECTABLE, batch_lengths
from hotswitch.backend.sim.floor import plan_floor
from hotswitch.backend.sim.paper import setups
from hotswitch.backend.sim.paper.compare import Comparison, compare
from hotswitch.backend.sim.paper.goals import paper_block
from hotswitch.backend.sim.scenario import Setup

CONTEXTS = (4096, 8192, 16384, 32768)


def simulate_setting(
    model: str,
    gpus: int,
    dataset: str,
    context: int,
    device: str = "A800",
    seed: int = 0,
    packing: bool = False,
    side_by_side: bool = False,
) -> Comparison:
    """Every contender of one setting on one global batch of the paper's size; ``packing``: the
    engine's own contenders (its statics, c1, ``auto``) pack their micro-batches; ``side_by_side``:
    also ``auto+groups``."""
    if dataset not in SELECTABLE:  # before any work, whatever the lengths
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(SELECTABLE)}")
    lengths = batch_lengths(dataset, context, seed=seed)
    setup = Setup(model, gpus, context, lengths, device=device, packing=packing)
    return compare(setup, model_name=model, side_by_side=side_by_side)


def speedup(slow: float | None, fast: float | None) -> float | None:
    """``slow`` over ``fast``; None where either is missing."""
    return slow / fast if slow and fast else None


def geomean(values: Iterable[float | None]) -> float | None:
    """The geometric mean of the values given (None ones left out); None where none is."""
    logs = [math.log(v) for v in values if v]
    return math.exp(sum(logs) / len(logs)) if logs else None


def row(comparison: Comparison, model: str, dataset: str) -> dict:
    """The figures of one setting (``None`` where a contender does not fit or is not given)."""
    setup = comparison.setup
    best = comparison.best_static
    c1, c2, auto = comparison.hot.get("c1"), comparison.hot.get("c2"), comparison.auto
    best_s = best.step_s if best else None
    return {
        "model": model,
        "gpus": setup.cluster.world_size,
        "dataset": dataset,
        "context": setup.context,
        "tokens": sum(setup.lengths),
        "best_static": str(best.plan) if best else None,
        "best_static_s": best_s,
        "hot_c1_s": c1.step_s if c1 else None,
        "hot_c1_plan": str(c1.plan) if c1 else None,
        "hot_c2_s": c2.step_s if c2 else None,
        "auto_s": auto.step_s,
        "auto_plan": str(auto.plan) if auto.plan else None,
        "auto_instantiation": str(auto.instantiation) if auto.instantiation else None,
        "auto_vs_static": speedup(best_s, auto.step_s),
        "c1_vs_static": speedup(best_s, c1.step_s if c1 else None),
        "auto_vs_c1": speedup(c1.step_s if c1 else None, auto.step_s),
        "statics_fitting": sum(c.step is not None for c in comparison.statics),
        **paper_baselines(comparison),
        **side_by_side_figures(comparison, best_s),
        **floor_figures(comparison, best_s),
    }


def floor_figures(comparison: Comparison, best_s: float | None) -> dict:
    """The floor under every plan this setting's ``auto`` could choose (``sim.floor``; device
    groups among the layouts where ``auto+groups`` ran) and the most any of them could gain over
    the strong static (``floor_vs_static``): what a speedup goal can ask of this setting."""
    setup = comparison.setup
    floor = plan_floor(setup.weighing(setup.context_parallel, comparison.auto_groups is not None))
    return {"floor_s": floor, "floor_vs_static": speedup(best_s, floor)}


def side_by_side_figures(comparison: Comparison, best_s: float | None) -> dict:
    """``auto+groups`` (device groups side by side allowed) against sequential-only ``auto`` and
    the strong static, where it ran."""
    groups = comparison.auto_groups
    if groups is None:
        return {}
    return {
        "auto_groups_s": groups.step_s,
        "auto_groups_plan": str(groups.plan) if groups.plan else None,
        "vs_sequential_auto": comparison.groups_speedup,
        "auto_groups_vs_static": speedup(best_s, groups.step_s),
    }


def paper_baselines(comparison: Comparison) -> dict:
    """The paper's own baselines' figures of one setting, and ``auto`` against each."""
    auto = comparison.auto.step_s
    named = comparison.paper
    megatron = comparison.megatron_paper
    best = comparison.best_static
    out = {}
    for name, c in named.items():
        key = name.replace("-", "_").replace("+", "_")
        out[f"{key}_s"] = c.step_s
        out[f"{key}_plan"] = c.summary()["plan"]
    deepspeed = named.get("deepspeed-paper")
    out["vs_megatron_paper"] = speedup(megatron.step_s if megatron else None, auto)
    out["vs_deepspeed_paper"] = speedup(deepspeed.step_s if deepspeed else None, auto)
    out["vs_strong_static"] = speedup(best.step_s if best else None, auto)
    c1 = named.get("hotspa-c1-paper")
    out["c1_paper_vs_megatron_paper"] = speedup(megatron.step_s if megatron else None, c1.step_s if c1 else None)
    return out


def paper_grid(
    settings: Iterable[tuple[str, int]] | None = None,
    datasets: Iterable[str] = DATASETS,
    contexts: Iterable[int] = CONTEXTS,
    device: str = "A800",
    packing: bool = False,
    side_by_side: bool = False,
) -> list[dict]:
    """``row`` for every (model, GPUs) of the paper's c1 settings, dataset and context."""
    return [
        row(
            simulate_setting(model, gpus, dataset, context, device, packing=packing, side_by_side=side_by_side),
            model,
            dataset,
        )
        for model, gpus in settings or setups.settings()
        for dataset in datasets
        for context in contexts
    ]


def summary(rows: list[dict]) -> dict:
    """The goals' figures over a grid: auto against c1 and the best static, and whether the
    speedup over the best static grows with context on CommonCrawl in every (model, GPUs)."""
    vs_c1 = [r["auto_vs_c1"] for r in rows if r["auto_vs_c1"]]
    vs_static = [r["auto_vs_static"] for r in rows if r["auto_vs_static"]]
    growing: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r["dataset"] == "commoncrawl" and r["auto_vs_static"]:
            growing.setdefault(f"{r['model']}/{r['gpus']}", []).append((r["context"], r["auto_vs_static"]))
    return {
        "auto_at_least_c1_everywhere": all(x >= 1 - 1e-9 for x in vs_c1),
        "auto_vs_c1_mean": sum(vs_c1) / len(vs_c1) if vs_c1 else None,
        "auto_vs_static_mean": sum(vs_static) / len(vs_static) if vs_static else None,
        "auto_vs_static_geomean": geomean(vs_static),
        "floor_vs_static_geomean": geomean(r.get("floor_vs_static") for r in rows),
        "auto_vs_static_max": {
            d: max((r["auto_vs_static"] or 0 for r in rows if r["dataset"] == d), default=None) for d in DATASETS
        },
        "paper_headline_vs_megatron": setups.HEADLINE,
        "commoncrawl_speedup_by_context": {k: [x for _, x in sorted(v)] for k, v in growing.items()},
        "commoncrawl_gains_more_at_the_longest_context": {k: max(v)[1] > min(v)[1] for k, v in growing.items()},
        "paper": paper_block(rows),
        **side_by_side_summary(rows),
    }


def side_by_side_summary(rows: list[dict]) -> dict:
    """Over a grid run with ``side_by_side``: ``auto+groups`` against sequential ``auto`` and the
    strong static, mean and extremes (nothing without it)."""
    vs_static = [r["auto_groups_vs_static"] for r in rows if r.get("auto_groups_vs_static")]
    versus = versus_sequential_auto(rows)
    if not versus:
        return {}
    return {
        **versus,
        "auto_groups_vs_static_mean": sum(vs_static) / len(vs_static) if vs_static else None,
        "auto_groups_vs_static_geomean": geomean(vs_static),
        "groups_chosen": sum(1 for r in rows if "@" in (r.get("auto_groups_plan") or "")),
    }


def versus_sequential_auto(rows: list[dict]) -> dict:
    """Mean and range of the rows' ``vs_sequential_auto`` (``auto`` with device groups over
    sequential ``auto``); nothing where no row has it. The paper grid's and the context grid's."""
    vs_auto = [r["vs_sequential_auto"] for r in rows if r.get("vs_sequential_auto")]
    if not vs_auto:
        return {}
    return {
        "vs_sequential_auto_mean": sum(vs_auto) / len(vs_auto),
        "vs_sequential_auto_range": [min(vs_auto), max(vs_auto)],
    }
