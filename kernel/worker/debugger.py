"""A debugger for a rank, driven from the notebook: ``breakpoint()`` (or ``pdb.set_trace()``)
in a body stops that rank in pdb, whose output and prompts travel to the kernel on the job's
channel, and whose input comes back on it from the cell (``%%train --wait``, or
``%train_debug``). Other ranks wait at their next collective, as they would for any slow rank.

Messages: the rank sends ``{"kind": "debug", "text", "prompt"}`` each time pdb asks for a line
(``text``: what it printed since), and ``{"kind": "debug_end"}`` when the session ends (pdb
continues or quits, or the body ends); the kernel answers with ``{"kind": "debug_input",
"line"}``. A detached job (no kernel that would answer) continues past a breakpoint, saying so.

Post-mortem: a warm pool's rank keeps the failure of its last cell (``keep_failure``: Python's
own ``sys.last_traceback``; the next cell forgets it, and the memory its frames hold), and
``post_mortem`` opens the same prompt in the failing frame when the kernel asks
(``%train_debug``), the rank idle between cells.

``stacks_reply`` answers ``%train_stacks``: every thread's Python stack, from the heartbeat's
thread, so a rank stuck in a collective still answers.
"""

from __future__ import annotations

import inspect
import os
import pdb
import sys
import threading
import time
import traceback
from typing import IO, cast

ENV_DETACHED = "HOTSWITCH_DETACHED"
POLL_S = 0.05


class ChannelOutput:
    """pdb's stdout: text kept until pdb asks for a line, then sent with the prompt."""

    def __init__(self):
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass  # sent with the next prompt

    def take(self) -> str:
        text, self.text = self.text, ""
        return text


class ChannelInput:
    """pdb's stdin: each line asked for is a ``debug`` message to the kernel, answered by the
    kernel's ``debug_input``."""

    def __init__(self, channel, output: ChannelOutput):
        self.channel = channel
        self.output = output
        self.prompt = ""

    def readline(self, size: int | None = -1) -> str:
        printed = self.output.take()
        prompt = self.prompt if self.prompt and printed.endswith(self.prompt) else ""
        self.channel.send({"kind": "debug", "text": printed[: len(printed) - len(prompt)], "prompt": prompt})
        while not self.channel.closed:
            answers = self.channel.take("debug_input")
            if answers:
                return str(answers[0].get("line", "")) + "\n"
            time.sleep(POLL_S)
        return "continue\n"  # the channel closed: nobody will answer


class RankPdb(pdb.Pdb):
    """pdb on a rank, its terminal the notebook cell."""

    def __init__(self, channel, rank: int):
        self.channel_output = ChannelOutput()
        self.channel_input = ChannelInput(channel, self.channel_output)
        # pdb reads lines and writes text: these two are all of a terminal it uses
        super().__init__(stdin=cast("IO[str]", self.channel_input), stdout=cast("IO[str]", self.channel_output))
        self.use_rawinput = False
        self.prompt = f"(Pdb rank {rank}) "
        self.channel_input.prompt = self.prompt
        self.channel = channel
        self.ended = False

    def interaction(self, frame, tb) -> None:
        """pdb's prompt loop; the session ends (the kernel told) however it is left, an
        interrupt raised at the prompt included."""
        try:
            super().interaction(frame, tb)
        except BaseException:
            self.end_session()
            raise

    def set_continue(self) -> None:
        super().set_continue()
        self.end_session()

    def set_quit(self) -> None:
        super().set_quit()
        self.end_session()

    def end_session(self) -> None:
        if self.ended:
            return
        self.ended = True
        rest = self.channel_output.take()
        self.channel.send({"kind": "debug_end", "text": rest})


def keep_failure(error: BaseException) -> None:
    """Keep ``error`` where ``pdb.pm()`` (and ``post_mortem``) look for the last failure."""
    sys.last_type, sys.last_value, sys.last_traceback = type(error), error, error.__traceback__
    if sys.version_info >= (3, 12):
        sys.last_exc = error


def forget_failure() -> None:
    """Drop the kept failure (and the frames, tensors among them, that it holds alive)."""
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)


def post_mortem(channel, rank: int) -> None:
    """A pdb session in the frame where this rank last failed (``keep_failure``), driven from
    the notebook; where nothing failed, the session says so and ends."""
    session = RankPdb(channel, rank)
    failure = getattr(sys, "last_traceback", None)
    if failure is None:
        session.channel_output.write(f"[hotswitch] rank {rank} kept no failure to debug: nothing raised here yet\n")
        session.end_session()
        return
    session.reset()
    try:
        session.interaction(None, failure)
    finally:
        session.end_session()


class Breakpoints:
    """While it is installed, ``breakpoint()`` and ``pdb.set_trace()`` on this rank open a
    ``RankPdb`` (in a detached job they say they continue); ``remove`` puts back what was."""

    def __init__(self, channel, rank: int):
        self.channel = channel
        self.rank = rank
        self.previous = sys.breakpointhook, pdb.set_trace
        sys.breakpointhook = self.stop_here
        pdb.set_trace = self.stop_here

    def stop_here(self, *args, **kwargs) -> None:
        if os.environ.get(ENV_DETACHED):
            said = f"[hotswitch] breakpoint() on rank {self.rank} continues: a detached job has no kernel to answer it"
            print(said, file=sys.stderr, flush=True)
            return
        caller = inspect.currentframe()
        RankPdb(self.channel, self.rank).set_trace(caller.f_back if caller is not None else None)

    def remove(self) -> None:
        sys.breakpointhook, pdb.set_trace = self.previous


def stacks_reply() -> dict:
    """Every thread's Python stack now, named."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f"thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame)))
    return {"kind": "stacks", "text": "\n".join(parts)}
