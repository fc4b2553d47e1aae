"""The job channel's messages, declared once: what a rank sends the kernel, and what the kernel
sends a rank. Each is a JSON-ready dict with a ``kind``; the training events a rank forwards
(``EventMessage.event``) are declared in ``hotswitch.backend.train.loop.events``.

Declarations only: the channel seals and verifies whatever dict it is given, and the kernel's
``RankReports.receive`` still checks each field it reads, since a message's shape is only as good
as the rank that sent it.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

# ---- rank → kernel -----------------------------------------------------------------------------


class StartedMessage(TypedDict):
    kind: Literal["started"]
    pid: int
    host: str
    node: str  # the launcher's node name, or the host's
    world_size: int


class LogLineMessage(TypedDict):
    """One output line, sent alone while the kernel keeps up."""

    kind: Literal["log"]
    stream: str  # "stdout" or "stderr"
    line: str


class LogLinesMessage(TypedDict):
    """Output lines gathered while the kernel was behind: ``[[stream, line], ...]``, oldest first."""

    kind: Literal["log"]
    lines: list[list[str]]


class EventMessage(TypedDict):
    kind: Literal["event"]
    event: dict[str, Any]  # a training event, with "type" and the sending "rank"


class HeartbeatMessage(TypedDict):
    """Either way: "I am alive". A rank's is sent only when it would not wait."""

    kind: Literal["heartbeat"]


class _EndFields(TypedDict, total=False):
    lines: int  # output lines the rank sent, so the kernel can count missing ones


class FinishedMessage(_EndFields):
    kind: Literal["finished"]


class ErrorMessage(_EndFields):
    kind: Literal["error"]
    error: str  # one line: the exception's type and message
    traceback: str


class UnsentMessage(TypedDict):
    """Messages the rank gave up on while the kernel was silent, told once it is back."""

    kind: Literal["unsent"]
    count: int  # dropped since the last such message
    total: int  # dropped since the channel opened


class DebugMessage(TypedDict):
    """A rank's pdb asks for a line (``kernel/worker/debugger.py``): what it printed since, and its prompt."""

    kind: Literal["debug"]
    text: str
    prompt: str


class DebugEndMessage(TypedDict):
    """A rank's pdb session ended (it continues or quits): what it printed last."""

    kind: Literal["debug_end"]
    text: str


class StacksMessage(TypedDict):
    """Every thread's Python stack on the rank, as ``%train_stacks`` asked."""

    kind: Literal["stacks"]
    text: str


class CollectiveWaitMessage(TypedDict):
    """The rank's training thread has waited ``seconds`` in collective ``op`` over ``group``
    (global ranks), past the limit (``kernel/worker/collective_wait.py``)."""

    kind: Literal["collective_wait"]
    op: str
    group: list[int]
    seconds: float


EndMessage = FinishedMessage | ErrorMessage
DebuggingMessage = DebugMessage | DebugEndMessage | StacksMessage | CollectiveWaitMessage
RankMessage = (
    StartedMessage
    | LogLineMessage
    | LogLinesMessage
    | EventMessage
    | HeartbeatMessage
    | EndMessage
    | UnsentMessage
    | DebuggingMessage
)

# ---- kernel → rank -----------------------------------------------------------------------------

ControlName = Literal["switch", "pause", "resume", "stop", "checkpoint"]


class _ControlFields(TypedDict, total=False):
    strategy: str | list  # of a switch: a strategy's name, "auto" or a plan's buckets
    path: str | None  # of a checkpoint: where to write it (None: the run's own folder)


class ControlCommand(_ControlFields):
    """What rank 0's trainer applies at a step boundary (and reports back as a "control" event)."""

    type: Literal["control"]
    command: ControlName


class ControlMessage(TypedDict):
    kind: Literal["control"]
    control: ControlCommand


class DebugInputMessage(TypedDict):
    """The line typed at a rank's pdb prompt."""

    kind: Literal["debug_input"]
    line: str


class StacksRequest(TypedDict):
    kind: Literal["stacks"]


class AckMessage(TypedDict):
    """The newest sequence number the kernel has folded in from this rank."""

    kind: Literal["ack"]
    seq: int


# A message a job's owner sends with ``Job.send`` (a warm pool's "task" and "interrupt"): any
# JSON-able dict with a "kind", read by whatever the rank runs (``WorkerContext.messages``).
OwnerMessage = dict[str, Any]
KernelMessage = ControlMessage | HeartbeatMessage | AckMessage | DebugInputMessage | StacksRequest | OwnerMessage
