"""Expert parallelism trains exactly as one device (4 gloo ranks): the experts split over ep
ranks, tokens sent to them and back by all-to-all, under ep alone, ep with data parallelism,
with tensor (and sequence) parallelism, in a pipeline with experts in both stages, and
hot-switched between expert layouts within each step: per-step loss within 1e-5 and every
gradient at step 1 within 3e-5 of one device; with the load-balancing auxiliary loss too,
under ep with dp and tp, in pipelines, with a sequence's tokens split (sp, cp ring and
Ulysses), and hot-switched; and GLM-4.5's sigmoid router, from a checkpoint whose choice biases
stay as loaded."""

import dataclasses

import pytest
import torch

from hotswitch.backend.layout import is_frozen, param_layout
from hotswitch.backend.models.hf import config_from_hf
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.strategy import Strategy

from .families import make_family
from .family_workers import family_runs, reference

PLANS = {
    "ep4": [("ep4", 0)],
    "dp2ep2": [("dp2ep2", 0)],
    "tp2ep2": [("tp2ep2", 0)],
    "ep2tp2sp": [("ep2tp2sp", 0)],
    "ep2pp2": [("ep2pp2", 0)],
    "ep2cp2": [("ep2cp2", 0)],
    "hot": [("tp2pp2", 30), ("dp2ep2", 16), ("ep4", 0)],
    # with the load-balancing auxiliary loss (``models.balance``): each strategy that computes it
    "aux-hot": [("tp2ep2", 30), ("dp2ep2", 16), ("ep4", 0)],
    # a pipeline carries each sequence's routing between its stages, under 1F1B with recomputed layers
    "aux-pipeline": [("ep2pp2", 24), ("tp2pp2ckpt", 0)],
    # sp and cp split a sequence's tokens: its routing summed over them, in pipelines too
    "aux-split-tokens": [("ep2tp2sp", 30), ("cp2pp2", 16), ("ep2ul2", 0)],
    # GLM-4.5's sigmoid router, its choice bias (read from the checkpoint, frozen), best groups
    "sigmoid-hot": [("tp2ep2", 30), ("ep2pp2", 16), ("ep4", 0)],
}
AUX = 0.05


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mixtral")
    make_family(directory, "mixtral")
    return config_from_hf(directory)


@pytest.fixture(scope="module")
def glm(tmp_path_factory):
    directory = tmp_path_factory.mktemp("glm4-moe")
    make_family(directory, "glm4-moe")
    return directory, config_from_hf(directory)


@pytest.fixture(scope="module")
def runs(mixtral, glm):
    balanced = mixtral.with_(experts=dataclasses.replace(mixtral.experts, aux_loss_coef=AUX))
    configs = {name: balanced if name.startswith("aux-") else mixtral for name in PLANS}
    configs["sigmoid-hot"] = glm[1]
    checkpoints = {"sigmoid-hot": str(glm[0])}
    results = spawn_ranks(family_runs, 4, configs, PLANS, checkpoints, timeout=1200)[0]
    references = {"plain": reference(mixtral), "aux": reference(balanced), "sigmoid": reference(glm[1], glm[0])}
    return results, references


def relative(a, b):
    return abs(a - b) / abs(b)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PLANS))
def test_expert_parallel_training_equals_one_device(runs, name):
    results, references = runs
    kind = name.split("-")[0] if name.startswith(("aux-", "sigmoid-")) else "plain"
    ref_losses, ref_grads, ref_params = references[kind]
    losses, grads, params, used = results[name]
    assert len(used) == len(PLANS[name]), f"{name}: every strategy of the plan trains some sequences"
    assert max(relative(a, b) for a, b in zip(losses, ref_losses, strict=True)) <= 1e-5, (name, losses, ref_losses)
    assert grads.keys() == ref_grads.keys()
    for tensor, ref in ref_grads.items():
        if is_frozen(tensor):  # a router's choice bias: no gradient, and the checkpoint's value kept
            assert not grads[tensor].any() and torch.equal(params[tensor], ref_params[tensor]), tensor
            assert ref_params[tensor].any(), f"{tensor}: the checkpoint's bias, not zero"
            continue
        error = ((grads[tensor] - ref).norm() / ref.norm()).item()
        assert error <= 3e-5, f"{name}: {tensor}'s gradient at step 1 is off by {error:.1e}"
    assert params.keys() == ref_params.keys()  # the master holds every expert whole again


def test_each_rank_holds_its_share_of_the_experts_and_every_dense_weight(mixtral):
    layout = param_layout(mixtral, Strategy.parse("dp2ep2"))
    experts = layout["layers.0.feed_forward.experts.w1"]
    boxes = {rank: experts.state.local_box(rank, experts.shape) for rank in range(4)}
    assert [b.offset[0] for b in boxes.values()] == [0, 2, 0, 2] and all(b.shape[0] == 2 for b in boxes.values())
    router = layout["layers.0.feed_forward.router.weight"]
    assert all(router.state.local_box(r, router.shape).shape == router.shape for r in range(4))


