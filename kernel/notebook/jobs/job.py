"""``Job``: one ``%%train`` launch seen from the notebook — status, events, logs and control.

Messages arrive on the channel thread (folded by ``rank_reports``); a watcher thread follows the
launch (``launch_watch``: exit, timeout, teardown after a rank fails). Neither blocks the kernel.
Everything the job started is gone once ``status`` is final: the watcher only declares an end
after every process has exited.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.channel.messages import KernelMessage
from hotswitch.kernel.channel.secrets import KernelSecret, leaves_loopback
from hotswitch.kernel.channel.signing import DEFAULT_MAX_MESSAGE_BYTES
from hotswitch.kernel.launch.launcher import Launcher, LaunchSpec
from hotswitch.kernel.notebook.jobs.attach import Attachment
from hotswitch.kernel.notebook.jobs.channel_losses import channel_losses, losses_note
from hotswitch.kernel.notebook.jobs.debug_sessions import DebugSessions, drive
from hotswitch.kernel.notebook.jobs.job_checks import checked_rank
from hotswitch.kernel.notebook.jobs.job_controls import JobControls
from hotswitch.kernel.notebook.jobs.job_display import job_bundle, job_html, job_repr
from hotswitch.kernel.notebook.jobs.job_events import JobEvents
from hotswitch.kernel.notebook.jobs.job_outcome import ending
from hotswitch.kernel.notebook.jobs.launch_watch import WATCH_EVERY_S, LaunchUnanswered, drain, wait_for_exit
from hotswitch.kernel.notebook.jobs.pulse import Pulse
from hotswitch.kernel.notebook.jobs.rank_env import rank_env
from hotswitch.kernel.notebook.jobs.rank_reports import RankReports
from hotswitch.kernel.worker.deadline import ENDING_S

FINAL = ("succeeded", "failed", "stopped", "timed out", "lost")
STOP_MESSAGE_WAIT_S = 1.0  # a body that reads no controls: how long a stop waits before SIGTERM
STACKS_S = 5.0  # how long %train_stacks waits for every rank to answer


class Job:
    """A running or finished training job.

    ``status`` is one of 'starting', 'running', 'succeeded', 'failed', 'stopped', 'timed out' and
    'lost' (its ranks went silent: no heartbeat for ``$HOTSWITCH_HEARTBEAT_TIMEOUT_S``).
    ``events`` holds the newest events the ranks emitted (with "rank"), in arrival order (their types in
    ``hotswitch.backend.train.loop.events``); ``on_event`` subscribes to them, ``events_of`` selects
    them and ``wait_until`` waits for one, like an ipyparallel ``AsyncResult``.

    A job whose spec says ``detach`` outlives its kernel; another kernel follows it again with
    ``attached`` (what ``%train_attach`` read from its run folder) instead of submitting it.
    """

    def __init__(
        self,
        name: str,
        spec: LaunchSpec,
        launcher: Launcher,
        output,
        timeout: float | None = None,
        host: str = "127.0.0.1",
        max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        attached: Attachment | None = None,
    ):
        self.name = name
        self.detached = spec.detach
        self.notebook_dir = Path(spec.workdir or os.getcwd()).resolve()  # where relative paths resolve
        self.spec = replace(spec, workdir=self.notebook_dir)
        self.job_dir: Path = spec.job_dir
        self.timeout = timeout
        self.exit_reason: str | None = None
        self._output = output
        self._status = "starting"
        self._teardown = threading.Event()
        self._done = threading.Condition()
        self._done_callbacks: list[Callable[[Job], None]] = []
        self._finished = False  # the watcher has seen every process exit and drained the channel
        self.debug = DebugSessions(output, name)  # the breakpoints its ranks stop at
        self._reports = RankReports(
            output, on_started=self._on_rank_started, on_failure=self._teardown.set, on_debug=self.debug.receive
        )
        for event in attached.events if attached else []:  # what the run folder recorded before
            self._reports.log.append(event)
        # encrypted beyond loopback; kept in a detached job's run folder for the kernels that attach
        self.kernel_secret = attached.secret if attached else KernelSecret.new(curve=leaves_loopback(host))
        secret = self.kernel_secret
        port = attached.port if attached else None
        host = attached.host if attached else host
        self._channel = KernelChannel(secret.key, self._reports.receive, host, max_bytes, secret.server, port)
        self._pulse = Pulse(self._channel, self._reports)
        self._events = JobEvents(self._reports.log, self._ended_reason)
        self._controls = JobControls(name, self.spec, self.notebook_dir, self._channel, self._final_status)
        self.started_at = attached.started_at if attached else time.time()
        self.ended_at: float | None = None
        self.launcher = launcher
        try:
            self.handle = attached.handle if attached else self._submit(max_bytes)
        except BaseException:
            self._channel.close()
            raise
        if attached:
            self._status = "running"
        self._watcher = threading.Thread(target=self._watch, name=f"hotswitch-job-{name}", daemon=True)
        self._watcher.start()

    def _submit(self, max_bytes: int) -> str:
        deadline = self.started_at + self.timeout if self.detached and self.timeout else None
        env = rank_env(
            self.spec,
            self.name,
            self._channel.address,
            self.kernel_secret,
            max_bytes,
            self.launcher.ranks_here,
            deadline,
        )
        return self.launcher.submit(replace(self.spec, env=env))

    @property
    def channel_address(self) -> str:
        return self._channel.address

    @property
    def status(self) -> str:
        return self._status

    @property
    def done(self) -> bool:
        return self._status in FINAL and (self._finished or not self._watcher.is_alive())

    def add_done_callback(self, callback: Callable[[Job], None]) -> None:
        """Call ``callback(job)`` once the job has ended and every process is gone (at once if
        it already has), on the job's watcher thread."""
        with self._done:
            if not self._finished:
                self._done_callbacks.append(callback)
                return
        callback(self)

    @property
    def placement(self) -> dict[int, dict]:
        """Where each rank that started runs: ``{rank: {"node", "host", "pid"}}``."""
        return dict(self._reports.placement)

    def running_ranks(self) -> list[int]:
        """The ranks that reported starting and not yet their end."""
        return self._reports.running_ranks()

    @property
    def failure(self) -> dict | None:
        """The first rank error, ``{"rank", "error", "traceback"}``, or None."""
        return self._reports.failure

    @property
    def channel_stats(self):
        """Accepted and dropped (unsigned, forged, replayed, oversized, malformed) message counts."""
        return self._channel.stats

    @property
    def channel_losses(self) -> dict:  # what the channel lost, counted (channel_losses.py); total 0 if nothing
        return channel_losses(self.channel_stats, self._reports.losses())

    def logs(self, rank: int = 0) -> str:
        """Rank ``rank``'s stdout and stderr as ``[stdout:N] line`` lines (ValueError: no such rank)."""
        return self._reports.logs(checked_rank(rank, self.spec.nproc * self.spec.nodes))

    def pids(self) -> list[int]:
        """Processes of this job still alive on this machine."""
        return self.launcher.processes(self.handle)

    def wait(self, timeout: float | None = None) -> str:
        """Block until the job ends (or ``timeout`` seconds pass); return ``status``. Waits in
        short slices so a kernel interrupt (KeyboardInterrupt) gets through; a rank stopped at a
        breakpoint meanwhile is driven from here (the cell's stdin), when called on the kernel's
        main thread (a cell)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        here = threading.current_thread() is threading.main_thread()
        while not self.done:
            if here and self.debug.waiting() is not None:
                self.debug_here()
            left = WATCH_EVERY_S if deadline is None else min(WATCH_EVERY_S, deadline - time.monotonic())
            if left <= 0:
                break
            with self._done:
                if not self.done:
                    self._done.wait(left)
        return self._status

    def debug_here(self, rank: int | None = None, output=None) -> int:
        """Drive the ranks stopped at a breakpoint (``rank``'s only, where given) from this cell
        (its ``output``; the job's own by default) until none waits; how many lines were sent
        (``debug_sessions.drive``)."""
        return drive(
            self.debug,
            lambda to, line: self.send(to, {"kind": "debug_input", "line": line}),
            lambda: not self.done,
            rank=rank,
            output=output,
        )

    def stacks(self, timeout: float = STACKS_S) -> dict[int, str]:
        """Every running rank's Python stacks now (what a hung job waits on), by rank; a rank
        that does not answer within ``timeout`` is left out."""
        ranks = self.running_ranks()
        self.debug.stacks.clear()
        for rank in ranks:
            self.send(rank, {"kind": "stacks"})
        deadline = time.monotonic() + timeout
        while set(self.debug.stacks) < set(ranks) and time.monotonic() < deadline and not self.done:
            self.debug.wait_change(0.1)
        return {rank: self.debug.stacks[rank] for rank in sorted(self.debug.stacks)}

    def stop(self, grace: float = 5.0, ending_s: float | None = None) -> str:
        """Ask rank 0 to stop, then SIGTERM every process, then SIGKILL those left after ``grace`` s.

        Rank 0 gets ``{"type": "control", "command": "stop"}`` and up to ``ending_s`` to end its step
        and say ``done`` (default: ``ENDING_S`` for a trainer, a second for a body that reads no
        controls). Returns the final status ('stopped' unless the job had already ended).
        """
        if self.done:
            return self._status
        self._set_status("stopped")
        try:
            if self.spec.node_rank == 0:
                self._controls.control({"type": "control", "command": "stop"})
            default = ENDING_S if self._trainer() else STOP_MESSAGE_WAIT_S
            self.wait(default if ending_s is None else ending_s)
            if not self.done:
                self.launcher.cancel(self.handle)
                self.wait(grace)
        except BaseException:  # a second Ctrl-C (or SIGTERM) while stopping: no more grace, nothing left running
            self.launcher.cancel(self.handle, force=True)
            raise
        if not self.done:
            self.launcher.cancel(self.handle, force=True)
        return self.wait(5.0)

    # ---- what the collaborators do, as the job's own -----------------------------------------

    @property
    def events(self) -> Sequence[dict]:
        """The events the ranks emitted (with "rank"), in arrival order (``JobEvents.events``)."""
        return self._events.events

    @property
    def event_received_at(self) -> Sequence[float]:
        """The kernel's ``time.time()`` when each of ``events`` arrived."""
        return self._events.received_at

    def on_event(self, callback: Callable[[dict], None], replay: bool = True) -> Callable[[], None]:
        """Call ``callback(event)`` for every event (``JobEvents.on_event``); returns the unsubscribe."""
        return self._events.on_event(callback, replay)

    def events_of(self, kind: str, since: int = 0, **fields) -> list[dict]:
        """The events of type ``kind`` from index ``since`` on, with ``fields`` (``JobEvents.of``)."""
        return self._events.of(kind, since, **fields)

    def wait_until(self, predicate: Callable[[], object], timeout: float = 300.0) -> object:
        """Block until ``predicate()`` is truthy and return it (``JobEvents.wait_until``)."""
        return self._events.wait_until(predicate, timeout)

    @property
    def plan(self) -> dict | None:
        """The last "plan" event, or None."""
        return self._events.last("plan")

    @property
    def graphs(self) -> dict | None:
        """The last "graphs" event, or None."""
        return self._events.last("graphs")

    def switch(self, plan: str | Sequence = "auto") -> None:
        """Hot-switch at the next step boundary to ``plan`` (``JobControls.switch``)."""
        self._controls.switch(plan)

    def pause(self) -> None:
        """Ask the trainer to pause at the next step boundary."""
        self._controls.pause()

    def resume(self) -> None:
        """Ask a paused trainer to go on."""
        self._controls.resume()

    def checkpoint(self, path: str | None = None) -> None:
        """Ask the trainer to write a checkpoint to ``path`` (``JobControls.checkpoint``)."""
        self._controls.checkpoint(path)

    def send(self, rank: int, message: KernelMessage) -> None:
        """Send ``message`` to rank ``rank`` on the job's channel (``JobControls.send``)."""
        self._controls.send(rank, message)

    def __repr__(self) -> str:
        return job_repr(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return job_bundle(self, include, exclude)

    def _repr_html_(self) -> str:
        return job_html(self)

    # ---- threads -----------------------------------------------------------------------------

    def _set_status(self, status: str) -> None:
        with self._done:
            if self._status not in FINAL:
                self._status = status
            self._done.notify_all()

    def _final_status(self) -> str | None:
        return self._status if self.done else None

    def _ended_reason(self) -> str | None:
        reason = f"{self._status}: {self.exit_reason}" if self.exit_reason else self._status
        return reason if self.done else None

    def _on_rank_started(self) -> None:
        if self._status == "starting":
            self._set_status("running")

    def _watch(self) -> None:
        deadline = None if self.timeout is None else self.started_at + self.timeout
        try:
            code = wait_for_exit(self.launcher, self.handle, self._teardown, deadline, self._on_timeout, self._on_tick)
        except LaunchUnanswered as error:
            self.exit_reason = str(error)
            self._set_status("lost")
            code = 1
        drain(self._channel, self._reports, clean=code == 0)
        self._finish(code)

    def _trainer(self) -> bool:
        """Whether rank 0 runs a Trainer (it reported a plan): one that ends its step when asked to stop."""
        return self._events.last("plan") is not None

    def _on_timeout(self) -> float:
        """At the deadline: ask a trainer to stop, as ``stop`` does; the seconds it may take."""
        if self._status in FINAL:
            return 0.0
        self._set_status("timed out")
        trainer = self.spec.node_rank == 0 and self._trainer()
        if trainer:
            self._controls.control({"type": "control", "command": "stop"})
        then = f"asked it to end its step ({ENDING_S:g} s at most)" if trainer else "stopping every rank"
        self._output.write(
            f"[hotswitch] job {self.name!r} timed out after {self.timeout:g} s; {then}. "
            "Raise --timeout if it needs longer.\n",
            "stderr",
        )
        return ENDING_S if trainer else 0.0

    def _on_tick(self) -> None:
        silent = self._pulse.tick()
        if silent and self._status not in FINAL:
            ranks = ", ".join(f"rank {r} for {s:.0f} s" for r, s in sorted(silent.items()))
            self.exit_reason = f"no heartbeat from {ranks}; the job was torn down"
            self._set_status("lost")
            self._teardown.set()

    def _finish(self, code: int) -> None:
        self.ended_at = time.time()
        elapsed = self.ended_at - self.started_at
        if self._status not in FINAL:
            self._status, self.exit_reason, text = ending(
                code, self.failure, self.launcher.logs(self.handle), self.channel_stats, self._reports.running_ranks()
            )
            if text:
                self._output.write(text, "stderr")
        self._output.write(losses_note(self.channel_losses), "stderr")
        reason = f": {self.exit_reason}" if self.exit_reason else ""
        flush = getattr(self._output, "flush", None)  # what a flood held back from the cell, said
        if flush is not None:
            flush()
        self._output.write(f"[hotswitch] job {self.name!r} {self._status} after {elapsed:.1f} s{reason}\n", "stdout")
        with self._done:
            self._finished = True
            self._done.notify_all()
            callbacks, self._done_callbacks = self._done_callbacks, []
        self._reports.log.wake()
        for callback in callbacks:
            try:
                callback(self)
            except Exception as error:  # the watcher must finish; the notebook hears of it
                self._output.write(f"[hotswitch] a done callback of job {self.name!r} raised {error!r}\n", "stderr")
