"""Ends a worker whose kernel or torchrun agent has gone, so no rank outlives its notebook."""

from __future__ import annotations

import os
import sys
import threading

CHECK_EVERY_S = 0.5


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_watchdog(kernel_pid: int | None) -> threading.Thread:
    """Exit this process (status 1) once ``kernel_pid`` dies or the parent (the agent) changes."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            orphaned = os.getppid() != parent
            if orphaned or (kernel_pid is not None and not _alive(kernel_pid)):
                who = "torchrun agent" if orphaned else f"kernel (pid {kernel_pid})"
                sys.__stderr__.write(f"hotswitch worker {os.getpid()}: the {who} is gone; exiting\n")
                sys.__stderr__.flush()
                os._exit(1)
            threading.Event().wait(CHECK_EVERY_S)

    thread = threading.Thread(target=watch, name="hotswitch-watchdog", daemon=True)
    thread.start()
    return thread
