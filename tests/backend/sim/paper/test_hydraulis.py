"""Hydraulis' settings as its code launches them: batches fixed in tokens, every contender on the
same packed batch, ours against the paper's baselines and above the floor."""

import pytest

from hotswitch.backend.sim.datasets import PAPER_BATCH, batch_lengths, batch_of_tokens
from hotswitch.backend.sim.paper.hydraulis import SETTINGS, hydraulis_row


def test_a_batch_fixed_in_tokens_cuts_its_last_document_to_fill_it_exactly():
    lengths = batch_of_tokens("commoncrawl", 32768, 200_000)
    drawn = batch_lengths("commoncrawl", 32768, PAPER_BATCH)
    assert sum(lengths) == 200_000 and max(lengths) <= 32768
    assert lengths[:-1] == drawn[: len(lengths) - 1], "the documents as drawn, in order"
    assert 0 < lengths[-1] <= drawn[len(lengths) - 1]
    assert (
        batch_of_tokens("commoncrawl", 32768, 200_000) == lengths != batch_of_tokens("commoncrawl", 32768, 200_000, 1)
    )
    more = batch_of_tokens("github", 4096, 3_000_000)  # more than one paper batch of 4K documents holds
    assert sum(more) == 3_000_000 and len(more) > PAPER_BATCH
    with pytest.raises(ValueError, match="at least 2 tokens"):
        batch_of_tokens("github", 4096, 1)


def test_the_github_setting_sets_our_best_arm_beside_every_baseline_above_the_floor():
    (github,) = [s for s in SETTINGS if s.dataset == "github"]
    r = hydraulis_row(github)
    assert (r["model"], r["gpus"], r["tokens"], r["context"]) == ("13b", 32, 100_000, 16384)
    arms = {"auto": r["auto_s"], "auto+cp": r["auto_cp_s"], "auto+groups": r["auto_groups_s"]}
    assert r["ours_s"] == min(arms.values()) == arms[r["ours"]]
    assert r["ours_s"] <= r["best_static_s"], "auto weighs every static layout too"
    for key in ("megatron_paper_recompute_s", "deepspeed_paper_s", "hetu_static_paper_s"):
        assert r[key] > 0, key
    assert r["vs_deepspeed_paper"] == pytest.approx(r["deepspeed_paper_s"] / r["ours_s"])
    assert r["vs_strong_static"] == pytest.approx(r["best_static_s"] / r["ours_s"])
    assert 0 < r["floor_s"] < r["ours_s"]
