"""What a notebook can ask of a running job: a plan switch, a pause, a checkpoint. Each goes to
rank 0 as a signed control message on the job's channel, at the next step boundary; a request the
job cannot run is refused before anything is sent."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hotswitch.kernel.channel.kernel_end import KernelChannel
from hotswitch.kernel.channel.messages import ControlCommand, KernelMessage
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.notebook.jobs.job_checks import checkpoint_target
from hotswitch.kernel.notebook.jobs.switch_request import switch_request


class JobControls:
    """The controls of job ``name``, sent on its ``channel``; ``ended()`` is the job's final
    status (None while it runs: nothing is sent after), the requests checked against its ``spec`` and
    its ``notebook_dir`` (where relative paths resolve)."""

    def __init__(
        self, name: str, spec: LaunchSpec, notebook_dir: Path, channel: KernelChannel, ended: Callable[[], str | None]
    ):
        self.name = name
        self.spec = spec
        self.notebook_dir = notebook_dir
        self.channel = channel
        self.ended = ended

    def switch(self, plan: str | Sequence = "auto") -> None:
        """Ask the trainer to hot-switch at the next step boundary to ``plan``: "auto" (it picks
        the buckets of every batch), one strategy ("dp2tp2") or buckets ([["tp4", 128], ["dp4",
        0]], longest first). Raises ValueError before sending anything the job cannot run."""
        strategy = switch_request(plan, self.spec.nproc * self.spec.nodes)
        self.control({"type": "control", "command": "switch", "strategy": strategy})

    def pause(self) -> None:
        """Ask the trainer to pause at the next step boundary."""
        self.control({"type": "control", "command": "pause"})

    def resume(self) -> None:
        """Ask a paused trainer to go on."""
        self.control({"type": "control", "command": "resume"})

    def checkpoint(self, path: str | None = None) -> None:
        """Ask the trainer to write a checkpoint to ``path`` (relative: to the notebook's folder),
        or its default place. Raises ValueError before sending when ``path`` exists or its folder
        cannot be written; a write that fails on the ranks anyway is a ``warning`` event."""
        target = checkpoint_target(path, self.notebook_dir)
        self.control({"type": "control", "command": "checkpoint", "path": target})

    def control(self, control: ControlCommand) -> None:
        """Deliver ``control`` to rank 0, which reads it at its next step boundary; RuntimeError
        once the job has ended, or on a node other than node 0 of a multi-node job."""
        ended = self.ended()
        if ended is not None:
            raise RuntimeError(f"job {self.name!r} has already ended ({ended}); start a new one with %%train")
        if self.spec.node_rank != 0:
            raise RuntimeError(
                f"job {self.name!r} is node {self.spec.node_rank} of a multi-node job; rank 0 runs on node 0, "
                "send control through the node-0 job"
            )
        self.channel.send(0, {"kind": "control", "control": control})

    def send(self, rank: int, message: KernelMessage) -> None:
        """Send ``message`` (a JSON-able dict with a "kind") to rank ``rank`` on the job's channel,
        as the channel's ``send`` does: a warm pool's tasks and interrupts. RuntimeError once the
        job has ended."""
        ended = self.ended()
        if ended is not None:
            raise RuntimeError(f"job {self.name!r} has already ended ({ended}); nothing runs to receive it")
        self.channel.send(rank, message)
