"""Per-strategy costs from FLOPs and bytes: the terms a simulated micro-batch is made of."""

import pytest

from hotswitch.backend import Strategy
from hotswitch.backend.models.flops import matmul_params, train_flops
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.compute import Links, SimulatedStrategy, executed_flops, ring_s
from hotswitch.backend.sim.device import PRESETS, device_spec
from hotswitch.backend.sim.scenario import sim_model

A800 = PRESETS["A800"]
CONFIG = sim_model("7b")
BF16 = Precision.of("bf16")


def simulated(strategy: str, gpus: int = 8) -> SimulatedStrategy:
    return SimulatedStrategy(CONFIG, Strategy.parse(strategy), A800.cluster(gpus), A800, BF16)


def test_executed_flops_are_the_dense_matmuls_plus_a_causal_fused_attention():
    n = 4096
    dense = 6 * matmul_params(CONFIG) * n
    palm_attention = train_flops(CONFIG, n) - dense  # PaLM counts all L x L scores, forward 1x, backward 2x
    assert executed_flops(CONFIG, n) == pytest.approx(dense + palm_attention * 7 / 12)
    # checkpointing runs the forward (a third of the dense work) once more
    assert executed_flops(CONFIG, n, ckpt=True) - executed_flops(CONFIG, n) == pytest.approx(
        dense / 3 + palm_attention / 6
    )


def test_a_ring_all_reduce_moves_twice_the_bytes_less_one_share_and_pays_latency_per_step():
    assert ring_s(8e9, 1, 1e9, 1e-5) == 0.0
    assert ring_s(8e9, 4, 1e9, 1e-5) == pytest.approx(2 * (0.75 * 8 + 3e-5))
    assert ring_s(8e9, 4, 1e9, 1e-5, passes=1) == pytest.approx(0.75 * 8 + 3e-5)


def test_groups_inside_a_server_use_nvlink_and_groups_across_servers_share_the_network():
    inside = Links.of(Strategy.parse("dp2tp4"), A800.cluster(8))
    assert inside.tp_bw == inside.dp_bw == inside.pp_bw == A800.intra_bw
    across = Links.of(Strategy.parse("dp2tp16"), A800.cluster(32))
    assert across.tp_bw == A800.inter_bw  # one ring per server crosses its network
    assert across.dp_bw == A800.inter_bw / 8  # eight dp rings (one per tp rank on a server) share it
    assert Links.of(Strategy.parse("dp16"), A800.cluster(16)).dp_bw == A800.inter_bw
    assert Links.of(Strategy.parse("dp8tp2"), A800.cluster(16)).dp_bw == A800.inter_bw / 2


def test_efficiency_grows_with_the_micro_batch_and_stays_below_the_documented_mfu():
    half = round(A800.half_work / 4096)
    small, large = A800.efficiency(half, 4096, 1), A800.efficiency(32768, 4096, 1)
    assert small == pytest.approx(A800.max_mfu / 2, rel=1e-3)
    assert small < large < A800.max_mfu
    # tensor parallelism shrinks each device's multiplies
    assert A800.efficiency(4096, 4096, 8) < A800.efficiency(4096, 4096, 1)


def test_tensor_parallelism_adds_collectives_and_latency_that_data_parallelism_does_not_pay():
    dp, tp = simulated("dp8"), simulated("tp8")
    assert dp.collectives() == 0 and dp.comm_s(4096) == 0.0
    assert dp.overhead_s() == pytest.approx(CONFIG.n_layers * A800.layer_overhead_s)  # the calibrated fixed cost
    assert tp.collectives() == 4 * CONFIG.n_layers
    assert tp.comm_s(4096) == pytest.approx(tp.collectives() * ring_s(4096 * CONFIG.dim * 2, 8, A800.intra_bw, 0.0))
    assert simulated("tp8ckpt").collectives() == 6 * CONFIG.n_layers
    assert simulated("tp8sp").collectives() == 5 * CONFIG.n_layers  # the inputs all-gathered again in backward


def test_the_fitted_cost_reproduces_the_micro_batch_it_was_fitted_to():
    s = simulated("dp2tp4")
    cost = s.cost([512, 1024, 2048, 4096, 8192], token_budget=4096)
    for rows, n in ((8, 512), (1, 4096), (1, 8192)):
        # a quadratic in L cannot follow the efficiency rising past the token budget (8K alone)
        assert cost.micro_batch_s(rows, n) == pytest.approx(s.micro_batch_s(rows, n), rel=0.08)
    assert cost.increment == 1.0 and cost.sync_s == pytest.approx(s.sync_s())
    assert simulated("dp2tp2pp2").cost([512, 4096], 4096).increment == 0.5  # 1F1B over two stages


def test_unknown_devices_are_refused_with_the_presets_named():
    assert device_spec("NVIDIA H100 80GB HBM3") is PRESETS["H100"]
    with pytest.raises(ValueError, match=r"unknown device 'TPUv5'.*A800, H800, H100, H200"):
        device_spec("TPUv5")


def test_selective_recompute_keeps_less_and_pays_its_elementwise_traffic_only():
    plain, selective = simulated("tp8sp"), simulated("tp8spsel")
    length = 32768
    freed = plain.cost([length], length).memory(length) - selective.cost([length], length).memory(length)
    # kept: norms' outputs (2 x dim / tp) and the FFN's activation (2 x ffn / tp) less, in bf16,
    # every layer; at the peak one layer's recomputed values live again
    assert freed == pytest.approx(2 * 2 * (CONFIG.dim + CONFIG.ffn_dim) / 8 * length * (CONFIG.n_layers - 1))
    extra = selective.micro_batch_s(1, length) - plain.micro_batch_s(1, length)
    assert extra == pytest.approx(2 * freed / (CONFIG.n_layers - 1) * CONFIG.n_layers / A800.hbm_bw)
    assert 0 < extra < 0.01 * plain.micro_batch_s(1, length)  # no FLOPs: memory-bound, about 0.1%


def test_plans_are_made_on_the_fitted_costs_and_timed_on_the_device():
    from hotswitch.backend.sim.contenders import run_plan
    from hotswitch.backend.sim.scenario import Setup
    from hotswitch.backend.sim.step import simulate_step
    from hotswitch.backend.train.planning.dispatch import HotSwitchPlan

    long = CONFIG.with_(max_seq_len=131072)
    lengths = [131072, 100000, 48000] + [3000] * 20
    setup = Setup(long, 8, 131072, lengths, planned_switches=False)
    strategy = Strategy.parse("dp1tp8pp1spsel")
    fitted = setup.cost_model([strategy], strategy)
    exact = setup.exact_model(fitted)
    for rows, n in ((1, 131072), (1, 48000), (1, 3000), (4, 1024)):  # micro-batches at the device's seconds
        assert exact.strategies[strategy].micro_batch_s(rows, n) == setup.simulated(strategy).micro_batch_s(rows, n)
    assert exact.strategies[strategy].time == fitted.strategies[strategy].time  # the fit still deals them
    run = run_plan(setup, HotSwitchPlan.of(strategy))
    assert run.predicted_s == simulate_step(fitted, run.plan, lengths, strategy, 8).seconds
    assert run.step_s == simulate_step(exact, run.plan, lengths, strategy, 8).seconds
    # a quadratic through 128..128K tokens misses where tp8's efficiency still grows: the fit errs
    assert abs(run.step_s / run.predicted_s - 1) > 0.02
