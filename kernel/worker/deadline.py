"""A detached job's ``--timeout`` when no kernel keeps it, rank side.

A kernel that follows a job keeps its time (``Job``'s watcher asks a trainer to stop at the
deadline, then ends every process). A detached job may have no kernel following it: its ranks
get the deadline (``$HOTSWITCH_DEADLINE``, seconds since the epoch) and, once it has passed with
the kernel silent, end the job themselves the same way: rank 0 takes a ``stop`` as if the kernel
had sent it (a trainer ends its step and writes what it was asked to), and every rank still
running ``ENDING_S`` later exits, saying why in its log. A kernel that attaches later finds
the job ended while no kernel followed it.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from hotswitch.kernel.worker.fd_capture import say_on_agent_log
from hotswitch.kernel.worker.watchdog import exit_worker

ENV_DEADLINE = "HOTSWITCH_DEADLINE"
# A trainer (a job that reported a plan) ends its step when asked to stop, then writes what it was
# asked to (a pending checkpoint, the run's final one, an export) and says ``done``: how long a
# stop or a timeout waits for that before the processes are ended, within the 30 s Slurm gives a
# job between SIGTERM and SIGKILL.
ENDING_S = 15.0
KERNEL_AWAY_S = 5.0  # a kernel silent this long follows the job no more (it beats every second)
LOOK_EVERY_S = 1.0


def deadline() -> float | None:
    """This job's deadline (``time.time()``), or None: no --timeout, or a kernel keeps it."""
    text = os.environ.get(ENV_DEADLINE)
    return float(text) if text else None


def start_deadline(channel, rank: int, ending_s: float = ENDING_S) -> threading.Thread | None:
    """Keep the deadline on this rank (see the module's docstring); None where there is none."""
    at = deadline()
    if at is None:
        return None

    def watch() -> None:
        while not channel.closed:
            if time.time() >= at and channel.silent_for() > KERNEL_AWAY_S:
                end_job(channel, rank, at, ending_s)
                return
            threading.Event().wait(LOOK_EVERY_S)

    thread = threading.Thread(target=watch, name="hotswitch-deadline", daemon=True)
    thread.start()
    return thread


def end_job(channel, rank: int, at: float, ending_s: float) -> None:
    """Stop the job past its deadline ``at``: a stop for rank 0's body, then this rank's exit."""
    late = time.time() - at
    why = f"the detached job's --timeout passed {late:.0f} s ago with no kernel following it"
    say_on_agent_log(f"hotswitch rank {rank}: {why}; asking it to stop ({ending_s:g} s at most)\n")
    print(f"[hotswitch] {why}; rank {rank} stops", file=sys.stderr, flush=True)
    if rank == 0:
        channel.deliver_locally({"kind": "control", "control": {"type": "control", "command": "stop"}})
    threading.Event().wait(ending_s)
    exit_worker(why)
