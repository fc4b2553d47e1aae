"""The recipe spec's bad-input catalogue: ``check_spec`` refuses each case (the command line
calls it before launching, ``build`` on every rank before any work), naming the setting, its
value and the fix; relative paths resolve against the notebook's folder."""

import json

import pytest

from hotswitch.backend.models.config import get_config
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.memory import model_state_bytes, size_text
from hotswitch.backend.train.run import recipe
from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, check_spec


@pytest.fixture
def notebook(tmp_path, monkeypatch):
    """A notebook folder with an existing folder, a file and two damaged checkpoints."""
    (tmp_path / "existing").mkdir()
    (tmp_path / "doc.txt").write_text("def f():\n    return 1\n")
    for name, text in (("corrupt", "{not json"), ("listed", json.dumps([1])), ("nomodel", "{}")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "hotswitch.json").write_text(text)
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(tmp_path))
    return tmp_path


CASES = [
    ([{"steps": 2}], "a training spec is a dict"),
    ("steps=2", "a training spec is a dict"),
    (None, "a training spec is a dict"),
    ({"stpes": 2}, "unknown training settings ['stpes'] in the spec ('stpes': did you mean 'steps'?); known: model"),
    ({"model": 7}, "'model' = 7 is not valid: give a model name"),
    ({"model": "huge"}, "unknown model 'huge'; choose one of"),
    ({"steps": -5}, "'steps' = -5 is not valid: give a whole number of at least 1"),
    ({"steps": 1.5}, "'steps' = 1.5 is not valid: give a whole number"),
    ({"steps": True}, "'steps' = True is not valid"),
    ({"steps": "10"}, "'steps' = '10' is not valid: give a whole number"),
    ({"batch_size": 0}, "'batch_size' = 0 is not valid: give a whole number of at least 1"),
    ({"max_len": 1}, "'max_len' = 1 is not valid: give a whole number of at least 2"),
    ({"max_len": 5000}, "'max_len' = 5000 is not valid: tiny holds at most 1024"),
    ({"token_budget": 1}, "'token_budget' = 1 is not valid: give a whole number of at least 256"),
    ({"token_budget": 100, "max_len": 128}, "at least 128 (max_len): a micro-batch holds at least one whole"),
    ({"lr": "abc"}, "'lr' = 'abc' is not valid: give a number above 0"),
    ({"lr": 0}, "'lr' = 0 is not valid: give a number above 0"),
    ({"lr": -1e-3}, "'lr' = -0.001 is not valid"),
    ({"memory_budget": 0}, "'memory_budget' = 0 is not valid: give a number above 0 (or None)"),
    ({"packing": "yes"}, "'packing' = 'yes' is not valid: give true or false"),
    ({"memory_budget": "8e6"}, "'memory_budget' = '8e6' is not valid"),
    ({"seed": -1}, "'seed' = -1 is not valid: give a whole number of at least 0"),
    ({"tokenizer": "bpe:5"}, "unknown tokenizer 'bpe:5': give 'byte', 'bpe:<vocabulary size of at least 260>' or"),
    ({"tokenizer": 512}, "'tokenizer' = 512 is not valid: give 'byte', 'bpe:<vocabulary size>' or 'hf:DIR'"),
    ({"device": "tpu"}, "'device' = 'tpu' is not valid: choose one of cpu, cuda or None"),
    ({"plan": "dp3x"}, "'plan' = 'dp3x' is not valid: cannot parse strategy"),
    ({"plan": [["tp4", 128]]}, "one of them 0"),
    ({"plan": 5}, "'plan' = 5 is not valid"),
    ({"instantiation": "tp2x"}, "'instantiation' = 'tp2x' is not valid: cannot parse strategy"),
    ({"instantiation": "tp2@0-1"}, "'instantiation' = 'tp2@0-1' is not valid: the master weights live on every device"),
    ({"data": "nope.txt"}, "nope.txt is not a file or a folder; give existing text/JSONL/Parquet/Arrow files"),
    ({"data": []}, "'data' = [] is not valid: give 'stdlib', 'synthetic:github', or text/JSONL/Parquet/Arrow files"),
    ({"data": "synthetic:nope"}, "'data' = 'synthetic:nope' is not valid: choose one of synthetic:"),
    ({"data": 5}, "'data' = 5 is not valid"),
    ({"checkpoint": "existing"}, "already exists; choose a new checkpoint path"),
    ({"checkpoint": 5}, "'checkpoint' = 5 is not valid: give a folder path"),
    ({"resume_from": "missing"}, "missing is not a folder; give a checkpoint folder"),
    ({"resume_from": "existing"}, "is not a hotswitch checkpoint (no hotswitch.json)"),
    ({"resume_from": "corrupt"}, "cannot be read"),
    ({"resume_from": "listed"}, "holds no model config; the checkpoint is damaged, give another"),
    ({"resume_from": "nomodel"}, "holds no model config"),
    ({"precision": "fp16"}, "'precision' = 'fp16' is not valid: choose one of fp32, bf16"),
    ({"precision": None}, "'precision' = None is not valid: choose one of fp32, bf16"),
    ({"grad_dtype": "fp8", "precision": "bf16"}, "'grad_dtype' = 'fp8' is not valid: choose one of fp32, bf16 or None"),
    ({"grad_dtype": "bf16"}, "gradients accumulate in fp32 under precision 'fp32'; drop it"),
    ({"lr_schedule": "linear"}, "'lr_schedule' = 'linear' is not valid: choose one of constant, cosine"),
    ({"warmup_steps": -1}, "'warmup_steps' = -1 is not valid: give a whole number of at least 0"),
    ({"experts": "fast"}, "'experts' = 'fast' is not valid: choose one of auto, grouped, loop"),
    ({"pipeline_schedule": "zb"}, "'pipeline_schedule' = 'zb' is not valid: choose one of 1f1b, gpipe"),
    ({"min_lr": 1.0}, "'min_lr' = 1.0 is not valid: give a number from 0 to lr (0.001)"),
    ({"weight_decay": -0.1}, "'weight_decay' = -0.1 is not valid: give a number at least 0"),
    ({"betas": [0.9]}, "'betas' = [0.9] is not valid: give two numbers in [0, 1)"),
    ({"betas": [0.9, 1.5]}, "'betas' = [0.9, 1.5] is not valid"),
    ({"max_grad_norm": 0}, "'max_grad_norm' = 0 is not valid: give a number above 0"),
    ({"checkpoint_every": 0}, "'checkpoint_every' = 0 is not valid: give a whole number of at least 1 (or None)"),
    ({"keep_checkpoints": 2}, "it keeps periodic checkpoints: set checkpoint_every too"),
    ({"eval_every": 0}, "'eval_every' = 0 is not valid: give a whole number of at least 1"),
    ({"eval_batches": 0}, "'eval_batches' = 0 is not valid: give a whole number of at least 1"),
    ({"eval_fraction": 1.0}, "'eval_fraction' = 1.0 is not valid: give a number at least 0 and below 1"),
    ({"eval_every": 5, "eval_fraction": 0}, "evaluation needs held-out documents"),
]


