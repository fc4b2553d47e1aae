"""One typed run configuration: the recipe's flat dict, a ``RunConfig`` tree and a TOML file
describe the same run, with the same defaults and the same checks; each section checks itself;
the resume checkpoint's metadata is read once."""

import json
from dataclasses import asdict, fields
from pathlib import Path

import pytest

import hotswitch.backend
from hotswitch.backend.models.config import get_config
from hotswitch.backend.train.config.optimizer import OptimizerSettings
from hotswitch.backend.train.config.parallelism import ParallelismSettings
from hotswitch.backend.train.config.run_config import KNOWN, SECTIONS, SETTINGS, RunConfig, load_toml
from hotswitch.backend.train.run.recipe import DEFAULTS, ENV_NOTEBOOK_DIR, check_spec
from hotswitch.backend.train.run.spec import check_run, run_config
from hotswitch.backend.train.state import checkpoint

TOML = """
model = "tiny"
steps = 40
plan = [["tp4", 128], ["dp4", 0]]

[optimizer]
lr = 3e-4
lr_schedule = "cosine"
warmup_steps = 4
betas = [0.9, 0.99]

[evaluation]
eval_every = 10
"""


def test_the_spec_defaults_are_the_typed_configs():
    assert RunConfig().as_spec() == DEFAULTS and tuple(DEFAULTS) == KNOWN
    assert RunConfig.of({}) == RunConfig() and RunConfig.of(DEFAULTS) == RunConfig()


def test_every_setting_lives_in_one_section_under_one_key():
    declared = [f for section in SECTIONS.values() for f in fields(section)]
    root = [f for f in fields(RunConfig) if f.name not in SECTIONS]
    assert len(KNOWN) == len(set(KNOWN)) == len(declared) + len(root)
    assert {s.section for s in SETTINGS.values()} == {None, *SECTIONS}
    assert all(s.help for s in SETTINGS.values())  # the flag's help comes from the field


def test_a_flat_dict_builds_the_same_tree_as_the_sections():
    flat = RunConfig.of({"lr": 3e-4, "plan": "dp4", "steps": 7, "precision": "bf16"})
    typed = RunConfig(steps=7, optimizer=OptimizerSettings(lr=3e-4), parallelism=ParallelismSettings(plan="dp4"))
    assert flat.precision.compute == "bf16" and flat == RunConfig.of({**typed.as_spec(), "precision": "bf16"})
    assert flat["lr"] == flat.optimizer.lr == 3e-4 and flat["plan"] == "dp4"
    assert RunConfig.of(flat.as_spec()) == flat
    with pytest.raises(KeyError, match="unknown training setting 'learning_rate'"):
        flat["learning_rate"]


def test_a_section_checks_itself_naming_the_setting_and_the_fix():
    with pytest.raises(ValueError, match=r"'min_lr' = 0.5 is not valid: give a number from 0 to lr \(0.001\)"):
        OptimizerSettings(min_lr=0.5).check()
    with pytest.raises(ValueError, match=r"'plan' = 'dp3x' is not valid: cannot parse strategy"):
        ParallelismSettings(plan="dp3x").check()
    assert OptimizerSettings().check().adamw(steps=10).decay_steps is None  # constant: no decay


def test_a_toml_file_a_dict_and_a_run_config_give_the_same_run(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(tmp_path))
    (tmp_path / "run.toml").write_text(TOML)
    settings = load_toml(tmp_path / "run.toml")
    assert settings["betas"] == (0.9, 0.99) and settings["eval_every"] == 10
    from_file = check_spec("run.toml")  # relative to the notebook's folder
    assert from_file == check_spec(settings) == check_spec(RunConfig.of(settings))
    typed = run_config("run.toml")
    assert isinstance(typed, RunConfig) and typed.steps == 40 and typed.optimizer.lr_schedule == "cosine"
    assert typed.parallelism.plan == [["tp4", 128], ["dp4", 0]] and typed.checkpoints.checkpoint_every is None
    assert typed.optimizer.adamw(typed.steps).decay_steps == 36  # cosine over the steps after warmup


