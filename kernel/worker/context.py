"""``job`` inside a ``%%train`` body: who this rank is, the event sink, and control messages."""

from __future__ import annotations

from hotswitch.kernel.channel.messages import ControlCommand
from hotswitch.kernel.channel.worker_end import WorkerChannel
from hotswitch.kernel.worker.debugger import Breakpoints, post_mortem


class WorkerContext:
    """What a training body may rely on: ``rank``, ``world_size``, ``local_rank``, ``device``,
    ``emit``, ``control``. ``device`` is "cpu", or "cuda:LOCAL_RANK" under ``--device cuda``."""

    def __init__(self, channel: WorkerChannel, rank: int, world_size: int, local_rank: int, name: str, device: str):
        self.rank = rank
        self.device = device if device == "cpu" else f"cuda:{local_rank}"
        self.world_size = world_size
        self.local_rank = local_rank
        self.name = name
        self._channel = channel

    def emit(self, event: dict) -> None:
        """Send one event to the kernel (the trainer's event sink).

        ``event`` must be a JSON-able dict with a "type" key; the kernel appends it to
        ``Job.events`` with ``"rank"`` added when absent.
        """
        if not isinstance(event, dict) or "type" not in event:
            raise ValueError(f'job.emit takes a dict with a "type" key, e.g. {{"type": "step", ...}}; got {event!r}')
        self._channel.send({"kind": "event", "event": {"rank": self.rank, **event}})

    def control(self) -> list[ControlCommand]:
        """Control dicts received since the last call; never blocks.

        Only rank 0 receives them; on other ranks this is always []. The trainer broadcasts
        what it needs to the other ranks itself, at a step boundary.
        """
        if self.rank != 0:
            return []
        return [m["control"] for m in self._channel.receive_all() if m.get("kind") == "control"]

    def messages(self) -> list[dict]:
        """Every message the kernel sent this rank since the last call (control included; a warm
        pool's tasks, say); never blocks. Whoever calls this takes them: ``control`` no longer sees
        the ones it returned."""
        return self._channel.receive_all()

    def take(self, kind: str) -> list[dict]:
        """The kernel's messages of ``kind`` since the last call, leaving the others; never blocks."""
        return self._channel.take(kind)

    def breakpoints(self) -> Breakpoints:
        """``breakpoint()`` on this rank opens a pdb prompt in the notebook until ``remove()``d."""
        return Breakpoints(self._channel, self.rank)

    def post_mortem(self) -> None:
        """A pdb prompt in the notebook, in the frame where this rank last failed."""
        post_mortem(self._channel, self.rank)

    def kernel_away_after(self, seconds: float) -> None:
        """Take the kernel as gone after ``seconds`` of silence: see ``WorkerChannel.away_after``."""
        self._channel.away_after(seconds)

    def __repr__(self) -> str:
        return f"WorkerContext(name={self.name!r}, rank={self.rank}, world_size={self.world_size})"
