"""A training event stream in the documented format (backend/train/loop/events.py), built here so
that widget tests need no running job: what it trains on, plan, graphs, steps, a hot switch, a
control switch with its new plan, held-out losses every 10 steps, a checkpoint, a warning and
done."""

from __future__ import annotations


def recorded_events(steps: int = 30, switch_at: int = 12, graphs: dict | None = None) -> list[dict]:
    t = 1_700_000_000.0
    events = [
        {
            "type": "data",
            "time": t,
            "documents": 1900,
            "source": "train: 1900 of 2000 documents from 3 file(s)",
            "tokenizer": "bpe:512",
            "held_out": 100,
        },
        {
            "type": "plan",
            "time": t,
            "step": 0,
            "buckets": [["tp4", 64], ["dp4", 0]],
            "order": ["dp4", "tp4"],
            "instantiation": "tp4",
            "predicted_step_s": None,
            "source": "buckets",
        },
    ]
    if graphs is not None:
        events.append({"type": "graphs", "time": t, **graphs})
    for step in range(1, steps + 1):
        t += 0.5
        if step == 2:
            events.append({"type": "switch", "time": t, "step": 1, "src": "dp4", "dst": "tp4", "what": "params",
                           "bytes": 1_000_000, "seconds": 0.01})  # fmt: skip
        if step == switch_at:
            events.append({"type": "control", "time": t, "step": step - 1, "command": "switch", "strategy": "dp2tp2"})
            events.append(
                {
                    "type": "plan",
                    "time": t,
                    "step": step - 1,
                    "buckets": [["dp2tp2", 0]],
                    "order": ["dp2tp2"],
                    "instantiation": "tp4",
                    "predicted_step_s": None,
                    "source": "fixed",
                }
            )
        events.append(_step(t, step, steps, switch_at))
        if step % 10 == 0:
            events.append(
                {"type": "eval", "time": t, "step": step, "loss": 6.5 - 0.1 * step, "tokens": 2048, "seconds": 0.1}
            )
    events.append({"type": "checkpoint", "time": t, "step": steps, "path": "/tmp/ckpt"})
    events.append({"type": "warning", "time": t, "message": "ignored unknown control command {'command': 'x'}"})
    events.append(
        {"type": "done", "time": t, "step": steps, "reason": "finished", "seconds": steps * 0.5, "tokens": 512 * steps}
    )
    return events


def _step(t: float, step: int, steps: int, switch_at: int) -> dict:
    seconds = {"compute": 0.3, "switch": 0.05 if step < switch_at else 0.0, "grad_sync": 0.05, "update": 0.02}
    seconds["total"] = sum(seconds.values())
    return {
        "type": "step",
        "time": t,
        "step": step,
        "steps": steps,
        "tokens": 512,
        "sequences": 8,
        "loss": 6.0 - 0.1 * step,
        "grad_norm": 1.0,
        "seconds": seconds,
        "tokens_per_s": 512 / seconds["total"],
        "strategies": {},
        "switches": 2 if step < switch_at else 0,
        "compile_s": 0.0,
        "predicted_step_s": None,
        "lr": 1e-3,
    }
