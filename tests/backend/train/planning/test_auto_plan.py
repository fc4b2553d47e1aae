"""Choosing strategies and bucket boundaries from a cost model (no processes needed)."""

import pytest

from hotswitch.backend import Strategy, get_config
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.train.planning.auto import (
    auto_plan,
    candidate_strategies,
    check_feasible,
    pareto,
    with_selective,
)
from hotswitch.backend.train.planning.cost import CostModel, LinkProfile, Quadratic, StrategyCost, per_sequence
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy

DP4, DP2TP2, TP4 = (Strategy.parse(s) for s in ("dp4", "dp2tp2", "tp4"))


def seqs(lengths):
    return [Sequence(i, (0,) * (n + 1)) for i, n in enumerate(lengths)]


def model(budget=1000.0, switch=0.01):
    # per replica: tp is slower per sequence (communication) but needs less memory per device
    costs = {
        DP4: StrategyCost(Quadratic(0, 1.0, 0), Quadratic(0, 4.0, 0), 0.0, 0.0),
        DP2TP2: StrategyCost(Quadratic(0, 1.5, 0), Quadratic(0, 2.0, 0), 0.0, 0.0),
        TP4: StrategyCost(Quadratic(0, 2.5, 0), Quadratic(0, 1.0, 0), 0.0, 0.0),
    }
    switches = {(w, a, b): switch for w in ("params", "grads") for a in costs for b in costs if a != b}
    return CostModel(costs, budget, LinkProfile(1e9, 1e-5, 1e9), 0.0, switches, token_budget=1)


def test_quadratic_fit_recovers_a_curve_and_never_goes_negative():
    fit = Quadratic.fit([16, 64, 128, 256], [2e-6 * n * n + 3e-4 * n + 0.01 for n in (16, 64, 128, 256)])
    assert fit.a == pytest.approx(2e-6) and fit.b == pytest.approx(3e-4) and fit.c == pytest.approx(0.01)
    flat = Quadratic.fit([1, 2, 3], [5.0, 4.0, 3.0])
    assert min(flat.a, flat.b, flat.c) >= 0


def test_quadratic_fit_holds_short_lengths_as_well_as_long_ones():
    # per-sequence seconds measured for dp4 on 4 CPU ranks (tokens/s falls a little with length)
    lengths = [32, 64, 128, 256, 512, 1024]
    seconds = [n / rate for n, rate in zip(lengths, [2544, 2641, 2438, 2294, 1975, 1822])]
    fit = Quadratic.fit(lengths, seconds)
    assert all(abs(fit(n) - t) / t < 0.1 for n, t in zip(lengths, seconds))


def test_a_profile_splits_micro_batches_into_a_fixed_cost_and_seconds_per_sequence():
    overhead, per = 0.05, [0.01, 0.03, 0.1]  # at lengths whose budget holds 8, 4 and 1 sequences
    rows = [8, 4, 1]
    filled = [overhead + r * t for r, t in zip(rows, per)]
    found, seconds = per_sequence(overhead + per[0], filled, rows)
    assert found == pytest.approx(overhead) and seconds == pytest.approx(per)
    # a single sequence far slower than its share: the fixed cost stops at half a micro-batch
    capped, _ = per_sequence(10.0, filled, rows)
    assert capped == pytest.approx(min(filled) / 2)
    assert per_sequence(0.1, [0.1], [1]) == (0.0, [0.1])  # one sequence fills the budget: no split


def test_auto_sends_long_sequences_to_tensor_parallelism_and_short_ones_to_data_parallelism():
    lengths = [10] * 40 + [100] * 8 + [900] * 2
    plan, predicted = auto_plan(lengths, model(), TP4, max_len=900)
    assigned = {b.strategy: b.above for b in plan.buckets}
    assert plan.buckets[0].strategy == TP4 and plan.buckets[-1].strategy == DP4
    assert 100 <= assigned[TP4] < 900 and assigned[DP4] == 0
    static_tp4 = model().static_step_s(TP4, lengths)
    assert predicted < static_tp4


def test_each_faster_strategy_takes_every_sequence_it_can_hold_between_length_quantiles():
    lengths = list(range(10, 1000, 10))  # quantiles 250, 330, 500, 580: capacities 270 and 540 fall between
    plan, _ = auto_plan(lengths, model(budget=1080.0, switch=0.0), TP4, max_len=990)
    assert [(b.strategy, b.above) for b in plan.buckets] == [(TP4, 540), (DP2TP2, 270), (DP4, 0)]


def test_when_everything_fits_and_switches_are_dear_auto_trains_statically():
    plan, _ = auto_plan([10] * 40 + [100] * 8, model(budget=1e9, switch=100.0), TP4, max_len=100)
    assert plan.strategies == (DP4,)


def test_a_sequence_no_strategy_can_hold_is_refused():
    with pytest.raises(ValueError, match=r"no strategy holds sequences of 2000 tokens.*raise the memory budget"):
        auto_plan([10, 2000], model(), TP4, max_len=2000)


