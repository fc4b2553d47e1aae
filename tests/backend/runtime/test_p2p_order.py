"""The pipeline's exchanges obey NCCL's rules, checked without NCCL for every stage pair:
sends and receives between two ranks are posted in the same order on both sides (NCCL matches
them by order, not by tag), and posting each exchange as one group, waiting for all of it
before the next, never deadlocks: some stage can always finish its exchange."""

from dataclasses import dataclass

import pytest

from hotswitch.backend.parallel.pipeline import SCHEDULES
from hotswitch.backend.runtime.p2p import exchanges


@dataclass(frozen=True)
class Link:
    peer_stage: int
    index: int


def chain(stages: int, skip: bool) -> list[tuple[list[Link], list[Link]]]:
    """(receives, sends) per stage: each stage feeds the next; with ``skip`` stage 0 also sends
    a second tensor straight to the last stage (every stage numbers links alike)."""
    links = [(s, s + 1, s) for s in range(stages - 1)]
    if skip and stages > 2:
        links.append((0, stages - 1, stages - 1))
    return [
        ([Link(a, i) for a, b, i in links if b == s], [Link(b, i) for a, b, i in links if a == s])
        for s in range(stages)
    ]


def plans(stages: int, micros: int, schedule: str, skip: bool):
    return [
        exchanges(SCHEDULES[schedule](stages, s, micros), receives, sends)
        for s, (receives, sends) in enumerate(chain(stages, skip))
    ]


def matched(stage: int, op) -> tuple:
    """The key under which the peer posts the other end of ``op``."""
    return (op.peer, stage, op.micro, op.link, op.kind) if op.send else (stage, op.peer, op.micro, op.link, op.kind)


# A tensor that skipped a stage would not be covered by the progress argument (with 1F1B, a
# stage could then wait on two peers at once); the compiler's pipelines are chains (below).
CASES = [(s, m, sched, False) for s in (2, 3, 4, 6) for m in (1, 2, 3, 5, 8) for sched in SCHEDULES]


@pytest.mark.parametrize("spec", ["pp4", "tp2pp2sp", "dp2pp2", "pp4ckpt"])
def test_the_compilers_pipelines_are_chains(spec):
    from hotswitch.backend.graph.compile import compile_graph
    from hotswitch.backend.graph.logical import LogicalGraph
    from hotswitch.backend.models.config import get_config
    from hotswitch.backend.strategy import Strategy

    strategy = Strategy.parse(spec)
    graph = LogicalGraph.build(get_config("tiny"), [strategy])
    for rank in range(strategy.world_size):
        stage = compile_graph(graph, strategy, rank)
        assert all(link.peer_stage == stage.stage - 1 for link in stage.receives)
        assert all(link.peer_stage == stage.stage + 1 for link in stage.sends)


@pytest.mark.parametrize(("stages", "micros", "schedule", "skip"), CASES)
def test_both_ends_post_in_the_same_order(stages, micros, schedule, skip):
    sent, received = {}, {}
    for stage, plan in enumerate(plans(stages, micros, schedule, skip)):
        for ops in plan:
            for op in ops:
                pair = (stage, op.peer) if op.send else (op.peer, stage)
                (sent if op.send else received).setdefault(pair, []).append(matched(stage, op))
    assert sent == received


def deadlocks(plan) -> bool:
    """Whether posting each exchange as a group, and waiting for all of it before the next,
    gets stuck: an operation completes once its peer has posted the other end (the two then
    complete together), and a stage moves on once its whole exchange has completed."""
    stages = len(plan)
    at, done = [0] * stages, [set() for _ in range(stages)]
    while any(at[s] < len(plan[s]) for s in range(stages)):
        posted = {(s, matched(s, op)) for s in range(stages) if at[s] < len(plan[s]) for op in plan[s][at[s]]}
        for s in range(stages):
            if at[s] < len(plan[s]):
                done[s] |= {op for op in plan[s][at[s]] if (op.peer, matched(s, op)) in posted}
        ready = [s for s in range(stages) if at[s] < len(plan[s]) and set(plan[s][at[s]]) <= done[s]]
        if not ready:
            return True
        for s in ready:
            at[s] += 1
    return False


@pytest.mark.parametrize(("stages", "micros", "schedule", "skip"), CASES)
def test_exchanges_posted_as_groups_never_deadlock(stages, micros, schedule, skip):
    assert not deadlocks(plans(stages, micros, schedule, skip))


def test_sends_posted_apart_from_receives_would_deadlock_on_nccl():
    # each exchange split in two groups, sends first: in 1F1B's steady state two neighbours
    # both send and wait, each for a receive the other has queued behind its own send
    split = [[part for ops in plan for part in ([o for o in ops if o.send], [o for o in ops if not o.send]) if part]
             for plan in plans(4, 8, "1f1b", False)]  # fmt: skip
    assert deadlocks(split)


def test_a_skipping_tensor_keeps_the_order_rule():
    for schedule in SCHEDULES:
        test_both_ends_post_in_the_same_order(4, 5, schedule, True)
