"""Micro-batches made as the schedule reaches them (``runtime.on_read``): nothing is made before
it is read, each read makes it, and an engine's step collates and moves micro-batch ``m + 1``
only after micro-batch ``m``'s forward has been issued."""

import pytest
import torch

from hotswitch.backend import get_config
from hotswitch.backend.runtime.on_read import OnRead, to_device
from hotswitch.backend.runtime.profile_ranges import FORWARD, INPUTS
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine

from ..train.train_workers import stream

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def test_items_are_made_when_read_and_each_read_makes_one():
    made = []

    def make(x):
        made.append(x)
        return 10 * x

    items = OnRead(make, [1, 2, 3])
    assert len(items) == 3 and made == [], "nothing is made before it is read"
    assert items[1] == 20 and made == [2]
    assert items[0:2] == [10, 20] and made == [2, 1, 2]
    assert list(items) == [10, 20, 30] and len(made) == 6


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=GPU)])
def test_a_host_tensor_reaches_the_device_whole(device):
    """On a GPU through pinned memory, without waiting: the values still arrive, and the host
    tensor may be dropped at once (PyTorch keeps the pinned block until the copy is done)."""
    moved = [to_device(torch.arange(n) * 3, torch.device(device)) for n in (5, 1 << 16, 7)]
    assert all(t.device.type == device for t in moved)
    assert [t.cpu().tolist() for t in moved] == [(torch.arange(n) * 3).tolist() for n in (5, 1 << 16, 7)]


def ranges_in_order(rank: int, world: int) -> list[str]:
    """The step's input and forward ranges, in the order they began, over a batch that the
    token budget cuts into several micro-batches."""
    single = Strategy()
    engine = Engine(get_config("tiny"), [single], single, engine_run(256, seed=0))
    batch = stream().next_batch()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        engine.step({single: batch}, [single])
    began = sorted((e.time_range.start, e.name) for e in profile.events() if e.name in (INPUTS, FORWARD))
    return [name for _, name in began]


def test_a_step_makes_each_micro_batch_after_the_previous_forward_was_issued():
    order = spawn_ranks(ranges_in_order, 1)[0]
    assert order.count(FORWARD) >= 3, f"the budget cuts the batch into several micro-batches: {order}"
    assert order == [INPUTS, FORWARD] * (len(order) // 2), f"inputs all made up front: {order}"