def test_an_infeasible_bucket_list_is_refused_naming_the_strategy():
    with pytest.raises(ValueError, match=r"dp4tp1pp1 cannot hold sequences of 900 tokens.*at most 250"):
        check_feasible(HotSwitchPlan.of("dp4"), model(), 900)
    check_feasible(HotSwitchPlan.of([("tp4", 200), ("dp4", 0)]), model(), 900)


def test_a_bucket_is_checked_at_most_at_the_longest_sequence_the_run_can_send_it():
    # max_len 200: tp4's bucket (above 600) gets nothing, so dp4's sequences are at most 200
    # tokens long, which it holds (250), not 600
    check_feasible(HotSwitchPlan.of([("tp4", 600), ("dp4", 0)]), model(), 200)
    with pytest.raises(ValueError, match=r"dp4tp1pp1 cannot hold sequences of 300 tokens"):
        check_feasible(HotSwitchPlan.of([("tp4", 600), ("dp4", 0)]), model(), 300)


def test_plan_validation_and_order():
    with pytest.raises(ValueError, match="one of them 0"):
        HotSwitchPlan.of([("tp4", 100), ("dp4", 50)])
    with pytest.raises(ValueError, match="different device counts"):
        HotSwitchPlan.of([("tp4", 100), ("dp2", 0)])
    plan = HotSwitchPlan.of([("dp4", 0), ("tp4", 256), ("dp2tp2", 64)])
    assert [str(b) for b in plan.buckets] == ["dp1tp4pp1(L>256)", "dp2tp2pp1(L>64)", "dp4tp1pp1(L>0)"]
    assert instantiation_strategy(plan.strategies) == TP4
    # HotSPa's order: shortest first, back to the instantiation strategy for the longest
    assert execution_order(plan.strategies, TP4, lambda a, b: 0.0) == (DP4, DP2TP2, TP4)
    dear = {(TP4, DP4): 5.0}
    assert execution_order(plan.strategies, TP4, lambda a, b: dear.get((a, b), 1.0))[0] == DP2TP2
    assert [str(s) for s in candidate_strategies(get_config("tiny"), 4)] == [
        "dp1tp4pp1",
        "dp1tp4pp1sp",
        "dp1tp2pp2",
        "dp1tp2pp2sp",
        "dp1tp1pp4",
        "dp2tp2pp1",
        "dp2tp2pp1sp",
        "dp2tp1pp2",
        "dp4tp1pp1",
        "dp4tp1pp1ckpt",
    ]


def test_strategies_another_one_beats_are_left_out_of_the_search():
    cost = model()
    slow = Strategy.parse("tp4sp")  # as slow as tp4 and no more memory-saving: redundant
    cost.strategies[slow] = StrategyCost(Quadratic(0, 2.6, 0), Quadratic(0, 1.0, 0), 0.0, 0.0)
    assert pareto(cost, [10, 100, 900], 900) == [DP4, DP2TP2, TP4]
    cost.strategies[slow] = StrategyCost(Quadratic(0, 2.6, 0), Quadratic(0, 0.5, 0), 0.0, 0.0)
    assert pareto(cost, [10, 100, 900], 2000) == [DP4, DP2TP2, TP4, slow]  # holds longer sequences


def test_a_micro_batch_overhead_paid_by_few_rows_counts_against_a_strategy():
    cost = model(budget=1000.0)
    cost.token_budget = 1000
    sp = Strategy.parse("tp4sp")  # faster per sequence than tp4 (2.5 L), but every micro-batch pays 475
    cost.strategies[sp] = StrategyCost(Quadratic(0, 2.0, 0), Quadratic(0, 1.0, 0), 0.0, 0.0, 1.0, 475.0)
    assert cost.sequence_s(sp, 500) == pytest.approx((475 + 2 * 2.0 * 500) / 2)  # two rows of 500 fit
    assert sp not in pareto(cost, [900], 900)  # one row of 900 per micro-batch: 2275 against 2250
    assert sp in pareto(cost, [10], 900)  # a hundred rows of 10 share it: 24.75 against 25


def test_speed_in_the_search_is_the_whole_clusters_not_one_replicas():
    cost = model()
    # dp4: slower than tp4 on one replica, but its four replicas work at once
    cost.strategies[DP4] = StrategyCost(Quadratic(0, 2.8, 0), Quadratic(0, 4.0, 0), 0.0, 0.0)
    assert DP4 in pareto(cost, [10, 100], 900)
    cost.strategies[DP4] = StrategyCost(Quadratic(0, 11.0, 0), Quadratic(0, 4.0, 0), 0.0, 0.0)
    assert DP4 not in pareto(cost, [10, 100], 900)  # 11/4 per sequence: tp4 is faster and holds more
    tp1pp4 = Strategy.parse("pp4")  # a pipeline's overlap counts too
    cost.strategies[tp1pp4] = StrategyCost(Quadratic(0, 3.0, 0), Quadratic(0, 1.0, 0), 0.0, 0.0, 0.25)
    assert tp1pp4 in pareto(cost, [10, 100], 900)
    # ... but steady state leaves out its fill and drain: it never prunes a shallower pipeline
    assert TP4 in pareto(cost, [10, 100], 900)
    cost.strategies[TP4] = StrategyCost(Quadratic(0, 0.5, 0), Quadratic(0, 1.0, 0), 0.0, 0.0)
    assert tp1pp4 not in pareto(cost, [10, 100], 900)  # the shallower one prunes it when faster


