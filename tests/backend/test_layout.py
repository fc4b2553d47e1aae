from fnmatch import fnmatchcase

import pytest

from hotswitch.backend import Replicate, Shard, Strategy, get_config, param_layout
from hotswitch.backend.layout import TP_PLAN, stage_layers, tp_placement, tp_style
from hotswitch.backend.models import build_model
from hotswitch.backend.models.config import Experts


def test_megatron_placements_and_stages():
    config = get_config("tiny")
    layout = param_layout(config, Strategy.parse("dp2tp2pp2"))
    tp = {name: tp_placement(p.state) for name, p in layout.items()}
    assert tp["tok_embeddings.weight"] == Shard(0) and tp["output.weight"] == Shard(0)
    assert tp["layers.0.attention.wq.weight"] == Shard(0) and tp["layers.0.feed_forward.w3.weight"] == Shard(0)
    assert tp["layers.0.attention.wo.weight"] == Shard(1) and tp["layers.0.feed_forward.w2.weight"] == Shard(1)
    assert tp["layers.0.attention_norm.weight"] == Replicate() and tp["norm.weight"] == Replicate()
    assert all(p.state.placements[:2] == (Replicate(), Replicate()) for p in layout.values())  # dp, cp
    assert layout["tok_embeddings.weight"].state.devices == (0, 1, 2, 3)
    assert layout["layers.1.attention.wq.weight"].stage == 0
    assert layout["layers.2.attention.wq.weight"].stage == 1
    assert layout["output.weight"].state.devices == (4, 5, 6, 7)


def test_every_rank_holds_its_share_of_parameters():
    config = get_config("tiny")
    strategy = Strategy.parse("tp4")
    layout = param_layout(config, strategy)
    per_rank = sum(p.state.local_box(0, p.shape).numel for p in layout.values())
    norms = sum(p.shape[0] for n, p in layout.items() if n.endswith("norm.weight"))
    assert per_rank == (config.n_params - norms) // 4 + norms


def test_stage_layers_are_contiguous_and_balanced():
    assert stage_layers(10, 4) == [range(0, 3), range(3, 6), range(6, 8), range(8, 10)]
    with pytest.raises(ValueError, match="lower pp"):
        stage_layers(2, 4)


@pytest.mark.parametrize(
    ("strategy", "message"), [("tp3", "tp=3 does not divide tiny's n_heads=8"), ("pp8", "lower pp")]
)
def test_strategy_that_does_not_fit_the_model(strategy, message):
    with pytest.raises(ValueError, match=message):
        param_layout(get_config("tiny"), Strategy.parse(strategy))


# every option that adds a parameter, on the tiny shape
OPTIONS = {"qkv_bias": True, "o_bias": True, "mlp_bias": True, "qk_norm": "head", "norm_placement": "sandwich"}


def test_every_parameter_matches_exactly_one_tp_plan_entry():
    configs = [get_config(m) for m in ("tiny", "125m", "1b", "32b")] + [get_config("tiny").with_(**OPTIONS)]
    configs.append(get_config("tiny").with_(experts=Experts(count=4, per_token=2, ffn_dim=32, layers=(0,))))
    configs.append(get_config("tiny").with_(experts=Experts(4, 2, 32, shared_ffn_dim=40, shared_gate=True)))
    configs.append(get_config("tiny").with_(experts=Experts(4, 2, 32, scoring="sigmoid", score_bias=True)))
    used = set()
    for config in configs:
        names = [name for name, _ in build_model(config, device="meta").named_parameters()]
        matches = {name: [p for p in TP_PLAN if fnmatchcase(name, p)] for name in names}
        assert {name: found for name, found in matches.items() if len(found) != 1} == {}, config.name
        used |= {found[0] for found in matches.values()}
    assert used == set(TP_PLAN)  # and no entry is dead


def test_a_shared_expert_is_split_over_tp_as_a_dense_feed_forward_and_its_gate_replicated():
    experts = Experts(4, 2, 32, shared_ffn_dim=40, shared_gate=True)
    layout = param_layout(get_config("tiny").with_(experts=experts), Strategy.parse("tp2"))
    tp = {name: tp_placement(p.state) for name, p in layout.items()}
    assert tp["layers.0.feed_forward.shared.w1.weight"] == tp["layers.0.feed_forward.shared.w3.weight"] == Shard(0)
    assert tp["layers.0.feed_forward.shared.w2.weight"] == Shard(1)
    assert tp["layers.0.feed_forward.shared_gate.weight"] == tp["layers.0.feed_forward.experts.w1"] == Replicate()
    with pytest.raises(ValueError, match="tp=4 does not divide tiny's shared expert's ffn_dim=42"):
        param_layout(get_config("tiny").with_(experts=Experts(4, 2, 32, shared_ffn_dim=42)), Strategy.parse("tp4"))


def test_a_parameter_missing_from_the_tp_plan_is_named():
    with pytest.raises(ValueError, match=r"'layers.0.attention.bias' matches no entry of TP_PLAN"):
        tp_style("layers.0.attention.bias")
