"""``%train_debug`` and ``%train_stacks``: look inside a job's ranks from the notebook.

``%train_debug [NAME] [RANK]`` drives the pdb session of a rank stopped at ``breakpoint()``
from this cell (a ``%%train --wait`` cell drives it at once); where a rank raised on a warm pool
(a job's body, or a ``%%ranks`` cell: ``%train_debug POOL [RANK]``), pdb opens in the failing
frame (post-mortem); for a rank that is gone, it says so and shows the traceback the job kept.
``%train_stacks [NAME]`` prints every rank's Python stacks now: what a job that seems hung is
waiting on.
"""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from hotswitch.kernel.notebook.cells.cell_output import output_for_current_cell
from hotswitch.kernel.notebook.jobs.job import Job
from hotswitch.kernel.notebook.jobs.registry import JobRegistry
from hotswitch.kernel.notebook.pools.pool import Pool, PoolError
from hotswitch.kernel.notebook.pools.pool_launcher import PoolLauncher
from hotswitch.kernel.notebook.pools.pool_registry import PoolRegistry


@magics_class
class DebugMagics(Magics):
    """Shares ``jobs`` and ``pools`` with ``TrainMagics``."""

    def __init__(self, shell, jobs: JobRegistry, pools: PoolRegistry):
        super().__init__(shell)
        self.jobs = jobs
        self.pools = pools

    def job_named(self, words: list[str]) -> Job:
        """The job ``words[0]`` names, or the newest job where none is given."""
        if words:
            try:
                return self.jobs[words[0]]
            except KeyError as error:
                raise UsageError(str(error.args[0])) from None
        if not self.jobs.names():
            raise UsageError("no job in this kernel yet: start one with %%train")
        return self.jobs[-1]

    @line_magic
    def train_debug(self, line: str = ""):
        """``%train_debug [NAME] [RANK]``: drive the pdb prompt of a rank stopped at a breakpoint
        (the newest job, any rank, where not given). Post-mortem where the rank raised on a warm
        pool that still runs: a job's (``NAME`` the job) or a ``%%ranks`` cell's (``NAME`` the
        pool), pdb opens in the failing frame. A gone rank's saved traceback otherwise."""
        words = line.split()
        rank = int(words[1]) if len(words) > 1 and words[1].lstrip("-").isdigit() else None
        output = output_for_current_cell(self.shell)
        if words and words[0] not in self.jobs.names() and self.pools.in_use(words[0]):
            self._post_mortem(self.pools[words[0]], rank, output, "the last %%ranks cell")
            return
        job = self.job_named(words[:1])
        if job.debug_here(rank, output):
            return
        failure = job.failure
        if failure is not None and (rank is None or failure["rank"] == rank):
            pool = job.launcher.pool if isinstance(job.launcher, PoolLauncher) else None
            if pool is not None and pool.status == "idle":
                self._post_mortem(pool, failure["rank"], output, f"job {job.name!r}")
                return
            print(f"[hotswitch] rank {failure['rank']} of job {job.name!r} is gone ({job.status}); its traceback:")
            print(failure["traceback"].rstrip())
            return
        who = (
            f"rank {rank} of job {job.name!r} does not wait"
            if rank is not None
            else f"no rank of job {job.name!r} waits"
        )
        print(f"[hotswitch] {who} at a breakpoint ({job.status})")

    def _post_mortem(self, pool: Pool, rank: int | None, output, what: str) -> None:
        """pdb on ``rank`` of ``pool`` (where ``what`` raised) in its failing frame, from this cell."""
        ranks = [rank] if rank is not None else pool.failed_ranks[:1]
        if not ranks:
            print(f"[hotswitch] {what} on pool {pool.name!r} raised on no rank: nothing to debug")
            return
        said = f"[hotswitch] rank {ranks[0]} of pool {pool.name!r}: pdb where {what} raised (continue or quit ends it)"
        print(said, flush=True)
        try:
            pool.post_mortem(ranks[0], output)
        except PoolError as error:
            raise UsageError(str(error)) from None

    @line_magic
    def train_stacks(self, line: str = ""):
        """``%train_stacks [NAME]``: every running rank's Python stacks now."""
        job = self.job_named(line.split()[:1])
        if job.done:
            print(f"[hotswitch] job {job.name!r} has ended ({job.status}): no rank runs to ask")
            return
        stacks = job.stacks()
        for rank, text in stacks.items():
            print(f"--- rank {rank} ---\n{text.rstrip()}")
        silent = sorted(set(job.running_ranks()) - set(stacks))
        if silent:
            print(f"[hotswitch] ranks {silent} did not answer within a few seconds")
