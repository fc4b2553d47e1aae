"""``hotswitch demo``'s verdict: each run's throughput and switches against the best static
strategy, and how far every step's loss is from one-device training on the same batches."""

from __future__ import annotations

from hotswitch.backend.train.loop.compare import HOT
from hotswitch.backend.train.loop.run_totals import summarize

# fp32: every step is exactly one-device training up to float32 summation order. bf16: one
# device trains in bf16 too, and the runs differ by bf16 rounding in another summation order.
TOLERANCES = {"fp32": 1e-5, "bf16": 1e-2}


def runs(events: list[dict], warmup: int) -> dict[str, dict]:
    """Per run (in order of appearance): step losses, and over the steps after ``warmup``
    (``summarize``'s figures): tokens per second of step time, hot switches, and the strategies
    that trained tokens."""
    tagged: dict[str, list[dict]] = {}
    for e in events:
        if "run" in e:
            tagged.setdefault(e["run"], []).append(e)
    out = {}
    for run, run_events in tagged.items():
        figures = summarize(run_events, warmup)
        out[run] = {
            "losses": [e["loss"] for e in run_events if e.get("type") == "step"],
            "tokens_per_s": figures["tokens_per_s"],
            "switches": figures["switches"],
            "strategies": sorted(s for s, v in figures["strategies"].items() if v["tokens"]),
        }
    return out


def max_relative_difference(losses: list[float], reference: list[float]) -> float:
    return max(abs(a - b) / abs(b) for a, b in zip(losses, reference, strict=True))


def verdict(events: list[dict], reference: list[float], warmup: int, precision: str = "fp32") -> dict:
    """Everything the summary table shows, as plain data (``--json``); ``reference`` is one
    device's losses in ``precision``."""
    tolerance = TOLERANCES[precision]
    results = runs(events, warmup)
    for result in results.values():
        result["max_relative_loss_difference"] = max_relative_difference(result["losses"], reference)
    statics = next(e for e in events if e.get("type") == "statics")
    best = statics["chosen"]
    hot = results[HOT]
    exact = all(r["max_relative_loss_difference"] <= tolerance for r in results.values())
    return {
        "runs": results,
        "predicted_static_step_s": statics["predicted_step_s"],
        "infeasible_static": statics["infeasible"],
        "best_static": best,
        "speedup_vs_best_static": hot["tokens_per_s"] / results[best]["tokens_per_s"],
        "reference_losses": reference,
        "precision": precision,
        "tolerance": tolerance,
        "exact": exact,
    }


def table(v: dict, warmup: int) -> str:
    lines = [
        f"{'run':<20}{'tokens/s':>10}{'switches':>10}  {'loss':<17}{'max rel. diff':>14}  strategies",
    ]
    for run, r in v["runs"].items():
        name = run if run == HOT else f"static {run}"
        losses = f"{r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}"
        lines.append(
            f"{name:<20}{r['tokens_per_s']:>10,.0f}{r['switches']:>10}  {losses:<17}"
            f"{r['max_relative_loss_difference']:>14.1e}  {', '.join(r['strategies'])}"
        )
    lines.append(f"(tokens/s over the steps after the first {warmup}; loss differences against one device)")
    lines.append("static strategies, predicted step time (the best one ran above):")
    for strategy, seconds in sorted(v["predicted_static_step_s"].items(), key=lambda item: item[1]):
        lines.append(f"  {strategy:<14}{seconds:>8.3f} s")
    for strategy, longest in v["infeasible_static"].items():
        lines.append(f"  {strategy:<14}does not fit the memory budget: holds {longest} tokens at most")
    lines.append(f"hot switching vs the best static strategy ({v['best_static']}): {v['speedup_vs_best_static']:.2f}x")
    worst = max(r["max_relative_loss_difference"] for r in v["runs"].values())
    lines.append(
        f"exactness against one device in {v['precision']}: {'PASS' if v['exact'] else 'FAIL'} "
        f"(worst step {worst:.1e}, tolerance {v['tolerance']:.0e})"
    )
    return "\n".join(lines)
