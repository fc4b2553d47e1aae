"""Hot-switched training on real gloo ranks equals one-device training, step by step."""

from hotswitch.backend.runtime.spawn import spawn_ranks

from ..conftest import SHORT_STEPS, STEPS
from ..matching import assert_matches, relative
from ..train_workers import checkpointed_run, controlled_run, hot_switch_run, resumed_run, static_runs

PLAN = [("tp4", 128), ("dp2tp2", 48), ("dp4", 0)]


def test_every_step_and_the_final_parameters_match_one_device(reference):
    ref_losses, _ = reference
    results = spawn_ranks(hot_switch_run, 4, STEPS, PLAN)
    losses, params, used, order, allocated = results[0]
    assert used == ["dp1tp4pp1", "dp2tp2pp1", "dp4tp1pp1"], "every strategy must have trained some sequences"
    assert order[-1] == "dp1tp4pp1"  # the instantiation strategy runs last and updates in place
    assert allocated == ["dp1tp4pp1"], "between steps only the instantiation strategy holds model states"
    assert all(r[0] == losses for r in results), "ranks disagree on the loss"
    assert_matches(losses, params, reference)
    assert ref_losses[-1] < ref_losses[0]  # it does learn


def test_a_control_command_changes_the_strategies_mid_run(reference):
    new = [("dp2tp2", 64), ("dp4", 0)]
    losses, params, plans, kinds = spawn_ranks(controlled_run, 4, STEPS, PLAN, 10, new)[0]
    assert plans == [[["dp1tp4pp1", 128], ["dp2tp2pp1", 48], ["dp4tp1pp1", 0]], [["dp2tp2pp1", 64], ["dp4tp1pp1", 0]]]
    # applied at the boundary after step 10: the new plan is announced, then the command
    core = [k for k in kinds if k != "switch"]
    assert core[:2] == ["plan", "graphs"] and core[2:12] == ["step"] * 10 and core[12:14] == ["plan", "control"]
    assert "switch" in kinds  # each new (what, src, dst) switch reports once
    assert_matches(losses, params, reference)


def test_resume_under_another_strategy_set_and_world_size(reference, tmp_path):
    path = str(tmp_path / "step10")
    side_by_side = [("tp4", 250), ("tp2@0-1", 200), ("dp2@2-3", 0)]  # then two device groups at once
    first = spawn_ranks(checkpointed_run, 4, 10, side_by_side, path)[0]
    assert_close_prefix = max(relative(a, b) for a, b in zip(first, reference[0][:10], strict=True))
    assert assert_close_prefix <= 1e-5
    start, losses, params = spawn_ranks(resumed_run, 2, STEPS, [("tp2", 96), ("dp2", 0)], path)[0]
    assert start == 10
    assert_matches(losses, params, reference, first_step=10)


def test_pipeline_and_sequence_parallel_strategies_train_like_one_device(short_reference):
    runs = [("tp2pp2", "1f1b"), ("dp2pp2", "1f1b"), ("pp4", "1f1b"), ("pp4", "gpipe"), ("dp2tp2sp", "1f1b")]
    results = spawn_ranks(static_runs, 4, SHORT_STEPS, runs)
    for name, (losses, params) in results[0].items():
        assert all(r[name][0] == losses for r in results), f"{name}: ranks disagree on the loss"
        assert_matches(losses, params, short_reference, what=name)


def test_hot_switching_in_the_papers_order_tp2pp2_dp4_dp2tp2(short_reference):
    plan = [("tp2pp2", 200), ("dp2tp2", 100), ("dp4", 0)]
    losses, params, used, order, _ = spawn_ranks(hot_switch_run, 4, SHORT_STEPS, plan)[0]
    assert used == ["dp1tp2pp2", "dp2tp2pp1", "dp4tp1pp1"]
    # tp2pp2 holds the master weights: switched to dp4, then dp2tp2, and back for the update
    assert order == ["dp4tp1pp1", "dp2tp2pp1", "dp1tp2pp2"]
    assert_matches(losses, params, short_reference)


def test_a_pipeline_instantiation_checkpoint_resumes_without_pipelines(short_reference, tmp_path):
    path = str(tmp_path / "step5")
    spawn_ranks(checkpointed_run, 4, 5, [("tp2pp2", 128), ("dp4", 0)], path)
    start, losses, params = spawn_ranks(resumed_run, 2, SHORT_STEPS, [("tp2", 96), ("dp2", 0)], path)[0]
    assert start == 5
    assert_matches(losses, params, short_reference, first_step=5)
