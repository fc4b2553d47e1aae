"""``%%train``, ``%jobs`` and ``%train_stop``: launch, list and stop training jobs from a notebook."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from hotswitch.backend.runtime.devices import ENV_DEVICE
from hotswitch.kernel.launch.launcher import Launcher, LaunchGone, LaunchSpec
from hotswitch.kernel.launch.named import launcher_options, make_launcher
from hotswitch.kernel.launch.options import CHANNEL_HOST, DEFAULT_NPROC, LAUNCHER_OPTIONS, magic_launch_options
from hotswitch.kernel.notebook.cells.cell_output import output_for_current_cell
from hotswitch.kernel.notebook.cells.push import push_names, pushed_values, write_pushed
from hotswitch.kernel.notebook.cells.train_options import (
    check_local_gpus,
    check_name,
    check_options,
    check_run_root,
    compile_body,
    parse_env,
)
from hotswitch.kernel.notebook.jobs.attach import attachable, find_run, read_summary
from hotswitch.kernel.notebook.jobs.detached import private_dir, reattach, record_run
from hotswitch.kernel.notebook.jobs.job import Job
from hotswitch.kernel.notebook.jobs.registry import JobRegistry
from hotswitch.kernel.notebook.jobs.run_record import new_run_dir
from hotswitch.kernel.notebook.pools.pool import PoolError
from hotswitch.kernel.notebook.pools.pool_registry import PoolRegistry, pool_launcher_of
from hotswitch.kernel.notebook.pools.pool_start import POOL_FILE, newest_of_name, pool_run
from hotswitch.kernel.worker.collective_wait import ENV_COLLECTIVE_WAIT

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

# %%train's launch options (``launch/options.py``): where and how its ranks start
TRAIN_OPTIONS: tuple[str, ...] = (
    "nproc",
    "node_rank",
    "rdzv_endpoint",
    "rdzv_id",
    "device",
    "detach",
    "env",
    "timeout",
)
TRAIN_OPTIONS += (*LAUNCHER_OPTIONS, "channel_host", "max_message_bytes", "collective_wait")


def launcher_of(args) -> Launcher:
    """The launcher ``--launcher`` names, made from its options."""
    try:
        return make_launcher(args.launcher, **launcher_options(args))
    except ValueError as error:
        raise UsageError(str(error)) from None


def launch_spec(args, job_dir: Path, env: dict, launcher: Launcher) -> LaunchSpec:
    """The cell's options as the job's spec (its body already in ``job_dir``), checked by
    ``launcher``."""
    try:
        spec = LaunchSpec(
            job_dir=job_dir,
            body_path=job_dir / "body.py",
            nproc=args.nproc,
            nodes=args.nodes,
            node_rank=args.node_rank,
            rdzv_endpoint=args.rdzv_endpoint,
            rdzv_id=args.rdzv_id,
            env=env,
            workdir=Path.cwd(),
            detach=args.detach,
        )
        launcher.check(spec)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return spec


@magics_class
class TrainMagics(Magics):
    """The magics and the ``jobs`` registry they share (also ``jobs`` in the user namespace)."""

    shell: InteractiveShell  # always given: the magics are made for a shell

    def __init__(self, shell: InteractiveShell):
        super().__init__(shell)
        self.jobs = JobRegistry()
        self.pools = PoolRegistry()
        shell.user_ns["jobs"] = self.jobs

    def close(self) -> None:
        """Stop every pool and every job (not detached ones); safe to call twice."""
        self.pools.close()
        self.jobs.close()

    @magic_arguments()
    @argument("--pool", default=None, help="run on the warm ranks of %%train_pool start NAME instead of new ones")
    @argument("--name", default=None, help="job name in `jobs`; default job1, job2, ...")
    @argument("--wait", action="store_true", help="block the cell until the job ends (interrupt stops it)")
    @argument("--run-dir", default=None, help="where run folders go (default $HOTSWITCH_RUNS or ~/.hotswitch/runs)")
    @argument("--push", default=None, metavar="A,B", help="notebook variables the body sees, by name")
    @magic_launch_options(TRAIN_OPTIONS, nproc=None)
    @cell_magic
    def train(self, line: str, cell: str):
        """Run the cell body on every rank with torchrun; return a ``Job`` at once.

        The body sees ``torch``, ``hotswitch`` and ``job`` (rank, world_size, local_rank, device,
        emit(event), control()). An empty body, a syntax error or a bad option fails the cell and
        launches nothing. With ``--pool NAME`` the body runs on that warm pool's ranks
        (``%train_pool``), in the namespace the pool's cells share.
        """
        args = parse_argstring(self.train, line)
        compile_body(cell)
        pool = pool_launcher_of(args, self.pools) if args.pool else None
        if args.nproc is None:
            args.nproc = pool.pool.size if pool else DEFAULT_NPROC
        args.device = args.device or (pool.pool.device if pool else "cpu")
        check_options(args)
        if not pool:
            check_local_gpus(args)
        if args.detach and args.wait:
            raise UsageError(
                "--detach with --wait: a detached job outlives this kernel, so the cell would block on a job it "
                "does not hold; drop --wait (jobs[NAME].wait() still waits) or drop --detach"
            )
        pushed = pushed_values(self.shell.user_ns, push_names(args.push)) if args.push is not None else None
        env = {**parse_env(args.env), ENV_DEVICE: args.device, ENV_COLLECTIVE_WAIT: str(args.collective_wait)}
        launcher = pool or launcher_of(args)
        name = check_name(args.name) if args.name else self.jobs.next_name()
        if self.jobs.running(name):
            raise UsageError(f"a job named {name!r} is running; %train_stop {name} first, or pick another --name")
        spec, run_dir = self._launch_from(args, name, cell, pushed, env, launcher)
        try:
            job = Job(
                name,
                replace(spec, log_dir=run_dir / "logs"),
                launcher,
                output_for_current_cell(self.shell),
                timeout=args.timeout,
                host=pool.pool.channel_host if pool and args.channel_host == CHANNEL_HOST else args.channel_host,
                max_bytes=args.max_message_bytes,
            )
        except (PoolError, ValueError) as error:  # busy, gone since the check, or an address not of this machine
            raise UsageError(str(error)) from None
        self.jobs.add(job)
        try:  # an interrupt from here on stops the launched job: the cell never handed it over
            record_run(job, run_dir, cell)
            print(f"[hotswitch] job {name!r}: events recorded in {run_dir}")
            if args.wait:
                job.wait()
        except KeyboardInterrupt:
            try:
                print(f"[hotswitch] interrupted: stopping job {name!r}")
                job.stop(grace=2.0)
            except KeyboardInterrupt:  # a second one, before or while it stopped: no more grace
                job.stop(grace=0.0, ending_s=0.0)
            raise
        return job

    def _launch_from(self, args, name: str, cell: str, pushed, env: dict, launcher) -> tuple[LaunchSpec, Path]:
        """The job's folder, holding its body and pushed values, as a spec ``launcher`` checked;
        and its run folder. A detached job's folder lies in its run folder (it outlives us);
        nothing is kept of a cell refused here."""
        check_run_root(args.run_dir)
        run_dir = new_run_dir(name, args.run_dir) if args.detach else None
        job_dir = private_dir(run_dir / "job") if run_dir else self.jobs.new_job_dir(name)
        (job_dir / "body.py").write_text(cell)
        if pushed is not None:
            write_pushed(pushed, job_dir)
        try:
            spec = launch_spec(args, job_dir, env, launcher)
        except UsageError:
            shutil.rmtree(run_dir or job_dir, ignore_errors=True)
            raise
        return spec, run_dir or new_run_dir(name, args.run_dir)

    @line_magic
    def train_attach(self, line: str):
        """``%train_attach NAME|DIR``: follow a detached job again (after a kernel restart, say),
        by its name (its newest run folder) or its run folder; a finished run is replayed. A
        detached pool's name or run folder attaches the pool (``%train_pool attach``)."""
        try:
            folder = newest_of_name(line.strip(), find_run(line.strip()))
            summary = read_summary(folder)
        except (ValueError, OSError) as error:
            if not line.strip():
                raise UsageError(str(error)) from None
            folder = pool_run(line.strip(), missing=str(error))  # a detached pool's name
        if (folder / POOL_FILE).is_file():
            return self.shell.run_line_magic("train_pool", f"attach {folder}")
        name, job = summary["name"], None
        if attachable(summary):
            if name in self.jobs.names():
                raise UsageError(f"a job named {name!r} is in this kernel already: jobs[{name!r}]")
            try:
                job = reattach(summary, folder, output_for_current_cell(self.shell))
            except LaunchGone as gone:
                print(f"[hotswitch] job {name!r} ended while no kernel followed it ({gone})")
            except (ValueError, OSError) as error:
                raise UsageError(str(error)) from None
        if job is None:
            from hotswitch.widgets import Dashboard

            print(f"[hotswitch] job {name!r}: {summary.get('status', 'ended')}; replaying {folder}")
            return Dashboard.replay(folder)
        self.jobs.add(job)
        record_run(job, folder, (folder / "body.py").read_text(), replay=False)
        print(f"[hotswitch] job {name!r} attached: {len(job.events)} events so far, recorded in {folder}")
        return job

    # named apart from the magic: ``self.jobs`` is the registry (IPython's stub of line_magic(name)
    # types the decorator it returns as taking nothing)
    @line_magic("jobs")  # type: ignore[arg-type]
    def jobs_magic(self, line: str = ""):
        """Print a table of this kernel's jobs."""
        print(self.jobs.table())

    @line_magic
    def train_stop(self, line: str):
        """``%train_stop NAME``: stop that job (stop message, SIGTERM, then SIGKILL)."""
        name = line.strip()
        if not name:
            raise UsageError(f"%train_stop takes a job name; the jobs are {self.jobs.names()}")
        try:
            job = self.jobs[name]
        except KeyError as error:
            raise UsageError(str(error.args[0])) from None
        print(f"job {name!r}: {job.stop()}")
