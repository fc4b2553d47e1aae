"""``Pool``: warm ranks that outlive cells (``%train_pool``), seen from the kernel.

A pool is a job whose body is the rank loop of ``kernel.worker.pool_serve``: its channel,
heartbeats both ways, watchdogs and teardown are the job's, so a pool leaves no process behind
when the kernel shuts down, restarts or dies, exactly as a job does. On that channel the pool
sends tasks, one at a time: a ``%%train --pool`` body (run as its own ``Job`` through
``PoolLauncher``) or a ``%%ranks`` cell (``run_ranks``). The ranks answer with ``pool.*`` events.
A task that raises fails, the pool goes on; a pool that died says how, and how to start again.
"""

from __future__ import annotations

import threading
import time

from hotswitch.backend.runtime.devices import ENV_DEVICE
from hotswitch.kernel.channel.signing import DEFAULT_MAX_MESSAGE_BYTES
from hotswitch.kernel.notebook.jobs.job import Job
from hotswitch.kernel.notebook.pools.pool_results import RankResults, RanksFailed

WAIT_SLICE_S = 0.1
READY_TIMEOUT_S = 600.0


class PoolError(RuntimeError):
    """A pool cannot take this task now (busy, not ready, or gone): the message says why and
    what to do."""


class Task:
    """One task's answers: each rank's exit status, value or traceback, and where its lines go."""

    def __init__(self, number: int, what: str, label: str, output=None):
        self.number = number
        self.what = what
        self.label = label
        self.output = output
        self.statuses: dict[int, int] = {}
        self.results: dict[int, dict] = {}


