"""Context parallelism in planning: memory per cp rank, the checks before launch, auto's cp
candidates, and auto choosing cp for a long-context batch on a virtual cluster."""

import pytest

from hotswitch.backend import Strategy, get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.contenders import sim_candidates
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.train.planning.auto import (
    CONTEXT_PARALLEL_FROM,
    auto_candidates,
    auto_plan,
    candidate_strategies,
    pareto,
)
from hotswitch.backend.train.planning.context import check_context, in_flight_bytes, local_tokens, ulysses_fits
from hotswitch.backend.train.planning.dispatch import instantiation_strategy
from hotswitch.backend.train.planning.memory import activation_bytes, kept_activation_bytes, model_state_bytes

BF16 = Precision.of("bf16")


def test_a_cp_rank_holds_two_padded_zig_zag_chunks():
    assert local_tokens(4096, 1) == 4096
    assert local_tokens(4096, 4) == 1024
    assert local_tokens(4097, 4) == 2 * 513  # odd lengths are padded per chunk, not refused
    assert local_tokens(3, 2) == 2


@pytest.mark.parametrize("spec", ["dp1cp4", "dp2cp2tp2sp", "dp1ul4", "cp2tp2ckpt"])
def test_activations_per_device_are_divided_by_cp_plus_what_travels(spec):
    config, s = get_config("7b"), Strategy.parse(spec)
    alone = Strategy(dp=s.dp, tp=s.tp, pp=s.pp, sp=s.sp, ckpt=s.ckpt)
    kept = kept_activation_bytes(config, s, 32768, BF16)
    assert kept == kept_activation_bytes(config, alone, 32768 // s.cp, BF16)
    extra = activation_bytes(config, s, 32768, BF16) - activation_bytes(config, alone, 32768 // s.cp, BF16)
    assert extra == in_flight_bytes(config, s, 32768, BF16) > 0
    assert model_state_bytes(config, s, BF16) == model_state_bytes(config, alone, BF16)  # replicated over cp


def test_cp_that_does_not_divide_the_world_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"cp=3 does not divide the 8 devices; choose a context-parallel degree"):
        check_context(get_config("7b"), Strategy.parse("dp1cp3"), 8)
    assert check_context(get_config("7b"), Strategy.parse("dp2cp4"), 8) == (Strategy.parse("dp2cp4"), None)


def test_ulysses_whose_heads_do_not_split_falls_back_to_ring_with_a_notice():
    config = get_config("13b")  # 40 heads
    assert ulysses_fits(config, Strategy.parse("ul8")) and not ulysses_fits(config, Strategy.parse("ul16"))
    runs, notice = check_context(config, Strategy.parse("ul16"), 16)
    assert runs == Strategy.parse("cp16")
    assert "Ulysses cannot split 13b's 40 heads" in notice and "running ring attention instead (dp1cp16" in notice
    setup = Setup(config, 16, 4096, [4096] * 16)
    assert setup.check(Strategy.parse("ul16")) == Strategy.parse("cp16") and setup.notices == [notice]


def test_auto_considers_cp_only_when_asked_and_ulysses_only_where_heads_split():
    config = get_config("13b")
    assert all(s.cp == 1 for s in candidate_strategies(config, 16))
    with_cp = candidate_strategies(config, 16, context_parallel=True)
    names = {str(s) for s in with_cp}
    assert {"dp2cp8tp1pp1", "dp2ul8tp1pp1", "dp1cp2tp8pp1sp", "dp1cp16tp1pp1"} <= names
    assert "dp1ul16tp1pp1" not in names and "dp1ul2tp8pp1sp" not in names  # 40 heads, 5 per tp rank
    assert all(s.world_size == 16 for s in with_cp)


def test_a_trainers_auto_weighs_cp_from_long_sequences_unless_told():
    config = get_config("13b")
    cp_in = [any(s.cp > 1 for s in auto_candidates(config, 16, n, None)) for n in (2048, CONTEXT_PARALLEL_FROM)]
    assert cp_in == [False, True]
    assert any(s.cp > 1 for s in auto_candidates(config, 16, 256, True))
    assert all(s.cp == 1 for s in auto_candidates(config, 16, 65536, False))


def test_auto_picks_cp_for_the_longest_documents_of_a_long_context_batch():
    config = get_config("7b").with_(max_seq_len=131072)
    lengths = [131072, 65536] + [2048] * 14
    predicted = {}
    for cp in (False, True):
        setup = Setup(config, 8, 131072, lengths, planned_switches=False, context_parallel=cp)
        setup.switches.estimate = True
        candidates = sim_candidates(setup)
        instantiation = instantiation_strategy(candidates)
        plan, predicted[cp] = auto_plan(lengths, setup.cost_model(candidates, instantiation), instantiation, 131072)
    assert plan.buckets[0].strategy.cp > 1 and plan.buckets[-1].strategy.cp == 1  # cp long, dp short
    assert predicted[True] < predicted[False]


def test_latency_aware_pruning_keeps_the_layouts_that_shorten_one_long_document():
    config = get_config("7b").with_(max_seq_len=65536)
    lengths = [65536] + [1024] * 15
    setup = Setup(config, 8, 65536, lengths, planned_switches=False)
    candidates = sim_candidates(setup)
    cost = setup.cost_model(candidates, instantiation_strategy(candidates))
    plain, aware = (set(pareto(cost, sorted(set(lengths)), 65536, latency_aware=a)) for a in (False, True))
    assert plain <= aware  # a stricter "beats": every strategy kept before is kept
    holding = [s for s in candidates if cost.fits(s, 65536)]
    assert min(holding, key=lambda s: cost.strategies[s].micro_batch_s(1, 65536)) in aware
