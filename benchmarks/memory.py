"""Memory per device against Megatron's, measured on 4 CPU ranks (gloo).

- ``activation_bytes_per_token_layer``: per strategy, the bytes autograd keeps for backward per
  token and transformer layer (``measured``), in bf16, counted with ``saved_tensors_hooks`` (the
  same count the memory model is checked against) on a model of ``--layers`` and of twice as
  many layers, so the head cancels; beside Megatron's 34 x dim / tp (``megatron_formula``:
  sequence parallelism and flash attention, Korthikanti et al. 2022, with the attention-score
  term gone) and the ``ratio``; and the analytic model's total for each measured strategy
  (``planning.memory``) over the count at ``--layers`` (``model_vs_measured_total``).
  Strategies without sequence parallelism are shown for reference: Megatron's figure assumes it.
- ``optimizer_bytes_per_device``: per instantiation strategy, the bytes this rank's master
  weights and AdamW moments take after one update (``measured``; bf16 compute, fp32 masters),
  beside 12 x params / (tp x pp) (``unsharded``) and 12 x params / (tp x pp x dp)
  (``sharded_goal``, sharded over dp).
- ``selective_recompute``: per strategy with sequence parallelism, its ``sel`` variant's
  activation bytes per token and layer (counted as above) over the plain one's, and the time of
  a micro-batch's forward and backward at ``--length`` (what recompute changes; a step's update
  and gradient sync are the same for both) over the plain one's, wall-clock (``step_s_ratio``)
  and the ranks' CPU time (``cpu_s_ratio``, steady where other processes share the cores):
  ratios of the medians of ``--repeats`` rounds, the two strategies alternating on the same
  ranks in the same run. The top-level ratios are the worse of the strategies'
  (``activation_ratio``; ``goal_met``: <= 0.6 of the activations for <= 1.1 of the step time).

``--smoke``: 2 ranks, width 32, one layer, 32 tokens, one timed round, one strategy of each kind
(the output's ``smoke``).

    python -m benchmarks.memory --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from benchmarks.common.promised import check_promised
from hotswitch.backend.models.config import get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.measure import filled_batch, slowest
from hotswitch.backend.train.planning.memory import kept_activation_bytes
from hotswitch.backend.train.planning.memory_measure import measured_activation_bytes

ACTIVATION_STRATEGIES = ["dp2tp2sp", "tp4sp", "dp2tp2", "tp4", "dp4"]
OPTIMIZER_STRATEGIES = ["dp4", "dp2tp2", "tp4"]
SELECTIVE_STRATEGIES = ["dp2tp2sp", "tp4sp"]
BF16 = Precision.of("bf16")
SMOKE = dict(
    dim=32,
    ffn=96,
    layers=1,
    length=32,
    repeats=1,
    ranks=2,
    activation_strategies=["tp2sp"],
    optimizer_strategies=["dp2"],
    selective_strategies=["tp2sp"],
)
OUTPUT_KEYS = (
    "activation_bytes_per_token_layer.*.measured",
    "activation_bytes_per_token_layer.*.megatron_formula",
    "activation_bytes_per_token_layer.*.ratio",
    "activation_bytes_per_token_layer.*.model_vs_measured_total",
    "optimizer_bytes_per_device.*.measured",
    "optimizer_bytes_per_device.*.unsharded",
    "optimizer_bytes_per_device.*.sharded_goal",
    "selective_recompute.activation_ratio",
    "selective_recompute.step_s_ratio",
    "selective_recompute.cpu_s_ratio",
    "selective_recompute.goal_met",
)


def _config(args, layers: int):
    return get_config("tiny").with_(dim=args.dim, ffn_dim=args.ffn, n_layers=layers, max_seq_len=args.length)


def _engine(config, strategy: Strategy) -> Engine:
    return Engine(config, [strategy], strategy, engine_run(config.max_seq_len, seed=0, **BF16.as_settings()))


def _per_token_layer(args, s: Strategy) -> tuple[float, int]:
    """Bytes kept per token and layer (the head cancels), and the total at ``--layers``."""
    counts = [
        measured_activation_bytes(_engine(_config(args, n), s), s, args.length) for n in (args.layers, 2 * args.layers)
    ]
    return (counts[1] - counts[0]) / args.layers / args.length, counts[0]


def activations(args) -> dict:
    out = {}
    for name in args.activation_strategies:
        s = Strategy.parse(name)
        per_token_layer, total = _per_token_layer(args, s)
        megatron = 34 * args.dim / s.tp
        config = _config(args, args.layers)
        model = kept_activation_bytes(config, s, args.length, BF16)
        out[name] = {
            "measured": per_token_layer,
            "megatron_formula": megatron,
            "ratio": per_token_layer / megatron,
            "model_vs_measured_total": model / total,
        }
    return out


def optimizer_bytes(args) -> dict:
    out = {}
    for name in args.optimizer_strategies:
        s = Strategy.parse(name)
        config = _config(args, args.layers)
        engine = _engine(config, s)
        engine.master.clip_and_update()  # AdamW's moments exist after its first step
        held = engine.master.optimizer_bytes()
        out[name] = {
            "measured": held,
            "unsharded": 12 * config.n_params / (s.tp * s.pp),
            "sharded_goal": 12 * config.n_params / (s.tp * s.pp * s.dp),
            "sharded": engine.master.sharded,
        }
    return out


def _paired_ratios(args, plain: Strategy, sel: Strategy) -> dict:
    """Forward and backward of a filled micro-batch under ``plain`` then ``sel``, round after
    round: the slowest rank's wall-clock seconds and its thread's CPU seconds (one intra-op
    thread per rank, so CPU time is the compute itself, whatever else shares the cores): their
    medians and the ratios of the medians."""
    config = _config(args, args.layers)
    engines = [_engine(config, s) for s in (plain, sel)]
    tokens = filled_batch(engines[0], args.length)
    rounds = []
    for repeat in range(args.repeats + 1):  # the first round warms up
        pair = []
        for s, engine in zip((plain, sel), engines, strict=True):
            with engine.holding(s):
                torch.distributed.barrier()
                wall, cpu = time.perf_counter(), time.thread_time()
                engine.states[s].graph.forward_backward(tokens, tokens, 0.0)
                pair.append((slowest(time.perf_counter() - wall), slowest(time.thread_time() - cpu)))
        rounds += [pair] if repeat else []
    wall = [statistics.median(p[i][0] for p in rounds) for i in (0, 1)]
    cpu = [statistics.median(p[i][1] for p in rounds) for i in (0, 1)]
    return {
        "plain_step_s": wall[0],
        "step_s": wall[1],
        "step_s_ratio": wall[1] / wall[0],
        "plain_cpu_s": cpu[0],
        "cpu_s": cpu[1],
        "cpu_s_ratio": cpu[1] / cpu[0],
    }


def selective(args) -> dict:
    rows = {}
    for name in args.selective_strategies:
        plain, sel = Strategy.parse(name), Strategy.parse(name + "sel")
        kept, kept_sel = _per_token_layer(args, plain)[0], _per_token_layer(args, sel)[0]
        rows[str(sel)] = {
            "bytes_per_token_layer": kept_sel,
            "plain_bytes_per_token_layer": kept,
            "activation_ratio": kept_sel / kept,
            **_paired_ratios(args, plain, sel),
        }
    worst = {key: max(row[key] for row in rows.values()) for key in ("activation_ratio", "step_s_ratio", "cpu_s_ratio")}
    return {
        **worst,
        "goal_met": worst["activation_ratio"] <= 0.6 and worst["step_s_ratio"] <= 1.1,
        "strategies": rows,
    }


def bench_rank(rank: int, world: int, args) -> dict:
    return {
        "activation_bytes_per_token_layer": activations(args),
        "optimizer_bytes_per_device": optimizer_bytes(args),
        "selective_recompute": selective(args),
        "dim": args.dim,
        "precision": "bf16",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--ffn", type=int, default=688, help="the FFN's width (LLaMA: about 8/3 dim)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per strategy for selective recompute")
    parser.add_argument("--smoke", action="store_true", help=f"a tiny run in seconds: {SMOKE}")
    parser.set_defaults(
        ranks=4,
        activation_strategies=ACTIVATION_STRATEGIES,
        optimizer_strategies=OPTIMIZER_STRATEGIES,
        selective_strategies=SELECTIVE_STRATEGIES,
    )
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    out = spawn_ranks(bench_rank, args.ranks, args, timeout=3600)[0]
    if args.smoke:
        out["smoke"] = SMOKE
    if not args.json:
        for name, row in out["activation_bytes_per_token_layer"].items():
            print(f"{name}: {row['measured']:.0f} B per token and layer, {row['ratio']:.2f}x Megatron's")
        sel = out["selective_recompute"]
        print(
            f"selective recompute: {sel['activation_ratio']:.2f}x the activations, {sel['step_s_ratio']:.2f}x the time"
        )
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
