"""Training progress on a terminal: a one-line bar while it runs, a table at the end."""

from __future__ import annotations

import sys
from collections import defaultdict


def bar(event: dict, width: int = 30) -> str:
    done = event["step"] / max(event["steps"], 1)
    filled = int(width * done)
    return (
        f"\r[{'#' * filled}{'.' * (width - filled)}] step {event['step']}/{event['steps']}  "
        f"loss {event['loss']:.4f}  {event['tokens_per_s']:,.0f} tok/s  {event['seconds']['total']:.2f} s/step"
    )


def summary(events: list[dict]) -> dict:
    """Totals over the step events: throughput, time split, per-strategy throughput, plans."""
    steps = [e for e in events if e.get("type") == "step"]
    if not steps:
        return {"steps": 0}
    seconds = sum(e["seconds"]["total"] for e in steps)
    split = {k: sum(e["seconds"][k] for e in steps) for k in ("compute", "switch", "grad_sync", "update")}
    per = defaultdict(lambda: [0, 0.0])
    for e in steps:
        for name, v in e["strategies"].items():
            per[name][0] += v["tokens"]
            per[name][1] += v["seconds"]
    predicted = [e["predicted_step_s"] for e in steps if e.get("predicted_step_s") is not None]
    return {
        "steps": len(steps),
        "tokens": sum(e["tokens"] for e in steps),
        "tokens_per_s": sum(e["tokens"] for e in steps) / seconds,
        "first_loss": steps[0]["loss"],
        "last_loss": steps[-1]["loss"],
        "seconds": seconds,
        "split": split,
        "switches": sum(e["switches"] for e in steps),
        "strategies": {k: {"tokens": t, "tokens_per_s": t / s if s else 0.0} for k, (t, s) in sorted(per.items())},
        "plans": len([e for e in events if e.get("type") == "plan"]),
        "predicted_step_s": sum(predicted) / len(predicted) if predicted else None,
        "measured_step_s": seconds / len(steps),
    }


def table(result: dict) -> str:
    if not result.get("steps"):
        return "no training step completed"
    lines = [
        f"steps            {result['steps']}",
        f"tokens           {result['tokens']:,}",
        f"throughput       {result['tokens_per_s']:,.0f} tokens/s",
        f"loss             {result['first_loss']:.4f} -> {result['last_loss']:.4f}",
        f"hot switches     {result['switches']}  (plans: {result['plans']})",
        "time split       " + "  ".join(f"{k} {v / result['seconds']:.0%}" for k, v in result["split"].items()),
    ]
    if result["predicted_step_s"] is not None:
        lines.append(
            f"step time        measured {result['measured_step_s']:.3f} s, predicted {result['predicted_step_s']:.3f} s"
        )
    lines.append("strategy         tokens      tokens/s")
    for name, v in result["strategies"].items():
        lines.append(f"  {name:<14} {v['tokens']:>8,}  {v['tokens_per_s']:>10,.0f}")
    return "\n".join(lines)


def write(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