def test_a_typo_in_toml_names_the_key_and_lists_the_known_ones(tmp_path):
    (tmp_path / "typo.toml").write_text("[optimizer]\nlearning_rate = 1e-3\n")
    with pytest.raises(ValueError) as error:
        load_toml(tmp_path / "typo.toml")
    assert "unknown training settings ['learning_rate']" in str(error.value)
    assert "known: model, router_aux_loss_coef, data, text_field, prompt_field" in str(error.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[optim]\nlr = 1e-3\n", "[optim] is not a section; did you mean [optimizer]?"),
        ("[optimizer]\nmax_len = 64\n", "'max_len' is not a setting of [optimizer]; it goes under [data]"),
        ("[data]\nsteps = 3\n", "'steps' is not a setting of [data]; it goes under the top of the file"),
        ("[optimizer.adamw]\nlr = 1e-3\n", "[optimizer.adamw] is not a section"),
    ],
)
def test_a_toml_table_must_be_the_section_its_settings_are_in(tmp_path, text, said):
    (tmp_path / "tables.toml").write_text(text)
    with pytest.raises(ValueError) as error:
        load_toml(tmp_path / "tables.toml")
    assert said in str(error.value)


@pytest.mark.parametrize("key", ["shard_optimizer", "context_parallel"])
def test_three_way_switches_are_settings_checked_by_type(tmp_path, key):
    section = SETTINGS[key].section
    (tmp_path / "switch.toml").write_text(f"[{section}]\n{key} = false\n")
    assert check_spec(str(tmp_path / "switch.toml"))[key] is False
    assert check_spec({})[key] is None  # the default decides by the run (dp > 1; sequences from 4,096 tokens)
    for bad in (1, "yes"):
        with pytest.raises(ValueError, match=rf"'{key}' = .* give true, false or leave it out"):
            check_spec({key: bad})


def test_the_token_budget_default_holds_one_whole_sequence():
    assert check_spec({"max_len": 64})["token_budget"] == check_spec({})["token_budget"]
    assert check_spec({"max_len": 1024})["token_budget"] == 1024
    assert RunConfig().precision.token_budget is None  # filled in by the check, from max_len


def test_the_resume_checkpoint_is_read_once_and_handed_on(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(tmp_path))
    (tmp_path / "ckpt").mkdir()
    meta = {"config": asdict(get_config("tiny")), "step": 3, "data": {"position": 5}}
    (tmp_path / "ckpt" / "hotswitch.json").write_text(json.dumps(meta))
    reads = []
    real = checkpoint.read_meta
    monkeypatch.setattr(checkpoint, "read_meta", lambda *args: reads.append(args) or real(*args))
    checked = check_run({"resume_from": "ckpt"})
    assert len(reads) == 1 and checked.resume.step == 3 and checked.resume.data == {"position": 5}
    assert checked.resume.path == tmp_path / "ckpt" and checked.config.checkpoints.resume_from == str(tmp_path / "ckpt")
    assert check_run({}).resume is None
    with pytest.raises(ValueError, match=r"'steps' = 3 is not valid: .*ckpt has trained 3 steps already.*more than 3"):
        check_run({"resume_from": "ckpt", "steps": 3})  # steps count from the start: nothing would train
    assert check_run({"resume_from": "ckpt", "steps": 4}).config.steps == 4


def test_the_notebook_folder_variable_is_defined_once():
    package = Path(hotswitch.backend.__file__).parent.parent  # the hotswitch package's folder
    sources = [p for layer in ("backend", "kernel", "widgets") for p in (package / layer).rglob("*.py")]
    defining = [p.relative_to(package).as_posix() for p in sources if f'= "{ENV_NOTEBOOK_DIR}"' in p.read_text()]
    assert defining == ["backend/train/config/paths.py"]


def test_a_trainer_checks_the_sections_it_reads_against_the_stream_it_is_given():
    run = RunConfig.of({"data": "missing.txt", "plan": "dp2", "instantiation": "tp2"})
    checked = run.check_training(max_len=2048)  # the data comes built: its section is not read
    assert checked.precision.token_budget == 2048 and checked.data == run.data
    assert checked.parallelism.instantiation == "tp2" and checked.optimizer == run.optimizer
    assert checked.check_training(max_len=64).precision.token_budget == 2048  # filled in once, then kept
    with pytest.raises(ValueError, match="'token_budget' = 2048 is not valid: give a whole number of at least 4096"):
        checked.check_training(max_len=4096)  # a budget filled in for shorter sequences holds no longer one


