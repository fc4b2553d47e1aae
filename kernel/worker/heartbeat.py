"""Liveness without pids, rank side: every ``HEARTBEAT_S`` a rank tells the kernel it lives, and
reads what the kernel sent; once the kernel has been silent for the timeout, the rank exits.

The kernel sends heartbeats as long as it runs (``notebook.pulse``), so a silent kernel is one
that is gone, frozen or cut off, on this node or any other: what a pid cannot tell across
machines. ``$HOTSWITCH_HEARTBEAT_TIMEOUT_S`` sets the timeout (default 60 s; ``0`` never
exits, for a detached job). Each beat also looks for a collective waiting past its limit
(``collective_wait``)."""

from __future__ import annotations

import os
import threading
import time

from hotswitch.kernel.worker.collective_wait import CollectiveWatch, wait_limit
from hotswitch.kernel.worker.debugger import stacks_reply
from hotswitch.kernel.worker.watchdog import exit_worker

HEARTBEAT_S = 1.0
DEFAULT_TIMEOUT_S = 60.0
ENV_HEARTBEAT_TIMEOUT = "HOTSWITCH_HEARTBEAT_TIMEOUT_S"


def heartbeat_timeout() -> float | None:
    """Seconds of kernel silence after which a rank exits; None: never."""
    text = os.environ.get(ENV_HEARTBEAT_TIMEOUT)
    seconds = float(text) if text else DEFAULT_TIMEOUT_S
    return seconds if seconds > 0 else None


def start_heartbeat(channel, timeout: float | None, every: float = HEARTBEAT_S) -> threading.Thread:
    """Beat on ``channel`` (a ``WorkerChannel``) every ``every`` seconds; exit this process
    (status 1) once the kernel has been silent for ``timeout`` seconds."""

    limit = wait_limit()
    watch = CollectiveWatch(limit) if limit is not None else None

    def beat() -> None:
        while not channel.closed:
            channel.try_send({"kind": "heartbeat"})  # a rank that is sending is heard anyway
            for _ in channel.take("stacks"):  # %train_stacks: answered here, so a rank stuck in a collective answers
                channel.send(stacks_reply())
            stuck = watch.check(time.monotonic()) if watch is not None else None
            if stuck is not None:
                channel.send(stuck)
            silent = channel.silent_for()
            if timeout is not None and silent > timeout:
                exit_worker(f"the kernel has been silent for {silent:.0f} s")
            threading.Event().wait(every)

    thread = threading.Thread(target=beat, name="hotswitch-heartbeat", daemon=True)
    thread.start()
    return thread
