"""Ends a worker whose kernel or torchrun agent has gone, so no rank outlives its notebook.

"Gone" is judged with psutil, not ``os.kill(pid, 0)``: a kernel killed with SIGKILL whose own
parent never reaps it stays a zombie, and signal 0 still succeeds on a zombie, so the ranks
would train on for nobody. The kernel counts as gone once its process is a zombie, no longer
exists, or its pid now belongs to another process (psutil compares the creation time taken
when the watch began, so a reused pid is not mistaken for the kernel).
"""

from __future__ import annotations

import os
import sys
import threading

import psutil

from hotswitch.kernel.worker.fd_capture import say_on_agent_log

CHECK_EVERY_S = 0.5


def _process(pid: int) -> psutil.Process | None:
    """The process ``pid`` as it is now (its creation time recorded), or None if it is gone."""
    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None
    return None if process_gone(process) else process


def process_gone(process: psutil.Process) -> bool:
    """Whether ``process`` has ended: no longer running as the process psutil first saw (its
    pid gone, or now another's), or a zombie."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:  # it exists (another user's): alive as far as we can tell
        return False


def exit_worker(why: str) -> None:
    """End this worker at once (status 1), saying ``why`` on its original stderr (the agent's
    log, past any capture of fd 2: the process ends before a pipe would be read)."""
    if sys.__stderr__ is not None:
        sys.__stderr__.flush()
    say_on_agent_log(f"hotswitch worker {os.getpid()}: {why}; exiting\n")
    os._exit(1)


def start_watchdog(kernel_pid: int | None) -> threading.Thread:
    """Exit this process (status 1) once the kernel ``kernel_pid`` is dead or a zombie, or the
    parent (the agent) changes."""
    parent = os.getppid()
    kernel = _process(kernel_pid) if kernel_pid is not None else None
    kernel_gone_at_start = kernel_pid is not None and kernel is None

    def watch() -> None:
        while True:
            orphaned = os.getppid() != parent
            if orphaned or kernel_gone_at_start or (kernel is not None and process_gone(kernel)):
                who = "torchrun agent" if orphaned else f"kernel (pid {kernel_pid})"
                exit_worker(f"the {who} is gone")
            threading.Event().wait(CHECK_EVERY_S)

    thread = threading.Thread(target=watch, name="hotswitch-watchdog", daemon=True)
    thread.start()
    return thread
