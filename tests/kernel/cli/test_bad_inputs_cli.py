"""The command line's bad-input catalogue: every case is refused before any rank starts, with a
message that names the problem and the fix (run in-process through ``main``; nothing launches)."""

import argparse
import json

import pytest

from hotswitch.kernel.cli import headless, train_command
from hotswitch.kernel.cli.main import main


@pytest.fixture
def files(tmp_path):
    (tmp_path / "existing").mkdir()
    (tmp_path / "a-file").write_text("not a folder")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "hotswitch.json").write_text("{not json")
    (tmp_path / "typo.toml").write_text("steps = 3\n[optimizer]\nlearning_rate = 1e-3\n")
    (tmp_path / "table.toml").write_text("steps = 3\n[optim]\nlr = 1e-3\n")
    (tmp_path / "broken.toml").write_text("steps = \n")
    (tmp_path / "twice.toml").write_text("lr = 1e-3\n[optimizer]\nlr = 2e-3\n")
    (tmp_path / "bad-value.toml").write_text('precision = "fp16"\n')
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "hotswitch.json").write_text(json.dumps([1, 2]))
    return tmp_path


# (argv, fragments the error must contain); "{tmp}" is the test's temporary folder.
CASES = [
    (["train", "--steps", "-1"], ["'steps' = -1", "at least 1"]),
    (["train", "--steps", "0"], ["'steps' = 0", "at least 1"]),
    (["train", "--batch-size", "0"], ["'batch_size' = 0", "at least 1"]),
    (["train", "--max-len", "1"], ["'max_len' = 1", "at least 2"]),
    (["train", "--max-len", "5000"], ["'max_len' = 5000", "at most 1024"]),
    (["train", "--token-budget", "1"], ["'token_budget' = 1", "one whole sequence"]),
    (["train", "--lr", "0"], ["'lr' = 0.0", "above 0"]),
    (["train", "--lr=-1e-3"], ["'lr' = -0.001", "above 0"]),
    (["train", "--memory-budget", "0"], ["'memory_budget' = 0.0", "above 0"]),
    (["train", "--memory-budget", "-3"], ["'memory_budget' = -3.0", "above 0"]),
    (["train", "--seed", "-1"], ["'seed' = -1", "at least 0"]),
    (["train", "--tokenizer", "bpe:5"], ["'bpe:5'", "at least 260"]),
    (["train", "--tokenizer", "words"], ["'words'", "give 'byte', 'bpe:", "or 'hf:DIR'"]),
    (["train", "--model", "huge"], ["unknown model 'huge'", "choose one of"]),
    (["train", "--data", "{tmp}/nope.txt"], ["nope.txt is not a file", "existing text/JSONL/Parquet/Arrow files"]),
    (["train", "--data", "synthetic:nope"], ["'synthetic:nope'", "synthetic:github"]),
    (["train", "--data", "{tmp}/existing"], ["existing holds no text, JSONL, Parquet or Arrow files (it is empty)"]),
    (["train", "--data", "{tmp}/missing.jsonl"], ["missing.jsonl is not a file or a folder", "JSONL/Parquet"]),
    (["train", "--plan", "dp3x"], ["cannot parse strategy 'dp3x'", "like 'dp2cp2tp2pp1'"]),
    (["train", "--plan", "tp4:x,dp4:0"], ["bucket 'tp4:x'", "like 'tp4:128,dp4:0'"]),
    (["train", "--plan", "tp4:128"], ["one of them 0", "[('tp4', 256), ('dp4', 0)]"]),
    (["train", "--plan", "dp8"], ["uses 8 devices but the cluster has 2", "product dp*cp*tp*pp is 2"]),  # -n: 2
    (["train", "--plan", "cp3"], ["cp=3 does not divide the 2 devices", "degree dividing 2"]),
    (["train", "--plan", "tp2ckptsel"], ["selective recompute (sel) and full activation checkpointing (ckpt)"]),
    (["train", "--checkpoint", "{tmp}/existing"], ["already exists", "choose a new checkpoint path"]),
    (["train", "--resume-from", "{tmp}/missing"], ["missing is not a folder", "checkpoint folder"]),
    (["train", "--resume-from", "{tmp}/existing"], ["not a hotswitch checkpoint", "written by save()"]),
    (["train", "--resume-from", "{tmp}/corrupt"], ["cannot be read", "damaged, give another"]),
    (["train", "--resume-from", "{tmp}/listed"], ["holds no model config", "damaged, give another"]),
    (["train", "--timeout", "0"], ["--timeout 0", "above 0"]),
    (["train", "--timeout", "-5"], ["--timeout -5", "above 0"]),
    (["train", "-n", "0"], ["--nproc 0", "at least 1"]),
    (["train", "--nodes", "2"], ["--nodes 2 with --launcher local", "give --launcher ray, slurm or kubeflow"]),
    (["train", "--device", "cuda", "-n", "64"], ["--device cuda: ", "GPU"]),  # refused before launch, GPUs or not
    (["train", "--gpus", "1"], ["--gpus-per-node: for --launcher slurm", "--launcher local would ignore it"]),
    (["train", "--image", "i", "--resources", "gpu=1"], ["--image --resources: for --launcher kubeflow"]),
    (["demo", "--steps", "-1"], ["--steps -1", "--warmup 1"]),
    (["demo", "--warmup", "-2"], ["--warmup -2", "0 or more"]),
    (["demo", "--batch-size", "0"], ["'batch_size' = 0", "at least 1"]),
    (["demo", "--max-len", "5000"], ["'max_len' = 5000", "at most 1024"]),
    (["demo", "--tokenizer", "bpe:5"], ["'bpe:5'", "at least 260"]),
    (["demo", "--memory-budget", "-1"], ["'memory_budget' = -1.0", "above 0"]),
    (["demo", "--timeout", "0"], ["--timeout 0", "above 0"]),
    (["demo", "-n", "0"], ["--nproc 0", "at least 1"]),
    (["train", "--warmup-steps", "-3"], ["'warmup_steps' = -3", "at least 0"]),
    (["train", "--checkpoint-every", "0"], ["'checkpoint_every' = 0", "at least 1"]),
    (["train", "--keep-checkpoints", "3"], ["'keep_checkpoints' = 3", "set checkpoint_every too"]),
    (["train", "--eval-every", "-1"], ["'eval_every' = -1", "at least 1"]),
    (["train", "--max-grad-norm", "0"], ["'max_grad_norm' = 0.0", "above 0"]),
    (["train", "--config", "{tmp}/typo.toml"], ["unknown training settings ['learning_rate']", "known: model"]),
    (["train", "--config", "{tmp}/broken.toml"], ["broken.toml is not valid TOML", "line 1"]),
    (["train", "--config", "{tmp}/twice.toml"], ["'lr' is given twice"]),
    (["train", "--config", "{tmp}/table.toml"], ["[optim] is not a section; did you mean [optimizer]?"]),
    (["train", "--config", "{tmp}/missing.toml"], ["cannot read the run configuration", "missing.toml"]),
    (["train", "--config", "{tmp}/bad-value.toml"], ["'precision' = 'fp16'", "choose one of fp32, bf16"]),
    (["train", "--grad-dtype", "bf16"], ["'grad_dtype' = 'bf16'", "under precision 'fp32'; drop it"]),
    (["demo", "--grad-dtype", "bf16"], ["'grad_dtype' = 'bf16'", "under precision 'fp32'; drop it"]),
    (["plan-switch", "dp4", "tp4", "--gpus", "0"], ["--gpus 0", "at least 1 GPU"]),
    (["plan-switch", "dp4", "tp4", "--gpus", "-8"], ["--gpus -8", "at least 1 GPU"]),
    (["plan-switch", "dp4", "tp4", "--bytes-per-param", "0"], ["--bytes-per-param 0", "give 2 (bf16) or 4"]),
    (["plan-switch", "dp4", "tp4x", "--model", "tiny"], ["cannot parse strategy 'tp4x'", "like 'dp2cp2tp2pp1'"]),
    (["plan-switch", "dp4", "tp4", "--model", "huge"], ["unknown model 'huge'", "choose one of"]),
    (["plan-switch", "dp2", "dp4"], ["dp2 spans 2 devices and dp4 4", "two strategies of one size"]),
    (["kernel", "install", "--prefix", "{tmp}/a-file"], ["cannot install the kernel", "--prefix"]),
]

