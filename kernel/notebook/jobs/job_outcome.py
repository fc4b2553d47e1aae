"""How a job ended, in words: its final status, the reason, and what the cell should show."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict

from hotswitch.kernel.notebook.jobs.exit_reason import describe_exit, describe_failure, observed_exits
from hotswitch.kernel.worker.entry import WORKER_ERROR_MARK

AGENT_TAIL_LINES = 20


def worker_errors(agent_output: str) -> list[str]:
    """The lines in which workers said why they failed on their own (not in the body)."""
    lines = agent_output.splitlines()
    return [line.split(WORKER_ERROR_MARK, 1)[1].strip() for line in lines if WORKER_ERROR_MARK in line]


CRASH_MARK = "Fatal Python error:"  # faulthandler's first line, which a rank writes as it crashes
CRASH_LINES = 12
STACK_LINES = (" ", "Current thread", "Thread", "Stack")  # how the lines under it begin


def crash_traces(agent_output: str) -> list[str]:
    """Each crash a rank's fault handler wrote to the agent's output (a segfault, an abort): its
    first line and the stack under it, up to ``CRASH_LINES`` lines (a prefix the agent puts
    before each of a rank's lines, ``[rank1]:``, taken off)."""
    lines = agent_output.splitlines()
    traces = []
    for i, line in enumerate(lines):
        if CRASH_MARK not in line:
            continue
        prefix = line[: line.index(CRASH_MARK)]
        block = [line[len(prefix) :]]
        for follow in lines[i + 1 : i + CRASH_LINES]:
            follow = follow.removeprefix(prefix)
            if CRASH_MARK in follow or (follow.strip() and not follow.startswith(STACK_LINES)):
                break
            block.append(follow)
        traces.append("\n".join(block).rstrip())
    return traces


def all_rejected(stats) -> str | None:
    """Why no message of the job counted, when the kernel dropped every one; else None."""
    if stats.accepted or not stats.dropped:
        return None
    counts = {k: v for k, v in asdict(stats).items() if v and k != "accepted"}
    return (
        f"the kernel rejected every message from the ranks ({counts}) and accepted none: the ranks ran "
        "without this job's key or limits (were HOTSWITCH_* variables changed?); nothing they reported counts"
    )


def ending(
    code: int, failure: dict | None, agent_output: str, stats, unreported: Collection[int] = ()
) -> tuple[str, str | None, str]:
    """``(status, exit_reason, text for the cell's stderr)`` of a job whose processes exited with
    ``code``, given the first rank failure, the channel's counts and the ranks that started but
    never reported their end (a rank that stopped first without a word comes first in the reason)."""
    rejected = all_rejected(stats)
    if failure is not None and code < 0 and not observed_exits(agent_output):
        # the agent itself was signalled (no rank's end reported by it): that is the first cause,
        # the ranks' errors (a peer gone from a collective) followed from it
        first = describe_exit(code, agent_output)
        return "failed", f"{first}; then rank {failure['rank']} raised {failure['error']}", ""
    if failure is not None:
        return "failed", describe_failure(failure, agent_output, unreported), ""
    if rejected:
        return "failed", rejected, f"[hotswitch] {rejected}\n"
    if code == 0:
        return "succeeded", None, ""
    causes = worker_errors(agent_output)
    reason = describe_exit(code, agent_output)
    if causes:
        reason = f"{reason}: {'; '.join(causes)}"
    tail = "\n".join(agent_output.splitlines()[-AGENT_TAIL_LINES:])
    text = "".join(f"[hotswitch] worker error: {cause}\n" for cause in causes)
    text += "".join(f"[hotswitch] a rank crashed:\n{trace}\n" for trace in crash_traces(agent_output))
    return "failed", reason, f"{text}[hotswitch] torchrun output:\n{tail}\n"
