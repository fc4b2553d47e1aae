"""The trainer takes the run configuration whole: what it is given is what it trains under; a
plan passed where the run goes, as older calls did, still trains, with a deprecation notice."""

from hotswitch.backend.runtime.spawn import spawn_ranks

from .loop_workers import trainer_settings

NOTICE = "Trainer(config, data, plan) is deprecated: pass {'plan': %r}"


def test_the_trainer_reads_its_sections_of_the_run_and_takes_an_old_plan_with_a_notice():
    given, plan, buckets = spawn_ranks(trainer_settings, 2, timeout=600)[0]
    assert given == ("dp2tp1pp1(L>0)", "dp1tp2pp1", 512, 3e-4, [])  # the plan, instantiation, budget, lr given
    assert plan == ("dp2tp1pp1(L>0)", "dp2tp1pp1", 1024, 1e-3, [NOTICE % "dp2"])  # the defaults beside it
    tp2_dp2 = [["tp2", 32], ["dp2", 0]]
    assert buckets == ("dp1tp2pp1(L>32) | dp2tp1pp1(L>0)", "dp1tp2pp1", 1024, 1e-3, [NOTICE % tp2_dp2])
