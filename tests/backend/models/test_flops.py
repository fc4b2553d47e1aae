"""Training FLOPs by PaLM's convention, checked against a count of the model's own matmuls."""

import pytest

from hotswitch.backend.models.config import get_config
from hotswitch.backend.models.flops import matmul_params, peak_flops, train_flops


def test_matmul_weights_are_every_linear_layer():
    config = get_config("tiny")
    shapes = config.param_shapes()
    linear = sum(
        rows * cols for name, (rows, *rest) in shapes.items() for cols in rest if name != "tok_embeddings.weight"
    )
    assert matmul_params(config) == linear


def test_flops_grow_linearly_in_weights_and_quadratically_in_attention():
    config = get_config("1b")
    dense = 6 * matmul_params(config)
    assert train_flops(config, 1) == pytest.approx(dense + 12 * config.n_layers * config.dim)
    assert train_flops(config, 4096) - 2 * train_flops(config, 2048) == pytest.approx(
        12 * config.n_layers * config.dim * 2048 * 2048 * 2
    )


def test_device_peaks_are_found_by_name():
    assert peak_flops("NVIDIA H100 80GB HBM3") == pytest.approx(989.4e12)
    assert peak_flops("NVIDIA A800-SXM4-80GB") == 312e12
    assert peak_flops("cpu") is None
