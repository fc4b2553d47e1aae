"""Micro-batches: padding, packing under token and memory budgets, balancing over ranks."""

import pytest
import torch

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models import IGNORE
from hotswitch.backend.parallel.zigzag import pad_rows
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.batching import MicroBatching, balance, collate, long_tensor, pack


def seqs(*lengths):
    return [Sequence(i, tuple(range(n + 1))) for i, n in enumerate(lengths)]


def test_collate_pads_right_and_ignores_padding():
    micro = collate(seqs(3, 5))
    assert micro.shape == (2, 5)
    assert micro.targets[0, 3:].tolist() == [IGNORE, IGNORE] and micro.targets[0, :3].tolist() == [1, 2, 3]
    assert micro.tokens[1].tolist() == [0, 1, 2, 3, 4]


def test_token_ids_become_int64_tensors_of_the_same_values():
    ids = (0, 31999, 2**40, 7)  # beyond int32 too
    assert long_tensor(ids).dtype == torch.long and long_tensor(ids).tolist() == list(ids)
    assert long_tensor(()).shape == (0,) and long_tensor([5]).tolist() == [5]


def test_pack_respects_the_token_budget():
    groups = pack(seqs(100, 90, 40, 30, 30, 300), 200)
    assert [[s.length for s in g] for g in groups] == [[300], [100, 90], [40, 30, 30]]
    assert all(len(g) * g[0].length <= 200 or len(g) == 1 for g in groups)


def test_pack_holds_no_more_rows_than_memory_allows():
    at_most_two = pack(seqs(40, 30, 30, 20, 10), 200, max_rows=lambda length: 2)
    assert [[s.length for s in g] for g in at_most_two] == [[40, 30], [30, 20], [10]]
    by_length = pack(seqs(50, 50, 20, 20, 20, 20), 1000, max_rows=lambda length: 100 // length)
    assert [[s.length for s in g] for g in by_length] == [[50, 50], [20, 20, 20, 20]]


def test_balance_spreads_cost_evenly():
    parts = balance(seqs(8, 7, 6, 5, 4, 3, 2, 1), 2, float)
    loads = [sum(s.length for s in p) for p in parts]
    assert sorted(loads) == [18, 18]


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("spec", ["dp2", "dp2tp2sp", "cp2", "dp2cp2", "cp2tp2sp"])
def test_the_padding_counted_is_the_padding_every_rank_computes(spec, packed):
    strategy = Strategy.parse(spec)
    batch = seqs(37, 120, 5, 64, 63, 9, 200, 17, 17, 1)
    batching = MicroBatching(token_budget=256, packed=packed)
    shares = batching.split(strategy, batch)
    computed = 0
    for micro_batch in (m for share in shares for m in share):
        collated = batching.collate(micro_batch)
        _, targets, _ = pad_rows(collated.tokens, collated.targets, collated.positions, strategy.row_multiple)
        computed += int((targets == IGNORE).sum())
    assert batching.padding(strategy, shares) == computed
    # packed rows pad only to split into chunks; padded rows of unequal lengths always pad
    assert (computed == 0) == (packed and strategy.row_multiple == 1)
