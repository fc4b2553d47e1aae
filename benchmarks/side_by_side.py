"""Device groups side by side against HotSPa's sequential buckets and static strategies, on
local CPU ranks, on the same batches.

Every step's batch holds a few long documents and many short ones (``--long`` documents of
``--long-len`` tokens, ``--short`` of ``--short-len``; random tokens, a fixed seed). Contenders,
all through the same engine from the same initial weights, on ``--ranks`` gloo processes:

- ``static``: every strategy of ``--static`` alone (the best of them is ``best_static``);
- ``sequential``: HotSPa's buckets, one after another over every rank: the long documents
  under ``--sequential``'s first strategy, the rest under its second;
- ``side_by_side``: the same split into two device groups training at the same time, the long
  documents on ``--groups``' first group, the short on its second;
- with ``--auto``, the trainer's own ``auto``, profiled on the ranks and re-planning each batch:
  ``auto`` (sequential buckets) and ``auto+groups`` (``side_by_side``: device groups and mixtures
  weighed too); ``auto_plans`` counts the plans each chose over the timed steps.

``step_s`` is each contender's median step (slowest rank) over ``--rounds`` rounds that each run
every contender for ``--steps`` steps after ``--warmup`` steps; ``speedup_over_sequential`` and
``speedup_over_best_static`` are side by side's against them. ``loss_spread`` is the largest
difference between contenders' first-step losses (they train the same batch from the same
weights, so it is fp32 noise). On a machine with fewer cores than ranks the groups share cores,
so the figures show the engine's overheads more than a cluster's parallelism (``cores`` says).
``--smoke``: a 2-layer narrow model, short documents, one round of one step (with ``--auto``,
its two profiles too).

    python -m benchmarks.side_by_side --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import Counter

import torch
import torch.distributed as dist

from benchmarks.common.promised import check_promised
from hotswitch.backend import get_config
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy

MODEL = dict(name="bench", dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=688, vocab_size=512)
SMOKE = dict(model=dict(MODEL, dim=32, n_layers=2, ffn_dim=96), long_len=64, short_len=16, rounds=1, steps=1)


def model_config(shape: dict):
    """The ``tiny`` model reshaped to ``shape`` (long enough for the longest document)."""
    return get_config("tiny").with_(**shape, max_seq_len=4096)


OUTPUT_KEYS = (
    "device",
    "cores",
    "ranks",
    "batch",
    "step_s",
    "best_static",
    "speedup_over_sequential",
    "speedup_over_best_static",
    "loss_spread",
)


def batches(args, vocab: int, count: int) -> list[list[Sequence]]:
    """``count`` batches of ``args.long`` long and ``args.short`` short documents of random tokens."""
    generator = torch.Generator().manual_seed(0)
    out = []
    for b in range(count):
        lengths = [args.long_len] * args.long + [args.short_len] * args.short
        out.append(
            [
                Sequence(b * 1000 + i, tuple(torch.randint(vocab, (n + 1,), generator=generator).tolist()))
                for i, n in enumerate(lengths)
            ]
        )
    return out


def contender(config, spec, args):
    """An engine for one plan and a function training one batch with it (its loss)."""
    plan = HotSwitchPlan.of(spec)
    instantiation = instantiation_strategy(plan.strategies)
    engine = Engine(config, plan.strategies, instantiation, engine_run(args.token_budget, seed=0))
    order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
    return lambda batch: engine.step(plan.assign(batch), order).loss


def auto_contender(config, args, side_by_side: bool):
    """The trainer's ``auto`` (profiled now, on every rank) and a function training one batch
    with it (its loss). The trainer reads only ``max_len`` from its stream: each batch is handed
    to ``step``."""
    from hotswitch.backend.data.sources import SyntheticDocuments
    from hotswitch.backend.data.stream import BatchStream
    from hotswitch.backend.train.loop.trainer import Trainer

    lengths = BatchStream(SyntheticDocuments("github", count=1), 1, args.long_len)
    run = {"plan": "auto", "token_budget": args.token_budget, "side_by_side": side_by_side}
    trainer = Trainer(config, lengths, run)
    chosen: Counter[str] = Counter()

    def step(batch: list[Sequence]) -> float:
        loss = trainer.step(batch)["loss"]
        chosen[str(trainer.plan)] += 1
        return loss

    return chosen, step


def timed_steps(step, data: list[list[Sequence]]) -> float:
    """The median step seconds over ``data`` (slowest rank)."""
    seconds = []
    for batch in data:
        dist.barrier()
        started = time.perf_counter()
        step(batch)
        elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        seconds.append(elapsed.item())
    return statistics.median(seconds)


def run_rank(rank: int, world: int, args) -> dict | None:
    config = get_config(args.model)
    bound = args.long_len - 1  # documents longer than this are the long ones
    specs = {s: s for s in args.static}
    specs["sequential " + " | ".join(args.sequential)] = [(args.sequential[0], bound), (args.sequential[1], 0)]
    specs["side by side " + " | ".join(args.groups)] = [(args.groups[0], bound), (args.groups[1], 0)]
    steps = {name: contender(config, spec, args) for name, spec in specs.items()}
    plans = {}
    for name, groups in (("auto", False), ("auto+groups", True)) if args.auto else ():
        plans[name], steps[name] = auto_contender(config, args, groups)
    data = batches(args, config.vocab_size, args.warmup + args.rounds * args.steps)
    first = {name: step(data[0]) for name, step in steps.items()}  # warm-up, and the first step's loss
    for batch in data[1 : args.warmup]:
        for step in steps.values():
            step(batch)
    for chosen in plans.values():
        chosen.clear()  # the plans of the timed steps
    rounds: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(args.rounds):
        chunk = data[args.warmup + r * args.steps : args.warmup + (r + 1) * args.steps]
        for name, step in steps.items():
            rounds[name].append(timed_steps(step, chunk))
    if rank:
        return None
    step_s = {name: statistics.median(values) for name, values in rounds.items()}
    best = min(args.static, key=step_s.__getitem__)
    side = next(name for name in step_s if name.startswith("side by side"))
    sequential = next(name for name in step_s if name.startswith("sequential"))
    out = {
        "device": "cpu",
        "cores": os.cpu_count(),
        "ranks": world,
        "batch": {"long": [args.long, args.long_len], "short": [args.short, args.short_len]},
        "step_s": step_s,
        "best_static": best,
        "speedup_over_sequential": step_s[sequential] / step_s[side],
        "speedup_over_best_static": step_s[best] / step_s[side],
        "loss_spread": max(first.values()) - min(first.values()),
    }
    if plans:
        out["auto_plans"] = {name: dict(chosen) for name, chosen in plans.items()}
        out["speedup_groups_over_auto"] = step_s["auto"] / step_s["auto+groups"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--long", type=int, default=2, help="long documents per batch")
    parser.add_argument("--long-len", type=int, default=1024)
    parser.add_argument("--short", type=int, default=24, help="short documents per batch")
    parser.add_argument("--short-len", type=int, default=96)
    parser.add_argument("--static", nargs="+", default=["dp4", "dp2tp2", "tp4"])
    parser.add_argument("--sequential", nargs=2, default=["tp4", "dp4"], metavar=("LONG", "SHORT"))
    parser.add_argument("--groups", nargs=2, default=["tp2@0-1", "dp2@2-3"], metavar=("LONG", "SHORT"))
    parser.add_argument("--token-budget", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--auto", action="store_true", help="also the trainer's auto, with and without groups")
    parser.add_argument("--smoke", action="store_true", help="a seconds-long run that checks the output")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.model = model_config(MODEL)
    if args.smoke:
        args.model = model_config(SMOKE["model"])
        for key in ("long_len", "short_len", "rounds", "steps"):
            setattr(args, key, SMOKE[key])
    out = spawn_ranks(run_rank, args.ranks, args, timeout=1800)[0]
    out["smoke"] = args.smoke
    check_promised(out, OUTPUT_KEYS)
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
