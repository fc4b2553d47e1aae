"""The kernel names a collective that waited past its limit: its group, who waits in it, who has
not arrived and where each of those is (the rank side is driven by a real job in
tests/kernel/notebook/cells/test_rank_debugger.py)."""

import threading
import time

import torch.distributed as dist

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.kernel.notebook.jobs.collective_waits import CollectiveWaits, ranks_text
from hotswitch.kernel.worker.collective_wait import CollectiveWatch


class Written:
    def __init__(self):
        self.parts = []

    def write(self, text, stream):
        self.parts.append((stream, text))


def test_the_ranks_not_arrived_are_named_with_what_they_wait_in():
    output = Written()
    waits = CollectiveWaits(output, "run", settle_s=0.05)
    for rank in (0, 1):
        waits.receive(rank, {"kind": "collective_wait", "op": "all_reduce", "group": [0, 1, 2, 3], "seconds": 120.4})
    waits.receive(2, {"kind": "collective_wait", "op": "broadcast", "group": [0, 1, 2, 3], "seconds": 121})
    time.sleep(0.3)
    said = [text for stream, text in output.parts if "all_reduce" in text.split(";")[0]]
    assert len(said) == 1 and output.parts[0][0] == "stderr"  # said once per collective, to stderr
    assert said[0] == (
        "[hotswitch] job 'run': all_reduce over ranks 0-3 has waited 120 s on rank(s) 0, 1; not arrived: "
        "rank(s) 2, 3 (rank 2 waits in broadcast over ranks 0-3; rank(s) 3 still compute, or are stuck outside a "
        "collective). %train_stacks run shows where each rank is\n"
    )


def test_a_collective_every_rank_waits_in_is_said_to_hang_itself():
    waits = CollectiveWaits(Written(), "run")
    for rank in (0, 1):
        waits.receive(rank, {"kind": "collective_wait", "op": "barrier", "group": [0, 1], "seconds": 300})
    assert "every rank of its group is in it: the collective itself hangs" in waits.text("barrier", (0, 1))
    assert ranks_text([5, 2, 9]) == "2, 5, 9" and ranks_text(range(8)) == "0-7"


def watched_barrier(rank: int, world: int) -> list:
    """Rank 0 watches its barrier thread while rank 1 comes 3 s late; what the watch said at
    each look (rank 1: nothing)."""
    if rank == 1:
        time.sleep(3.0)
        dist.barrier()
        return []
    stuck = threading.Thread(target=dist.barrier)
    stuck.start()
    watch = CollectiveWatch(limit=1.0, thread=stuck.ident)
    outside = CollectiveWatch(limit=0.0)  # this thread, outside any collective
    said = [watch.check(0.0), watch.check(0.5), watch.check(1.5), watch.check(2.0), outside.check(0.0)]
    said.append(outside.check(10.0))
    stuck.join()
    said.append(watch.check(9.0))  # the barrier returned: a new look, nothing to say
    return said


def test_the_watch_reports_a_thread_stuck_in_a_collective_once_and_not_a_thread_outside_one():
    said = spawn_ranks(watched_barrier, 2)[0]
    report = {"kind": "collective_wait", "op": "barrier", "group": [0, 1], "seconds": 1.5}
    assert said == [None, None, report, None, None, None, None]  # past the limit once; never outside one
