"""Switch-plan quality and planning time on the paper's setups (no processes needed).

For every ordered pair of strategies in HotSPa's c1 and c2 configurations
(7B/13B/32B on 8/16/32 A800s), plan the switch of the bf16 parameters with the
naive, HotSPa greedy and balanced (default) planners and compare each with the
linear-programming lower bounds: on the busiest sender's bytes and on the
predicted switch time.

The output's ``cases``, one per ordered pair: ``bytes_moved``, each planner's busiest sender
(``naive_max_send``, ``greedy_max_send``, ``best_max_send``) and predicted time (``naive_time_s``,
``greedy_time_s``, ``best_time_s``) beside the bounds (``bound_max_send``, ``bound_time_s``), and
the planning seconds (``plan_s``, ``greedy_plan_s``); the ``summary`` gives the worst ratios to
the bounds (``max_greedy_over_bound_max_send``, ``max_best_over_bound_max_send``,
``max_greedy_over_bound_time``, ``max_best_over_bound_time``) and ``max_plan_s_32b``. ``--smoke``: 7B on 8 GPUs
(c1) and the 32B setup only (the output's ``smoke``).

    python -m benchmarks.planner --json
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

from benchmarks.common.promised import check_promised
from hotswitch.backend import Cluster, Strategy
from hotswitch.backend.switch import model_layouts, plan_switch, switch_bounds

# (model, gpus, configuration, strategies as (dp, tp, pp)), from the paper's artifact.
SETUPS = [
    ("7b", 8, "c1", [(1, 4, 2), (8, 1, 1), (2, 2, 2)]),
    ("7b", 16, "c1", [(2, 4, 2), (16, 1, 1), (4, 4, 1)]),
    ("13b", 8, "c1", [(1, 8, 1), (4, 2, 1), (1, 4, 2)]),
    ("13b", 16, "c1", [(2, 8, 1), (8, 2, 1), (4, 4, 1)]),
    ("32b", 32, "c1", [(1, 16, 2), (4, 2, 4), (2, 8, 2)]),
    ("7b", 8, "c2", [(1, 4, 2), (8, 1, 1), (4, 2, 1), (2, 2, 2)]),
]
BF16 = 2
SMOKE = dict(setups=[SETUPS[0], SETUPS[4]])  # the 32B one: the summary's planning time
OUTPUT_KEYS = (
    "cases[].bytes_moved",
    "cases[].naive_max_send",
    "cases[].greedy_max_send",
    "cases[].best_max_send",
    "cases[].bound_max_send",
    "cases[].naive_time_s",
    "cases[].greedy_time_s",
    "cases[].best_time_s",
    "cases[].bound_time_s",
    "cases[].plan_s",
    "cases[].greedy_plan_s",
    "summary.max_greedy_over_bound_max_send",
    "summary.max_best_over_bound_max_send",
    "summary.max_greedy_over_bound_time",
    "summary.max_best_over_bound_time",
    "summary.max_plan_s_32b",
)


def measure_case(model: str, gpus: int, config: str, src: Strategy, dst: Strategy) -> dict:
    cluster = Cluster.of_gpus(gpus)
    layouts = model_layouts(model, src, dst, cluster)
    plans = {}
    for algorithm in ("naive", "greedy", "balanced"):
        started = time.perf_counter()
        plans[algorithm] = plan_switch(*layouts, cluster, algorithm, BF16)
        plans[algorithm + "_s"] = time.perf_counter() - started
    bounds = switch_bounds(*layouts, cluster, BF16)
    naive, greedy, best = plans["naive"], plans["greedy"], plans["balanced"]
    return {
        "model": model,
        "gpus": gpus,
        "config": config,
        "src": str(src),
        "dst": str(dst),
        "bytes_moved": best.bytes_moved,
        "greedy_max_send": greedy.max_send,
        "best_max_send": best.max_send,
        "bound_max_send": bounds.max_send,
        "naive_max_send": naive.max_send,
        "greedy_time_s": greedy.time_s,
        "best_time_s": best.time_s,
        "bound_time_s": bounds.time_s,
        "naive_time_s": naive.time_s,
        "plan_s": plans["balanced_s"],
        "greedy_plan_s": plans["greedy_s"],
    }


def ratio(a: float, b: float) -> float:
    return a / b if b else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--smoke", action="store_true", help="two setups only, in seconds")
    parser.set_defaults(setups=SETUPS)
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    cases = []
    for model, gpus, config, strategies in args.setups:
        parsed = [Strategy(dp=dp, tp=tp, pp=pp) for dp, tp, pp in strategies]
        for src, dst in itertools.permutations(parsed, 2):
            cases.append(measure_case(model, gpus, config, src, dst))
            if not args.json:
                c = cases[-1]
                print(
                    f"{model:>4} {gpus:>2} {config} {c['src']:>10} -> {c['dst']:<10} "
                    f"greedy/bound bytes {ratio(c['greedy_max_send'], c['bound_max_send']):.2f} "
                    f"time greedy/bound {ratio(c['greedy_time_s'], c['bound_time_s']):.2f} "
                    f"best/bound {ratio(c['best_time_s'], c['bound_time_s']):.3f} plan {c['plan_s'] * 1e3:.0f} ms"
                )
    summary = {
        "max_greedy_over_bound_max_send": max(ratio(c["greedy_max_send"], c["bound_max_send"]) for c in cases),
        "max_best_over_bound_max_send": max(ratio(c["best_max_send"], c["bound_max_send"]) for c in cases),
        "max_greedy_over_bound_time": max(ratio(c["greedy_time_s"], c["bound_time_s"]) for c in cases),
        "max_best_over_bound_time": max(ratio(c["best_time_s"], c["bound_time_s"]) for c in cases),
        "max_plan_s_32b": max(c["plan_s"] for c in cases if c["model"] == "32b"),
    }
    out = {"cases": cases, "summary": summary, **({"smoke": SMOKE} if args.smoke else {})}
    print(json.dumps(out, indent=None if not args.json else 1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
