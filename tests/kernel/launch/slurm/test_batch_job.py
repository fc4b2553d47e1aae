"""What ``--launcher slurm`` submits, without a Slurm: the batch script carries the launch options
that are sbatch's own (``--partition``, ``--account``, ``--qos``...), sbatch's command line
carries ``--slurm-args`` before the script, and a pass-through argument that would set what the
launcher sets is refused before the controller is asked, naming the option to give instead."""

import argparse
import shlex

import pytest
from IPython.core.magic_arguments import parse_argstring

from hotswitch.kernel.channel.secrets import SECRET_FILE
from hotswitch.kernel.cli import train_command
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.named import make_launcher
from hotswitch.kernel.launch.slurm import launcher as slurm_launcher
from hotswitch.kernel.launch.slurm.batch_job import batch_script, extra_sbatch_args, sbatch_argv
from hotswitch.kernel.notebook.cells.magics import TrainMagics


def _spec(tmp_path) -> LaunchSpec:
    job_dir = tmp_path / "job1"
    job_dir.mkdir()
    (job_dir / "body.py").write_text("print('hi')\n")
    (job_dir / SECRET_FILE).write_text('{"key": "k"}')
    return LaunchSpec(job_dir=job_dir, body_path=job_dir / "body.py", nproc=4, nodes=2)


def _directives(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_batch_script_carries_the_sbatch_launch_options_given(tmp_path):
    options = {"partition": "gpu", "time": "2:00:00", "gpus_per_node": 8, "account": "proj7", "qos": "high"}
    spec = _spec(tmp_path)
    script = batch_script(tmp_path, spec, {**options, "slurm_args": "--exclusive"})
    assert _directives(script) == [
        "--job-name=hotswitch-job1",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=4",
        f"--output={tmp_path}/slurm-%j.out",
        "--partition=gpu",
        "--time=2:00:00",
        "--gpus-per-node=8",
        "--account=proj7",
        "--qos=high",
    ]
    assert _directives(batch_script(tmp_path, spec, dict.fromkeys(options)))[5:] == []  # none given: none set


def test_slurm_args_go_on_sbatchs_command_line_before_the_script(tmp_path):
    extra = extra_sbatch_args("--exclusive --mem=0 --comment 'two words' --gpus=2 --gres=gpu:4")
    assert extra == ["--exclusive", "--mem=0", "--comment", "two words", "--gpus=2", "--gres=gpu:4"]
    assert sbatch_argv(tmp_path / "job.sbatch", extra) == ["sbatch", "--parsable", *extra, str(tmp_path / "job.sbatch")]
    assert extra_sbatch_args(None) == [] and extra_sbatch_args("") == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('--slurm-args "--exclusive --mem=0"', ["--exclusive", "--mem=0"]),
        ("--slurm-args '--comment=\"a b\" --exclusive'", ["--comment=a b", "--exclusive"]),
        ("--slurm-args=--exclusive", ["--exclusive"]),
    ],
)
def test_slurm_args_from_a_magic_or_the_command_line_reach_sbatch_alike(line, expected):
    """A magic's line is split keeping its quotes (IPython's ``arg_split``), a shell's is not."""
    magic = parse_argstring(TrainMagics.train, line).slurm_args
    command = train_command.add_parser(argparse.ArgumentParser().add_subparsers()).parse_args(shlex.split(line))
    assert extra_sbatch_args(magic) == extra_sbatch_args(command.slurm_args) == expected


SET_FROM = "which the launcher sets from"
ALONE = "which is the launcher's alone"


