"""What ``benchmarks/moe.py --ranks N`` runs: a mixture of experts trained on N local CPU ranks
(gloo) on the same mixed-length batches under every static expert layout given and under hot
switching (the trainer's ``auto``, profiled on the ranks first, re-planning each batch), from the
same initial weights, side by side in one run; every contender's losses checked against one
device's on the same batches.

Timing follows ``benchmarks/side_by_side.py``: after ``warmup`` batches for every contender alike,
``rounds`` rounds each run every contender for ``steps`` batches; a step's seconds are the
slowest rank's, a contender's ``step_s`` the median over its timed steps."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable

import torch
import torch.distributed as dist

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.config import ModelConfig, get_config
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.sim.datasets import batch_lengths
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy

SEED = 0
HOT = "auto"
# every expert layout the engine trains on 4 ranks, and the dense ones beside (experts replicated)
LAYOUTS = ("dp4", "ep4", "dp2ep2", "tp2ep2", "ep2tp2sp", "dp2tp2", "tp4", "pp4", "dp2pp2")
SMOKE = dict(size=8, cap=64, token_budget=128, rounds=1, steps=1, warmup=1)  # --smoke with --ranks
LOSS_TOLERANCE = 1e-4  # relative, per step: fp32 sums in another order (the tests hold 1e-5)
Step = Callable[[list[Sequence]], float]


def model_config() -> ModelConfig:
    """The ``tiny-moe`` preset (8 experts, 2 per token, in each of 4 layers: as few as ``pp4``
    takes), under ``--smoke`` too (only its batches are smaller)."""
    return get_config("tiny-moe")


def batches(config: ModelConfig, count: int, size: int, cap: int) -> list[list[Sequence]]:
    """``count`` batches of ``size`` CommonCrawl-like documents cut at ``cap`` tokens (``sim.datasets``:
    many short, a few long), random tokens from a fixed seed: every contender trains these."""
    generator = torch.Generator().manual_seed(SEED)
    out = []
    for b in range(count):
        lengths = batch_lengths("commoncrawl", cap, size, seed=b)
        tokens = [torch.randint(config.vocab_size, (n + 1,), generator=generator).tolist() for n in lengths]
        out.append([Sequence(b * 1000 + i, tuple(t)) for i, t in enumerate(tokens)])
    return out


def static_step(config: ModelConfig, layout: str, budget: int) -> Step:
    """Training one batch under ``layout`` alone (the master weights on it, or with ep on it
    without ep: the engine's instantiation never splits the experts), returning its loss."""
    plan = HotSwitchPlan.of(layout)
    instantiation = instantiation_strategy(plan.strategies)
    engine = Engine(config, plan.strategies, instantiation, engine_run(budget, seed=SEED))
    order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
    return lambda batch: engine.step(plan.assign(batch), order).loss


class HotSwitching:
    """The trainer's ``auto`` (profiled when built: collective), one batch at a time; it keeps
    the plans it chose, each step's predicted and measured split of seconds."""

    def __init__(self, config: ModelConfig, budget: int, cap: int):
        from hotswitch.backend.data.sources import SyntheticDocuments
        from hotswitch.backend.data.stream import BatchStream
        from hotswitch.backend.train.loop.trainer import Trainer

        lengths = BatchStream(SyntheticDocuments("github", count=1), 1, cap)  # the trainer reads max_len only
        self.trainer = Trainer(config, lengths, {"plan": "auto", "token_budget": budget, "seed": SEED})
        self.plans: list[str] = []
        self.reports: list[dict] = []

    def __call__(self, batch: list[Sequence]) -> float:
        report = self.trainer.step(batch)
        self.plans.append(str(self.trainer.plan))
        self.reports.append(report)
        return report["loss"]

    def summary(self, timed: list[list[Sequence]], layouts: list[str]) -> dict:
        """The plans of the ``timed`` batches (the last steps), their mean predicted seconds and
        measured split, and what the cost model predicts for each of ``layouts`` it profiled on them."""
        reports = self.reports[-len(timed) :]
        cost = self.trainer.cost
        split = {k: statistics.mean(r["seconds"][k] for r in reports) for k in reports[0]["seconds"]}
        lengths = [[s.length for s in batch] for batch in timed]
        profiled = {name: Strategy.parse(name) for name in layouts}
        statics = {
            name: statistics.mean(cost.step_s(HotSwitchPlan.of(s), n) for n in lengths)  # as ``static_step``
            for name, s in profiled.items()
            if cost and s in cost.strategies
        }
        return {
            "plans": dict(Counter(self.plans[-len(timed) :])),
            "predicted_step_s": statistics.mean(r["predicted_step_s"] or 0.0 for r in reports),
            "predicted_static_s": statics,
            "seconds": split,
            "profiled": [str(s) for s in cost.strategies] if cost else [],
            "expert_exchanges": cost.expert_exchanges() if cost else {},
        }


def timed_steps(step: Step, chunk: list[list[Sequence]]) -> tuple[list[float], list[float]]:
    """Each batch's (slowest rank's) seconds and loss."""
    seconds, losses = [], []
    for batch in chunk:
        dist.barrier()
        started = time.perf_counter()
        losses.append(step(batch))
        elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        seconds.append(elapsed.item())
    return seconds, losses


def run_rank(rank: int, world: int, args: argparse.Namespace) -> dict | None:
    """Every contender on this rank through the same batches (collective); rank 0's figures."""
    config = model_config()
    data = batches(config, args.warmup + args.rounds * args.steps, args.size, args.cap)
    hot = HotSwitching(config, args.token_budget, args.cap)
    steps: dict[str, Step] = {name: static_step(config, name, args.token_budget) for name in args.layouts}
    steps[HOT] = hot
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    losses: dict[str, list[float]] = {name: [] for name in steps}
    for name, step in steps.items():
        losses[name] += timed_steps(step, data[: args.warmup])[1]
    for r in range(args.rounds):
        chunk = data[args.warmup + r * args.steps : args.warmup + (r + 1) * args.steps]
        for name, step in steps.items():
            spent, lost = timed_steps(step, chunk)
            seconds[name] += spent
            losses[name] += lost
            if rank == 0:
                print(f"round {r + 1}, {name}: {[round(t, 3) for t in spent]} s", file=sys.stderr, flush=True)
    if rank:
        return None
    return {"seconds": seconds, "losses": losses, "hot": hot.summary(data[args.warmup :], args.layouts)}


def reference_losses(args: argparse.Namespace) -> list[float]:
    """One device's loss at every step on the same batches, from the same weights, on one thread
    as each rank computes (where the other cores are busy, a second OpenMP thread waits for one at
    every small operator of a model this small)."""
    from hotswitch.backend.train.loop.reference import ReferenceTrainer
    from hotswitch.backend.train.state.optim import OptimizerConfig

    config = model_config()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = ReferenceTrainer(config, OptimizerConfig(), SEED, args.token_budget)
        data = batches(config, args.warmup + args.rounds * args.steps, args.size, args.cap)
        return [trainer.step(batch) for batch in data]
    finally:
        torch.set_num_threads(threads)


def layouts(args: argparse.Namespace) -> dict:
    """The ``--ranks`` part of ``moe.py``'s output (its docstring names each figure)."""
    for name in args.layouts:
        if Strategy.parse(name).world_size != args.ranks:
            raise SystemExit(
                f"--layouts {name} spans {Strategy.parse(name).world_size} ranks, not --ranks {args.ranks}: "
                f"give layouts of {args.ranks} ranks"
            )
    ranked = spawn_ranks(run_rank, args.ranks, args, timeout=3600)[0]
    reference = reference_losses(args)
    step_s = {name: statistics.median(s) for name, s in ranked["seconds"].items()}
    statics = [name for name in step_s if name != HOT]
    best = min(statics, key=step_s.__getitem__)
    error = {
        name: max(abs(a - b) / abs(b) for a, b in zip(lost, reference, strict=True))
        for name, lost in ranked["losses"].items()
    }
    return {
        "ranks": args.ranks,
        "model": model_config().name,
        "batch": {"documents": args.size, "cap": args.cap, "token_budget": args.token_budget},
        "step_s": step_s,
        "best_static": best,
        "hot_over_best_static": step_s[HOT] / step_s[best],
        "loss_error": error,
        "losses_match_one_device": max(error.values()) <= LOSS_TOLERANCE,
        "hot": ranked["hot"],
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the ``--ranks`` part."""
    parser.add_argument("--ranks", type=int, default=0, help="also train the layouts on this many CPU ranks (4)")
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), help="the static layouts (on 4 ranks)")
    parser.add_argument("--size", type=int, default=32, help="documents per batch")
    parser.add_argument("--cap", type=int, default=512, help="tokens a document is cut at")
    parser.add_argument("--token-budget", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="timed batches per contender and round")
    parser.add_argument("--warmup", type=int, default=2, help="untimed batches per contender first")
