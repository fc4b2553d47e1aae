"""The HotSPa paper's grid by simulation, and the simulator checked against real runs.

Grid (no processes): LLaMA-2 7B/13B and the 32B shape on the paper's c1 settings (7B and 13B on
8 and 16 A800s, 32B on 32), CommonCrawl (measured RefinedWeb lengths) and GitHub (assumed) batches
of 512 documents truncated at 4K-32K tokens; per setting the best static strategy of the paper's
layouts with the engine's data handling (the strong static), the paper's c1, the paper's own
baselines as its authors ran them (``sim.baselines``: megatron-paper, hetu-static-paper,
hotspa-c1-paper, deepspeed-paper), and ``auto``; a ``paper`` block in the summary sets the
largest speedups beside the paper's. The device model is calibrated on the authors' Megatron-LM
logs (``sim.calibrate``; its error on every point is in ``calibration``); the H200 preset's fit
on the engine's own one-GPU steps is in ``calibration_h200``.

Validation ("this machine" mode, ``--validate``): real training on ``--ranks`` local CPU ranks,
as ``benchmarks/e2e.py`` runs it (same model, data and memory budget), hot-switched (``auto``)
and static; the simulator's step (``sim.simulate_step`` on the trainer's measured cost model)
against the measured mean step time, and predicted against measured speedups (hot over static),
which a loaded machine leaves nearly unchanged. A few minutes on 2 cores.

The output: ``settings`` (per row ``best_static_s``, ``hot_c1_s``, ``auto_s`` and ``auto``
against the paper's baselines: ``vs_megatron_paper``, ``vs_deepspeed_paper``,
``vs_strong_static``; ``floor_s``, the least any plan over the setting's layouts could take, and
``floor_vs_static``, the most any could gain: ``sim.floor``), the ``summary``
(``auto_vs_static_mean``, ``auto_vs_static_geomean``, ``floor_vs_static_geomean``, the ``paper``
block),
``calibration``, ``calibration_h200``, ``grid_s``, ``packing`` (``--packing``: the engine's own
contenders, its statics, c1 and ``auto``, pack their micro-batches; the paper's baselines run as
their authors ran them) and ``validation`` (null without
``--validate``; else its ``cases``, ``worst_rel_err`` and ``speedups``). ``--side-by-side``: each setting also
runs ``auto+groups`` (``auto`` weighing two device groups side by side); rows gain
``vs_sequential_auto`` and ``auto_groups_vs_static``, the summary ``vs_sequential_auto_mean`` and
``auto_groups_vs_static_geomean``.
``--smoke``: one grid
cell (7B on 8 GPUs, CommonCrawl, 4K) and the validation on 2 ranks with ``e2e.py``'s smoke
model, one step of 4 documents of up to 64 byte tokens (the output's ``smoke``).

    python -m benchmarks.paper --json [--validate]
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.common.promised import check_promised
from hotswitch.backend.sim.paper import calibrate_h200
from hotswitch.backend.sim.paper.calibrate import report
from hotswitch.backend.sim.paper.grid import paper_grid, summary

SMOKE = dict(
    grid=dict(settings=[("7b", 8)], datasets=["commoncrawl"], contexts=[4096]),
    validate=True,
    ranks=2,
    steps=1,
    warmup=1,
    batch_size=4,
    max_len=64,
    tokenizer="byte",
    token_budget=256,
    static=["tp2"],
    hot="tp2:16,dp2:0",
)
OUTPUT_KEYS = (
    "device",
    "settings[].best_static_s",
    "settings[].hot_c1_s",
    "settings[].auto_s",
    "settings[].vs_megatron_paper",
    "settings[].vs_deepspeed_paper",
    "settings[].vs_strong_static",
    "settings[].floor_s",
    "settings[].floor_vs_static",
    "summary.auto_vs_static_mean",
    "summary.auto_vs_static_geomean",
    "summary.floor_vs_static_geomean",
    "summary.paper",
    "calibration",
    "calibration_h200",
    "grid_s",
    "validation",
)


def validate_rank(rank: int, world: int, args) -> dict:
    from benchmarks import e2e  # its contenders and measurement
    from hotswitch.backend import Strategy, get_config
    from hotswitch.backend.data import stdlib_documents
    from hotswitch.backend.sim.step import simulate_step
    from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
    from hotswitch.backend.train.planning.memory import budget_holding

    source = stdlib_documents().use_tokenizer(args.tokenizer)
    vocab = -(-source.tokenizer.vocab_size // world) * world  # padded as e2e pads it
    model = e2e.SMOKE["model"] if args.smoke else e2e.MODEL
    config = get_config("tiny").with_(**model, vocab_size=vocab, max_seq_len=1024)
    budget = budget_holding(config, Strategy(dp=world), args.max_len // 3)  # as e2e: only TP holds the longest
    cases = []
    hot = [[s, int(b)] for s, b in (part.split(":") for part in args.hot.split(","))]
    plans = [("hot-switched (auto)", "auto"), (f"hot-switched {HotSwitchPlan.of(hot)}", hot)]
    plans += [(f"static {HotSwitchPlan.of(s)}", s) for s in args.static]
    for what, plan in plans:
        trainer, _ = e2e.engine_contender(config, source, plan, args, budget)

        def step(trainer=trainer):
            batch = trainer.data.next_batch()
            report = trainer.step(batch)
            return report["tokens"], (trainer.plan, [s.length for s in batch])

        seconds, _, extras = e2e.measure(args.steps, args.warmup, step)
        instantiation = trainer.engine.instantiation
        predicted = [simulate_step(trainer.cost, p, n, instantiation, world).seconds for p, n in extras]
        cases.append({"what": what, "predicted_s": sum(predicted) / len(predicted), "measured_s": seconds / args.steps})
        del trainer
    errors = [abs(c["predicted_s"] - c["measured_s"]) / c["measured_s"] for c in cases]
    speedups = speedup_errors(cases)
    return {
        "ranks": world,
        "steps": args.steps,
        "cases": cases,
        "worst_rel_err": max(errors),
        "speedups": speedups,
        "worst_speedup_err": max((abs(s["rel_err"]) for s in speedups), default=None),
    }


def speedup_errors(cases: list[dict]) -> list[dict]:
    """Predicted against measured speedup of every hot-switched case over every static one: a
    ratio of two steps timed alike, so a load that slows both cancels out."""
    out = []
    for hot in (c for c in cases if c["what"].startswith("hot")):
        for static in (c for c in cases if c["what"].startswith("static")):
            predicted = static["predicted_s"] / hot["predicted_s"]
            measured = static["measured_s"] / hot["measured_s"]
            out.append(
                {
                    "hot": hot["what"],
                    "static": static["what"],
                    "predicted": predicted,
                    "measured": measured,
                    "rel_err": (predicted - measured) / measured,
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--validate", action="store_true", help="also run the measured 4-rank validation")
    parser.add_argument("--device", default="A800", help="A800 (the paper's), H100 or H200")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-len", type=int, default=1024)
    parser.add_argument("--tokenizer", default="bpe:4096")
    parser.add_argument("--token-budget", type=int, default=4096)
    parser.add_argument("--static", nargs="*", default=["dp1tp4pp1", "dp1tp4pp1sp"], help="static cases to validate")
    parser.add_argument("--hot", default="dp1tp4pp1:256,dp4:0", help="a fixed hot-switched case to validate")
    parser.add_argument("--skip-grid", action="store_true", help="the validation only")
    parser.add_argument(
        "--packing", action="store_true", help="the engine's contenders pack micro-batches (documents back to back)"
    )
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="each setting also runs auto+groups (two device groups side by side allowed): rows gain "
        "vs_sequential_auto and auto_groups_vs_static, the summary their means",
    )
    parser.add_argument("--smoke", action="store_true", help=f"a tiny run: {SMOKE}")
    parser.set_defaults(grid={})
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    started = time.perf_counter()
    grid = dict(device=args.device, packing=args.packing, side_by_side=args.side_by_side)
    rows = [] if args.skip_grid else paper_grid(**args.grid, **grid)
    out = {**grid, "settings": rows, "summary": summary(rows) if rows else None}
    out["calibration"] = report()  # the device model's fit: error on every logged point it used or held out
    out["calibration_h200"] = calibrate_h200.report()  # the H200 preset on the engine's own measured GPU steps
    out["grid_s"] = time.perf_counter() - started
    if args.validate:
        from hotswitch.backend.runtime.spawn import spawn_ranks

        started = time.perf_counter()
        out["validation"] = spawn_ranks(validate_rank, args.ranks, args, timeout=3600)[0]
        out["validation"]["seconds"] = time.perf_counter() - started
    else:
        out["validation"] = None
    if args.smoke:
        out["smoke"] = SMOKE
    if not args.json:
        for r in rows:
            print(
                f"{r['model']:>4} {r['gpus']:>2} {r['dataset']:<12}{r['context']:>6}"
                f"  static {r['best_static_s'] or 0:7.2f}s"
                f"  c1 {r['hot_c1_s'] or 0:7.2f}s  auto {r['auto_s'] or 0:7.2f}s  {r['auto_plan']}"
            )
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
