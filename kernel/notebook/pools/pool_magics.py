"""``%train_pool`` and ``%%ranks``: start, attach, list and stop warm pools; run code on every
rank of one.

``%%train --pool NAME`` (in ``magics``) runs a training body on a pool as a ``Job``.
"""

from __future__ import annotations

import time

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from hotswitch.kernel.launch.options import LAUNCHER_OPTIONS, magic_launch_options
from hotswitch.kernel.notebook.cells.cell_output import output_for_current_cell
from hotswitch.kernel.notebook.cells.train_options import MIN_MESSAGE_BYTES, NAME_RULE, compile_body, valid_name
from hotswitch.kernel.notebook.pools.pool import Pool, PoolError
from hotswitch.kernel.notebook.pools.pool_registry import PoolRegistry
from hotswitch.kernel.notebook.pools.pool_start import attach_pool, pool_name, pool_run, start_pool

# %train_pool start's launch options (``launch/options.py``)
POOL_OPTIONS: tuple[str, ...] = ("nproc", "device", *LAUNCHER_OPTIONS, "detach", "env", "idle_timeout", "channel_host")
POOL_OPTIONS += ("max_message_bytes", "collective_wait")


def check_pool_name(name: str) -> str:
    """``%train_pool start NAME``'s NAME, or a UsageError quoting it."""
    if not valid_name(name):
        quoted = len(name) > 1 and name[0] == name[-1] and name[0] in "'\""  # a line magic keeps the quotes
        typed = name if quoted else repr(name)
        raise UsageError(f"the pool name {typed} is not valid; {NAME_RULE} (e.g. %train_pool start warm)")
    return name


@magics_class
class PoolMagics(Magics):
    """Shares ``jobs`` (for job folders) with ``TrainMagics`` and owns ``pools``."""

    def __init__(self, shell, jobs, pools: PoolRegistry):
        super().__init__(shell)
        self.jobs = jobs
        self.pools = pools
        shell.user_ns["pools"] = pools

    @magic_arguments()
    @argument("action", nargs="?", choices=("start", "attach", "stop", "list"), default="list", help="what to do")
    @argument("name", nargs="?", default=None, help="the pool's name (attach: or its run folder)")
    @magic_launch_options(POOL_OPTIONS)
    @line_magic
    def train_pool(self, line: str = ""):
        """``%train_pool start NAME -n 4 [--launcher ray|slurm|kubeflow ...] [--detach]``: start warm
        ranks (blocks until every rank has joined its process group); ``%train_pool attach NAME``:
        follow a detached pool again from this kernel; ``%train_pool stop NAME``: end one;
        ``%train_pool``: list the pools."""
        args = parse_argstring(self.train_pool, line)
        if args.action == "list":
            print(self.pools.table())
            return None
        if not args.name:
            raise UsageError(f"%train_pool {args.action} takes a pool name, like %train_pool {args.action} warm")
        if args.action == "stop":
            print(f"[hotswitch] pool {args.name!r}: {self.pools.stop(args.name)}")
            return None
        if args.action == "attach":
            return self.attach(pool_run(args.name))
        return self._start(args)

    def _start(self, args) -> Pool:
        if args.nproc < 1 or args.nodes < 1:
            raise UsageError(f"-n {args.nproc} --nodes {args.nodes}: a pool needs at least 1 rank on at least 1 node")
        if not args.idle_timeout >= 0:
            raise UsageError(f"--idle-timeout {args.idle_timeout:g}: give seconds without a cell, or 0 for never")
        if args.max_message_bytes < MIN_MESSAGE_BYTES:
            raise UsageError(f"--max-message-bytes {args.max_message_bytes}: give at least {MIN_MESSAGE_BYTES}")
        args.device = args.device or "cpu"  # as %%train without a pool: gloo on the CPU
        name = check_pool_name(args.name)
        if self.pools.in_use(name):
            raise UsageError(f"a pool named {name!r} runs already ({self.pools[name].status}); pick another name")
        began = time.monotonic()
        pool = start_pool(args, self.jobs, output_for_current_cell(self.shell))
        self._wait_ready(pool)
        detached = " (detached: %train_pool attach " + name + " from another kernel)" if args.detach else ""
        print(f"[hotswitch] pool {name!r}: {pool.size} ranks ready in {time.monotonic() - began:.1f} s{detached}")
        return pool

    def attach(self, folder) -> Pool:
        """Follow the detached pool recorded in run folder ``folder`` (``%train_pool attach``,
        ``%train_attach``)."""
        name = pool_name(folder)
        if self.pools.in_use(name):
            raise UsageError(f"a pool named {name!r} runs in this kernel already: pools[{name!r}]")
        pool = attach_pool(folder, output_for_current_cell(self.shell))
        self._wait_ready(pool)
        print(f"[hotswitch] pool {pool.name!r} attached: {pool.size} ranks, {pool.status}; recorded in {folder}")
        return pool

    def _wait_ready(self, pool: Pool) -> None:
        self.pools.add(pool)
        try:
            pool.wait_ready()
        except KeyboardInterrupt:
            pool.stop("interrupted while starting")
            raise
        except PoolError as error:
            raise UsageError(str(error)) from None

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
