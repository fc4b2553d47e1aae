"""``%train_pool`` and ``%%ranks``: start, list and stop warm pools; run code on every rank of one.

``%%train --pool NAME`` (in ``magics``) runs a training body on a pool as a ``Job``.
"""

from __future__ import annotations

import time
from pathlib import Path

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from hotswitch.backend.runtime.devices import DEVICE_KINDS, ENV_DEVICE
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.torchrun import TorchrunLauncher
from hotswitch.kernel.notebook.cell_output import output_for_current_cell
from hotswitch.kernel.notebook.job import Job
from hotswitch.kernel.notebook.pool import Pool, PoolError
from hotswitch.kernel.notebook.pool_launcher import PoolLauncher
from hotswitch.kernel.notebook.train_options import check_name, compile_body, parse_env

POOL_BODY = "from hotswitch.kernel.worker.pool_serve import serve\n\nserve(job)\n"
DEFAULT_IDLE_TIMEOUT_S = 3600.0
LOCAL_ONLY = (
    "pools run on the local launcher (torchrun on this machine) in this version; drop --launcher, or run a "
    "one-off job on {launcher} with %%train --launcher {launcher}"
)


def pool_launcher_of(args, pools: PoolRegistry) -> PoolLauncher:
    """``%%train --pool NAME``: the launcher that runs the cell on that pool; UsageError for a
    pool that is missing, gone or busy, or options a pool's job cannot take."""
    for given, option in (
        (args.launcher != "local", "--launcher"),
        (args.detach, "--detach"),
        (args.nodes != 1, "--nodes"),
    ):
        if given:
            raise UsageError(
                f"%%train --pool with {option}: a pool's job runs on the pool's ranks and ends with this kernel; "
                f"drop {option} (or drop --pool for a job of its own)"
            )
    pool = pools[args.pool]
    try:
        pool.wait_ready()
        pool.check_free()
    except PoolError as error:
        raise UsageError(str(error)) from None
    return PoolLauncher(pool)


class PoolRegistry:
    """``pools``: this kernel's warm pools by name; ``close`` stops them all."""

    def __init__(self):
        self._pools: dict[str, Pool] = {}

    def add(self, pool: Pool) -> None:
        self._pools[pool.name] = pool

    def __getitem__(self, name: str) -> Pool:
        """The pool ``name`` if it runs; UsageError naming how it died, or the pools there are."""
        pool = self._pools.get(name)
        if pool is None:
            raise UsageError(
                f"no pool named {name!r}; the pools are {sorted(self._pools)}. Start one: %train_pool start {name} -n 2"
            )
        if pool.death():
            raise UsageError(pool.death())
        return pool

    def in_use(self, name: str) -> bool:
        pool = self._pools.get(name)
        return pool is not None and pool.death() is None

    def remove(self, name: str) -> None:
        self._pools.pop(name, None)

    def table(self) -> str:
        rows = [f"{'name':<12}{'status':<10}{'ranks':>6}  running"]
        for pool in self._pools.values():
            rows.append(f"{pool.name:<12}{pool.status:<10}{pool.size:>6}  {pool.busy_with or '-'}")
        return "\n".join(rows)

    def close(self, grace: float = 2.0) -> None:
        for pool in list(self._pools.values()):
            if not pool.job.done:
                pool.stop("the kernel shut down", grace=grace)

    def __repr__(self) -> str:
        return self.table()


@magics_class
class PoolMagics(Magics):
    """Shares ``jobs`` (for job folders) with ``TrainMagics`` and owns ``pools``."""

    def __init__(self, shell, jobs, pools: PoolRegistry):
        super().__init__(shell)
        self.jobs, self.pools = jobs, pools
        shell.user_ns["pools"] = pools

    @magic_arguments()
    @argument("action", nargs="?", choices=("start", "stop", "list"), default="list", help="what to do")
    @argument("name", nargs="?", default=None, help="the pool's name")
    @argument("-n", "--nproc", type=int, default=2, help="ranks in the pool; default 2")
    @argument("--device", choices=DEVICE_KINDS, default="cpu", help="cpu (gloo) or cuda (one GPU per rank)")
    @argument("--launcher", default="local", help="how ranks start; pools run on local only in this version")
    @argument("--detach", action="store_true", help="refused: pools end with their kernel in this version")
    @argument("--env", action="append", metavar="K=V", help="environment variable for every rank; repeatable")
    @argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        help="stop the pool after SECONDS without a cell (default 3600; 0: never)",
    )
    @line_magic
    def train_pool(self, line: str = ""):
        """``%train_pool start NAME -n 4``: start warm ranks; ``%train_pool stop NAME``: end them;
        ``%train_pool``: list the pools. Start blocks until every rank has joined its process group."""
        args = parse_argstring(self.train_pool, line)
        if args.action == "list":
            print(self.pools.table())
            return None
        if not args.name:
            raise UsageError(f"%train_pool {args.action} takes a pool name, like %train_pool {args.action} warm")
        if args.action == "stop":
            pool = self.pools[args.name]
            print(f"[hotswitch] pool {args.name!r}: {pool.stop()}")
            self.pools.remove(args.name)
            return None
        return self._start(args)

    def _start(self, args) -> Pool:
        if args.launcher != "local":
            raise UsageError(LOCAL_ONLY.format(launcher=args.launcher))
        if args.detach:
            raise UsageError("--detach: pools end with their kernel in this version; %%train --detach runs one job")
        if args.nproc < 1:
            raise UsageError(f"-n {args.nproc}: a pool needs at least 1 rank")
        name = check_name(args.name)
        if self.pools.in_use(name):
            raise UsageError(f"a pool named {name!r} runs already ({self.pools[name].status}); pick another name")
        job_dir = self.jobs.new_job_dir(f"pool-{name}")
        (job_dir / "body.py").write_text(POOL_BODY)
        env = {**parse_env(args.env), ENV_DEVICE: args.device}
        spec = LaunchSpec(job_dir, job_dir / "body.py", nproc=args.nproc, env=env, workdir=Path.cwd())
        began = time.monotonic()
        job = Job(f"pool-{name}", spec, TorchrunLauncher(), output_for_current_cell(self.shell))
        pool = Pool(name, job, args.nproc, args.idle_timeout or None)
        self.pools.add(pool)
        try:
            pool.wait_ready()
        except KeyboardInterrupt:
            pool.stop("interrupted while starting")
            raise
        except PoolError as error:
            raise UsageError(str(error)) from None
        print(f"[hotswitch] pool {name!r}: {args.nproc} ranks ready in {time.monotonic() - began:.1f} s")
        return pool

    @cell_magic
    def ranks(self, line: str, cell: str):
        """``%%ranks NAME``: run the cell on every rank of pool NAME, in the namespace its
        ``%%train --pool`` bodies share; each rank's output streams labelled ``[stdout:N]``, the
        value of a last expression comes back per rank (``Out[N]``), a failing rank's traceback
        is shown labelled with its rank. Refused (not queued) while a job trains on the pool."""
        name = line.strip()
        if not name:
            raise UsageError("%%ranks takes a pool name: %%ranks NAME; the pools:\n" + self.pools.table())
        compile_body(cell)
        pool = self.pools[name]
        try:
            return pool.run_ranks(cell, output_for_current_cell(self.shell))
        except PoolError as error:
            raise UsageError(str(error)) from None
