"""Expert parallelism in the simulator: the all-to-alls' bytes, the experts' memory split over ep,
the imbalance of routing, the layouts ``auto`` weighs, and what is refused."""

import random

import pytest

from hotswitch.backend import Strategy
from hotswitch.backend.models.config import get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.compute import SimulatedStrategy
from hotswitch.backend.sim.contenders import run_auto, sim_candidates, within_servers
from hotswitch.backend.sim.device import PRESETS
from hotswitch.backend.sim.expert_parallel import ExpertTraffic, uniform_imbalance
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.sim.switch_bound import bound_seconds
from hotswitch.backend.train.planning.memory import expert_params, model_state_bytes

H200 = PRESETS["H200"]
MOE = get_config("tiny-moe")  # 4 routed layers of 8 experts, 2 a token, dim 64
BF16 = Precision.of("bf16")


def simulated(strategy: str, gpus: int, imbalance: float = 1.0) -> SimulatedStrategy:
    return SimulatedStrategy(MOE, Strategy.parse(strategy), H200.cluster(gpus), H200, BF16, imbalance)


def test_the_all_to_alls_move_each_ranks_routed_rows_to_its_peers_as_counted_by_hand():
    tokens = 1000
    rows = tokens * 2 * 64 * 2  # tokens x experts a token x dim x bf16
    ids = tokens * 2 * 8  # each row's expert id, int64, forward only
    # 4 devices in one server: (ep - 1) / ep of every exchange over NVLink; per routed layer
    # dispatch and combine forward, their gradients backward, and the ids once
    inside = (4 * rows + ids) * 3 / 4 / H200.intra_bw
    assert simulated("dp1ep4", 4).comm_s(tokens) == pytest.approx(4 * inside)
    assert simulated("dp4", 4).comm_s(tokens) == 0.0
    # 16 devices in two servers, ep 8: each group inside one server
    inside_8 = ExpertTraffic(MOE, Strategy(dp=16, ep=8), H200.cluster(16), BF16)
    assert inside_8.members_per_server() == 8
    assert inside_8.seconds(tokens) == pytest.approx(4 * 7 / 8 * (4 * rows + ids) / H200.intra_bw)
    # ep 8 over tp 2: the group spans both servers, 4 on each: 3 of 8 shares over NVLink, 4 of 8
    # through the server's network, which its 8 devices use at once; the slower of the two
    spanning = Strategy(dp=8, ep=8, tp=2)
    traffic = ExpertTraffic(MOE, spanning, H200.cluster(16), BF16)
    assert traffic.members_per_server() == 4
    per_exchange = max(3 / 8 * rows / H200.intra_bw, 8 * 4 / 8 * rows / H200.inter_bw)
    per_ids = max(3 / 8 * ids / H200.intra_bw, 8 * 4 / 8 * ids / H200.inter_bw)
    assert traffic.seconds(tokens) == pytest.approx(4 * (4 * per_exchange + per_ids))


def test_the_busiest_rank_sets_the_pace_and_every_exchange_pays_latency_per_peer():
    even, skewed = simulated("dp1ep4", 4), simulated("dp1ep4", 4, imbalance=1.25)
    assert skewed.comm_s(1000) == pytest.approx(1.25 * even.comm_s(1000))
    # 4 routed layers x (4 row exchanges + counts and ids) x 3 peers
    latency = simulated("dp1ep4", 4).overhead_s() - simulated("dp4", 4).overhead_s()
    assert latency == pytest.approx(4 * 6 * 3 * H200.latency_s)
    # the busiest rank computes its share of the experts' FLOPs times the imbalance
    assert skewed.compute_s(4, 256) > even.compute_s(4, 256) == pytest.approx(simulated("dp4", 4).compute_s(4, 256))


