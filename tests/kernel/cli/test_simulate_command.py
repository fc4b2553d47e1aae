"""``hotswitch simulate``: contenders' step times, memory and plans; bad input refused by name."""

import json

import pytest

from hotswitch.backend.sim.device import device_spec
from hotswitch.kernel.cli.main import main
from hotswitch.kernel.cli.simulate_command import parse_plan


def test_json_lists_every_contender_with_step_memory_and_plan(capsys):
    assert main(["simulate", "--model", "7b", "--gpus", "8", "--context", "4096", "--batch", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["model"], out["gpus"], out["sequences"]) == ("7b", 8, 64)
    names = [c["name"] for c in out["contenders"]]
    assert {"dp8tp1pp1", "c1", "c2", "auto"} <= set(names)
    assert {"megatron-paper", "hetu-static-paper", "hotspa-c1-paper", "deepspeed-paper"} <= set(names)
    auto = out["contenders"][names.index("auto")]
    assert auto["step_s"] > 0 and auto["plan"]
    assert out["best_static"] in names
    # one quantity, one limit: every contender's peak stays within the limit the report names
    assert out["limit_gib"] == pytest.approx(74.0)
    assert all(v <= out["limit_gib"] + 1e-9 for c in out["contenders"] for v in c["memory_gib"].values())


def test_a_progress_bar_goes_to_stderr_and_contenders_can_be_chosen(capsys):
    args = ["simulate", "--context", "4096", "--batch", "16", "--contenders", "megatron-paper", "--json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    names = [c["name"] for c in json.loads(captured.out)["contenders"]]
    assert "megatron-paper" in names and "deepspeed-paper" not in names
    assert "] 1/" in captured.err and "done" in captured.err


def test_the_table_shows_the_users_plan(capsys):
    args = ["simulate", "--gpus", "8", "--context", "8192", "--batch", "32", "--plan", "dp2tp4sp:4096,dp8:0"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "7b on 8 x A800-80G: 32 sequences" in text
    assert "attention: 20% of peak, as measured of flash-attn in Megatron-LM on 8 x H800" in text
    assert "plan" in text and "dp2tp4pp1sp(L>4096) | dp8tp1pp1(L>0)" in text
    row = next(line for line in text.splitlines() if line.startswith("plan "))
    assert len(row.split()) >= 4 and all(x.endswith("s") for x in row.split()[1:3])  # step and predicted


def test_context_parallel_adds_auto_with_cp_beside_auto_at_128k(capsys):
    args = ["simulate", "--model", "13b", "--gpus", "16", "--dataset", "github", "--context", "131072"]
    assert main([*args, "--batch", "24", "--contenders", "none", "--context-parallel", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {c["name"]: c for c in out["contenders"]}
    auto, with_cp = by_name["auto"], by_name["auto+cp"]
    assert "cp" not in auto["plan"].replace("ckpt", "") and "ul" not in auto["plan"]
    assert out["cp_speedup"] == pytest.approx(auto["step_s"] / with_cp["step_s"])
    assert with_cp["step_s"] <= auto["step_s"] * (1 + 1e-9)  # here; both planned on the fit, timed on the device
    assert main([*args, "--batch", "24", "--contenders", "none", "--plan", "dp1cp4tp4spckpt:8192,dp4tp4sp:0"]) == 0
    text = capsys.readouterr().out
    assert "dp1cp4tp4pp1spckpt(L>8192) | dp4tp4pp1sp(L>0)" in text and "auto+cp" not in text


def test_side_by_side_adds_auto_with_device_groups_and_prices_a_plan_of_groups(capsys):
    args = ["simulate", "--gpus", "8", "--context", "16384", "--dataset", "commoncrawl", "--batch", "64"]
    assert main([*args, "--contenders", "none", "--side-by-side", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {c["name"]: c for c in out["contenders"]}
    auto, groups = by_name["auto"], by_name["auto+groups"]
    assert out["groups_speedup"] == pytest.approx(auto["step_s"] / groups["step_s"])
    # it weighs sequential plans too: the fitted costs choose, so it is never predicted slower
    assert groups["predicted_s"] <= auto["predicted_s"] * (1 + 1e-9)
    assert 0 < out["floor_s"] < min(c["step_s"] for c in out["contenders"] if c["step_s"]), "the floor is under all"
    assert main([*args, "--contenders", "none", "--plan", "tp4@0-3:4096,dp2tp2@4-7:0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("plan "))
    assert "dp1tp4pp1@0-3(L>4096) | dp2tp2pp1@4-7(L>0)" in row and row.split()[1].endswith("s"), row
    assert any(line.startswith("floor: no plan over auto's layouts takes less than") for line in lines)


def test_the_attention_priced_is_the_kernel_each_device_was_calibrated_on(capsys):
    for device, kernel in (("A800", "flash-attn in Megatron-LM"), ("H200", "cuDNN")):
        args = ["simulate", "--device", device, "--context", "4096", "--batch", "8", "--contenders", "none", "--json"]
        assert main(args) == 0
        attention = json.loads(capsys.readouterr().out)["attention"]
        assert attention["kernel"].startswith(kernel)
        assert attention["fraction_of_peak"] == device_spec(device).attention_mfu > 0


def test_plans_parse_as_a_strategy_or_buckets():
    assert str(parse_plan("dp8")) == "dp8tp1pp1(L>0)"
    assert str(parse_plan("tp8sp:1024, dp8:0")) == "dp1tp8pp1sp(L>1024) | dp8tp1pp1(L>0)"
    with pytest.raises(ValueError, match="needs a whole-number lower bound"):
        parse_plan("tp8:,dp8:0")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--device", "TPU"], "unknown device 'TPU'"),
        (["--dataset", "wiki"], "unknown dataset 'wiki'"),
        (["--contenders", "megatron"], "unknown contender 'megatron'; choose from megatron-paper"),
        (["--context", "262144"], "context 262144 is outside what 7b takes (1 to 131072"),
        (["--model", "32b", "--gpus", "2", "--context", "4096"], "32b does not fit 2 x A800-80G at 4096 tokens"),
        (["--model", "gpt5"], "unknown model 'gpt5'"),
    ],
)
def test_bad_input_exits_2_naming_the_limit(args, message, capsys):
    assert main(["simulate", "--batch", "8", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_plan_is_checked_at_most_at_the_context_however_high_its_bounds(capsys):
    """At a 10-token context the paper's plans send nothing above 10 tokens, so each bucket's
    strategy is held to 10 tokens, not to the bound of the bucket before it (4K, 16K: lengths
    its memory, fitted on this batch's, was priced far past), and none needs checkpointing."""
    args = ["simulate", "--context", "10", "--contenders", "hotspa-c1-paper", "--json"]
    assert main(args) == 0
    contenders = {c["name"]: c for c in json.loads(capsys.readouterr().out)["contenders"]}
    for name in ("c1", "c2", "hotspa-c1-paper"):
        assert contenders[name]["step_s"] is not None and "ckpt" not in contenders[name]["plan"], contenders[name]


def test_a_plan_the_cluster_cannot_hold_is_refused_before_anything_runs(capsys):
    args = ["simulate", "--gpus", "4", "--context", "4096", "--batch", "16", "--plan", "tp4@0-3:4096,dp4@4-7:0"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "device group dp4tp1pp1@4-7 needs ranks 4-7 but the cluster has 4 devices" in err, err
    assert "static" not in err, "no contender ran before the refusal"


def test_your_documents_give_the_batch_training_would_draw(capsys, tmp_path, monkeypatch):
    """``--data``: the lengths are those of the first global batch ``hotswitch train`` would
    train on the same documents (cut at the context), not a distribution's."""
    from hotswitch.backend.data import BatchStream
    from hotswitch.backend.train.run.recipe import documents

    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "docs.jsonl").write_text("".join(json.dumps({"text": "w" * (40 * i + 3)}) + "\n" for i in range(60)))
    args = ["simulate", "--gpus", "8", "--context", "1024", "--batch", "16", "--contenders", "none"]
    assert main([*args, "--data", str(corpus), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = [s.length for s in BatchStream(documents([str(corpus / "docs.jsonl")]), 16, 1024).next_batch()]
    assert (out["sequences"], out["tokens"]) == (16, sum(expected)) and max(expected) == 1024
    assert out["data"] == "60 documents from 1 file(s), byte tokens"
    assert main([*args, "--data", str(corpus)]) == 0
    assert "context 1024 (60 documents from 1 file(s), byte tokens)" in capsys.readouterr().out
    assert main([*args, "--data", str(corpus), "--dataset", "github"]) == 2
    assert "give your documents or a distribution, not both" in capsys.readouterr().err
    assert main([*args, "--data", str(tmp_path / "none.jsonl")]) == 2
    assert "none.jsonl is not a file or a folder" in capsys.readouterr().err
