"""Context parallelism in the simulator: work per cp rank, the ring hidden behind attention,
Ulysses' all-to-alls, and a hot-switched step mixing cp and dp buckets."""

import itertools

import pytest

from hotswitch.backend import Strategy, get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.compute import SimulatedStrategy, flops_parts
from hotswitch.backend.sim.context_parallel import ContextTraffic, all_to_all_s, ring_bandwidth
from hotswitch.backend.sim.device import device_spec
from hotswitch.backend.sim.paper.context_grid import longest_alone
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.sim.step import simulate_step
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan

BF16 = Precision.of("bf16")
SPEC = device_spec("A800")
CONFIG = get_config("7b").with_(max_seq_len=131072)


def simulated(spec: str, gpus: int = 8) -> SimulatedStrategy:
    return SimulatedStrategy(CONFIG, Strategy.parse(spec), SPEC.cluster(gpus), SPEC, BF16)


def test_compute_per_rank_is_the_sequence_over_cp_and_the_long_ring_hides_behind_attention():
    alone, ring = simulated("dp8"), simulated("dp1cp8")
    parts = flops_parts(CONFIG, 131072)
    assert ring.compute_s(1, 131072) == pytest.approx(alone.flops_s(131072 // 8, *[x / 8 for x in parts]))
    # a block's transfer is shorter than its attention: what remains is the cost of the split
    assert ring.context_s([131072]) == pytest.approx(ring.ring_split_s(131072)) and ring.ring_split_s(131072) > 0
    assert ring.context_s([1024]) > ring.ring_split_s(1024)  # short blocks: the transfer shows
    assert ring.micro_batch_s(1, 131072) < alone.micro_batch_s(1, 131072) / 7


def test_ulysses_pays_its_all_to_alls_and_copies_and_crosses_servers_slower():
    one_server, two = simulated("dp1ul8"), simulated("dp2ul8tp2", gpus=16)
    assert one_server.context_s([65536]) > 0.0
    kv = CONFIG.n_kv_heads * CONFIG.head_size
    per_device = 65536 / 8 * (2 * CONFIG.dim + 2 * kv) * 2
    all_to_alls = CONFIG.n_layers * 2 * per_device * 7 / 8 / SPEC.intra_bw
    copies = CONFIG.n_layers * 2 * 2 * 2 * per_device / SPEC.hbm_bw  # fwd+bwd, two copies, read+write
    assert one_server.context_s([65536]) == pytest.approx(all_to_alls + copies)
    assert one_server.ring_split_s(65536) == 0.0 and simulated("dp1cp8").context.ulysses_copy_bytes(65536) == 0.0
    cluster = SPEC.cluster(16)
    assert all_to_all_s(1e9, two.strategy, cluster) > all_to_all_s(1e9, Strategy.parse("dp2ul4tp2"), cluster)
    assert ring_bandwidth(Strategy.parse("dp1cp4tp4"), cluster) < cluster.intra_bw  # a ring across servers
    assert ContextTraffic(CONFIG, Strategy.parse("dp8"), cluster, BF16).latency_steps() == 0


def test_a_step_mixing_cp_and_dp_buckets_lays_out_on_every_rank():
    lengths = [131072, 40000] + [2000] * 30
    setup = Setup(CONFIG, 8, 131072, lengths, planned_switches=False)
    plan = HotSwitchPlan.of([("dp1cp4tp2sp", 8192), ("dp8", 0)])
    instantiation = Strategy.parse("dp1cp4tp2sp")
    cost = setup.cost_model(list(plan.strategies), instantiation)
    step = simulate_step(cost, plan, lengths, instantiation, 8)
    assert step.seconds == cost.step_s(plan, lengths, instantiation)
    for rank in range(8):
        spans = sorted((s.start, s.end) for s in step.segments if s.rank == rank)
        assert sum(b - a for a, b in spans) == pytest.approx(step.seconds)
        assert all(a[1] == pytest.approx(b[0]) for a, b in itertools.pairwise(spans))
    assert step.breakdown(0)["sync"] > 0  # gradients reduced over dp x cp, even where dp is 1
    assert setup.optimizer_share(instantiation) == CONFIG.n_params / 8  # sharded over dp x cp x tp
    assert cost.switch_cost(instantiation, Strategy.parse("dp8")) > 0  # tp2 shards gathered; back: local


def test_the_longest_document_alone_takes_the_fastest_layout_that_holds_it():
    lengths = [131072, 40000] + [2000] * 30
    plain = Setup(CONFIG, 8, 131072, lengths, planned_switches=False)
    with_cp = Setup(CONFIG, 8, 131072, lengths, planned_switches=False, context_parallel=True)
    instantiation = Strategy.parse("dp1tp8pp1sp")
    seconds, layout = longest_alone(plain, instantiation)
    others = [Strategy.parse(s) for s in ("dp1tp8pp1sp", "dp1tp8pp1spsel", "dp1tp8pp1spckpt", "dp2tp4pp1spckpt")]
    cost = plain.cost_model([Strategy.parse(layout), *others], instantiation)
    assert Strategy.parse(layout).cp == 1 and cost.fits(Strategy.parse(layout), 131072)
    holding = [s for s in others if cost.fits(s, 131072)]
    on_device = {s: plain.simulated(s).micro_batch_s(1, 131072) for s in [*holding, Strategy.parse(layout)]}
    assert holding and all(seconds <= on_device[s] for s in holding)
    assert seconds == on_device[Strategy.parse(layout)]
    cp_seconds, cp_layout = longest_alone(with_cp, instantiation)
    assert Strategy.parse(cp_layout).cp > 1 and cp_seconds < seconds  # more candidates, and one splits it better
    assert longest_alone(plain, None) == (None, None)  # an arm that found no plan


def test_the_groups_arm_weighs_device_groups_beside_cp_against_both_arms():
    from hotswitch.backend.sim.paper.context_grid import context_row

    row = context_row("7b", 8, "commoncrawl", 16384, quick=True, side_by_side=True)
    assert row["auto_groups_s"] > 0 and row["auto_groups_plan"]
    assert row["vs_sequential_auto"] == pytest.approx(row["auto_cp_s"] / row["auto_groups_s"])
    assert row["groups_speedup"] == pytest.approx(row["auto_s"] / row["auto_groups_s"])
    assert 0 < row["floor_cp_s"] <= min(row["auto_cp_s"], row["auto_groups_s"]), "no plan steps below the floor"
    assert row["speedup_ceiling"] >= max(row["speedup"], row["groups_speedup"])
    assert "auto_groups_s" not in context_row("7b", 8, "commoncrawl", 4096, quick=True)  # only when asked
