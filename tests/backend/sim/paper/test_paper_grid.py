"""The paper's settings as plain values, its batches, and one grid row."""

import pytest

from hotswitch.backend.sim.datasets import PAPER_BATCH, batch_lengths
from hotswitch.backend.sim.paper import setups
from hotswitch.backend.sim.paper.grid import row, simulate_setting, summary


def test_c1_sends_the_longest_sequences_to_the_instantiation_and_the_shortest_to_data_parallelism():
    plan = setups.hand_picked("7b", 8)
    assert [(str(b.strategy), b.above) for b in plan.buckets] == [
        ("dp1tp4pp2sp", 16384),
        ("dp2tp2pp2sp", 4096),
        ("dp8tp1pp1", 0),
    ]
    assert setups.hand_picked("7b", 8, "c2").strategy_for(6000).tp == 2  # c2's 4K-8K bucket: dp4tp2
    assert setups.hand_picked("13b", 32) is None


def test_the_baselines_scale_data_parallelism_with_the_gpus():
    assert [str(s) for s in setups.baselines(16)][:3] == ["dp16tp1pp1", "dp8tp2pp1sp", "dp8tp1pp2"]
    with pytest.raises(ValueError, match="multiples of 8 GPUs, got 12"):
        setups.baselines(12)


def test_batches_are_documents_truncated_at_the_context_and_reproducible():
    lengths = batch_lengths("github", 4096)
    assert len(lengths) == PAPER_BATCH and max(lengths) == 4096 and min(lengths) >= 2
    assert lengths == batch_lengths("github", 4096) != batch_lengths("github", 4096, seed=1)
    # code has the longer tail
    assert sum(n > 2048 for n in lengths) > sum(n > 2048 for n in batch_lengths("commoncrawl", 4096))


def test_a_grid_row_carries_every_figure_of_the_benchmark_schema():
    r = row(simulate_setting("7b", 8, "commoncrawl", 4096), "7b", "commoncrawl")
    for key in ("model", "gpus", "dataset", "context", "best_static", "best_static_s", "hot_c1_s", "auto_s"):
        assert r[key] is not None, key
    assert r["auto_plan"]
    assert r["auto_vs_static"] == pytest.approx(r["best_static_s"] / r["auto_s"])
    assert r["vs_strong_static"] == r["auto_vs_static"]
    megatron = min(x for x in (r["megatron_paper_s"], r["megatron_paper_recompute_s"]) if x)
    assert r["vs_megatron_paper"] == pytest.approx(megatron / r["auto_s"])
    assert r["vs_deepspeed_paper"] == pytest.approx(r["deepspeed_paper_s"] / r["auto_s"])
    assert r["hetu_static_paper_s"] and r["hotspa_c1_paper_s"]
    s = summary([r])
    assert s["commoncrawl_speedup_by_context"] == {"7b/8": [r["auto_vs_static"]]}
    assert s["paper_headline_vs_megatron"] == {"commoncrawl": 2.99, "github": 1.5}
    block = s["paper"]["commoncrawl"]
    assert block["max_vs_megatron"] == r["vs_megatron_paper"] and block["paper_max_vs_megatron"] == 2.99
    assert block["max_vs_deepspeed"] == r["vs_deepspeed_paper"] and block["paper_max_vs_deepspeed"] == 5.0


def test_commoncrawl_is_the_measured_histogram_and_the_old_stand_ins_stay_selectable():
    lengths = batch_lengths("commoncrawl", 16384, size=4096)
    short = sum(n <= 512 for n in lengths) / len(lengths)
    assert short == pytest.approx((11062 + 11624 + 11691) / 51200, abs=0.03)  # the logged real_seq_len
    assert batch_lengths("commoncrawl-synthetic", 4096) != batch_lengths("commoncrawl", 4096)
    assert max(batch_lengths("github-synthetic", 4096)) <= 4096
    with pytest.raises(ValueError, match=r"unknown dataset 'wiki'.*commoncrawl-synthetic"):
        batch_lengths("wiki", 4096)
