"""Why a launch ended, in words: signal names instead of negative exit codes, and the rank that
stopped first before the ranks that failed because it did.

The order of events comes from torchrun, the agent every launcher runs on each node. Where it
forks its ranks (``launch/local/forked_ranks.py``), the agent says the moment each rank ends, to the
microsecond. Otherwise its error report numbers the failures it saw in the order it saw them
(``[0]`` is its "first observed failure"), each with the second it saw it: ranks that end
within one of its polls look simultaneous there. The channel adds which ranks ended with a word
(a "finished" or an error) and which stopped without one (killed, crashed, or torn down).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Collection
from typing import NamedTuple

from hotswitch.kernel.launch.local.forked_ranks import ranks_ended

# One failure of torchrun's ChildFailedError report (each node's agent prints one):
#   [1]:
#     time      : 2026-11-26_13:22:17
#     host      : node-a
#     rank      : 0 (local_rank: 0)
#     exitcode  : -15 (pid: 8143)  (SIGTERM)
_REPORTED = re.compile(r"^\s*\[(\d+)\]:\s*$(.*?)^\s*exitcode\s*:\s*(-?\d+)", re.M | re.S)
_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank", re.M)
_TIME = re.compile(r"^\s*time\s*:\s*(\S+)", re.M)
# The same without the numbering (older torchrun): "rank : 1 (local_rank: 1)" ... "exitcode : -9".
_FAILED_RANK = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank.*?\n\s*exitcode\s*:\s*(-?\d+)", re.S)


class RankExit(NamedTuple):
    """One rank's end as its agent reported it: ``code`` is its exit status (negative: the signal)."""

    rank: int
    code: int


def exit_code_in_words(code: int) -> str:
    """``-9`` -> "killed by SIGKILL"; ``3`` -> "exit status 3"."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def observed_exits(agent_output: str) -> list[RankExit]:
    """The failed ranks in ``agent_output``, in the order they ended: by the time the agents saw
    each end (their own lines where they forked the ranks; else torchrun's report: by the second
    each was seen, then by each agent's own numbering, ties across nodes keeping the order of
    the output; without numbered reports, the order of the output)."""
    ended = ranks_ended(agent_output)
    if ended:
        return [RankExit(rank, code) for _, rank, code in ended if code != 0]
    seen = []
    for match in _REPORTED.finditer(agent_output):
        rank = _RANK.search(match.group(2))
        time = _TIME.search(match.group(2))
        if rank:
            key = (time.group(1) if time else "", int(match.group(1)))
            seen.append((key, RankExit(int(rank.group(1)), int(match.group(3)))))
    if not seen:
        return [RankExit(int(rank), int(code)) for rank, code in _FAILED_RANK.findall(agent_output)]
    return [rank_exit for _, rank_exit in sorted(seen, key=lambda item: item[0])]


def describe_exit(code: int, agent_output: str) -> str:
    """One line naming each rank torchrun reported as failed, the first it saw end first; or the
    agent's own exit."""
    ranks = [f"rank {e.rank} {exit_code_in_words(e.code)}" for e in observed_exits(agent_output)]
    if ranks:
        return "; then ".join(ranks)
    if code < 0:  # the agent itself was signalled (its ranks end on their own once it is gone)
        return f"the torchrun agent was {exit_code_in_words(code)}; its ranks were stopped"
    return f"torchrun {exit_code_in_words(code)}"


def describe_failure(failure: dict, agent_output: str, unreported: Collection[int]) -> str:
    """The first error a rank raised (``failure``: "rank", "error"), after the ranks that ended
    before it without a word: those of ``unreported`` (started, never reported an end on the
    channel) that torchrun saw end before the raising rank. "rank 1 killed by SIGKILL; then
    rank 0 raised RuntimeError: ... Connection reset by peer"."""
    before = []
    for rank_exit in observed_exits(agent_output):
        if rank_exit.rank == failure["rank"]:
            break
        if rank_exit.rank in unreported:
            before.append(f"rank {rank_exit.rank} {exit_code_in_words(rank_exit.code)}")
    return "; then ".join([*before, f"rank {failure['rank']} raised {failure['error']}"])