def test_an_expert_parallel_strategy_compiles_its_mixtures_to_send_tokens_to_their_experts(mixtral):
    from hotswitch.backend.graph.compile import compile_graph
    from hotswitch.backend.graph.logical import LogicalGraph
    from hotswitch.backend.parallel.expert_parallel import ExpertParallel

    split, whole = Strategy.parse("dp2ep2"), Strategy.parse("dp4")
    graph = LogicalGraph.build(mixtral, [split, whole])
    mixtures = [m for m in compile_graph(graph, split, 1, False).module.modules() if isinstance(m, ExpertParallel)]
    assert len(mixtures) == mixtral.n_layers and {m.ranks for m in mixtures} == {(0, 1)}
    assert {(m.index, m.held) for m in mixtures} == {(1, 2)}  # rank 1 holds experts 2 and 3
    assert not [m for m in compile_graph(graph, whole, 1, False).module.modules() if isinstance(m, ExpertParallel)]


def test_an_expert_count_the_ep_group_does_not_divide_is_refused_naming_the_fix(mixtral):
    refused = r"ep=3 does not divide hf:.*'s 4 experts; choose ep dividing the expert count"
    with pytest.raises(ValueError, match=refused):
        param_layout(mixtral, Strategy.parse("ep3"))
    with pytest.raises(ValueError, match=r"ep=2 must divide the data-parallel replicas"):
        Strategy(dp=3, ep=2)


@pytest.mark.slow
def test_auto_weighs_expert_parallel_layouts_and_trains_exactly(tmp_path):
    """A mixture of experts' ``auto`` profiles its candidates with the experts split over the
    data-parallel replicas too (the all-to-all measured with them) and trains exactly."""
    from ..train.loop.loop_workers import auto_run, loop_spec, one_device

    spec = loop_spec(model="tiny-moe", plan="auto", steps=2, batch_size=6, eval_every=None)
    events, profiled = spawn_ranks(auto_run, 2, spec, str(tmp_path), timeout=1200)[0]
    assert "dp1ep2tp1pp1" in profiled and "dp2tp1pp1" in profiled, profiled
    losses, _, _ = one_device(spec)
    steps = [e for e in events if e["type"] == "step"]
    assert len(steps) == 2
    for e, loss in zip(steps, losses, strict=True):
        assert relative(e["loss"], loss) <= 1e-5, (e["step"], e["loss"], loss)


@pytest.mark.slow
def test_a_run_resumes_under_another_expert_layout_as_if_uninterrupted(tmp_path):
    """Checkpointed at step 2 under dp2ep2 (experts in pairs), resumed under dp4 (experts whole)
    and under ep4 (two experts a rank, over all four): steps 3-4 equal the
    uninterrupted run's (loss 1e-6)."""
    from ..train.loop.loop_workers import loop_spec, train_events

    base = {"model": "tiny-moe", "steps": 4, "eval_every": None, "checkpoint_every": 2}
    first = loop_spec(**base, plan="dp2ep2")
    events, _ = spawn_ranks(train_events, 4, first, str(tmp_path / "first"), timeout=1200)[0]
    expected = {e["step"]: e["loss"] for e in events if e["type"] == "step"}
    saved = str(tmp_path / "first" / "checkpoints" / "step-2")
    for plan in ("dp4", "ep4"):
        spec = loop_spec(**{**base, "checkpoint_every": None}, plan=plan, resume_from=saved)
        resumed, _ = spawn_ranks(train_events, 4, spec, str(tmp_path / plan), timeout=1200)[0]
        steps = [e for e in resumed if e["type"] == "step"]
        assert [e["step"] for e in steps] == [3, 4], plan
        for e in steps:
            assert e["loss"] == pytest.approx(expected[e["step"]], rel=1e-6), (plan, e["step"])


@pytest.mark.parametrize("kernel", ["loop", "grouped"])
def test_a_rank_whose_experts_get_no_token_still_takes_part_in_every_backward_exchange(kernel):
    """Where no token of a micro-batch reaches a rank's experts, that rank's backward must still
    run both of the layer's all-to-alls, or the group's next exchanges pair up wrongly (gloo:
    "received data size doesn't match", seen under ep4 when routing starved a rank)."""
    from ..parallel.expert_parallel_workers import starved_rank_backward

    grads = spawn_ranks(starved_rank_backward, 2, kernel, timeout=300)
    assert len(grads) == 2 and all(len(g) == 3 for g in grads)
    assert all(abs(v) > 0 for v in grads[1])  # rank 1's tokens went to rank 0's experts and back