@pytest.mark.parametrize(
    ("slurm_args", "message"),
    [
        ("--nodes=3", f"--nodes=3 would set sbatch's --nodes, {SET_FROM} --nodes; give --nodes instead"),
        ("--exclusive -N 3", f"-N would set sbatch's --nodes, {SET_FROM} --nodes; give --nodes instead"),
        ("--ntasks-per-node 4", f"--ntasks-per-node would set sbatch's --ntasks-per-node, {SET_FROM} -n/--nproc; give"),
        ("-n8", f"-n8 would set sbatch's --ntasks, {SET_FROM} -n/--nproc; give -n/--nproc instead"),
        ("--cpus-per-task=16", f"--cpus-per-task=16 would set sbatch's --cpus-per-task, {SET_FROM} -n/--nproc"),
        ("--part=debug", f"--part=debug would set sbatch's --partition, {SET_FROM} --partition; give --partition"),
        ("-p debug", f"-p would set sbatch's --partition, {SET_FROM} --partition; give --partition instead"),
        ("-t 1:00:00", f"-t would set sbatch's --time, {SET_FROM} --time; give --time instead"),
        ("--gpus-per-node=2", f"--gpus-per-node=2 would set sbatch's --gpus-per-node, {SET_FROM} --gpus-per-node"),
        ("-A proj7", f"-A would set sbatch's --account, {SET_FROM} --account; give --account instead"),
        ("--qos=high", f"--qos=high would set sbatch's --qos, {SET_FROM} --qos; give --qos instead"),
        ("--job-name=mine", f"--job-name=mine would set sbatch's --job-name, {ALONE} (it names the job after its"),
        ("-o /tmp/out", f"-o would set sbatch's --output, {ALONE} (it reads the job's output from the run folder)"),
        ("--parsable", f"--parsable would set sbatch's --parsable, {ALONE} (it reads the job id from sbatch's"),
        ("--wrap 'echo hi'", f"--wrap would set sbatch's --wrap, {ALONE} (it submits its own batch script); leave"),
    ],
)
def test_slurm_args_the_launcher_sets_are_refused_naming_what_to_give(slurm_args, message):
    with pytest.raises(ValueError) as refused:
        extra_sbatch_args(slurm_args)
    assert str(refused.value).startswith(f"--slurm-args: {message}")


def test_slurm_args_that_a_shell_could_not_split_are_refused():
    with pytest.raises(ValueError, match=r"--slurm-args \"--comment 'open\" cannot be split .*closing quotation"):
        extra_sbatch_args("--comment 'open")


def test_slurm_args_are_refused_before_the_controller_is_asked(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm commands: asking the controller would fail otherwise
    with pytest.raises(ValueError, match=r"^--slurm-args: --nodes=2 would set sbatch's --nodes"):
        make_launcher("slurm", slurm_args="--nodes=2")


def test_slurm_launch_submits_the_options_and_the_pass_through(monkeypatch, tmp_path):
    called: list[tuple[str, ...]] = []

    def slurm(*argv, timeout=None):
        called.append(argv)
        return "4242;cluster\n" if argv[0] == "sbatch" else ""

    monkeypatch.setattr(slurm_launcher, "slurm", slurm)
    options = {"partition": "gpu", "account": "proj7", "qos": "high", "slurm_args": "--exclusive --mem=0"}
    launcher = make_launcher("slurm", **options)
    spec = _spec(tmp_path)
    assert launcher.submit(spec) == "slurm:4242"
    folder = spec.job_dir / "slurm"
    assert called == [
        ("scontrol", "ping"),
        ("sbatch", "--parsable", "--exclusive", "--mem=0", str(folder / "job.sbatch")),
    ]
    directives = _directives((folder / "job.sbatch").read_text())
    assert {"--partition=gpu", "--account=proj7", "--qos=high"} <= set(directives)
    assert not [d for d in directives if "exclusive" in d or "mem" in d]  # on the command line only
    settings = launcher.settings()  # what a detached job's run folder keeps to attach again
    assert settings == {**dict.fromkeys(("time", "gpus_per_node")), **options}
    assert make_launcher("slurm", **settings).settings() == settings


def test_slurm_options_without_launcher_slurm_are_refused():
    for option, flag in (("account", "--account"), ("qos", "--qos"), ("slurm_args", "--slurm-args")):
        with pytest.raises(ValueError, match=f"^{flag}: for --launcher slurm, and --launcher local would ignore it"):
            make_launcher("local", **{option: "x"})
