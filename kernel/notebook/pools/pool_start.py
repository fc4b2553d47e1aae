"""Starting a warm pool on any launcher (``%train_pool start``), and following a detached one
again from another kernel (``%train_pool attach``).

A pool is a job whose body is ``pool_serve``'s loop, so it starts the way a ``%%train`` job does,
through the launcher ``--launcher`` names (torchrun here, Ray node agents, a Slurm batch job, a
Kubeflow TrainJob): the pool needs nothing of a launcher beyond its ranks and the job's channel.
A detached pool (``--detach``) is a detached job: its ranks watch no kernel, its run folder
(``pool-NAME-...``) keeps what another kernel needs to follow it (``job.json``, the channel's
secret, the events) and ``pool.json`` what makes it a pool; its ranks keep the idle timeout
themselves, since no kernel may be there to.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from IPython.core.error import UsageError

from hotswitch.backend.runtime.devices import ENV_DEVICE
from hotswitch.kernel.launch.launcher import LaunchGone, LaunchSpec
from hotswitch.kernel.launch.named import launcher_options, make_launcher
from hotswitch.kernel.notebook.cells.train_options import check_local_gpus, parse_env
from hotswitch.kernel.notebook.jobs.attach import attachable, find_run, read_summary
from hotswitch.kernel.notebook.jobs.detached import private_dir, reattach, record_run
from hotswitch.kernel.notebook.jobs.job import Job
from hotswitch.kernel.notebook.jobs.run_record import new_run_dir
from hotswitch.kernel.notebook.pools.pool import Pool
from hotswitch.kernel.worker.collective_wait import ENV_COLLECTIVE_WAIT
from hotswitch.kernel.worker.pool_serve import ENV_IDLE_TIMEOUT

POOL_BODY = "from hotswitch.kernel.worker.pool_serve import serve\n\nserve(job)\n"
POOL_FILE = "pool.json"  # in a detached pool's run folder: its name, size, device, limits


def job_name(pool: str) -> str:
    """The name of the job whose ranks are pool ``pool`` (its run folders are ``pool-NAME-...``)."""
    return f"pool-{pool}"


def start_pool(args, jobs, output) -> Pool:
    """Submit the ranks of the pool ``args`` describes (``%train_pool start``'s options) and
    return it at once (not yet ready); UsageError for options its launcher refuses."""
    try:
        launcher = make_launcher(args.launcher, **launcher_options(args))
    except ValueError as error:
        raise UsageError(str(error)) from None
    check_local_gpus(args)
    idle = args.idle_timeout or None
    env = {**parse_env(args.env), ENV_DEVICE: args.device, ENV_COLLECTIVE_WAIT: str(args.collective_wait)}
    run_dir = new_run_dir(job_name(args.name)) if args.detach else None
    if run_dir is not None:
        env[ENV_IDLE_TIMEOUT] = str(idle or 0)  # no kernel may be there to stop it
        job_dir = private_dir(run_dir / "job")
    else:
        job_dir = jobs.new_job_dir(job_name(args.name))
    body = job_dir / "body.py"
    body.write_text(POOL_BODY)
    spec = LaunchSpec(job_dir, body, args.nproc, args.nodes, env=env, workdir=Path.cwd(), detach=args.detach)
    try:
        launcher.check(spec)
    except ValueError as error:
        raise UsageError(str(error)) from None
    size = args.nproc * args.nodes
    if run_dir is not None:
        spec = replace(spec, log_dir=run_dir / "logs")
        settings = {"name": args.name, "size": size, "device": args.device, "idle_timeout": idle}
        settings["max_bytes"] = args.max_message_bytes
        (run_dir / POOL_FILE).write_text(json.dumps(settings) + "\n")
    job = Job(job_name(args.name), spec, launcher, output, host=args.channel_host, max_bytes=args.max_message_bytes)
    if run_dir is not None:
        record_run(job, run_dir, POOL_BODY)
    return Pool(args.name, job, size, idle, args.max_message_bytes, args.device)


def pool_run(text: str, missing: str = "") -> Path:
    """The run folder of the detached pool ``text`` names (its newest), or the folder ``text``;
    UsageError (after ``missing``, what else was looked for) if there is none."""
    try:
        folder = find_run(text) if (Path(text).expanduser() / POOL_FILE).is_file() else find_run(job_name(text))
    except ValueError:
        also = f"{missing}; and " if missing else ""
        raise UsageError(
            f"{also}no detached pool named {text!r} was started here (%train_pool start {text} --detach)"
        ) from None
    if not (folder / POOL_FILE).is_file():
        raise UsageError(f"{folder} is a job's run folder, not a pool's: %train_attach {folder}")
    return folder


def newest_of_name(text: str, job_folder: Path) -> Path:
    """``job_folder`` (the newest run of job ``text``), or the newest run of the detached pool
    ``text`` where that is newer: a name may have been used by a job and, later, a pool."""
    if (Path(text).expanduser() / "job.json").is_file():
        return job_folder
    try:
        pool = find_run(job_name(text))
    except ValueError:
        return job_folder
    newer = (pool / "job.json").stat().st_mtime > (job_folder / "job.json").stat().st_mtime
    return pool if newer and (pool / POOL_FILE).is_file() else job_folder


def pool_name(folder: Path) -> str:
    """The name of the pool recorded in run folder ``folder``."""
    return json.loads((folder / POOL_FILE).read_text())["name"]


def attach_pool(folder: Path, output) -> Pool:
    """The detached pool recorded in ``folder``, followed again (it goes on recording there);
    UsageError if it has ended, saying how."""
    settings = json.loads((folder / POOL_FILE).read_text())
    summary = read_summary(folder)
    name = settings["name"]
    if not attachable(summary):
        reason = f": {summary['exit_reason']}" if summary.get("exit_reason") else ""
        raise UsageError(
            f"pool {name!r} has ended ({summary.get('status', 'ended')}{reason}); start it again with "
            f"%train_pool start {name} --detach"
        )
    try:
        job = reattach(summary, folder, output)
    except LaunchGone as gone:
        raise UsageError(
            f"pool {name!r} ended while no kernel followed it ({gone}); start it again with "
            f"%train_pool start {name} --detach"
        ) from None
    except (ValueError, OSError) as error:
        raise UsageError(str(error)) from None
    record_run(job, folder, POOL_BODY, replay=False)
    # its ranks said "pool.ready" to the kernel that started it: the recorded events replay that
    return Pool(name, job, settings["size"], settings["idle_timeout"], settings["max_bytes"], settings["device"])
