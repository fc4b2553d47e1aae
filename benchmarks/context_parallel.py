"""Context parallelism hot-switched with data parallelism, on 4 CPU ranks.

A batch of short documents and one long one. The memory budget per device is stated as a
multiple of the activation bytes cp4 needs for the long document (measured by the engine:
the bytes autograd keeps from forward to backward on the busiest rank, for one sequence):
dp4 cannot hold the long document within it (one rank keeps the whole sequence), cp4 can
(each rank keeps its two zig-zag chunks). The hot plan trains the long document under cp4 and
the short ones under dp4; the static plan trains everything under cp4. Micro-batches hold at
most the tokens per device the budget allows (rows x length / cp), so every micro-batch of
either plan fits.

With ``--auto`` (the default) the trainer's own ``auto`` runs the same batches twice, within the
same budget: once weighing the cp layouts (``context_parallel=True``) and once without them,
each after profiling its candidates on these ranks (the profile's seconds are reported, not
counted in the steps). Every run is checked against one device (the loss of every step, fp32),
and its step times measured (median of the timed steps, slowest rank, after one warm-up step).

The output: per run (``runs``: hot, static_cp4, auto, auto_without_cp) its ``median_step_s``,
``max_loss_error`` and ``plans``; whether every run matched one device (``exact``),
``speedup_hot_over_static_cp4`` (and ``speedup_auto_over_auto_without_cp`` with ``--auto``), the
``memory_budget_bytes`` and the ``activation_bytes`` it was set from. ``--smoke``: a narrower,
one-layer model, 4 short documents and one of 128 tokens, one timed step, ``auto`` weighing
dp4, cp4 and tp4 only (the output's ``smoke``).

    python -m benchmarks.context_parallel --json     # about 5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch
import torch.distributed as dist

from benchmarks.common.promised import check_promised
from hotswitch.backend import Strategy, get_config
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.loop.reference import ReferenceTrainer
from hotswitch.backend.train.planning.auto import auto_candidates, auto_plan
from hotswitch.backend.train.planning.batching import MicroBatching
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.planning.memory import model_state_bytes
from hotswitch.backend.train.planning.memory_measure import measured_activation_bytes
from hotswitch.backend.train.planning.profile import profile, profile_lengths
from hotswitch.backend.train.state.optim import OptimizerConfig

MODEL = dict(name="bench-cp", vocab_size=512, dim=128, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=344)
SEED = 0
SMOKE = dict(
    model=dict(MODEL, dim=32, n_layers=1, ffn_dim=96),
    short=4,
    short_max=48,
    long=128,
    steps=1,
    candidates="dp4,cp4,tp4",
)
OUTPUT_KEYS = (
    "runs.*.median_step_s",
    "runs.*.max_loss_error",
    "runs.*.plans",
    "exact",
    "speedup_hot_over_static_cp4",
    "memory_budget_bytes",
    "activation_bytes",
)


def batches(args) -> list[list[Sequence]]:
    """Per step: ``--short`` documents of 32..``--short-max`` tokens and one of ``--long``."""
    rng = random.Random(SEED)
    out = []
    for step in range(args.steps + 1):
        lengths = [rng.randint(32, args.short_max) for _ in range(args.short)] + [args.long]
        docs = [tuple(rng.randrange(args.model["vocab_size"]) for _ in range(n + 1)) for n in lengths]
        out.append([Sequence(step * 1000 + i, tokens) for i, tokens in enumerate(docs)])
    return out


def config(args):
    return get_config("tiny").with_(**args.model, max_seq_len=args.long)


def train(engine: Engine, plan_for, data: list[list[Sequence]], switch_cost=lambda a, b: 0.0) -> dict:
    """Each batch under ``plan_for(batch)`` (collective): the losses of every step, the wall
    time of each step after the first (slowest rank) and the plans' buckets."""
    losses, times, plans = [], [], []
    for i, batch in enumerate(data):
        plan = plan_for(batch)
        order = execution_order(plan.strategies, engine.instantiation, switch_cost)
        dist.barrier()
        started = time.perf_counter()
        losses.append(engine.step(plan.assign(batch), order).loss)
        wall = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
        dist.all_reduce(wall, op=dist.ReduceOp.MAX)
        plans.append([[str(b.strategy), b.above] for b in plan.buckets])
        if i:
            times.append(wall.item())
    return {"losses": losses, "step_s": times, "plans": plans}


