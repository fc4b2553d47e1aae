"""How responsive ``%%train`` keeps a real Jupyter kernel, measured in this run.

    python benchmarks/notebook.py [--json] [--steps 40]

Starts the stock python3 kernel with ``%load_ext hotswitch.kernel`` and runs a 2-rank gloo job
(tiny nn.Linear, all_reduce of gradients) that emits one event per step with the worker's
``time.time()``. Prints:
  train_return_s         time for the ``%%train`` cell to return (client-side, reply received)
  first_cell_after_load_s  the same for a cell run the instant the extension loaded
  first_step_s           launch to the first step event arriving in the kernel
  event_latency_ms_p50/99  kernel arrival time minus the worker's send time, over all step events
  busy_cell_ms           median execution time of a trivial cell while the job trains
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

# The driver shared with the tests; run from a checkout.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.kernel.kernel_session import KernelSession, train_body, wait_until


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(steps: int) -> dict:
    session = KernelSession("python3")
    try:
        session.execute("%load_ext hotswitch.kernel")
        # the first cell right after loading (the dashboard's plotly stack may still be importing)
        began = time.monotonic()
        _, reply = session.execute("%%train -n 2 --name cold\n" + train_body(steps=1, pause=0))
        cold_return_s = time.monotonic() - began
        if reply["status"] != "ok" or session.value("jobs['cold'].wait(120)") != "succeeded":
            raise RuntimeError(f"the first %%train cell failed: {reply}")
        began = time.monotonic()
        _, reply = session.execute("%%train -n 2 --name bench\n" + train_body(steps=steps, pause=0.05))
        train_return_s = time.monotonic() - began
        if reply["status"] != "ok":
            raise RuntimeError(f"the %%train cell failed: {reply}")
        assert wait_until(lambda: session.value("len(jobs['bench'].events)") > 0, timeout=120, every=0.05)
        busy = []
        while session.value("jobs['bench'].status") == "running" and len(busy) < 30:
            t = time.monotonic()
            session.client.execute("1 + 1", silent=True)
            session.client.get_shell_msg(timeout=30)  # the execute reply: the cell is done
            busy.append((time.monotonic() - t) * 1e3)
        status = session.value("jobs['bench'].wait(120)")
        if status != "succeeded":
            raise RuntimeError(f"the benchmark job ended {status}")
        timing = session.value(
            "[jobs['bench'].started_at, "
            "[(e.get('sent_at'), t) for e, t in zip(jobs['bench'].events, jobs['bench'].event_received_at)]]"
        )
    finally:
        session.shutdown()
    started_at, pairs = timing
    latencies = [(arrived - sent) * 1e3 for sent, arrived in pairs if sent is not None]
    return {
        "train_return_s": round(train_return_s, 4),
        "first_cell_after_load_s": round(cold_return_s, 4),
        "first_step_s": round(min(arrived for _, arrived in pairs) - started_at, 3),
        "event_latency_ms_p50": round(percentile(latencies, 0.5), 3),
        "event_latency_ms_p99": round(percentile(latencies, 0.99), 3),
        "busy_cell_ms": round(statistics.median(busy), 3) if busy else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--steps", type=int, default=40, help="training steps (default 40, 0.05 s apart)")
    args = parser.parse_args()
    result = measure(args.steps)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:<24}{value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
