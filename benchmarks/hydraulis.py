"""Hydraulis' experiment beside ours, by simulation (no processes): its two paper settings as its
public code launches them (``sim.paper.hydraulis``: the 32B shape on 64 A800s, CommonCrawl,
batches of 200,000 tokens up to 32K; 13B on 32, GitHub, 100,000 tokens up to 16K), every
contender packing documents on the same batch.

The output: ``settings``, per row the strong static (``best_static_s``), our ``auto`` arms
(``auto_s``, ``auto_cp_s``, ``auto_groups_s``; the best of them ``ours_s``), the floor under
every plan (``floor_s``), the HotSPa paper's baselines as its authors ran them
(``megatron_paper_s``, ``deepspeed_paper_s``, ``hetu_static_paper_s``) and ours against each
(``vs_strong_static``, ``vs_megatron_paper``, ``vs_deepspeed_paper``, ``vs_hetu_static_paper``);
``reported``, Hydraulis' own range over existing systems (from its abstract: its baselines and
figures per setting are not in its code); ``source``; ``grid_s``. ``--smoke``: the GitHub
setting alone (seconds; the output's ``smoke`` says so).

    python -m benchmarks.hydraulis --json [--device A800] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.common.promised import check_promised
from hotswitch.backend.sim.paper.hydraulis import REPORTED, SETTINGS, SOURCE, hydraulis_grid

OUTPUT_KEYS = (
    "settings[].best_static_s",
    "settings[].auto_s",
    "settings[].auto_cp_s",
    "settings[].auto_groups_s",
    "settings[].ours_s",
    "settings[].floor_s",
    "settings[].megatron_paper_s",
    "settings[].deepspeed_paper_s",
    "settings[].hetu_static_paper_s",
    "settings[].vs_strong_static",
    "settings[].vs_megatron_paper",
    "settings[].vs_deepspeed_paper",
    "settings[].vs_hetu_static_paper",
    "reported",
    "source",
    "grid_s",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--device", default="A800", help="A800 (Hydraulis'), H800, H100 or H200")
    parser.add_argument("--seed", type=int, default=0, help="the batches' seed")
    parser.add_argument("--smoke", action="store_true", help="the GitHub setting alone")
    args = parser.parse_args()
    started = time.perf_counter()
    settings = [s for s in SETTINGS if s.dataset == "github"] if args.smoke else SETTINGS
    rows = hydraulis_grid(settings, args.device, args.seed)
    out = {"device": args.device, "settings": rows, "reported": REPORTED, "source": SOURCE}
    out["grid_s"] = time.perf_counter() - started
    if args.smoke:
        out["smoke"] = "the GitHub setting alone"
    if not args.json:
        for r in rows:
            print(
                f"{r['model']:>4} {r['gpus']:>2} {r['dataset']:<12}{r['tokens']:>7} tokens  static "
                f"{r['best_static_s']:6.2f}s  ours {r['ours_s']:6.2f}s ({r['ours']})  DeepSpeed "
                f"{r['deepspeed_paper_s'] or 0:6.2f}s  floor {r['floor_s']:6.2f}s"
            )
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