class Pool:
    """``size`` ranks started by ``job`` (whose body serves tasks); ``idle_timeout`` seconds
    without a task stop it (None: never); ``max_bytes``: the largest message its channel carries
    (a task's files must fit); ``device``: "cpu" or "cuda" (``%train_pool start --device``, by
    default the job's), where every job on the pool runs."""

    def __init__(
        self,
        name: str,
        job: Job,
        size: int,
        idle_timeout: float | None = None,
        max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        device: str | None = None,
    ):
        self.name = name
        self.job = job
        self.size = size
        self.idle_timeout = idle_timeout
        self.max_bytes = max_bytes
        self.device = device or job.spec.env.get(ENV_DEVICE, "cpu")
        self._lock = threading.Condition()
        self._ready: set[int] = set()
        self._tasks: dict[int, Task] = {}
        self._current: Task | None = None
        self._next = 1
        self.idle_since = time.monotonic()
        self.stop_reason: str | None = None
        self.failed_ranks: list[int] = []  # the ranks the last cell raised on
        job.on_event(self._on_event)
        job.add_done_callback(lambda _job: self._wake())
        if idle_timeout is not None:
            watch = self._watch_idle
            threading.Thread(target=watch, args=(idle_timeout,), name=f"hotswitch-pool-{name}", daemon=True).start()

    # ---- state -------------------------------------------------------------------------------

    @property
    def status(self) -> str:
        """'starting', 'idle', 'busy' (running a task), or how the pool ended ('stopped', 'failed',
        'lost', ...)."""
        if self.job.done or self.job.status not in ("starting", "running"):
            return self.job.status
        if len(self._ready) < self.size:
            return "starting"
        return "busy" if self._current else "idle"

    @property
    def channel_host(self) -> str:
        """The address the pool's ranks reach this kernel at (a job on the pool listens there too)."""
        return self.job.channel_address.removeprefix("tcp://").rpartition(":")[0]

    @property
    def busy_with(self) -> str | None:
        """What runs on the pool now ("job 'x'", "%%ranks"), or None (always, once the pool has
        ended: a task it was running ended with it)."""
        current = self._current
        return current.label if current and not self.job.done else None

    def death(self) -> str | None:
        """How the pool ended, with how to start it again; None while it runs."""
        if self.status in ("starting", "idle", "busy"):
            return None
        reason = self.stop_reason or self.job.exit_reason or "its ranks ended"
        spec = self.job.spec
        launcher = self.job.launcher.name
        again = f"%train_pool start {self.name} -n {spec.nproc}" + (f" --nodes {spec.nodes}" if spec.nodes > 1 else "")
        again += "" if launcher == "local" else f" --launcher {launcher} ..."
        return (
            f"pool {self.name!r} is gone ({self.job.status}: {reason}); its ranks and what they held are lost. "
            f"Start it again with {again}"
        )

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until every rank has joined the process group (PoolError if the pool ends first)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._ready) < self.size:
                if self.death():
                    raise PoolError(self.death())
                if time.monotonic() > deadline:
                    raise PoolError(f"pool {self.name!r} did not start within {timeout:g} s; see its cell's output")
                self._lock.wait(WAIT_SLICE_S)

    # ---- tasks -------------------------------------------------------------------------------

    def check_free(self) -> None:
        """PoolError unless the pool is up and runs nothing."""
        if self.death():
            raise PoolError(self.death())
        current = self._current
        if current is not None:
            raise PoolError(
                f"pool {self.name!r} is busy running {current.label}; a pool runs one cell at a time. "
                "Wait for it (jobs[NAME].wait()), or stop it (%train_stop NAME), then run this cell again"
            )
        if len(self._ready) < self.size:
            raise PoolError(f"pool {self.name!r} is still starting ({len(self._ready)} of {self.size} ranks up)")

    def start_task(self, what: str, label: str, output=None, **fields) -> int:
        """Send a task to every rank; its number. PoolError when the pool is gone or busy: one
        task at a time (a ``%%ranks`` while a job trains is refused, not queued: it could only
        run once the job's body returns)."""
        with self._lock:
            self.check_free()
            task = Task(self._next, what, label, output)
            self._next += 1
            self._tasks[task.number] = task
            self._current = task
        for rank in range(self.size):
            self.job.send(rank, {"kind": "task", "task": task.number, "what": what, **fields})
        return task.number

    def task_status(self, number: int) -> int | None:
        """None while a rank still runs task ``number``; then the worst exit status (1 for the
        ranks that never answered because the pool ended)."""
        task = self._tasks[number]
        if len(task.statuses) == self.size:
            return max(task.statuses.values(), key=abs)
        return 1 if self.death() else None

    def interrupt(self, number: int) -> None:
        """Raise KeyboardInterrupt in task ``number`` on every rank still running it."""
        if not self.job.done:
            for rank in range(self.size):
                if rank not in self._tasks[number].statuses:
                    self.job.send(rank, {"kind": "interrupt", "task": number})

    def run_ranks(self, code: str, output) -> RankResults | None:
        """Run ``code`` on every rank (a ``%%ranks`` cell); each rank's value, by rank (None when
        no rank gave one). Output lines reach ``output`` as they are written; ``RanksFailed``
        (every failing rank's traceback) if any rank raised. A kernel interrupt interrupts the
        ranks, waits for them, and propagates."""
        number = self.start_task("ranks", "%%ranks", output, code=code)
        try:
            self._wait_task(number)
        except KeyboardInterrupt:
            self.interrupt(number)
            try:
                self._wait_task(number)
            except KeyboardInterrupt:  # a second one: the body would not end; nothing is left running it
                self.stop(f"the %%ranks cell (task {number}) did not end on an interrupt; a second one ended the pool")
            raise
        task = self._tasks.pop(number)
        if len(task.statuses) < self.size:
            raise PoolError(self.death() or f"pool {self.name!r} lost task {number}")
        failed = {r: v for r, v in sorted(task.results.items()) if "error" in v}
        self.failed_ranks = list(failed)  # what %train_debug POOL opens pdb on
        if failed:
            raise RanksFailed(self.name, failed)
        self.failed_ranks = []
        values = RankResults({r: task.results.get(r, {}).get("value") for r in range(self.size)})
        return None if all(v is None for v in values.values()) else values

    def post_mortem(self, rank: int, output) -> int:
        """pdb on ``rank`` in the frame where its last cell (a ``%%ranks`` cell, a job's body)
        raised, driven from the cell ``output`` writes to; the pool is busy meanwhile. How many
        lines were sent (0: the rank kept no failure, and says so)."""
        if not 0 <= rank < self.size:
            raise PoolError(f"pool {self.name!r} has ranks 0-{self.size - 1}; rank {rank} is not one of them")
        with self._lock:
            self.check_free()
            self._current = Task(0, "debug", f"%train_debug on rank {rank}", output)
        try:
            self.job.debug.expect(rank)
            self.job.send(rank, {"kind": "post_mortem"})
            return self.job.debug_here(rank, output)
        finally:
            with self._lock:
                self._current = None

    def stop(self, reason: str = "stopped with %train_pool stop", grace: float = 2.0) -> str:
        """End the pool's ranks (what they hold is lost); its final status."""
        if self.stop_reason is None:
            self.stop_reason = reason
        return self.job.stop(grace=grace)

    def __repr__(self) -> str:
        running = f", running {self.busy_with}" if self.busy_with else ""
        return f"<Pool {self.name!r} {self.status}, {self.size} ranks{running}>"

    # ---- threads -----------------------------------------------------------------------------

    def _wait_task(self, number: int) -> None:
        """Until task ``number`` ends; a rank stopped at ``breakpoint()`` meanwhile is driven from
        the task's cell (its stdin), as ``Job.wait`` drives a job's."""
        task = self._tasks[number]
        while True:
            with self._lock:
                if self.task_status(number) is not None:
                    return
                self._lock.wait(WAIT_SLICE_S)
            if self.job.debug.waiting() is not None:
                self.job.debug_here(output=task.output)

    def _wake(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def _on_event(self, event: dict) -> None:
        kind, rank = event.get("type"), int(event.get("rank", -1))
        if kind == "pool.ready":
            with self._lock:
                self._ready.add(rank)
                self.idle_since = time.monotonic()  # the idle clock starts once the pool is up
                self._lock.notify_all()
            return
        if kind == "pool.idle" and self.stop_reason is None:  # a detached pool's ranks ended themselves
            self.stop_reason = f"idle for {event.get('seconds', 0):g} s (--idle-timeout)"
        task = self._tasks.get(int(event.get("task", -1)))
        if task is None:
            return
        if kind == "pool.log" and task.output is not None:
            stream = "stderr" if event.get("stream") == "stderr" else "stdout"
            task.output.write(f"[{stream}:{rank}] {event.get('line')}\n", stream)
        elif kind == "pool.result":
            task.results[rank] = event
        elif kind == "pool.done":
            with self._lock:
                task.statuses[rank] = int(event.get("status", 1))
                if len(task.statuses) == self.size and self._current is task:
                    self._current = None
                    self.idle_since = time.monotonic()
                self._lock.notify_all()

    def _watch_idle(self, idle_timeout: float) -> None:
        while not self.job.done:
            if self.status == "idle" and time.monotonic() - self.idle_since > idle_timeout:
                self.stop(f"idle for {idle_timeout:g} s (--idle-timeout)")
                return
            time.sleep(1.0)
