"""A frozen parameter (``layout.FROZEN``: a sigmoid router's choice bias, which transformers holds
as a fixed buffer) keeps its loaded value through every update: AdamW's weight decay would shrink
it though no gradient reaches it. Whole or sharded, eager or fused, in fp32 and bf16, on 2 gloo
ranks, the master and the compute copy hold it unchanged while the rest of the model trains."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks

from .optimizer_workers import frozen_through_updates

VARIANTS = [("fp32", False, False), ("fp32", True, False), ("bf16", True, False), ("bf16", False, True)]


@pytest.fixture(scope="module")
def results():
    return spawn_ranks(frozen_through_updates, 2, VARIANTS, timeout=1200)[0]


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v)))
def test_a_frozen_weight_stays_as_loaded_while_the_rest_trains(results, variant):
    frozen, moved = results[variant]
    assert len(frozen) == 4  # one choice bias per routed layer of tiny-moe
    for name, (master, compute) in frozen.items():
        assert (master == 0.5).all() and (compute == 0.5).all(), name
    assert moved > 1e-3  # the router beside it trained (and decayed)
