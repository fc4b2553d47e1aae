"""One typed run configuration: the recipe's dict, a ``RunConfig`` and a TOML file describe the
same run, with the same defaults and the same checks."""

import pytest

from hotswitch.backend.train.run.recipe import DEFAULTS, ENV_NOTEBOOK_DIR, check_spec
from hotswitch.backend.train.run.run_config import KNOWN, RunConfig, load_toml
from hotswitch.backend.train.run.spec import run_config

TOML = """
model = "tiny"
steps = 40
plan = [["tp4", 128], ["dp4", 0]]

[optim]
lr = 3e-4
lr_schedule = "cosine"
warmup_steps = 4
betas = [0.9, 0.99]

[eval]
eval_every = 10
"""


def test_the_spec_defaults_are_the_typed_configs():
    assert RunConfig().as_spec() == DEFAULTS and tuple(DEFAULTS) == KNOWN


def test_a_toml_file_a_dict_and_a_run_config_give_the_same_run(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(tmp_path))
    (tmp_path / "run.toml").write_text(TOML)
    settings = load_toml(tmp_path / "run.toml")
    assert settings["betas"] == (0.9, 0.99) and settings["eval_every"] == 10
    from_file = check_spec("run.toml")  # relative to the notebook's folder
    assert from_file == check_spec(settings) == check_spec(RunConfig(**settings))
    typed = run_config("run.toml")
    assert isinstance(typed, RunConfig) and typed.steps == 40 and typed.lr_schedule == "cosine"
    assert typed.plan == [["tp4", 128], ["dp4", 0]] and typed.checkpoint_every is None


def test_a_typo_in_toml_names_the_key_and_lists_the_known_ones(tmp_path):
    (tmp_path / "typo.toml").write_text("[optim]\nlearning_rate = 1e-3\n")
    with pytest.raises(ValueError) as error:
        load_toml(tmp_path / "typo.toml")
    assert "unknown training settings ['learning_rate']" in str(error.value)
    assert "known: model, data, text_field, tokenizer" in str(error.value)


@pytest.mark.parametrize("key", ["shard_optimizer", "context_parallel"])
def test_three_way_switches_are_settings_checked_by_type(tmp_path, key):
    (tmp_path / "switch.toml").write_text(f"[optimizer]\n{key} = false\n")
    assert check_spec(str(tmp_path / "switch.toml"))[key] is False
    assert check_spec({})[key] is None  # the default decides by the run (dp > 1; sequences from 4,096 tokens)
    for bad in (1, "yes"):
        with pytest.raises(ValueError, match=rf"'{key}' = .* give true, false or leave it out"):
            check_spec({key: bad})
