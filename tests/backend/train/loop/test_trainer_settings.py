"""The trainer takes the run configuration whole: what it is given is what it trains under, the
defaults of what it is not given; a plan given where the run goes is refused naming the fix."""

from hotswitch.backend.runtime.spawn import spawn_ranks

from .loop_workers import trainer_settings

REFUSAL = "Trainer(config, data, run) takes a run configuration, not a plan: pass {'plan': %r}"


def test_the_trainer_reads_its_sections_of_the_run_and_refuses_a_plan_in_its_place():
    given, defaults, plan, buckets = spawn_ranks(trainer_settings, 2, timeout=600)[0]
    assert given == ("dp2tp1pp1(L>0)", "dp1tp2pp1", 512, 3e-4)  # the plan, instantiation, budget, lr given
    assert defaults == ("dp2tp1pp1(L>0)", "dp2tp1pp1", 1024, 1e-3)  # the run's defaults beside the plan
    assert plan == REFUSAL % "dp2"
    assert buckets == REFUSAL % [["tp2", 32], ["dp2", 0]]
