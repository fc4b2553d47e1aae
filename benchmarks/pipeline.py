"""Pipeline bubbles: the measured idle share of each stage next to the schedule's theory.

On ``--ranks`` gloo processes (one thread each), a LLaMA-style model runs ``M`` equal
micro-batches through ``pp`` stages under GPipe and 1F1B. A stage's bubble is the share
of the run's wall time (slowest rank) it did not spend computing passes; the figure is
the mean over stages, next to ``(pp - 1) / (M + pp - 1)``. With fewer cores than ranks
the stages also compete for the CPU, which shows as extra busy time, not as bubble.

The output's ``runs``, one per schedule and ``M``: ``schedule``, ``stages``, ``micro_batches``,
the best run's ``wall_s``, ``measured_bubble`` and ``theoretical_bubble``. ``--smoke``: 2 ranks,
a narrower 2-layer model, M of 1 and 2, one repeat (the output's ``smoke``).

    python -m benchmarks.pipeline --json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist

from benchmarks.common.promised import check_promised
from hotswitch.backend import Strategy, get_config, param_layout
from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.parallel.pipeline import SCHEDULES, StageClock, bubble_fraction
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.runtime.process_groups import ProcessGroups, strategy_rank_sets
from hotswitch.backend.runtime.spawn import spawn_ranks

MODEL = dict(name="bench-pipeline", vocab_size=512, dim=256, n_layers=8, n_heads=8, n_kv_heads=4, ffn_dim=688)
SMOKE = dict(model=dict(MODEL, dim=32, n_layers=2, ffn_dim=96), ranks=2, micro_batches=[1, 2], length=16, repeats=1)
OUTPUT_KEYS = (
    "runs[].schedule",
    "runs[].stages",
    "runs[].micro_batches",
    "runs[].wall_s",
    "runs[].measured_bubble",
    "runs[].theoretical_bubble",
)


def bench_rank(rank: int, world: int, args) -> list[dict]:
    torch.set_num_threads(1)
    config = get_config("tiny").with_(**args.model)
    strategy = Strategy(dp=1, tp=1, pp=world)
    graph = compile_graph(LogicalGraph.build(config, [strategy]), strategy, rank)
    layout = param_layout(config, strategy)
    params, grads = FlatBuffer(layout, rank), FlatBuffer(layout, rank)
    torch.nn.init.normal_(params.flat, std=0.02)
    graph.attach(params, grads)
    graph.bind(ProcessGroups(strategy_rank_sets([strategy])))
    gen = torch.Generator().manual_seed(0)
    rows = []
    for micros in args.micro_batches:
        batches = [torch.randint(0, config.vocab_size, (args.rows, args.length), generator=gen) for _ in range(micros)]
        micro_batches = [(tokens, tokens) for tokens in batches]
        for schedule in SCHEDULES:
            graph.run(micro_batches, 1.0, schedule)  # warm up
            best = None
            for _ in range(args.repeats):
                clock = StageClock()
                dist.barrier()
                started = time.perf_counter()
                graph.run(micro_batches, 1.0, schedule, clock)
                wall = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
                dist.all_reduce(wall, op=dist.ReduceOp.MAX)
                idle = torch.tensor([1.0 - clock.busy_s / wall.item()], dtype=torch.float64)
                dist.all_reduce(idle)
                if best is None or wall.item() < best[0]:
                    best = (wall.item(), idle.item() / world)
            rows.append(
                {
                    "schedule": schedule,
                    "stages": world,
                    "micro_batches": micros,
                    "wall_s": best[0],
                    "measured_bubble": best[1],
                    "theoretical_bubble": bubble_fraction(world, micros),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--micro-batches", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help=f"a tiny run in seconds: {SMOKE}")
    parser.set_defaults(model=MODEL)
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    rows = spawn_ranks(bench_rank, args.ranks, args, timeout=1800)[0]
    if not args.json:
        for r in rows:
            print(
                f"{r['schedule']:>5} pp={r['stages']} M={r['micro_batches']:>2}: bubble {r['measured_bubble']:.2f} "
                f"measured, {r['theoretical_bubble']:.2f} in theory ({r['wall_s'] * 1e3:.0f} ms)"
            )
    out = {"runs": rows, **({"smoke": SMOKE} if args.smoke else {})}
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