def test_every_micro_batch_pays_the_measured_overhead_once():
    cost = model()
    cost.token_budget = 100  # [100] and [50, 50]: two micro-batches
    cost.strategies[TP4] = StrategyCost(Quadratic(0, 1.0, 0), Quadratic(0, 1.0, 0), 0.0, 0.0, 1.0, 5.0)
    assert cost.group_s(TP4, [50, 100, 50]) == pytest.approx((5 + 100) + (5 + 2 * 50))


def test_a_micro_batch_holds_what_fits_in_memory_and_the_engine_packs_as_predicted():
    cost = model(budget=1000.0)
    cost.token_budget = 10_000
    cost.strategies[TP4] = StrategyCost(Quadratic(0, 1.0, 0), Quadratic(0, 1.0, 0), 100.0, 0.0, 1.0, 5.0)
    assert cost.max_rows(TP4, 300) == 3 and cost.max_rows(TP4, 900) == 1 and cost.max_rows(TP4, 950) == 1
    lengths = [300, 300, 300, 300, 100]  # [300 x 3] within 900 bytes, then [300, 100]
    assert [[s.length for s in m] for m in cost.micro_batching().split(TP4, seqs(lengths))[0]] == [
        [300] * 3,
        [300, 100],
    ]
    assert cost.group_s(TP4, lengths) == pytest.approx((5 + 3 * 300) + (5 + 2 * 300))


def test_a_pipeline_group_costs_its_longest_micro_batch_plus_the_measured_increment_of_the_rest():
    tp2pp2 = Strategy.parse("tp2pp2")
    cost = model()
    cost.token_budget = 100  # one micro-batch per 100-token sequence
    for increment, expected in ((0.5, 100 + 0.5 * 300), (1.0, 400)):  # ideal 2-stage overlap; stages sharing cores
        cost.strategies[tp2pp2] = StrategyCost(Quadratic(0, 1.0, 0), Quadratic(0, 1.0, 0), 0.0, 0.0, increment)
        assert cost.group_s(tp2pp2, [100] * 4) == pytest.approx(expected)
    assert cost.group_s(DP4, [100] * 8) == pytest.approx(200)  # no pipeline: two micro-batches per replica, in turn


def test_under_a_tight_budget_checkpointed_data_parallelism_can_beat_tensor_parallelism():
    # dp4ckpt recomputes every block (a third slower than dp4) but keeps a fraction of dp4's
    # activations: it holds sequences dp4 cannot, and is still faster than tp4 there
    dp4ckpt = Strategy(dp=4, ckpt=True)
    cost = model(budget=1000.0)
    costs = {**cost.strategies, dp4ckpt: StrategyCost(Quadratic(0, 1.33, 0), Quadratic(0, 1.2, 0), 0.0, 0.0)}
    switches = {(w, a, b): 0.01 for w in ("params", "grads") for a in costs for b in costs if a != b}
    with_ckpt = CostModel(costs, 1000.0, LinkProfile(1e9, 1e-5, 1e9), 0.0, switches, token_budget=1)
    lengths = [10] * 40 + [400] * 8 + [800] * 2
    plan, predicted = auto_plan(lengths, with_ckpt, TP4, max_len=800)
    _, without = auto_plan(lengths, cost, TP4, max_len=800)
    assert dp4ckpt in plan.strategies and predicted < without
    # with room to spare, the recomputation is not worth it
    relaxed = CostModel(costs, 1e6, LinkProfile(1e9, 1e-5, 1e9), 0.0, switches, token_budget=1)
    assert dp4ckpt not in auto_plan(lengths, relaxed, TP4, max_len=800)[0].strategies


def test_selective_recompute_variants_are_weighed_only_where_they_let_a_bucket_fit():
    assert [str(s) for s in with_selective([DP4, Strategy.parse("dp4ckpt")])] == [
        "dp4tp1pp1",
        "dp4tp1pp1ckpt",
        "dp4tp1pp1sel",
    ]
    cost = model()
    selective = Strategy.parse("dp4sel")  # a little slower than dp4, keeps 0.6 of its activations
    cost.strategies[selective] = StrategyCost(Quadratic(0, 1.05, 0), Quadratic(0, 2.4, 0), 0.0, 0.0)
    assert selective in pareto(cost, [10, 100, 400], 900)  # holds 416 tokens where dp4 holds 250
    plan, _ = auto_plan([10, 100, 400, 900], cost, TP4, 900)
    assert selective in plan.strategies  # the bucket of 400 runs on dp4sel rather than dp2tp2
    cost.strategies[selective] = StrategyCost(Quadratic(0, 1.05, 0), Quadratic(0, 4.0, 0), 0.0, 0.0)
    assert selective not in pareto(cost, [10, 100, 400], 900)  # fits nothing longer: dp4 beats it
