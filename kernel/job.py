"""``Job``: one ``%%train`` launch seen from the notebook — status, events, logs and control.

Messages arrive on the channel thread; a watcher thread follows the launch (exit, timeout,
teardown after a rank fails). Neither blocks the kernel. Everything the job started is gone
once ``status`` is final: the watcher only declares an end after every process has exited.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from hotswitch.kernel.exit_reason import describe_exit
from hotswitch.kernel.kernel_channel import KernelChannel
from hotswitch.kernel.launcher import Launcher, LaunchSpec
from hotswitch.kernel.signing import DEFAULT_MAX_MESSAGE_BYTES, new_key
from hotswitch.kernel.worker import ENV_ADDRESS, ENV_JOB_NAME, ENV_KERNEL_PID, ENV_KEY, ENV_MAX_BYTES

FINAL = ("succeeded", "failed", "stopped", "timed out")
WATCH_EVERY_S = 0.1
# After the processes exit, wait this long without messages before closing the channel;
# after a clean exit, first wait (up to DRAIN_CLEAN_MAX_S) for every rank's "finished" marker,
# so that a slow receiving thread on a busy machine loses no trailing event.
DRAIN_QUIET_S = 0.2
DRAIN_MAX_S = 2.0
DRAIN_CLEAN_MAX_S = 10.0
STOP_MESSAGE_WAIT_S = 1.0


class Job:
    """A running or finished training job.

    ``status`` is one of 'starting', 'running', 'succeeded', 'failed', 'stopped', 'timed out'.
    ``events`` holds every dict the ranks emitted (with "rank"), in arrival order;
    ``event_received_at[i]`` is the kernel's ``time.time()`` when ``events[i]`` arrived.
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
    ):
        self.name = name
        self.spec = spec
        self.job_dir: Path = spec.job_dir
        self.timeout = timeout
        self.events: list[dict] = []
        self.event_received_at: list[float] = []
        self.failure: dict | None = None
        self.exit_reason: str | None = None
        self._logs: dict[int, list[str]] = {}
        self._started_ranks: set[int] = set()
        self._ended_ranks: set[int] = set()
        self._output = output
        self._status = "starting"
        self._teardown = threading.Event()
        self._done = threading.Condition()
        key = new_key()
        self._channel = KernelChannel(key, self._on_message, host, max_bytes)
        env = {
            ENV_ADDRESS: self._channel.address,
            ENV_KEY: key.hex(),
            ENV_KERNEL_PID: str(os.getpid()),
            ENV_MAX_BYTES: str(max_bytes),
            ENV_JOB_NAME: name,
            **spec.env,
        }
        self.started_at = time.time()
        self.ended_at: float | None = None
        try:
            self._launch = launcher.start(LaunchSpec(**{**spec.__dict__, "env": env}))
        except BaseException:
            self._channel.close()
            raise
        self._watcher = threading.Thread(target=self._watch, name=f"hotswitch-job-{name}", daemon=True)
        self._watcher.start()

    # ---- what the notebook reads -------------------------------------------------------------

    @property
    def status(self) -> str:
        return self._status

    @property
    def done(self) -> bool:
        return self._status in FINAL and not self._watcher.is_alive()

    @property
    def channel_stats(self):
        """Accepted and dropped (unsigned, forged, replayed, oversized, malformed) message counts."""
        return self._channel.stats

    @property
    def plan(self) -> dict | None:
        """The last event of type "plan", or None."""
        return self._last_event("plan")

    @property
    def graphs(self) -> dict | None:
        """The last event of type "graphs", or None."""
        return self._last_event("graphs")

    def logs(self, rank: int = 0) -> str:
        """Everything rank ``rank`` wrote to stdout and stderr, as ``[stdout:N] line`` lines."""
        return "".join(self._logs.get(rank, []))

    def pids(self) -> list[int]:
        """Processes of this job still alive on this machine."""
        return self._launch.alive_pids()

    def _last_event(self, kind: str) -> dict | None:
        return next((e for e in reversed(self.events) if e.get("type") == kind), None)

    # ---- control -----------------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> str:
        """Block until the job ends (or ``timeout`` seconds pass); return ``status``.

        Waits in short slices so a kernel interrupt (KeyboardInterrupt) gets through.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while not self.done:
                left = WATCH_EVERY_S if deadline is None else min(WATCH_EVERY_S, deadline - time.monotonic())
                if left <= 0:
                    break
                self._done.wait(left)
        return self._status

    def stop(self, grace: float = 5.0) -> str:
        """Ask rank 0 to stop, then SIGTERM every process, then SIGKILL those left after ``grace`` s.

        Rank 0 gets ``{"type": "control", "command": "stop"}`` and up to a second (or ``grace``)
        to end by itself. Returns the final status ('stopped' unless the job had already ended).
        """
        if self.done:
            return self._status
        self._set_status("stopped")
        if self.spec.node_rank == 0:
            self._send_control("stop")
        self.wait(min(STOP_MESSAGE_WAIT_S, grace))
        if not self.done:
            self._launch.terminate()
            self.wait(grace)
        if not self.done:
            self._launch.kill()
        return self.wait(5.0)

    def switch(self, strategy: str = "auto") -> None:
        """Ask the trainer to hot-switch to ``strategy`` (e.g. "dp2", or "auto" to let it choose)."""
        if not isinstance(strategy, str) or not strategy:
            raise ValueError(f'switch takes a strategy name such as "dp2tp2" or "auto", got {strategy!r}')
        self._send_control("switch", strategy=strategy)

    def pause(self) -> None:
        """Ask the trainer to pause at the next step boundary."""
        self._send_control("pause")

    def resume(self) -> None:
        """Ask a paused trainer to go on."""
        self._send_control("resume")

    def checkpoint(self, path: str | None = None) -> None:
        """Ask the trainer to write a checkpoint (to ``path``, or its default place)."""
        self._send_control("checkpoint", path=path)

    def _send_control(self, command: str, **fields) -> None:
        if self.done:
            raise RuntimeError(f"job {self.name!r} has already ended ({self._status}); start a new one with %%train")
        if self.spec.node_rank != 0:
            raise RuntimeError(
                f"job {self.name!r} is node {self.spec.node_rank} of a multi-node job; rank 0 runs on node 0, "
                "send control through the node-0 job"
            )
        self._channel.send(0, {"kind": "control", "control": {"type": "control", "command": command, **fields}})

    # ---- threads -----------------------------------------------------------------------------

    def _set_status(self, status: str) -> None:
        with self._done:
            if self._status not in FINAL:
                self._status = status
            self._done.notify_all()

    def _on_message(self, sender: str, body: dict) -> None:
        rank = int(sender.removeprefix("rank-")) if sender.startswith("rank-") else -1
        kind = body.get("kind")
        if kind == "log":
            line = f"[{body.get('stream')}:{rank}] {body.get('line')}\n"
            self._logs.setdefault(rank, []).append(line)
            self._output.write(line, "stderr" if body.get("stream") == "stderr" else "stdout")
        elif kind == "event" and isinstance(body.get("event"), dict):
            self.events.append(body["event"])
            self.event_received_at.append(time.time())
        elif kind == "started":
            self._started_ranks.add(rank)
            if self._status == "starting":
                self._set_status("running")
        elif kind == "finished":
            self._ended_ranks.add(rank)
        elif kind == "error":
            self._ended_ranks.add(rank)
            self._on_rank_error(rank, body)

    def _on_rank_error(self, rank: int, body: dict) -> None:
        if self.failure is None:
            self.failure = {"rank": rank, "error": str(body.get("error")), "traceback": str(body.get("traceback"))}
            text = "".join(f"[rank {rank}] {line}\n" for line in self.failure["traceback"].splitlines())
            self._output.write(text, "stderr")
            self._teardown.set()
        else:
            self._output.write(f"[rank {rank}] also failed: {body.get('error')}\n", "stderr")

    def _watch(self) -> None:
        terminated_at = None
        while True:
            code = self._launch.poll()
            if code is not None:
                break
            timed_out = self.timeout is not None and time.time() - self.started_at > self.timeout
            if timed_out and self._status not in FINAL:
                self._set_status("timed out")
                self._output.write(
                    f"[hotswitch] job {self.name!r} timed out after {self.timeout:g} s; stopping every rank. "
                    "Raise --timeout if it needs longer.\n",
                    "stderr",
                )
            if (self._teardown.is_set() or timed_out) and terminated_at is None:
                self._launch.terminate()
                terminated_at = time.monotonic()
            if terminated_at is not None and time.monotonic() - terminated_at > 5.0:
                self._launch.kill()
            time.sleep(WATCH_EVERY_S)
        self._drain(clean=code == 0)
        self._finish(code)

    def _drain(self, clean: bool) -> None:
        began = time.monotonic()
        while clean and not self._started_ranks <= self._ended_ranks and time.monotonic() - began < DRAIN_CLEAN_MAX_S:
            time.sleep(DRAIN_QUIET_S / 4)
        began = time.monotonic()
        while self._channel.quiet_for() < DRAIN_QUIET_S and time.monotonic() - began < DRAIN_MAX_S:
            time.sleep(DRAIN_QUIET_S / 4)
        self._channel.close()

    def _finish(self, code: int) -> None:
        self.ended_at = time.time()
        elapsed = self.ended_at - self.started_at
        if self._status in FINAL:
            pass
        elif self.failure is not None:
            self.exit_reason = f"rank {self.failure['rank']} raised {self.failure['error']}"
            self._status = "failed"
        elif code == 0:
            self._status = "succeeded"
        else:
            self.exit_reason = describe_exit(code, self._launch.agent_output())
            self._status = "failed"
            tail = "\n".join(self._launch.agent_output().splitlines()[-20:])
            self._output.write(f"[hotswitch] torchrun output:\n{tail}\n", "stderr")
        reason = f": {self.exit_reason}" if self.exit_reason else ""
        self._output.write(f"[hotswitch] job {self.name!r} {self._status} after {elapsed:.1f} s{reason}\n", "stdout")
        with self._done:
            self._done.notify_all()

    def __repr__(self) -> str:
        return (
            f"<Job {self.name!r} {self._status}, {self.spec.nproc}x{self.spec.nodes} ranks, {len(self.events)} events>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The live dashboard when ``hotswitch.widgets`` imports; None falls back to the reprs here."""
        try:
            from hotswitch.widgets import Dashboard
        except ImportError:
            return None
        bundle = Dashboard(self)._repr_mimebundle_(include=include, exclude=exclude)
        if isinstance(bundle, dict):  # front ends without widgets (and logs) still read the job's summary
            bundle["text/plain"] = repr(self)
        return bundle

    def _repr_html_(self) -> str:
        from html import escape

        return (
            f"<b>Job {escape(self.name)}</b>: {escape(self._status)} &mdash; "
            f"{self.spec.nproc} process(es) x {self.spec.nodes} node(s), {len(self.events)} events"
        )