@pytest.mark.parametrize(("spec", "message"), CASES, ids=[repr(c[0])[:40] for c in CASES])
def test_a_bad_spec_is_refused_naming_the_setting_and_the_fix(spec, message, notebook):
    with pytest.raises(ValueError) as error:
        check_spec(spec)
    assert message in str(error.value)


def test_build_checks_the_spec_before_any_work(notebook, monkeypatch):
    monkeypatch.setattr(recipe, "init_from_env", lambda device: pytest.fail("started distributed work"))
    with pytest.raises(ValueError, match="'lr' = 'abc'"):
        recipe.build({"lr": "abc"})


def test_relative_paths_resolve_against_the_notebook_folder(notebook):
    s = check_spec({"data": ["doc.txt"], "checkpoint": "runs/ckpt", "max_len": 64})
    assert s["data"] == [str(notebook / "doc.txt")]
    assert s["checkpoint"] == str(notebook / "runs" / "ckpt")
    assert s["token_budget"] == 1024 and s["steps"] == 20  # defaults filled in
    assert check_spec({"max_len": 1024, "model": "tiny"})["token_budget"] == 1024


def test_bf16_on_a_cpu_build_without_bf16_matmul_is_refused_before_launch(notebook, monkeypatch):
    import torch

    def no_bf16(*args, **kwargs):
        raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'BFloat16'")

    monkeypatch.setattr(torch.Tensor, "__matmul__", no_bf16)
    with pytest.raises(ValueError) as error:
        check_spec({"precision": "bf16"})
    message = str(error.value)
    assert "cannot multiply bf16 matrices on CPU" in message and "--precision fp32" in message


def _states(plan: str) -> float:
    """The bytes per device the memory model gives ``plan``'s model states (tiny, fp32)."""
    return model_state_bytes(get_config("tiny"), Strategy.parse(plan))


def test_a_budget_below_the_model_states_alone_is_refused_naming_their_gib_and_the_fix():
    with pytest.raises(ValueError) as error:
        check_spec({"model": "tiny", "plan": "dp2", "memory_budget": 1, "max_len": 64})
    message = str(error.value)
    assert message.startswith("training setting 'memory_budget' = 1 is not valid"), message
    assert f"model states of dp2tp1pp1 alone need: {size_text(_states('dp2'))} per device" in message
    assert f"raise memory_budget above {_states('dp2'):.0f} bytes" in message
    assert "hold its sequences of up to 64 tokens" in message and "shards the model states (more tp or pp)" in message


def test_every_bucket_strategy_must_hold_its_model_states_and_one_that_does_passes():
    between = (_states("tp2") + _states("dp2")) / 2  # tp2's shard fits, dp2's whole copy does not
    plan = [["tp2", 32], ["dp2", 0]]
    with pytest.raises(ValueError) as error:
        check_spec({"model": "tiny", "plan": plan, "memory_budget": between, "max_len": 64})
    assert "model states of dp2tp1pp1 alone need" in str(error.value)
    assert "sequences of up to 32 tokens" in str(error.value)  # dp2's bucket, not max_len
    holding = _states("dp2") + 1
    assert check_spec({"model": "tiny", "plan": plan, "memory_budget": holding})["memory_budget"] == holding


def test_a_budget_auto_cannot_instantiate_under_is_refused_before_any_profiling():
    from hotswitch.backend.train.run.spec import check_run

    checked = check_run({"model": "tiny", "plan": "auto", "memory_budget": 1})
    with pytest.raises(ValueError) as error:
        checked.config.check_world(checked.model, 4)
    message = str(error.value)
    assert "'memory_budget' = 1 is not valid: a memory budget of 1 byte per device" in message
    assert f"alone need: {size_text(_states('dp1tp4'))} per device" in message


def test_sizes_read_in_the_unit_that_fits():
    assert [size_text(n) for n in (1, 512, 5e6, 13.5 * 2**30)] == ["1 byte", "512 bytes", "4.77 MiB", "13.5 GiB"]
