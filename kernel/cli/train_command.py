"""``hotswitch train``: headless hot-switch training on local ranks through torchrun."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from hotswitch.backend.runtime.devices import local_gpus_problem
from hotswitch.backend.train.loop.events import NOTICES, notice
from hotswitch.backend.train.loop.run_totals import summarize
from hotswitch.kernel.cli import progress
from hotswitch.kernel.cli.headless import check_launch, follow
from hotswitch.kernel.cli.train_flags import add_training_flags, given_settings
from hotswitch.kernel.launch.named import launcher_options, make_launcher
from hotswitch.kernel.launch.options import LAUNCHER_OPTIONS, add_launch_options
from hotswitch.kernel.notebook.jobs.job import Job

# the launch options it takes (``launch/options.py``); --device is a training setting here
TRAIN_COMMAND_OPTIONS = ("nproc", *LAUNCHER_OPTIONS, "timeout", "channel_host")
BODY = """\
from hotswitch.backend.train.run.recipe import run
run({spec!r}, job.emit, job.control)
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "train",
        help="train on local ranks with hot switching, headless",
        description="Settings come from the defaults, then --config run.toml, then the flags given.",
        argument_default=argparse.SUPPRESS,  # a flag not given leaves the config's value
    )
    add_launch_options(p.add_argument, TRAIN_COMMAND_OPTIONS)
    p.add_argument("--config", help="a TOML run configuration (the settings' keys); flags override it")
    add_training_flags(p)  # --device among them: the run setting's, which the launch reads
    p.add_argument("--json", action="store_true", default=False, help="print the summary as JSON")
    p.set_defaults(run=run)
    return p


def spec_from(args) -> dict:
    """The run's settings, flat: ``--config``'s, overridden by the flags given."""
    from hotswitch.backend.train.config.run_config import load_toml

    spec = load_toml(args.config) if getattr(args, "config", None) else {}
    return {**spec, **given_settings(args)}


def tracked_name(spec: dict, config: str | None) -> str:
    """What trackers call a ``hotswitch train`` run without a ``run_name``: the ``--config``
    file's name, else the model's (an ``hf:`` folder's name), and the time it started."""
    model = str(spec.get("model", "tiny"))
    base = Path(config).stem if config else Path(model.removeprefix("hf:")).name or model
    return f"{base}-{time.strftime('%Y%m%d-%H%M%S')}"


def train(
    spec: dict,
    nproc: int,
    timeout: float | None = None,
    show_progress: bool = True,
    launcher=None,
    nodes: int = 1,
    host: str = "127.0.0.1",
) -> tuple[Job, dict, int | None]:
    """Launch the run, follow it to the end (Ctrl-C stops it cleanly); the job, its summary and
    the exit status of the signal that stopped it (None if it ended by itself)."""

    def show(events: list[dict]) -> None:
        if not show_progress:
            return
        for e in events:  # in order: a notice after the step it follows
            if e.get("type") in NOTICES:  # a line of its own, above the bar
                progress.write(progress.above_bar(notice(e)))
            elif e.get("type") == "eval":
                progress.write(progress.above_bar(f"step {e['step']}: held-out loss {e['loss']:.4f}"))
            elif e.get("type") == "step":
                progress.write(progress.bar(e))

    job, signalled = follow("train", BODY.format(spec=spec), nproc, show, timeout, launcher, nodes, host)
    if show_progress:
        progress.write("\n")
    return job, summarize(job.events), signalled


def check(spec: dict, nproc: int) -> dict:
    """Refuse a spec or a plan that cannot run on ``nproc`` ranks before launching anything;
    the full spec, flat."""
    from hotswitch.backend.layout import check_strategy
    from hotswitch.backend.strategy import Strategy
    from hotswitch.backend.train.planning.dispatch import check_device_groups
    from hotswitch.backend.train.run.spec import check_run

    checked = check_run(spec)
    run = checked.config  # model: a preset's or an hf:DIR checkpoint's
    model = checked.model
    parallelism = run.parallelism
    plan = parallelism.hot_switch_plan()
    chosen = Strategy.parse(parallelism.instantiation) if parallelism.instantiation else None
    run.check_world(model, nproc)
    for strategy in [*([] if isinstance(plan, str) else plan.strategies), *([chosen] if chosen else [])]:
        check_strategy(model, strategy)
    if not isinstance(plan, str):  # a named plan; the string is "auto"
        check_device_groups(plan.strategies, nproc)
    return run.as_spec()


def run(args) -> int:
    check_launch(args.nproc, args.timeout)
    if args.nodes < 1:
        raise ValueError(f"--nodes {args.nodes} starts nothing; give at least 1")
    if args.nodes > 1 and args.launcher == "local":
        raise ValueError(
            f"--nodes {args.nodes} with --launcher local: this command starts ranks on this machine only; "
            "give --launcher ray, slurm or kubeflow to start every node from here"
        )
    given = spec_from(args)
    if given.get("track") and not given.get("run_name"):
        given["run_name"] = tracked_name(given, getattr(args, "config", None))
    spec = check(given, args.nproc * args.nodes)
    if spec["device"] == "cuda" and args.launcher == "local" and (problem := local_gpus_problem(args.nproc)):
        raise ValueError(f"--device cuda: {problem}")
    launcher = make_launcher(args.launcher, **launcher_options(args))
    job, result, signalled = train(
        spec, args.nproc, args.timeout, not args.json, launcher, args.nodes, args.channel_host
    )
    if args.json:
        print(json.dumps({"status": job.status, **result}, indent=1))
    else:
        print(progress.table(result))
        print(f"job {job.status}")
    return 0 if job.status == "succeeded" else signalled or 1