def test_compile_defaults_to_the_device_and_needs_a_compiler_on_the_cpu(monkeypatch):
    from hotswitch.backend.train.config.precision import PrecisionSettings

    assert check_spec({})["compile"] is False and check_spec({"compile": True})["compile"] is True
    assert PrecisionSettings().check(64, "cuda").compile is True  # compiled by default where kernels launch from a host
    assert PrecisionSettings(compile=False).check(64, "cuda").compile is False
    with pytest.raises(ValueError, match=r"'compile' = 'yes' is not valid: give true, false or leave it out"):
        check_spec({"compile": "yes"})
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(ValueError, match=r"'compile' = True is not valid: compiling for the CPU needs a C\+\+"):
        check_spec({"compile": True})


def test_attention_is_chosen_by_measurement_unless_a_kernel_is_named():
    assert check_spec({})["attention"] == "auto" and check_spec({"attention": "math"})["attention"] == "math"
    with pytest.raises(ValueError, match=r"'attention' = 'cudnn' is not valid: that kernel runs on cuda only"):
        check_spec({"attention": "cudnn"})  # the tests' device is the CPU
    with pytest.raises(ValueError, match=r"'attention' = 'fast' is not valid: choose one of auto, flash, efficient"):
        check_spec({"attention": "fast"})


def test_long_documents_are_cut_unless_split_is_asked_for_and_the_stream_follows(tmp_path):
    from hotswitch.backend.train.run.recipe import batches

    (tmp_path / "long.txt").write_text("x" * 300)
    spec = {"data": [str(tmp_path / "long.txt")], "max_len": 64, "batch_size": 4}
    cut = batches(check_spec(spec), get_config("tiny")).next_batch()
    assert [s.length for s in cut] == [64] * 4  # the one document's start, epoch after epoch
    split = batches(check_spec({**spec, "long_documents": "split"}), get_config("tiny")).next_batch()
    assert [s.length for s in split] == [64] * 4 and split[1].tokens[0] == split[0].tokens[-1]
    with pytest.raises(ValueError, match=r"'long_documents' = 'chunk' is not valid: choose one of cut, split"):
        check_spec({"long_documents": "chunk"})


def test_a_plan_for_another_world_size_is_refused_naming_the_setting():
    """What the ranks check once they know the world size (a notebook's job: %%train -n 2)."""
    with pytest.raises(
        ValueError, match=r"setting 'plan' = 'dp3' is not valid: .*uses 3 devices but the cluster has 2"
    ):
        ParallelismSettings(plan="dp3").check().check_world(2)
    with pytest.raises(ValueError, match=r"setting 'instantiation' = 'tp4' is not valid: .*cluster has 2"):
        ParallelismSettings(plan="dp2", instantiation="tp4").check().check_world(2)
    with pytest.raises(ValueError, match=r"setting 'plan' = 'tp2@2-3' is not valid: device group .*needs ranks 2-3"):
        ParallelismSettings(plan="tp2@2-3").check().check_world(2)
    ParallelismSettings(plan=[["tp2@0-1", 128], ["dp2@2-3", 0]]).check().check_world(4)
    ParallelismSettings().check().check_world(3)  # auto: planned for whatever world there is


def test_an_evaluation_less_often_than_the_run_is_long_is_refused():
    from hotswitch.backend.train.run.spec import check_run

    with pytest.raises(ValueError, match=r"'eval_every' = 5 is not valid: more than steps \(2\): nothing would be"):
        check_run({"steps": 2, "eval_every": 5})
    assert check_run({"steps": 5, "eval_every": 5}).config.evaluation.eval_every == 5


def test_a_plan_of_another_kind_is_refused_saying_what_a_plan_is():
    with pytest.raises(ValueError, match=r"'plan' = 4 is not valid: give 'auto', a strategy \('dp4'\), or buckets"):
        ParallelismSettings(plan=4).check()
