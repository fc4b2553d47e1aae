"""Mixtures of experts with expert parallelism, by simulation (no processes): ``auto`` weighing
the ep layouts (``sim.contenders.run_auto``; its candidates ``sim_candidates``, each layout with
replicas again with its experts split, ``auto.expert_parallel_candidates``) against the best
static layout with ep, on virtual H200 clusters (``--device``) of 32, 64, 128 and 256 GPUs in
servers of 8, over CommonCrawl (measured RefinedWeb lengths) and GitHub (assumed lengths,
``sim.datasets``) batches fixed in tokens (16K a GPU: 512K at 32 GPUs to 4M at 256, Hydraulis'
way of filling a batch), each document truncated at 32K.

Two models: Qwen3-30B-A3B (the preset: 48 layers, 128 experts of width 768, 8 a token) and a
DeepSeek-V3-like shape (61 layers, dim 7168, 256 routed experts of width 2048, 8 a token, the
first 3 layers dense with width 18432). Our decoder has neither DeepSeek's multi-head latent
attention nor its shared expert: the shape uses grouped-query attention of 128 heads of 128 with
16 key-value heads (1.4x MLA's projection weights a layer, the same score FLOPs within a fifth;
its 672B parameters are DeepSeek-V3's 671B within a percent) and no shared expert. At 32 and 64
GPUs no layout holds it (its model states alone, about 12 TB with the master weights and moments,
exceed 64 x 141 GB): those cells say so (``why``).

How expert parallelism is priced (``sim.expert_parallel``, ``sim.compute``, ``planning.memory``):
per routed layer two all-to-alls forward and two backward carrying a rank's routed rows, over
NVLink inside a server and the servers' network beyond; the busiest rank of an ep group receives
``imbalance`` times the mean rows (uniform routing's expectation unless ``--imbalance`` is
given); the experts' weights and gradients split over ep. Switches at their time bound
(``sim.switch_bound``), as ``sim.paper.context_grid`` takes them; ``auto`` searches the
candidates' lower envelope (``sim.envelope``; ``--check-envelope``: the 32-GPU Qwen3 CommonCrawl
cell also searched over every candidate, ``envelope_check``).

Per cell: ``best_static`` (the fastest static layout with ep, of the three predicted fastest
timed on the device, its master weights where the trainer puts them or sharded over every
replica, whichever is faster; ``best_static_instantiation``) and its ``best_static_s``,
``auto_plan`` and ``auto_s``, ``floor_s`` (the least any plan over the candidates could take,
``sim.floor``), ``speedup`` (best static over
auto), ``ceiling`` (best static over the floor), ``auto_over_floor`` and ``meets_goal``. The goal
(issue 66): auto at least 1.15x the best static layout with ep, or within 1.10x of the floor where
the ceiling is under 1.15x, and never slower. ``summary``: ``speedup_geomean``, ``never_slower``,
``cells_meeting_goal``, ``cells_run``, ``cells_without_layout``. ``imbalance``: the factor
measured in this run, random tokens routed by ``models.experts.route`` through the engine's
initial router weights, beside uniform routing's (``uniform``) at each model's shape. ``grid_s``:
the grid's seconds. ``--smoke``: Qwen3-30B-A3B on 32 GPUs, CommonCrawl, 64K tokens (seconds).

    python -m benchmarks.moe_sim --json [--device H200] [--imbalance 1.1] [--check-envelope]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from benchmarks.common.promised import check_promised
from hotswitch.backend.models.config import Experts, ModelConfig, get_config
from hotswitch.backend.sim.contenders import Contender, roomiest, run_auto, run_static, sim_candidates
from hotswitch.backend.sim.datasets import DATASETS, batch_of_tokens
from hotswitch.backend.sim.expert_parallel import routed_rows, uniform_imbalance
from hotswitch.backend.sim.floor import plan_floor
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.dispatch import instantiation_strategy

CONTEXT = 32768
TOKENS_PER_GPU = 16384
GPUS = (32, 64, 128, 256)
GOAL = 1.15  # auto over the best static layout with ep
NEAR_FLOOR = 1.10  # where the floor leaves less than the goal: auto within this of it
DEEPSEEK_V3_LIKE = ModelConfig(
    "deepseek-v3-like",
    vocab_size=129280,
    dim=7168,
    n_layers=61,
    n_heads=128,
    n_kv_heads=16,
    head_dim=128,
    ffn_dim=18432,
    max_seq_len=CONTEXT,
    experts=Experts(count=256, per_token=8, ffn_dim=2048, normalize=True, layers=tuple(range(3, 61))),
)
MODELS = {"qwen3-30b-a3b": get_config("qwen3-30b-a3b"), DEEPSEEK_V3_LIKE.name: DEEPSEEK_V3_LIKE}
SMOKE = dict(models=["qwen3-30b-a3b"], gpus=[32], datasets=["commoncrawl"], tokens=65536)
OUTPUT_KEYS = (
    "device",
    "cells[].best_static",
    "cells[].best_static_s",
    "cells[].auto_plan",
    "cells[].auto_s",
    "cells[].floor_s",
    "cells[].speedup",
    "cells[].ceiling",
    "cells[].auto_over_floor",
    "cells[].meets_goal",
    "cells[].why",
    "summary.speedup_geomean",
    "summary.never_slower",
    "summary.cells_meeting_goal",
    "summary.cells_run",
    "summary.cells_without_layout",
    "imbalance",
    "envelope_check",
    "grid_s",
)


def best_static_with_ep(setup: Setup) -> Contender | None:
    """The fastest static layout with ep on the device, of the three predicted fastest, each with
    its master weights where the trainer puts them (the layout without ep) or on the ``roomiest``
    instantiation (data parallelism sharding them over every replica), whichever is faster."""
    candidates = sim_candidates(setup)
    ep = [s for s in candidates if s.ep > 1]
    masters = [None, *roomiest(setup, candidates)]
    predicted: dict[tuple, float] = {}
    for s in ep:
        for master in masters:
            cost = setup.cost_model([s], master or instantiation_strategy([s]))
            if cost.fits(s, setup.context):
                predicted[(s, master)] = cost.static_step_s(s, setup.lengths)
    fastest = sorted(predicted, key=predicted.__getitem__)[:3]
    ran = [c for c in (run_static(setup, s, master) for s, master in fastest) if c.step_s is not None]
    return min(ran, key=lambda c: c.step_s or 0.0, default=None)


def _floor(setup: Setup) -> float | None:
    try:
        return plan_floor(setup)
    except ValueError:  # no candidate holds the longest document
        return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def cell(model: str, gpus: int, dataset: str, args: argparse.Namespace, envelope: bool = True) -> dict:
    """One cell's figures (see the module's docstring)."""
    lengths = batch_of_tokens(dataset, CONTEXT, args.tokens or TOKENS_PER_GPU * gpus)
    setup = Setup(
        MODELS[model], gpus, CONTEXT, lengths, device=args.device, planned_switches=False,
        imbalance=args.imbalance, envelope=envelope,
    )  # fmt: skip
    static = best_static_with_ep(setup)
    found = run_auto(setup)
    floor = _floor(setup)
    speedup = _ratio(static.step_s if static else None, found.step_s)
    ceiling = _ratio(static.step_s if static else None, floor)
    near = found.step_s is not None and floor is not None and found.step_s <= NEAR_FLOOR * floor
    meets = (
        speedup is not None
        and speedup >= 1.0
        and (speedup >= GOAL or (ceiling is not None and ceiling < GOAL and near))
    )
    why = None if static else found.why or "no static layout with ep holds the context"
    return {
        "model": model,
        "gpus": gpus,
        "dataset": dataset,
        "tokens": sum(lengths),
        "documents": len(lengths),
        "best_static": static.name if static else None,
        "best_static_s": static.step_s if static else None,
        "best_static_instantiation": str(static.instantiation) if static and static.instantiation else None,
        "auto_plan": str(found.plan) if found.plan else None,
        "auto_instantiation": str(found.instantiation) if found.instantiation else None,
        "auto_s": found.step_s,
        "auto_uses_ep": bool(found.plan and any(s.ep > 1 for s in found.plan.strategies)),
        "floor_s": floor,
        "speedup": speedup,
        "ceiling": ceiling,
        "auto_over_floor": _ratio(found.step_s, floor),
        "meets_goal": meets,
        "why": why,
    }


def summary(cells: list[dict]) -> dict:
    run = [c for c in cells if c["speedup"]]
    speedups = [c["speedup"] for c in run]
    return {
        "speedup_geomean": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None,
        "speedup_min": min(speedups, default=None),
        "speedup_max": max(speedups, default=None),
        "auto_over_floor_geomean": _geomean([c["auto_over_floor"] for c in run if c["auto_over_floor"]]),
        "never_slower": all(s >= 1.0 - 1e-9 for s in speedups),
        "cells_meeting_goal": sum(c["meets_goal"] for c in run),
        "cells_run": len(run),
        "cells_without_layout": [f"{c['model']}/{c['gpus']}/{c['dataset']}" for c in cells if not c["speedup"]],
    }


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def measured_imbalance(config: ModelConfig, ep: int, tokens: int, seeds: int = 4) -> dict:
    """The busiest of ``ep`` ranks' routed rows over the mean, random tokens (standard normal,
    as the norm before a routed layer hands them on at initialisation) routed by the real
    ``route`` through the engine's initial router weights (``models.llama.init_param``), the mean
    over ``seeds`` batches of ``tokens``; beside uniform routing's expectation."""
    import torch

    from hotswitch.backend.models.experts import Gate, route
    from hotswitch.backend.models.llama import init_param

    e = config.experts
    assert e is not None  # the grid's models are mixtures
    router = init_param("layers.3.feed_forward.router.weight", (e.count, config.dim), 0)
    ratios = []
    for seed in range(seeds):
        x = torch.randn(tokens, config.dim, generator=torch.Generator().manual_seed(seed))
        picked, _ = route(x, router, Gate.of(e))
        load = torch.bincount(picked.reshape(-1) // (e.count // ep), minlength=ep).double()
        ratios.append((load.max() / load.mean()).item())
    rows = routed_rows(config, Strategy(dp=ep, ep=ep), tokens) / ep  # each rank's share of the group's
    uniform = uniform_imbalance(rows, ep)
    return {"model": config.name, "ep": ep, "tokens": tokens, "route": sum(ratios) / seeds, "uniform": uniform}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--device", default="H200", help="H200 or H100 (8 a server)")
    parser.add_argument("--imbalance", type=float, default=None, help="the busiest ep rank's rows over the mean")
    parser.add_argument("--check-envelope", action="store_true", help="one cell also searched over every candidate")
    parser.add_argument("--smoke", action="store_true", help=f"a tiny run: {SMOKE}")
    parser.set_defaults(models=list(MODELS), gpus=list(GPUS), datasets=list(DATASETS), tokens=None)
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    started = time.perf_counter()
    cells = []
    for model in args.models:
        for gpus in args.gpus:
            for dataset in args.datasets:
                cells.append(cell(model, gpus, dataset, args))
                print(json.dumps(cells[-1]), file=sys.stderr, flush=True)
    out: dict = {"device": args.device, "context": CONTEXT, "cells": cells, "summary": summary(cells)}
    out["imbalance"] = [measured_imbalance(MODELS[m], ep, 4096) for m in args.models for ep in (8, 32)]
    out["envelope_check"] = None
    if args.check_envelope:
        whole = cell("qwen3-30b-a3b", 32, "commoncrawl", args, envelope=False)
        out["envelope_check"] = {"every_candidate": whole, "envelope": cells[0] if cells else None}
    out["grid_s"] = time.perf_counter() - started
    if args.smoke:
        out["smoke"] = SMOKE
    if not args.json:
        for c in cells:
            print(
                f"{c['model']:>16} {c['gpus']:>3} {c['dataset']:<12} static {c['best_static']} "
                f"{c['best_static_s'] or 0:7.2f}s  auto {c['auto_s'] or 0:7.2f}s  floor {c['floor_s'] or 0:7.2f}s  "
                f"{c['speedup'] or 0:.2f}x  {c['auto_plan']}"
            )
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