def test_expert_parallelism_splits_the_experts_weights_and_gradients_over_ep():
    experts = expert_params(MOE)
    assert experts == 4 * 8 * 3 * 48 * 64
    per_param = BF16.param_bytes + BF16.grad_bytes
    whole = model_state_bytes(MOE, Strategy(dp=8), BF16)
    for ep in (2, 4, 8):
        split = model_state_bytes(MOE, Strategy(dp=8, ep=ep), BF16)
        assert whole - split == pytest.approx(per_param * experts * (1 - 1 / ep))
    # tensor parallelism replicates the experts: it splits only the rest
    tp = model_state_bytes(MOE, Strategy(dp=4, tp=2), BF16)
    assert tp == pytest.approx(per_param * ((MOE.n_params - experts) / 2 + experts))
    setup = Setup(MOE, 8, 512, [256] * 8, device="H200")
    assert setup.strategy_cost(Strategy(dp=8, ep=8)).static_bytes == pytest.approx(
        model_state_bytes(MOE, Strategy(dp=8, ep=8), BF16)
    )


def test_uniform_routings_imbalance_is_the_expected_busiest_of_multinomial_counts():
    rng = random.Random(0)
    for ep, rows in ((4, 2048), (8, 1024), (32, 256)):
        draws = []
        for _ in range(200):
            counts = [0] * ep
            for _ in range(ep * rows):
                counts[rng.randrange(ep)] += 1
            draws.append(max(counts) / rows)
        assert uniform_imbalance(rows, ep) == pytest.approx(sum(draws) / len(draws), rel=0.01)
    assert uniform_imbalance(4096, 1) == 1.0


def test_invalid_expert_layouts_are_refused_naming_the_fix():
    setup = Setup(MOE, 6, 512, [256] * 6, device="H200")
    with pytest.raises(ValueError, match="does not divide tiny-moe's 8 experts; choose ep dividing the expert count"):
        setup.check(Strategy(dp=6, ep=3))
    with pytest.raises(ValueError, match=r"ep=4 must divide the data-parallel replicas \(dp=6\)"):
        Strategy(dp=6, ep=4)
    dense = Setup("tiny", 4, 512, [256] * 4, device="H200")
    with pytest.raises(ValueError, match="has none; drop ep"):
        dense.check(Strategy(dp=4, ep=2))
    with pytest.raises(ValueError, match="give it without ep"):
        Setup(MOE, 8, 512, [256] * 8, device="H200").cost_model([Strategy(dp=8, ep=8)], Strategy(dp=8, ep=8))


def test_auto_weighs_expert_layouts_for_a_mixture_only_and_keeps_groups_inside_servers():
    setup = Setup(MOE, 16, 512, [256] * 16, device="H200")
    candidates = sim_candidates(setup)
    assert Strategy(dp=16, ep=8) in candidates and Strategy(dp=16, ep=8, ckpt=True) in candidates
    assert not any(s.ep > 1 for s in sim_candidates(Setup("tiny", 16, 512, [256] * 16, device="H200")))
    assert within_servers([Strategy(dp=8, tp=2, ep=8)], 8) == [Strategy(dp=8, tp=2, ep=4)]
    assert within_servers([Strategy(dp=8, ep=8)], 8) == []  # already inside one
    found = run_auto(setup)
    assert found.step is not None and found.instantiation is not None and found.instantiation.ep == 1


def test_switching_into_split_experts_is_local_and_gathering_them_is_not():
    cluster = H200.cluster(8)
    nbytes = 2.0 * MOE.n_params
    experts = 2.0 * expert_params(MOE)
    into = bound_seconds(Strategy(dp=8), Strategy(dp=8, ep=8), cluster, nbytes, 0.0, expert_bytes=experts)
    back = bound_seconds(Strategy(dp=8, ep=8), Strategy(dp=8), cluster, nbytes, 0.0, expert_bytes=experts)
    assert into == 0.0  # every rank already holds its experts
    # every rank gathers the 7 of 8 expert slices it lacks from its server's peers
    assert back == pytest.approx(experts * 7 / 8 / cluster.intra_bw)
