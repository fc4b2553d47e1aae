"""A warm pool's rank: joins the process group once, then runs what the kernel sends, cell after
cell, in one namespace that lives as long as the pool (``%train_pool``).

The pool is itself a job: this loop is its body, so the pool's channel, heartbeats, watchdog and
teardown are a job's. The kernel sends ``{"kind": "task", "task": N, "what": "job" | "ranks"}``
on that channel; a "job" task runs a ``%%train --pool`` body as its own job (its own channel,
events, run folder; ``pool_tasks.run_job``), a "ranks" task runs a ``%%ranks`` cell
(``pool_tasks.run_ranks``). ``{"kind": "post_mortem"}`` opens pdb in the frame of the rank's
last failure (``%train_debug``). ``{"kind": "interrupt", "task": N}`` raises KeyboardInterrupt
in the task if it still runs: the task fails, the pool goes on. Every task ends with a ``pool.done``
event carrying its exit status.
"""

from __future__ import annotations

import os
import queue
import signal
import threading

from hotswitch.kernel.worker.context import WorkerContext
from hotswitch.kernel.worker.debugger import forget_failure
from hotswitch.kernel.worker.pool_tasks import run_job, run_ranks

LISTEN_EVERY_S = 0.002  # how often a rank looks for the kernel's messages (a %%ranks round trip)
# Seconds without a task after which the ranks of a detached pool end themselves (unset: never).
ENV_IDLE_TIMEOUT = "HOTSWITCH_POOL_IDLE_TIMEOUT_S"
MAIN_THREAD = threading.main_thread().ident or 0  # started, so it has an ident
ENDING_PATIENCE_S = 5.0  # the kernel's silence after which a pool ending itself stops waiting for it


class TaskLine:
    """The task the main thread runs now (None between tasks), and interrupts of it: an
    interrupt is delivered only while that same task runs."""

    def __init__(self):
        self._lock = threading.Lock()
        self._current: int | None = None

    def begin(self, task: int) -> None:
        with self._lock:
            self._current = task

    def end(self) -> None:
        with self._lock:
            self._current = None

    def interrupt(self, task: int) -> None:
        """Raise KeyboardInterrupt in the main thread if it runs ``task``: a real SIGINT, which
        wakes a blocking call (``time.sleep``, a socket read) as Ctrl-C would, where
        ``_thread.interrupt_main`` only sets a flag the main thread reads once that call returns."""
        with self._lock:
            if self._current == task:
                signal.pthread_kill(MAIN_THREAD, signal.SIGINT)


def listen(pool: WorkerContext, tasks: queue.Queue, line: TaskLine) -> None:
    """Take the kernel's tasks off the pool channel: tasks and post-mortem requests go to the
    main thread in order, interrupts act at once (the main thread is busy with the task they
    interrupt); a pdb session's input is left for it (``debugger.ChannelInput``)."""
    wake = threading.Event()
    while True:
        for message in pool.take("task") + pool.take("post_mortem"):
            tasks.put(message)
        for message in pool.take("interrupt"):
            line.interrupt(int(message.get("task", -1)))
        wake.wait(LISTEN_EVERY_S)


def idle_timeout() -> float | None:
    text = os.environ.get(ENV_IDLE_TIMEOUT)
    return float(text) if text and float(text) > 0 else None


def serve(pool: WorkerContext) -> None:
    """Join the process group, say "pool.ready", then run tasks until the pool is stopped (or,
    for a detached pool, has been idle for its timeout)."""
    from hotswitch.backend.runtime.process_groups import init_from_env

    init_from_env(pool.device)
    # an interrupt is a SIGINT, which a rank started in the background would ignore
    signal.signal(signal.SIGINT, signal.default_int_handler)
    namespace: dict = {"__name__": "__main__", "job": pool, "rank": pool.rank, "world_size": pool.world_size}
    tasks: queue.Queue = queue.Queue()
    line = TaskLine()
    threading.Thread(target=listen, args=(pool, tasks, line), name="hotswitch-pool-listen", daemon=True).start()
    pool.emit({"type": "pool.ready"})
    idle = idle_timeout()
    while True:
        try:
            message = tasks.get(timeout=idle)
        except queue.Empty:
            # the pool ends for good: a following kernel confirms within a second or so; one
            # that went away is not waited for (AWAY_S is for kernels away for hours)
            pool.kernel_away_after(ENDING_PATIENCE_S)
            pool.emit({"type": "pool.idle", "seconds": idle})
            return
        if message.get("kind") == "post_mortem":  # between cells: the last failure's frame, in pdb
            pool.post_mortem()
            continue
        task = int(message["task"])
        status = 1
        forget_failure()  # post-mortem is of the last cell: its frames are not kept past the next
        try:
            line.begin(task)
            try:
                status = run_task(message, namespace, pool)
            finally:
                line.end()
        except KeyboardInterrupt:  # an interrupt that came as the task was ending: it has ended
            pass
        pool.emit({"type": "pool.done", "task": task, "status": status})


def run_task(message: dict, namespace: dict, pool: WorkerContext) -> int:
    if message.get("what") == "job":
        return run_job(message, namespace, pool)
    return run_ranks(message, namespace, pool)
