"""Each launch option is defined once (``kernel/launch/options.py``) and ``%%train``,
``%train_pool start`` and ``hotswitch train`` generate their flags from it: every flag of the
three has exactly one definition (a launch option, a run setting, or the command's own), and
where two commands take an option they show the same help and default."""

import argparse
import re

import pytest

from hotswitch.backend.train.config.run_config import SETTINGS
from hotswitch.kernel.cli import train_command
from hotswitch.kernel.cli.train_flags import flag
from hotswitch.kernel.launch.named import foreign_options, launcher_options
from hotswitch.kernel.launch.options import DEFAULT_NPROC, OPTIONS
from hotswitch.kernel.notebook.cells.magics import TrainMagics
from hotswitch.kernel.notebook.pools.pool_magics import PoolMagics

# the flags that are one command's own, each defined where the command is
OWN = {
    "%%train": {"--pool", "--name", "--wait", "--run-dir", "--push"},
    "%train_pool": set(),
    "hotswitch train": {"--config", "--json"},
}


def flags_in(parser: argparse.ArgumentParser) -> set[str]:
    """Every flag the parser's usage line offers (its help aside)."""
    return set(re.findall(r"(?<![\w-])--?[a-z][a-z0-9-]*", parser.format_usage())) - {"-h", "--help"}


def parsers() -> dict[str, argparse.ArgumentParser]:
    return {
        "%%train": TrainMagics.train.parser,
        "%train_pool": PoolMagics.train_pool.parser,
        "hotswitch train": train_command.add_parser(argparse.ArgumentParser(prog="hotswitch").add_subparsers()),
    }


def definitions_of(name: str) -> list[str]:
    """Where the flag ``name`` is defined: launch options, run settings, commands' own."""
    found = [f"launch option {o.dest}" for o in OPTIONS.values() if name in o.flags and o.setting is None]
    found += [f"setting {s.key}" for s in SETTINGS.values() if name in (flag(s), "--no-" + flag(s)[2:])]
    return found


@pytest.mark.parametrize("command", list(OWN))
def test_every_flag_has_exactly_one_definition(command):
    flags = flags_in(parsers()[command]) - OWN[command]
    counted = {name: definitions_of(name) for name in flags}
    assert {name: where for name, where in counted.items() if len(where) != 1} == {}
    assert not OWN[command] & {f for o in OPTIONS.values() for f in o.flags}, "a command's own flag is an option"


def help_and_default(parser: argparse.ArgumentParser, dest: str) -> tuple[str, object]:
    args = parser.parse_args([] if parser.prog != "%train_pool" else ["start", "x"])
    text = " ".join(parser.format_help().split())
    return ("--" + dest.replace("_", "-")) in text, getattr(args, dest, None)


def test_an_option_two_commands_share_has_one_default_and_one_help():
    pool = PoolMagics.train_pool.parser.parse_args(["start", "x"])
    command = train_command.add_parser(argparse.ArgumentParser().add_subparsers()).parse_args([])
    for dest in ("nproc", "nodes", "launcher", "channel_host", "ray_address", "partition"):
        assert getattr(pool, dest) == getattr(command, dest) == OPTIONS[dest].default, dest
    assert pool.nproc == DEFAULT_NPROC
    assert TrainMagics.train.parser.parse_args([]).nproc is None  # resolved at launch: the pool's, else the default
    for parser in parsers().values():
        text = " ".join(parser.format_help().split())
        assert " ".join(OPTIONS["channel_host"].text().split()) in text


def test_device_is_the_run_settings_definition():
    device = SETTINGS["device"]
    for parser in parsers().values():
        text = " ".join(parser.format_help().replace("%%", "%").split())
        assert " ".join(device.help.split()) in text
        assert "--device" in flags_in(parser)


def test_a_launchers_option_is_none_unless_given_and_its_default_is_the_launchers():
    """``--runtime`` has a default, yet a command left at its defaults gives no launcher's option,
    so ``--launcher local`` (and a local pool) start without refusing one."""
    runtime = OPTIONS["runtime"]
    assert (runtime.owner, runtime.default) == ("kubeflow", "torch-distributed")
    for command, parser in parsers().items():
        args = parser.parse_args([] if command != "%train_pool" else ["start", "x"])
        assert {key: value for key, value in launcher_options(args).items() if value is not None} == {}, command
        assert foreign_options(args.launcher, launcher_options(args)) is None
        text = " ".join(parser.format_help().replace("%%", "%").split())
        assert "with --launcher kubeflow: the TrainJob's ClusterTrainingRuntime" in text, command
        assert "(default torch-distributed)" in text, command


def test_each_launchers_options_are_its_own_flags():
    expected = {
        "slurm": {"--partition", "--time", "--gpus-per-node", "--account", "--qos", "--slurm-args"},
        "kubeflow": {"--namespace", "--image", "--resources", "--runtime", "--kubeflow-backend"},
    }
    for owner, flags in expected.items():
        assert {f for o in OPTIONS.values() if o.owner == owner for f in o.flags} == flags
        for parser in parsers().values():
            assert flags <= flags_in(parser)
