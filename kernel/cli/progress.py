"""Training progress on a terminal: a one-line bar while it runs, a table at the end (of
``hotswitch.backend.train.loop.run_totals.summarize``'s figures, the dashboard's and the demo's too)."""

from __future__ import annotations

import sys


def bar(event: dict, width: int = 30) -> str:
    done = event["step"] / max(event["steps"], 1)
    filled = int(width * done)
    return (
        f"\r[{'#' * filled}{'.' * (width - filled)}] step {event['step']}/{event['steps']}  "
        f"loss {event['loss']:.4f}  {event['tokens_per_s']:,.0f} tok/s  {event['seconds']['total']:.2f} s/step"
    )


def above_bar(line: str) -> str:
    """``line`` printed over the bar's line (cleared first), the bar to be redrawn after it."""
    return f"\r\033[K{line}\n" if sys.stderr.isatty() else f"\n{line}\n"


def table(result: dict) -> str:
    """``result``: ``summarize(events)``."""
    if not result.get("steps"):
        return "no training step completed"
    lines = [
        *([f"data             {result['data']}"] if result.get("data") else []),
        f"steps            {result['steps']}{_numbered(result)}",
        f"tokens           {result['tokens']:,}",
        f"throughput       {result['tokens_per_s']:,.0f} tokens/s",
        f"loss             {result['first_loss']:.4f} -> {result['last_loss']:.4f}",
        *(
            [f"eval loss        {result['first_eval_loss']:.4f} -> {result['last_eval_loss']:.4f}"]
            if result.get("last_eval_loss") is not None
            else []
        ),
        f"hot switches     {result['switches']}  (plans: {result['plans']})",
        "time split       " + "  ".join(f"{k} {v / result['seconds']:.0%}" for k, v in result["split"].items()),
    ]
    if result["predicted_step_s"] is not None:
        lines.append(
            f"step time        measured {result['measured_step_s']:.3f} s, predicted {result['predicted_step_s']:.3f} s"
        )
    lines += _saved(result)
    width = max([14, *(len(name) for name in result["strategies"])])
    lines.append(f"{'strategy':<{width + 2}} {'tokens':>8}  {'tokens/s':>10}")
    for name, v in result["strategies"].items():
        lines.append(f"  {name:<{width}} {v['tokens']:>8,}  {v['tokens_per_s']:>10,.0f}")
    return "\n".join(lines)


def _numbered(result: dict) -> str:
    """Which steps ran, where they were not the whole run from its first (a resumed or stopped run)."""
    first = result.get("first_step")
    last = result.get("last_step")
    planned = result.get("planned_steps")
    if first is None or (first == 1 and last == planned):
        return ""
    return f"  (steps {first}-{last} of {planned}" + (f"; resumed after step {first - 1})" if first > 1 else ")")


def _saved(result: dict) -> list[str]:
    """Where the run's checkpoints and its export went, where it wrote any."""
    lines = []
    if result.get("checkpoints"):
        count = result["checkpoints"]
        lines.append(f"checkpoints      {count}, the last {result['last_checkpoint']}" if count > 1
                     else f"checkpoint       {result['last_checkpoint']}")  # fmt: skip
    if result.get("exported"):
        lines.append(f"exported         {result['exported']} (Hugging Face: model and tokenizer)")
    return lines


class _Stderr:
    """Whether what this module wrote last left the line open (a bar, drawn after ``\r``)."""

    mid_line = False


def write(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
    if text:
        _Stderr.mid_line = not text.endswith("\n")


class JobLines:
    """A headless job's output (rank lines, how it ended) on stderr, each begun on a line of its
    own where a progress bar was drawn last, not glued to the bar."""

    def write(self, text: str, stream: str = "stdout") -> None:
        write(("\n" if _Stderr.mid_line and not text.startswith("\n") else "") + text)
