"""A forked rank's end is said (``forked_ranks.ended_line``) however soon torchrun polls it and
however many ranks end at once: the job's exit reason reads those lines to name the rank that
stopped first, and one left unsaid named the rank it broke instead (seen on two loaded cores:
rank 1 SIGKILLed, the reason only "rank 0 raised RuntimeError ... Connection closed by peer").
Two causes, both caught here: a poll that reaped the rank before its watcher ran, and two
watchers' lines interleaved into one unreadable line."""

import os
import signal
import time

from hotswitch.kernel.launch.local.forked_ranks import ForkedRank, ranks_ended

CHILDREN = 24
LIMIT_S = 120  # generous: the machine's cores are shared


def test_every_end_is_said_however_soon_it_is_polled(capfd):
    ranks = []
    for rank in range(CHILDREN):
        pid = os.fork()
        if pid == 0:  # a rank that dies at once, before its watcher may have started
            os.kill(os.getpid(), signal.SIGKILL)
            os._exit(1)
        ranks.append(ForkedRank(pid, ("rank",), str(rank)))
    deadline = time.monotonic() + LIMIT_S
    while any(r.poll() is None for r in ranks):  # polled as fast as it goes, as torchrun's monitor would
        assert time.monotonic() < deadline, "a rank's end was never seen"
    said = ranks_ended(capfd.readouterr().err)
    assert sorted(rank for _, rank, _ in said) == list(range(CHILDREN)), "an end went unsaid or unreadable"
    assert {code for _, _, code in said} == {-signal.SIGKILL}
    assert [r.wait() for r in ranks] == [-signal.SIGKILL] * CHILDREN
