"""Context parallelism at paper scale, by simulation (no processes): ``auto`` with cp layouts
(ring attention and Ulysses) against ``auto`` without, LLaMA-2 7B and 13B on 8, 16 and 32 A800s,
CommonCrawl (measured RefinedWeb lengths, a geometric tail assumed past 16K) and GitHub (assumed
lengths) batches of 512 documents truncated at 4K to 128K tokens (``sim.context_grid``).

Goals (issue 28): at least 1.3x where the context is 64K or more, never slower at 4K-32K. The
device model is the one ``benchmarks/paper.py`` uses, calibrated on the same measurements.
Each cell also gives the batch's longest document trained alone on the fastest layout that
holds it, without cp and with it (``longest_alone_s``, ``longest_alone_cp_s``): what cp can
shorten, against what the step gains.
Each cell also gives ``floor_cp_s``, the least any plan with cp could take (``sim.floor``: the
batch's least work, or its longest document alone), and ``speedup_ceiling``, the most any could
gain over ``auto`` without cp: where that is under 1.3x, no plan meets the goal.
The output: the ``cells`` (each with both arms' ``auto_s`` and ``auto_cp_s``, the ``speedup`` and
``meets_goal``), the ``summary`` (``long_cells_meeting_1_3x``, ``short_never_slower``,
``long_cells_whose_ceiling_reaches_1_3x``), the ring's
fitted split cost (``ring_split``) and the grid's seconds (``grid_s``). ``--side-by-side``: a
third arm per cell, ``auto`` with cp and device groups side by side; cells gain ``auto_groups_s``,
``vs_sequential_auto`` (over ``auto`` with cp) and ``groups_speedup`` (over ``auto`` without cp),
the summary ``long_vs_sequential_auto_mean`` and ``long_cells_meeting_1_3x_with_groups``.
Progress on stderr; ``--quick``: 7B on 8 and 32 GPUs at 32K, 64K and 128K only; ``--smoke``: one
cell (7B on 8 GPUs, CommonCrawl, 4K), what the output's ``smoke`` says.

    python -m benchmarks.context --json [--quick] [--device A800]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.common.promised import check_promised
from hotswitch.backend.sim.paper import calibrate_ring
from hotswitch.backend.sim.paper.context_grid import CONTEXTS, SETTINGS, context_grid, context_summary

SMOKE = dict(settings=[("7b", 8)], contexts=[4096], datasets=["commoncrawl"])
OUTPUT_KEYS = (
    "device",
    "cells[].auto_s",
    "cells[].auto_cp_s",
    "cells[].speedup",
    "cells[].meets_goal",
    "cells[].longest_alone_s",
    "cells[].longest_alone_cp_s",
    "cells[].floor_cp_s",
    "cells[].speedup_ceiling",
    "summary.long_cells_meeting_1_3x",
    "summary.short_never_slower",
    "summary.long_cells_whose_ceiling_reaches_1_3x",
    "ring_split",
    "grid_s",
)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--quick", action="store_true", help="7B on 8 and 32 GPUs at 32K-128K")
    parser.add_argument("--device", default="A800", help="A800 (the paper's), H800, H100 or H200")
    parser.add_argument("--contexts", help="comma-separated contexts in tokens (default: 64K, 128K, then 4K-32K)")
    parser.add_argument("--seed", type=int, default=0, help="the batches' seed")
    parser.add_argument("--out", help="also write the JSON here after every cell (a long run's partial result)")
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="a third arm per cell: auto with cp and device groups side by side (cells gain auto_groups_s, "
        "vs_sequential_auto, groups_speedup)",
    )
    parser.add_argument("--smoke", action="store_true", help=f"one cell, in seconds: {SMOKE}")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    settings = (("7b", 8), ("7b", 32)) if args.quick else SETTINGS
    contexts = CONTEXTS[:2] + CONTEXTS[-1:] if args.quick else CONTEXTS
    contexts = [int(c) for c in args.contexts.split(",")] if args.contexts else contexts
    grid = SMOKE if args.smoke else {"settings": settings, "contexts": contexts}
    rows: list[dict] = []
    started = time.perf_counter()

    def progress(row: dict, done: int, total: int) -> None:
        elapsed = time.perf_counter() - started
        cell = f"{row['model']}/{row['gpus']}/{row['dataset']}/{row['context'] // 1024}K"
        print(
            f"[{done}/{total} {elapsed:5.0f}s] {cell}: {row['auto_s'] or 0:.2f}s -> {row['auto_cp_s'] or 0:.2f}s "
            f"({row['speedup'] or 0:.2f}x) {row['auto_cp_plan']}"
            + (
                f"; with groups {row['auto_groups_s'] or 0:.2f}s {row['auto_groups_plan']}"
                if "auto_groups_s" in row
                else ""
            ),
            file=sys.stderr,
            flush=True,
        )
        rows.append(row)
        if args.out:
            Path(args.out).write_text(json.dumps(result(rows, done, total), indent=1))

    def result(rows: list[dict], done: int, total: int) -> dict:
        summary = context_summary(rows)
        return {"device": args.device, "done": f"{done}/{total}", "summary": summary, "cells": rows}

    context_grid(**grid, device=args.device, progress=progress, seed=args.seed, side_by_side=args.side_by_side)
    out = result(rows, len(rows), len(rows))
    if args.smoke:
        out["smoke"] = SMOKE
    out["grid_s"] = time.perf_counter() - started
    ring = calibrate_ring.report()  # the ring's split cost, as measured on an H200 and fitted
    out["ring_split"] = {k: v for k, v in ring.items() if k != "points"}
    if not args.json:
        for r in rows:
            print(
                f"{r['model']:>4} {r['gpus']:>2} {r['dataset']:<12}{r['context']:>7}  auto {r['auto_s'] or 0:7.2f}s"
                f"  with cp {r['auto_cp_s'] or 0:7.2f}s  {r['speedup'] or 0:5.2f}x  {r['auto_cp_plan']}"
            )
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
