"""A debugger for a rank, driven from the notebook: ``breakpoint()`` (or ``pdb.set_trace()``)
in a body stops that rank in pdb, whose output and prompts travel to the kernel on the job's
channel, and whose input comes back on it from the cell (``%%train --wait``, or
``%train_debug``). Other ranks wait at their next collective, as they would for any slow rank.

Messages: the rank sends ``{"kind": "debug", "text", "prompt"}`` each time pdb asks for a line
(``text``: what it printed since), and ``{"kind": "debug_end"}`` when the session ends (pdb
continues or quits, or the body ends); the kernel answers with ``{"kind": "debug_input",
"line"}``. A detached job (no kernel that would answer) continues past a breakpoint, saying so.

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

    def set_continue(self) -> None:
        super().set_continue()
        self.end_session()

    def set_quit(self) -> None:
        super().set_quit()
        self.end_session()

    def end_session(self) -> None:
        rest = self.channel_output.take()
        self.channel.send({"kind": "debug_end", "text": rest})


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
