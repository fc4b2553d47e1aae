"""What a notebook can ask of a running job: a plan switch, a pause, a checkpoint. Each goes to
rank 0 as a signed control message on the job's channel, at the next step boundary; a request the
job cannot run is refused before anything is sent."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.channel.messages import ControlCommand, KernelMessage
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.notebook.jobs.job_checks import checkpoint_target
from hotswitch.kernel.notebook.jobs.switch_request import switch_request


class ControlledJob(Protocol):
    """What the controls need of the job they are mixed into (``Job``)."""

    name: str
    spec: LaunchSpec
    notebook_dir: Path
    _channel: KernelChannel

    @property
    def done(self) -> bool: ...

    @property
    def status(self) -> str: ...

    def _send_control(self, control: ControlCommand) -> None: ...


class JobControls:
    """Mixed into ``Job``, whose ``_send_control`` delivers them and whose ``spec`` and
    ``notebook_dir`` they are checked against."""

    def switch(self: ControlledJob, plan: str | Sequence = "auto") -> None:
        """Ask the trainer to hot-switch at the next step boundary to ``plan``: "auto" (it picks
        the buckets of every batch), one strategy ("dp2tp2") or buckets ([["tp4", 128], ["dp4",
        0]], longest first). Raises ValueError before sending anything the job cannot run."""
        strategy = switch_request(plan, self.spec.nproc * self.spec.nodes)
        self._send_control({"type": "control", "command": "switch", "strategy": strategy})

    def pause(self: ControlledJob) -> None:
        """Ask the trainer to pause at the next step boundary."""
        self._send_control({"type": "control", "command": "pause"})

    def resume(self: ControlledJob) -> None:
        """Ask a paused trainer to go on."""
        self._send_control({"type": "control", "command": "resume"})

    def checkpoint(self: ControlledJob, path: str | None = None) -> None:
        """Ask the trainer to write a checkpoint to ``path`` (relative: to the notebook's folder),
        or its default place. Raises ValueError before sending when ``path`` exists or its folder
        cannot be written; a write that fails on the ranks anyway is a ``warning`` event."""
        target = checkpoint_target(path, self.notebook_dir)
        self._send_control({"type": "control", "command": "checkpoint", "path": target})

    def send(self: ControlledJob, rank: int, message: KernelMessage) -> None:
        """Send ``message`` (a JSON-able dict with a "kind") to rank ``rank`` on the job's channel,
        as the channel's ``send`` does: a warm pool's tasks and interrupts. RuntimeError once the
        job has ended."""
        if self.done:
            raise RuntimeError(f"job {self.name!r} has already ended ({self.status}); nothing runs to receive it")
        self._channel.send(rank, message)
