"""Executable graphs on real gloo ranks give the one-device loss and gradients."""

import pytest

from hotswitch.backend import Strategy
from hotswitch.backend.runtime.spawn import spawn_ranks

from .exec_workers import exec_matches_reference

TOLERANCE = 1e-5
CONFIGS = {
    "gqa": ("tiny", {}),  # 8 query heads sharing 4 key/value heads
    "mha": ("tiny", {"dim": 96, "n_heads": 4, "n_kv_heads": 4, "ffn_dim": 256, "n_layers": 4, "vocab_size": 256}),
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize(
    ("world", "strategies"),
    [
        (4, ["dp4", "tp4", "dp2tp2"]),
        (2, ["dp2", "tp2"]),
        (4, ["tp2pp2", "dp2pp2", "pp4", "dp2tp2sp", "tp4sp"]),
        (2, ["pp2", "tp2sp"]),
    ],
)
def test_loss_and_every_gradient_equal_one_device(config, world, strategies):
    model, changes = CONFIGS[config]
    results = spawn_ranks(exec_matches_reference, world, model, changes, strategies)
    for rank, errors in enumerate(results):
        assert set(errors) == {str(Strategy.parse(s)) for s in strategies}
        for strategy, (loss_error, grad_error) in errors.items():
            assert loss_error <= TOLERANCE, f"rank {rank} {strategy}: loss off by {loss_error:.2e}"
            assert grad_error <= TOLERANCE, f"rank {rank} {strategy}: a gradient off by {grad_error:.2e}"