# argparse's own refusals: exit status 2 and the option named.
USAGE_CASES = [
    (["train", "--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["train", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["train", "--lr", "abc"], "argument --lr: invalid float value: 'abc'"),
    (["train", "--precision", "fp16"], "argument --precision: invalid choice: 'fp16'"),
    (["demo", "--precision", "fp8"], "argument --precision: invalid choice: 'fp8'"),
    (["demo", "--nproc", "two"], "argument -n/--nproc: invalid int value: 'two'"),
    (["plan-switch", "dp4"], "the following arguments are required: dst"),
    (["nonsense"], "invalid choice: 'nonsense'"),
]


@pytest.fixture
def no_launch(monkeypatch):
    """Any attempt to start ranks fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a rank was started for an input that can be checked before launch")

    monkeypatch.setattr(headless, "Job", refuse)


@pytest.mark.parametrize(("argv", "fragments"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_bad_setting_is_refused_before_launch_naming_it_and_the_fix(argv, fragments, files, no_launch, capsys):
    code = main([a.replace("{tmp}", str(files)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"hotswitch {argv[0]}: "), err
    for fragment in fragments:
        assert fragment in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("argv", "fragment"), USAGE_CASES, ids=[" ".join(c[0]) for c in USAGE_CASES])
def test_a_malformed_option_is_a_usage_error(argv, fragment, no_launch, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert fragment in capsys.readouterr().err


def test_flags_override_the_run_configuration(files):
    from hotswitch.kernel.cli.train_command import spec_from

    (files / "run.toml").write_text('steps = 50\nplan = "dp4"\n[optimizer]\nlr = 3e-4\nbetas = [0.9, 0.99]\n')
    parser = argparse.ArgumentParser()
    train_command.add_parser(parser.add_subparsers())
    args = parser.parse_args(["train", "--config", str(files / "run.toml"), "--steps", "7", "--plan", "tp4:64,dp4:0"])
    spec = spec_from(args)
    assert spec == {"steps": 7, "plan": [["tp4", 64], ["dp4", 0]], "lr": 3e-4, "betas": (0.9, 0.99)}
    assert spec_from(parser.parse_args(["train"])) == {}  # every default comes from the recipe
