"""``hotswitch train`` end to end: torchrun ranks, progress, summary, clean exit."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from hotswitch.backend.models.config import get_config
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.auto import auto_candidates
from hotswitch.backend.train.planning.dispatch import instantiation_strategy
from hotswitch.backend.train.planning.memory import model_state_bytes, size_text
from tests.kernel.kernel_session import CAP_S, wait_progressing

VOCAB = 320


def hotswitch(*args, timeout=300, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "hotswitch.kernel.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


@pytest.mark.slow
def test_headless_training_reports_a_summary_and_leaves_nothing_behind(tmp_path):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = hotswitch(
        "train",
        "-n",
        "2",
        "--steps",
        "3",
        "--plan",
        "tp2:95,dp2:0",  # the stdlib units mostly fill 96 tokens; shorter ones go to dp2
        "--batch-size",
        "6",
        "--max-len",
        "96",
        "--checkpoint",
        str(tmp_path / "ckpt"),
        "--json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["status"] == "succeeded" and summary["steps"] == 3
    assert set(summary["strategies"]) == {"dp1tp2pp1", "dp2tp1pp1"}
    assert summary["tokens"] == sum(v["tokens"] for v in summary["strategies"].values())
    assert (tmp_path / "ckpt" / "hotswitch.json").is_file()
    assert (summary["checkpoints"], summary["last_checkpoint"]) == (1, str(tmp_path / "ckpt"))
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


@pytest.mark.slow
def test_warnings_and_checkpoints_are_shown_as_they_happen_and_summed_up(tmp_path):
    out = hotswitch(
        *("train", "-n", "1", "--plan", "dp1", "--steps", "2", "--max-len", "64", "--batch-size", "4"),
        *("--shard-optimizer", "--checkpoint-every", "1", "--checkpoint", str(tmp_path / "last")),
        *("--eval-every", "2"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stderr.splitlines()
    shown = [re.sub(r"loss \d+\.\d{4}$", "loss L", line) for line in lines if line.startswith(("warning:", "step"))]
    assert shown == [
        "warning: shard_optimizer: dp1tp1pp1 has one replica (dp x cp): "
        "the optimizer state stays whole (nothing to shard)",
        f"step 1: checkpoint saved to {tmp_path / 'checkpoints' / 'step-1'}",
        "step 2: held-out loss L",
        f"step 2: checkpoint saved to {tmp_path / 'checkpoints' / 'step-2'}",
        f"step 2: checkpoint saved to {tmp_path / 'last'}",
    ], out.stderr[-3000:]
    assert f"checkpoints      3, the last {tmp_path / 'last'}" in out.stdout.splitlines(), out.stdout


@pytest.mark.slow
def test_ctrl_c_ends_the_step_writes_the_checkpoint_and_prints_the_summary(tmp_path):
    """A terminal's Ctrl-C reaches the command's whole process group."""
    argv = [sys.executable, "-m", "hotswitch.kernel.cli", "train", "-n", "1", "--steps", "100000", "--plan", "dp1"]
    argv += ["--batch-size", "2", "--max-len", "32", "--checkpoint", str(tmp_path / "ckpt"), "--json"]
    command = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a shell starts it
    )  # fmt: skip
    folder = Path(re.search(r"events recorded in (\S+)", command.stderr.readline()).group(1))
    wait_progressing(
        lambda: '"type": "step"' in _text(folder / "events.jsonl"),
        lambda: len(_text(folder / "events.jsonl")),
        "the first step",
    )
    os.killpg(command.pid, signal.SIGINT)
    out, err = command.communicate(timeout=CAP_S)
    assert command.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    summary = json.loads(out)
    assert summary["status"] == "stopped" and summary["steps"] >= 1
    assert (tmp_path / "ckpt" / "hotswitch.json").is_file()  # the run's final checkpoint, at the step it ended
    kinds = [json.loads(line)["type"] for line in _text(folder / "events.jsonl").splitlines()]
    assert kinds[-2:] == ["done", "checkpoint"], kinds[-5:]


@pytest.mark.slow
def test_a_checkpoint_exports_as_it_is_when_steps_is_its_own(tmp_path):
    from safetensors.torch import load_file

    run = ["train", "-n", "1", "--steps", "2", "--plan", "dp1", "--batch-size", "2", "--max-len", "32"]
    first = hotswitch(*run, "--checkpoint", str(tmp_path / "ckpt"), "--export-hf", str(tmp_path / "trained"))
    assert first.returncode == 0, first.stderr[-3000:]
    again = hotswitch(*run, "--resume-from", str(tmp_path / "ckpt"), "--export-hf", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "no training step completed" in again.stdout
    trained, exported = (load_file(tmp_path / d / "model.safetensors") for d in ("trained", "again"))
    assert trained.keys() == exported.keys() and all((trained[k] == exported[k]).all() for k in trained)
    refused = hotswitch(*run, "--resume-from", str(tmp_path / "ckpt"))
    assert refused.returncode == 2 and "or 2 with export_hf to export it as it is" in refused.stderr


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def test_bad_plans_are_refused_before_anything_launches(tmp_path):
    out = hotswitch("train", "-n", "4", "--plan", "tp3")
    assert out.returncode == 2 and "uses 3 devices but the cluster has 4" in out.stderr
    out = hotswitch("train", "-n", "4", "--plan", "tp4:100,dp4:50")
    assert out.returncode == 2 and "one of them 0" in out.stderr
    out = hotswitch("train", "-n", "2", "--plan", "dp2", "--instantiation", "tp4")
    assert out.returncode == 2 and "uses 4 devices but the cluster has 2" in out.stderr
    (tmp_path / "taken").mkdir()
    out = hotswitch("train", "-n", "2", "--plan", "dp2", "--checkpoint", str(tmp_path / "taken"))
    assert out.returncode == 2 and "already exists" in out.stderr


def _instantiated(plan: str, nproc: int, max_len: int):
    """The strategy ``plan`` instantiates on ``nproc`` ranks (auto: as the trainer picks it)."""
    if plan != "auto":
        return Strategy.parse(plan)
    return instantiation_strategy(auto_candidates(get_config("tiny"), nproc, max_len, None))


BELOW_THE_STATES = ["--memory-budget", "1", "--max-len", "64", "--model", "tiny"]


@pytest.mark.parametrize("plan", ["dp2", "auto"])
def test_a_budget_below_the_model_states_is_refused_before_any_rank_starts(tmp_path, plan):
    runs = tmp_path / "runs"  # a launch would make its run folder here first
    out = subprocess.run(
        [sys.executable, "-m", "hotswitch.kernel.cli", "train", "-n", "2", "--plan", plan, *BELOW_THE_STATES],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HOTSWITCH_RUNS": str(runs)},
    )
    assert out.returncode == 2, out.stderr[-3000:]
    strategy = _instantiated(plan, 2, 64)
    states = size_text(model_state_bytes(get_config("tiny"), strategy))
    assert f"model states of {strategy} alone need: {states} per device" in out.stderr, out.stderr
    assert "raise memory_budget above" in out.stderr
    assert not runs.exists() or not any(runs.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("plan", ["auto", "tp2:20,dp2:0"], ids=["auto", "buckets"])
def test_a_hugging_face_checkpoint_trains_from_the_command_line_and_exports(tmp_path, plan):
    """The README's ``--model hf:DIR`` form, with auto and with buckets; the export loads in transformers
    and holds the trained weights (not the ones it started from)."""
    import torch

    from tests.backend.models.hf_fixtures import load_with_transformers, make_checkpoint, tokens

    start = make_checkpoint(tmp_path / "src", vocab_size=VOCAB)  # the byte tokenizer's 256 ids fit
    data = tmp_path / "corpus.txt"
    data.write_text("".join(chr(32 + (i * 7) % 90) * (5 + i % 30) + "\n" for i in range(64)))
    out = hotswitch(
        *("train", "-n", "2", "--model", f"hf:{tmp_path / 'src'}", "--data", str(data), "--steps", "2"),
        *("--batch-size", "6", "--max-len", "40", "--token-budget", "120", "--plan", plan, "--lr", "1e-2"),
        *("--export-hf", str(tmp_path / "out"), "--json"),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["status"] == "succeeded" and summary["steps"] == 2
    trained = load_with_transformers(tmp_path / "out")
    assert trained.config.vocab_size == VOCAB
    ids = tokens()
    with torch.no_grad():
        assert trained(input_ids=ids).logits.shape == (*ids.shape, VOCAB)
    moved = [
        (a - b).abs().max().item()
        for a, b in zip(trained.state_dict().values(), start.state_dict().values(), strict=True)
    ]
    assert max(moved) > 1e-4, "the export holds the starting weights, not the trained ones"
    assert summary["exported"] == str(tmp_path / "out")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")  # the byte tokenizer it trained with
    assert tokenizer("héllo\n").input_ids == list("héllo\n".encode())
    assert trained.generation_config.eos_token_id == tokenizer.eos_token_id == 256


@pytest.mark.slow
def test_sigterm_stops_every_rank_and_removes_the_job_folder(tmp_path):
    """``kill`` (or a scheduler ending the command) stops the job as Ctrl-C does: the ranks end,
    the job's folder (its channel secret included) goes, the run's events say it stopped."""
    from tests.kernel.kernel_session import processes_mentioning, wait_until

    temp, runs = tmp_path / "tmp", tmp_path / "runs"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "HOTSWITCH_RUNS": str(runs)}
    command = [sys.executable, "-m", "hotswitch.kernel.cli", "train", "-n", "2", "--steps", "10000", "--plan", "dp2"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def stepped() -> bool:
            logs = list(runs.glob("train-*/events.jsonl"))
            return bool(logs) and '"type": "step"' in logs[0].read_text()

        assert wait_until(stepped, timeout=300), "no step within 300 s"
        process.terminate()
        _, err = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 128 + 15, err[-3000:]
    assert "job 'train' stopped" in err, err[-3000:]
    assert not list(temp.glob("hotswitch-train-*")), list(temp.iterdir())
    assert wait_until(lambda: not processes_mentioning(str(temp)), timeout=120), processes_mentioning(str(temp))
    (events,) = runs.glob("train-*/events.jsonl")
    done = [json.loads(line) for line in events.read_text().splitlines() if '"type": "done"' in line]
    assert done and done[-1]["reason"] == "stopped", done
