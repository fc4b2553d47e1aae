"""Collectives that wait past a limit, rank side: once a heartbeat, the heartbeat's thread looks
at the training thread's innermost ``torch.distributed`` call; one still running after
``$HOTSWITCH_COLLECTIVE_WAIT_S`` seconds (default 120; 0: never) is reported to the kernel once,
with the op and the ranks of its group, so that the kernel can name the ranks that have not
arrived (``kernel/notebook/jobs/collective_waits.py``). It reads another thread's frames: the
training thread does no work for it.

A call is told apart from the next by its frame object; a rank that calls the same collective back
to back for the whole limit (never seen outside it at a beat) looks like one long wait, which the
kernel's message allows for.
"""

from __future__ import annotations

import os
import sys
import threading
from types import FrameType

from hotswitch.kernel.channel.messages import CollectiveWaitMessage

ENV_COLLECTIVE_WAIT = "HOTSWITCH_COLLECTIVE_WAIT_S"
DEFAULT_WAIT_S = 120.0
C10D_FILE = "distributed_c10d.py"  # torch.distributed's collectives are functions of this module


def wait_limit() -> float | None:
    """Seconds a collective may wait before it is reported; None: never reported."""
    text = os.environ.get(ENV_COLLECTIVE_WAIT)
    seconds = float(text) if text else DEFAULT_WAIT_S
    return seconds if seconds > 0 else None


def collective_call(frame: FrameType | None) -> FrameType | None:
    """The innermost frame of ``frame``'s stack that runs a public torch.distributed collective
    (``all_reduce``, ``broadcast``, ``barrier``, ...), or None."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.endswith(C10D_FILE) and not code.co_name.startswith("_"):
            return frame
        frame = frame.f_back
    return None


def group_ranks(call: FrameType) -> list[int]:
    """The global ranks of the collective's group (the whole world where none was given)."""
    import torch.distributed as dist

    group = call.f_locals.get("group")
    try:
        return list(dist.get_process_group_ranks(group)) if group is not None else list(range(dist.get_world_size()))
    except (RuntimeError, ValueError):  # a group being torn down: the world is the best guess
        return list(range(dist.get_world_size()))


class CollectiveWatch:
    """What the training thread waits in, seen at each ``check(now)``: a report the first time one
    call has waited ``limit`` seconds, else None."""

    def __init__(self, limit: float, thread: int | None = None):
        self.limit = limit
        self.thread = thread if thread is not None else threading.main_thread().ident
        self.call: FrameType | None = None
        self.since = 0.0
        self.reported = False

    def check(self, now: float) -> CollectiveWaitMessage | None:
        call = collective_call(sys._current_frames().get(self.thread or 0))
        if call is not self.call:
            self.call, self.since, self.reported = call, now, False
            return None
        if call is None or self.reported or now - self.since < self.limit:
            return None
        self.reported = True
        op = call.f_code.co_name
        return {"kind": "collective_wait", "op": op, "group": group_ranks(call), "seconds": round(now - self.since, 1)}
