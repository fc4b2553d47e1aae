"""Local rank processes: a failing rank is reported with its rank."""

import pytest

from hotswitch.backend.runtime.spawn import RankError, spawn_ranks


def _fails_on_rank_two(rank, world):
    if rank == 2:
        raise ValueError("boom")
    return rank


def test_a_failing_rank_is_reported_with_its_rank():
    with pytest.raises(RankError, match=r"\[rank 2\][\s\S]*ValueError: boom"):
        spawn_ranks(_fails_on_rank_two, 3)
