"""``ModelConfig.param_shapes`` (torch-free, for planning) is exactly the model's own parameters."""

from math import prod

import pytest
import torch

from hotswitch.backend import get_config
from hotswitch.backend.models.config import Experts
from hotswitch.backend.models.llama import Transformer

CONFIGS = {
    "grouped-query": get_config("tiny"),  # 8 query heads sharing 4 key/value heads
    "multi-head": get_config("125m").with_(n_layers=2),
    "one layer": get_config("tiny").with_(n_layers=1),
    "seven layers, grouped-query": get_config("1b").with_(n_layers=7),
    "7b": get_config("7b"),
    "32b": get_config("32b"),
    "mixture with a gated shared expert, one layer dense": get_config("tiny").with_(
        experts=Experts(4, 2, 32, layers=(0, 2, 3), shared_ffn_dim=40, shared_gate=True)
    ),
    "mixture with an ungated shared expert": get_config("tiny").with_(experts=Experts(4, 2, 32, shared_ffn_dim=40)),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_param_shapes_are_the_meta_models_parameters_in_module_order(case):
    config = CONFIGS[case]
    with torch.device("meta"):
        model = Transformer(config)
    expected = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    assert list(config.param_shapes().items()) == expected
    assert config.n_params == sum(prod(shape) for _, shape in expected)


def test_grouped_query_attention_has_narrower_keys_and_values():
    config = get_config("tiny")
    shapes = config.param_shapes()
    kv = config.n_kv_heads * config.head_size
    assert kv < config.dim
    assert shapes["layers.0.attention.wq.weight"] == (config.dim, config.dim)
    assert shapes["layers.0.attention.wk.weight"] == shapes["layers.0.attention.wv.weight"] == (kv, config.dim)