def train_auto(model, data, args, budget: float, context_parallel: bool) -> dict:
    """The trainer's ``auto`` on the same batches: candidates profiled on these ranks (with or
    without the cp layouts), each batch planned by the cost model within ``budget`` activation
    bytes per device (the cost model's budget also counts the model states)."""
    strategies = auto_candidates(model, 4, args.long, context_parallel)
    if args.candidates:  # only these of auto's candidates (a shorter profile)
        strategies = [s for s in strategies if s in {Strategy.parse(c) for c in args.candidates.split(",")}]
    instantiation = instantiation_strategy(strategies)
    engine = Engine(model, strategies, instantiation, engine_run(args.long, seed=SEED))
    started = time.perf_counter()
    state = max(model_state_bytes(model, s) for s in strategies)
    cost = profile(engine, strategies, profile_lengths(args.long), budget + state, use_cache=False)
    profile_s = time.perf_counter() - started
    engine.use_batching(cost.micro_batching())

    def plan_for(batch):  # rank 0 searches, every rank follows (as the trainer does)
        lengths = [x.length for x in batch]
        box = [auto_plan(lengths, cost, instantiation, args.long)[0] if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    return {**train(engine, plan_for, data, cost.switch_cost), "profile_s": profile_s}


def bench_rank(rank: int, world: int, args) -> dict:
    torch.set_num_threads(1)
    model, data = config(args), batches(args)
    longest_short = max(s.length for batch in data for s in batch if s.length < args.long)
    hot = HotSwitchPlan.of([("cp4", longest_short), ("dp4", 0)])
    plans = (("hot", hot), ("static_cp4", HotSwitchPlan.of("cp4")))
    cp4, dp4 = hot.strategies
    engines = {name: Engine(model, plan.strategies, cp4, engine_run(args.long, seed=SEED)) for name, plan in plans}
    lengths = (args.long, longest_short)
    memory = {f"{s}@{n}": measured_activation_bytes(engines["hot"], s, n) for s in (cp4, dp4) for n in lengths}
    budget = int(args.budget_factor * memory[f"{cp4}@{args.long}"])
    # tokens one device may hold in a micro-batch within the budget (activations grow linearly
    # at these lengths): a micro-batch of a cp strategy spreads its rows over cp devices
    device_tokens = budget * longest_short // memory[f"{dp4}@{longest_short}"]
    batching = MicroBatching(4 * device_tokens, max_rows=lambda s, n: max(1, device_tokens * s.cp // n))
    runs = {}
    for name, plan in plans:
        engines[name].use_batching(batching)
        runs[name] = train(engines[name], lambda batch, plan=plan: plan, data)
    if args.auto:
        for name, context_parallel in (("auto", True), ("auto_without_cp", False)):
            runs[name] = train_auto(model, data, args, budget, context_parallel)
    return dict(memory=memory, budget=budget, device_tokens=device_tokens, runs=runs, longest_short=longest_short)


def reference_losses(args) -> list[float]:
    trainer = ReferenceTrainer(config(args), OptimizerConfig(), SEED, args.long)
    return [trainer.step(batch) for batch in batches(args)]


def report(result: dict, reference: list[float], args) -> dict:
    memory, budget = result["memory"], result["budget"]
    runs = {}
    for name, run in result["runs"].items():
        runs[name] = {
            "median_step_s": statistics.median(run["step_s"]),
            "step_s": run["step_s"],
            "max_loss_error": max(abs(a - b) for a, b in zip(run["losses"], reference, strict=True)),
            **{key: run[key] for key in ("plans", "profile_s") if key in run},
        }
    speedups = {"speedup_hot_over_static_cp4": runs["static_cp4"]["median_step_s"] / runs["hot"]["median_step_s"]}
    if "auto" in runs:
        speedups["speedup_auto_over_auto_without_cp"] = (
            runs["auto_without_cp"]["median_step_s"] / runs["auto"]["median_step_s"]
        )
    return {
        "ranks": 4,
        "model": args.model,
        "batch": {"short_documents": args.short, "short_max": args.short_max, "long_document": args.long},
        "longest_short_document": result["longest_short"],
        "memory_budget_bytes": budget,
        "micro_batch_tokens_per_device": result["device_tokens"],
        "activation_bytes": memory,
        "fits": {key: bytes_ <= budget for key, bytes_ in memory.items()},
        "plans": {"hot": f"cp4 for L>{result['longest_short']}, dp4 below", "static_cp4": "cp4 for every length"},
        "runs": runs,
        "exact": all(r["max_loss_error"] <= 1e-5 for r in runs.values()),
        **speedups,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--short", type=int, default=24, help="short documents per step")
    parser.add_argument("--short-max", type=int, default=192)
    parser.add_argument("--long", type=int, default=1536, help="the long document's tokens")
    parser.add_argument("--steps", type=int, default=8, help="timed steps (after one warm-up step)")
    parser.add_argument(
        "--auto",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also the trainer's auto with and without cp layouts (profiles them first; default on)",
    )
    parser.add_argument("--budget-factor", type=float, default=1.5, help="budget = this x cp4's bytes for the long one")
    parser.add_argument("--candidates", help="auto weighs only these of its candidates (comma-separated)")
    parser.add_argument("--smoke", action="store_true", help=f"a tiny run in seconds: {SMOKE}")
    args = parser.parse_args()
    args.model = MODEL
    if args.smoke:
        vars(args).update(SMOKE)
    result = spawn_ranks(bench_rank, 4, args, timeout=3000)[0]
    out = report(result, reference_losses(args), args)
    if args.smoke:
        out["smoke"] = SMOKE
    if not args.json:
        for name, run in out["runs"].items():
            print(f"{name}: {run['median_step_s'] * 1e3:.0f} ms per step, loss within {run['max_loss_error']:.1e}")
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
