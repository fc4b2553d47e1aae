"""``PoolLauncher``: the launcher of a ``%%train --pool NAME`` job. Submitting sends the body to
the pool's warm ranks instead of starting processes, so the cell's ``Job`` (channel, events,
dashboard, run folder, controls) is the one any launch gives."""

from __future__ import annotations

from hotswitch.backend.runtime.devices import ENV_DEVICE
from hotswitch.kernel.launch.launcher import Launcher, LaunchSpec, rank_log
from hotswitch.kernel.notebook.pool import Pool
from hotswitch.kernel.worker.entry import ENV_JOB_NAME


class PoolLauncher(Launcher):
    """Runs job bodies on ``pool``; a handle is ``pool:NAME:TASK``."""

    name = "pool"
    ranks_here = True

    def __init__(self, pool: Pool):
        self.pool = pool
        self._specs: dict[str, LaunchSpec] = {}

    def check(self, spec: LaunchSpec) -> None:
        ranks = spec.nproc * spec.nodes
        if ranks != self.pool.size:
            raise ValueError(
                f"pool {self.pool.name!r} has {self.pool.size} ranks and this cell asks for {ranks} (-n {spec.nproc}); "
                f"drop -n, or start a pool of {ranks}: %train_pool start NAME -n {ranks}"
            )

    def submit(self, spec: LaunchSpec) -> str:
        self.check(spec)
        # the job's channel, key file, limits and log folder (and --env), held while its body runs
        label = f"job {spec.env.get(ENV_JOB_NAME, '?')!r}"
        env = {**spec.env, ENV_DEVICE: self.pool.device}  # the ranks' devices were chosen at the pool's start
        task = self.pool.start_task("job", label, env=env, body_path=str(spec.body_path))
        handle = f"pool:{self.pool.name}:{task}"
        self._specs[handle] = spec
        return handle

    def _task(self, handle: str) -> int:
        if handle not in self._specs:
            raise ValueError(f"no pool task {handle!r} was submitted by this launcher")
        return int(handle.rsplit(":", 1)[1])

    def status(self, handle: str) -> int | None:
        return self.pool.task_status(self._task(handle))

    def cancel(self, handle: str, force: bool = False) -> None:
        """Interrupt the body on every rank (the pool goes on); with ``force`` (the body did not
        end on the interrupt, e.g. blocked in a collective), stop the pool itself."""
        task = self._task(handle)
        if force:
            self.pool.stop(f"the body of task {task} did not end on an interrupt and was killed with the pool")
        else:
            self.pool.interrupt(task)

    def logs(self, handle: str, rank: int | None = None) -> str:
        spec = self._specs[handle]
        if rank is None:
            return self.pool.death() or ""
        try:
            return rank_log(spec.log_dir or spec.job_dir / "logs", rank).read_text(errors="replace")
        except FileNotFoundError:
            return ""
