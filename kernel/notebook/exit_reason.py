"""Why a launch ended, in words: signal names instead of negative exit codes."""

from __future__ import annotations

import re
import signal

# torchrun's ChildFailedError report: "rank : 1 (local_rank: 1)" ... "exitcode : -9 (pid: 123)".
_FAILED_RANK = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank.*?\n\s*exitcode\s*:\s*(-?\d+)", re.S)


def exit_code_in_words(code: int) -> str:
    """``-9`` -> "killed by SIGKILL"; ``3`` -> "exit status 3"."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def describe_exit(code: int, agent_output: str) -> str:
    """One line naming each rank torchrun reported as failed, or the agent's own exit."""
    ranks = [f"rank {rank} {exit_code_in_words(int(rc))}" for rank, rc in _FAILED_RANK.findall(agent_output)]
    if ranks:
        return "; ".join(ranks)
    if code < 0:  # the agent itself was signalled (its ranks end on their own once it is gone)
        return f"the torchrun agent was {exit_code_in_words(code)}; its ranks were stopped"
    return f"torchrun {exit_code_in_words(code)}"
