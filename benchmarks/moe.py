"""A mixture of experts' two kernels side by side in one run: every expert as three grouped
matmuls over the tokens sorted by expert (``torch._grouped_mm``) against one expert after
another (``models.experts``), forward and backward, on the same tokens, routing and weights.

For each expert count, ``grouped_s`` and ``loop_s`` (median seconds of a forward and backward
of one layer's experts), ``speedup`` (loop over grouped: what the engine's measured choice
gains), ``max_error`` (the largest difference between their outputs) and the ``kernel`` the
engine would choose (``choose_experts``). A kernel that cannot run on the device or dtype has
no time (``null``). The output: the ``device``, ``dtype``, the layer's shape (``dim``,
``ffn_dim``, ``per_token``, ``tokens``) and ``rows``. The default shape is Qwen3-30B-A3B's
expert layer (hidden 2048, width 768, 8 of 128 experts per token) at 64 and 128 experts, shrunk
on the CPU; ``--smoke``: 8 experts of width 16 over 64 tokens of width 32.

``--ranks 4`` adds ``layouts``: the ``tiny-moe`` preset trained on 4 local CPU ranks on the same
mixed-length batches (``--size`` CommonCrawl-like documents cut at ``--cap`` tokens) under each
static layout of ``--layouts`` (by default every expert layout the engine trains on 4 ranks,
``ep4``, ``dp2ep2``, ``tp2ep2``, ``ep2tp2sp``, and the dense ``dp4``, ``dp2tp2``, ``tp4``, ``pp4``,
``dp2pp2`` with every expert on each replica) and under hot switching (``auto``, profiled first), side by side in one
run (``benchmarks/common/moe_layouts.py``). Its figures: ``step_s`` (each contender's median
step, slowest rank), ``best_static``, ``hot_over_best_static`` (hot switching's step over the
best static's: below 1 is faster), ``loss_error`` (each contender's largest relative difference
from one device's loss at a step) and ``losses_match_one_device`` (all within 1e-4), and under
``hot`` the ``plans`` auto chose, their ``predicted_step_s`` and measured ``seconds`` split, its
cost model's ``predicted_static_s`` for each layout it profiled (on the same batches), the
strategies it ``profiled`` and its profile's ``expert_exchanges`` (per ep strategy, the measured
all-to-all seconds and router imbalance at each length). With ``--smoke`` that part trains
on 8 documents of up to 64 tokens, one round of one step.

    python -m benchmarks.moe --json                                              # CPU
    python -m benchmarks.moe --ranks 4 --experts 8 --json                         # and 4 CPU ranks
    python -m benchmarks.moe --device cuda --dtype bf16 --dim 2048 --ffn-dim 768 --per-token 8 \\
        --tokens 8192 --experts 64 128 --json                                      # a GPU
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from benchmarks.common import moe_layouts
from benchmarks.common.promised import check_promised
from benchmarks.common.timing import median_seconds
from hotswitch.backend.models.config import Experts
from hotswitch.backend.models.experts import KERNELS, choose_experts

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SMOKE = dict(dim=32, ffn_dim=16, per_token=2, tokens=64, experts=[8], repeat=1)
OUTPUT_KEYS = (
    "device",
    "dtype",
    "tokens",
    "rows[].experts",
    "rows[].grouped_s",
    "rows[].loop_s",
    "rows[].speedup",
    "rows[].max_error",
    "rows[].kernel",
)
LAYOUT_KEYS = (  # with --ranks
    "layouts.step_s",
    "layouts.best_static",
    "layouts.hot_over_best_static",
    "layouts.loss_error",
    "layouts.losses_match_one_device",
    "layouts.hot.plans",
    "layouts.hot.predicted_step_s",
    "layouts.hot.predicted_static_s",
    "layouts.hot.seconds",
    "layouts.hot.profiled",
    "layouts.hot.expert_exchanges",
)


def _inputs(args, count: int):
    g = torch.Generator().manual_seed(0)
    device, dtype = args.device, DTYPES[args.dtype]
    x = torch.randn(args.tokens, args.dim, generator=g).to(device, dtype).requires_grad_()
    up = (count, args.ffn_dim, args.dim)
    down = (count, args.dim, args.ffn_dim)
    w1, w2, w3 = (torch.randn(s, generator=g).mul(0.02).to(device, dtype).requires_grad_() for s in (up, down, up))
    scores = torch.rand(args.tokens, count, generator=g)
    picked = scores.topk(args.per_token, dim=-1).indices.to(device)
    weights = torch.rand(args.tokens, args.per_token, generator=g).to(device, dtype)
    return x, picked, weights, w1, w2, w3


def measure(args, count: int) -> dict:
    inputs = _inputs(args, count)
    outputs, seconds = {}, {}
    for name, kernel in KERNELS.items():
        try:
            outputs[name] = kernel(*inputs).detach().float()
            seconds[name] = median_seconds(lambda k=kernel: k(*inputs).sum().backward(), args.device, args.repeat)
        except (RuntimeError, NotImplementedError) as error:  # the device or dtype does not run it
            print(f"{name} kernel: {error}", file=sys.stderr)
            seconds[name] = None
    both = len(outputs) == 2
    shape = Experts(count, args.per_token, args.ffn_dim)
    chosen = choose_experts(shape, args.dim, args.tokens, torch.device(args.device), DTYPES[args.dtype])
    row = {
        "experts": count,
        "grouped_s": seconds["grouped"],
        "loop_s": seconds["loop"],
        "speedup": seconds["loop"] / seconds["grouped"] if seconds["grouped"] and seconds["loop"] else None,
        "max_error": (outputs["grouped"] - outputs["loop"]).abs().max().item() if both else None,
        "kernel": chosen["kernel"],
    }
    print(f"{count} experts: {row}", file=sys.stderr, flush=True)
    return row


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--ffn-dim", type=int, default=192)
    p.add_argument("--per-token", type=int, default=8)
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--experts", type=int, nargs="+", default=[64, 128])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help=f"a tiny run in seconds: {SMOKE}")
    moe_layouts.add_arguments(p)
    args = p.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE, **moe_layouts.SMOKE)
    if any(args.per_token > n for n in args.experts):
        p.error(f"--per-token {args.per_token} is more than an expert count of {args.experts}")
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    result = {
        "device": name,
        "dtype": args.dtype,
        "dim": args.dim,
        "ffn_dim": args.ffn_dim,
        "per_token": args.per_token,
        "tokens": args.tokens,
        "rows": [measure(args, n) for n in args.experts],
        **({"layouts": moe_layouts.layouts(args)} if args.ranks else {}),
        **({"smoke": SMOKE} if args.smoke else {}),
    }
    print(json.dumps(result, indent=2 if args.json else None))
    check_promised(result, OUTPUT_KEYS)
    if args.ranks:
        check_promised(result, LAYOUT_KEYS)
    return result


if __name__ == "__main__":
    main()
