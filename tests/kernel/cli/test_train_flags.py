"""``hotswitch train``'s training flags are the run configuration's settings: every setting has
exactly one flag and one default (the field's, shown in the help), and no flag exists without a
setting beside the launcher's and the command's own."""

import argparse
import re
from typing import get_args

import pytest

from hotswitch.backend.train.config.run_config import SETTINGS, RunConfig
from hotswitch.kernel.cli import train_command
from hotswitch.kernel.cli.train_flags import default_text, flag, flag_options, given_settings
from hotswitch.kernel.launch.options import add_launch_options

# What ``hotswitch train`` takes beside the run's settings and its launch options.
COMMAND_FLAGS = {"--config", "--json"}


def flags_in(parser: argparse.ArgumentParser) -> set[str]:
    """Every long flag the parser's usage line offers."""
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", parser.format_usage()))


def train_parser() -> argparse.ArgumentParser:
    return train_command.add_parser(argparse.ArgumentParser().add_subparsers())


def launcher_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_launch_options(parser.add_argument, train_command.TRAIN_COMMAND_OPTIONS)
    return parser


def test_every_setting_has_one_flag_and_no_training_flag_lacks_a_setting():
    setting_flags = {flag(s) for s in SETTINGS.values()}
    assert len(setting_flags) == len(SETTINGS)
    switches = {f"--no-{flag(s)[2:]}" for s in SETTINGS.values() if s.hint is bool or bool in get_args(s.hint)}
    wanted = {"--no-context-parallel", "--no-shard-optimizer", "--no-packing", "--no-side-by-side", "--no-compile"}
    assert switches == wanted
    offered = flags_in(train_parser())
    assert offered - flags_in(launcher_parser()) - COMMAND_FLAGS == setting_flags | switches


def test_no_flag_holds_a_default_of_its_own_and_the_help_shows_the_fields():
    args = train_parser().parse_args([])
    assert not set(vars(args)) & set(SETTINGS)  # a flag not given leaves the setting alone
    assert given_settings(args) == {}
    for setting in SETTINGS.values():
        text = " ".join(flag_options(setting)["help"].split())
        shown = default_text(setting)
        assert shown is None or text.endswith(f"(default: {shown})"), (setting.key, text)
    assert default_text(SETTINGS["betas"]) == "0.9 0.95" and default_text(SETTINGS["lr"]) == str(
        RunConfig().optimizer.lr
    )


def test_each_flag_sets_its_setting_in_the_settings_own_form():
    argv = ["--lr", "3e-4", "--betas", "0.9", "0.99", "--no-shard-optimizer", "--track", "wandb", "--track",
            "tensorboard:tb", "--data", "a.txt", "b.jsonl", "--plan", "tp4:64,dp4:0", "--eval-fraction", "0.1",
            "--precision", "bf16", "--checkpoint", "out"]  # fmt: skip
    given = given_settings(train_parser().parse_args(argv))
    assert given == {
        "lr": 3e-4,
        "betas": [0.9, 0.99],
        "shard_optimizer": False,
        "track": ["wandb", "tensorboard:tb"],
        "data": ["a.txt", "b.jsonl"],
        "plan": [["tp4", 64], ["dp4", 0]],
        "eval_fraction": 0.1,
        "precision": "bf16",
        "checkpoint": "out",
    }
    config = RunConfig.of(given)
    assert config.precision.compute == "bf16" and config.checkpoints.final == "out"
    assert given_settings(train_parser().parse_args(["--data", "synthetic:github"])) == {"data": "synthetic:github"}


@pytest.mark.parametrize(
    ("argv", "message"), [(["--steps", "many"], "invalid int value"), (["--lr-schedule", "x"], "invalid choice")]
)
def test_a_flag_refuses_text_its_setting_cannot_take(argv, message, capsys):
    with pytest.raises(SystemExit):
        train_parser().parse_args(argv)
    assert message in capsys.readouterr().err


CHECK_WITHOUT_TORCH = """
import sys
from hotswitch.kernel.cli.train_command import check
for plan in ("dp2", "auto", [["tp2", 64], ["dp2", 0]], [["dp1@0", 64], ["dp1@1", 0]]):
    check({"plan": plan, "steps": 1, "batch_size": 2, "max_len": 32}, 2)
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_the_command_line_checks_a_run_without_importing_torch():
    """``hotswitch train`` is a process beside the ranks: importing torch there cost 2 s of CPU
    on an idle machine (and up to 14 s on a loaded one) for nothing the command line uses."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CHECK_WITHOUT_TORCH], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"the command line imported torch: {done.stdout}"


def test_the_word_none_unsets_what_the_config_gave(tmp_path):
    from hotswitch.kernel.cli.train_command import spec_from

    config = tmp_path / "run.toml"
    config.write_text(
        '[checkpoints]\ncheckpoint_every = 10\n[parallelism]\ndevice = "cpu"\n[evaluation]\neval_data = ["v.txt"]\n'
    )
    argv = ["--config", str(config), "--checkpoint-every", "none", "--device", "none", "--eval-data", "none"]
    spec = spec_from(train_parser().parse_args(argv))
    assert spec["checkpoint_every"] is None and spec["device"] is None and spec["eval_data"] is None
    with pytest.raises(SystemExit):  # a word that is neither a number nor none is refused, as before
        train_parser().parse_args(["--checkpoint-every", "often"])


def test_relative_paths_in_a_config_are_the_configs_folders(tmp_path):
    from hotswitch.backend.train.config.run_config import load_toml

    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "run.toml").write_text(
        'model = "hf:ckpt"\ntrack = ["tensorboard:tb", "wandb"]\n[data]\ndata = ["docs/*.txt", "stdlib"]\n'
        'tokenizer = "bpe:512"\n[checkpoints]\nexport_hf = "out"\nresume_from = "/abs/ck"\n'
    )
    settings = load_toml(folder / "run.toml")
    assert settings["model"] == f"hf:{folder / 'ckpt'}" and settings["export_hf"] == str(folder / "out")
    assert settings["data"] == [str(folder / "docs/*.txt"), "stdlib"] and settings["tokenizer"] == "bpe:512"
    assert settings["track"] == (f"tensorboard:{folder / 'tb'}", "wandb") and settings["resume_from"] == "/abs/ck"


def test_a_tracked_command_line_run_is_named_after_its_config_or_its_model():
    from hotswitch.kernel.cli.train_command import tracked_name

    assert tracked_name({"model": "hf:/ckpts/my-llama"}, None).startswith("my-llama-2")
    assert tracked_name({}, "/work/sweeps/lr3e-4.toml").startswith("lr3e-4-2")
