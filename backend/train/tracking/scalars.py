"""The scalars a tracker records for an event, named alike in every tracker."""

from __future__ import annotations

from hotswitch.backend.train.loop.events import PHASES


def scalars(event: dict) -> tuple[int, dict[str, float]] | None:
    """(step, {name: value}) to record for ``event``; None for events that carry none."""
    kind = event.get("type")
    if kind == "step":
        seconds = event.get("seconds", {})
        values = {
            "train/loss": event["loss"],
            "train/tokens_per_s": event["tokens_per_s"],
            "train/grad_norm": event["grad_norm"],
            "train/lr": event.get("lr"),
            "train/switches": event.get("switches", 0),
            **{f"time/{p}_s": seconds.get(p) for p in (*PHASES, "total")},
        }
        return event["step"], {k: float(v) for k, v in values.items() if v is not None}
    if kind == "eval":
        return event["step"], {"eval/loss": float(event["loss"])}
    if kind == "switch":
        what = event["what"]
        return event["step"], {
            f"switch/{what}_bytes": float(event["bytes"]),
            f"switch/{what}_s": float(event["seconds"]),
        }
    return None
