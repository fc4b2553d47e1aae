"""Packed micro-batches against padded rows, on the same batches, under the same plan.

Batches are RefinedWeb-like: document lengths drawn from the histogram the HotSPa authors' own
runs logged (``backend/sim/datasets.py``, ``commoncrawl``), capped at ``--context``, random
tokens. At each token budget per micro-batch (``--budgets``):

- ``padding_ratio``: tokens computed (padding included) over real tokens, for the whole batch as
  the engine cuts it under the plan (``MicroBatching.split`` then ``micro_batch_shape``): ``packed``
  (documents back to back, one row per micro-batch) and ``padded`` (today's rows, each padded to
  its micro-batch's longest), over ``--seeds`` batches of ``--padding-tokens`` tokens each;
- ``speedup_packed_over_padded``: padded step seconds over packed ones, training ``--ranks``
  processes (gloo on CPU, or one GPU with ``--device cuda``) under ``--plan``; every round
  trains each mode ``--steps`` steps on the same batches after ``--warmup`` steps, modes
  alternating within a round, the median round's ratio reported (``step_s`` holds every
  round's seconds per mode, ``speedup_rounds`` every round's ratio).

Also in the output: ``device``, ``plan``, ``model``, ``tokens_per_batch``, ``attention`` (per
budget and mode, the kernel in force and how packed rows attended their documents). ``--smoke``: 2 ranks, a
2-layer model, one small budget, one round of one step (the output's ``smoke``).

    python -m benchmarks.packing --json
    python -m benchmarks.packing --device cuda --ranks 1 --plan dp1 --model 1b --precision bf16 --json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

import torch
import torch.distributed as dist

from benchmarks.common.peer_sides import release_memory
from benchmarks.common.promised import check_promised
from hotswitch.backend import Strategy, get_config
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.attention.kernels import in_force
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.sim.datasets import batch_lengths
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.batching import MicroBatching, micro_batch_shape
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order

OUTPUT_KEYS = (
    "padding_ratio.packed",
    "padding_ratio.padded",
    "speedup_packed_over_padded",
    "speedup_rounds",
    "step_s.*.packed",
    "step_s.*.padded",
    "device",
    "plan",
    "model",
    "tokens_per_batch",
    "attention",
)
MODEL = dict(dim=128, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=352, vocab_size=2048)
SMOKE = dict(
    model=dict(MODEL, dim=32, n_layers=2, ffn_dim=96, vocab_size=256),
    ranks=2,
    plan="dp2",
    budgets=[1024],
    context=512,
    tokens=2048,
    padding_tokens=8192,
    seeds=1,
    steps=1,
    warmup=1,
    rounds=1,
)


def lengths_of(tokens: int, context: int, seed: int) -> list[int]:
    """RefinedWeb-like document lengths (at least 2 tokens) adding up to about ``tokens``."""
    out: list[int] = []
    draw = 0
    while sum(out) < tokens:
        out += [max(2, n) for n in batch_lengths("commoncrawl", context, 64, seed * 1000 + draw)]
        draw += 1
    while sum(out) > tokens and len(out) > 1:
        out.pop()
    return out


def padding_ratios(args) -> dict:
    """Tokens computed over real tokens, packed and padded, at every budget."""
    plan = Strategy.parse(args.plan)
    out: dict = {"packed": {}, "padded": {}}
    for budget in args.budgets:
        for mode in ("packed", "padded"):
            computed = real = 0
            for seed in range(args.seeds):
                seqs = [
                    Sequence(i, (0,) * (n + 1))
                    for i, n in enumerate(lengths_of(args.padding_tokens, args.context, seed))
                ]
                for replica in MicroBatching(budget, packed=mode == "packed").split(plan, seqs):
                    for group in replica:
                        rows, length = micro_batch_shape(group, mode == "packed")
                        computed += rows * length
                        real += sum(s.length for s in group)
            out[mode][str(budget)] = computed / real
    return out


def batches(args, vocab: int) -> list[list[Sequence]]:
    """The batches both modes train, the same on every rank."""
    rng = random.Random(0)
    out = []
    for b in range(args.warmup + args.steps):
        lengths = lengths_of(args.tokens, args.context, 100 + b)
        out.append([Sequence(i, tuple(rng.randrange(vocab) for _ in range(n + 1))) for i, n in enumerate(lengths)])
    return out


def timed_steps(engine: Engine, plan: HotSwitchPlan, data: list[list[Sequence]], warmup: int, device) -> float:
    """Seconds per step over the steps after ``warmup``."""
    order = execution_order(plan.strategies, plan.strategies[0], lambda a, b: 0.0)
    for batch in data[:warmup]:
        engine.step(plan.assign(batch), order)
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for batch in data[warmup:]:
        engine.step(plan.assign(batch), order)
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    return (time.perf_counter() - started) / max(1, len(data) - warmup)


def bench_rank(rank: int, world: int, args) -> dict:
    device = torch.device(f"cuda:{rank}" if args.device == "cuda" else "cpu")
    model = args.model if isinstance(args.model, dict) else None
    config = get_config("tiny").with_(**model) if model else get_config(args.model)
    config = config.with_(max_seq_len=max(config.max_seq_len, args.context))
    data = batches(args, config.vocab_size)
    step_s: dict = {str(b): {"packed": [], "padded": []} for b in args.budgets}
    attention: dict = {}
    for round_ in range(args.rounds):
        for budget in args.budgets:
            for mode in ("packed", "padded") if round_ % 2 == 0 else ("padded", "packed"):
                seconds, attention[f"{budget} {mode}"] = time_mode(config, data, budget, mode, args, device)
                step_s[str(budget)][mode].append(seconds)
                if rank == 0:  # progress: a run cut off still shows the steps it timed
                    line = f"[packing] round {round_} budget {budget} {mode}: {seconds:.4f} s a step"
                    print(line, file=sys.stderr, flush=True)
    rounds = {b: [pad / pack for pack, pad in zip(s["packed"], s["padded"], strict=True)] for b, s in step_s.items()}
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu x {world} ranks (gloo)",
        "plan": args.plan,
        "model": model or args.model,
        "tokens_per_batch": sum(s.length for s in data[-1]),
        "attention": attention,
        "step_s": step_s,
        "speedup_rounds": rounds,
        "speedup_packed_over_padded": {b: statistics.median(r) for b, r in rounds.items()},
    }


def time_mode(config, data: list, budget: int, mode: str, args, device: torch.device) -> tuple[float, str]:
    """Seconds a step of a new engine training ``mode`` rows under ``args.plan``, and the
    attention it ran (the kernel; for packed rows, how their documents were attended)."""
    plan = HotSwitchPlan.of(args.plan)
    run = engine_run(budget, seed=0, device=device.type, precision=args.precision, packing=mode == "packed")
    engine = Engine(config, plan.strategies, plan.strategies[0], run)
    seconds = timed_steps(engine, plan, data, args.warmup, device)
    choice = in_force()
    del engine
    release_memory()  # the next engine starts on an empty device
    return seconds, choice.label + (f", documents {choice.documents}" if mode == "packed" else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--plan", default="dp4", help="the plan both modes train under (default dp4)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--model", default=None, help="a preset (e.g. 1b); default: a small CPU-sized model")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--budgets", type=int, nargs="+", default=[4096, 16384, 65536])
    parser.add_argument("--context", type=int, default=4096, help="documents capped at this many tokens")
    parser.add_argument("--tokens", type=int, default=65536, help="tokens per trained batch")
    parser.add_argument("--padding-tokens", type=int, default=262144, help="tokens per batch for padding_ratio")
    parser.add_argument("--seeds", type=int, default=3, help="batches padding_ratio counts over")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help=f"a tiny run in seconds: {SMOKE}")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    args.model = args.model or MODEL
    backend = "nccl" if args.device == "cuda" else "gloo"
    out = {
        "padding_ratio": padding_ratios(args),
        **spawn_ranks(bench_rank, args.ranks, args, backend=backend, timeout=3600)[0],
    }
    if args.smoke:
        out["smoke"] = SMOKE
    if not args.json:
        for budget, x in out["speedup_packed_over_padded"].items():
            padded = out["padding_ratio"]["padded"][budget]
            print(f"budget {budget}: padded rows compute {padded:.2f}x the real tokens; packed steps {x:.2f}x faster")
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
