"""``hotswitch plan-switch``: plan a hot switch offline and print what it moves."""

from __future__ import annotations

import json

from hotswitch.backend import Cluster
from hotswitch.backend.switch import ALGORITHMS, model_layouts, plan_switch, switch_bounds


def add_parser(sub) -> None:
    p = sub.add_parser("plan-switch", help="plan a hot switch between two strategies and print its cost")
    p.add_argument("src", help="source strategy, e.g. dp2tp8pp2")
    p.add_argument("dst", help="destination strategy, e.g. dp1tp16pp2")
    p.add_argument("--model", default="7b", help="model config: tiny, 125m, 1b, 7b, 13b, 32b (default 7b)")
    p.add_argument(
        "--gpus",
        type=int,
        default=None,
        help="A800 GPUs, 8 per server (default: as many as the two strategies reach)",
    )
    p.add_argument("--bytes-per-param", type=int, default=2, help="2 for bf16 weights (default), 4 for fp32")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def _gb(n: float) -> str:
    return f"{n / 1e9:.3f} GB"


def run(args) -> int:
    from hotswitch.backend import Strategy

    if args.gpus is not None and args.gpus < 1:
        raise ValueError(
            f"--gpus {args.gpus} is no cluster; give at least 1 GPU, or leave it out (as many as the strategies reach)"
        )
    if args.bytes_per_param < 1:
        raise ValueError(f"--bytes-per-param {args.bytes_per_param} moves nothing; give 2 (bf16) or 4 (fp32)")
    src_strategy = Strategy.parse(args.src)
    dst_strategy = Strategy.parse(args.dst)
    if src_strategy.world_size != dst_strategy.world_size and not (src_strategy.is_group or dst_strategy.is_group):
        raise ValueError(
            f"{args.src} spans {src_strategy.world_size} devices and {args.dst} {dst_strategy.world_size}: a switch "
            "moves parameters between two layouts of the same devices; give two strategies of one size (e.g. "
            f"dp{src_strategy.world_size} -> tp{src_strategy.world_size})"
        )
    gpus = args.gpus or max(s.offset + s.world_size for s in (src_strategy, dst_strategy))
    cluster = Cluster.of_gpus(gpus)
    src, dst = model_layouts(args.model, args.src, args.dst, cluster)
    plans = {a: plan_switch(src, dst, cluster, a, args.bytes_per_param) for a in ALGORITHMS}
    bounds = switch_bounds(src, dst, cluster, args.bytes_per_param)
    if args.json:
        out = {a: p.summary() for a, p in plans.items()}
        out["bound"] = {"max_send": bounds.max_send, "time_s": bounds.time_s}
        print(json.dumps(out, indent=2))
        return 0
    print(f"{args.model} on {gpus} x {cluster.device} ({cluster.nodes} node(s)): {args.src} -> {args.dst}")
    print(f"{'planner':<10}{'moved':>14}{'max send':>14}{'time':>12}{'messages':>10}{'plan':>10}")
    for name, p in plans.items():
        print(
            f"{name:<10}{_gb(p.bytes_moved):>14}{_gb(p.max_send):>14}{p.time_s * 1e3:>10.2f}ms"
            f"{len(p.messages):>10}{p.plan_s * 1e3:>8.0f}ms"
        )
    print(f"{'bound':<10}{'':>14}{_gb(bounds.max_send):>14}{bounds.time_s * 1e3:>10.2f}ms")
    return 0
