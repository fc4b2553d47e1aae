"""``PoolLauncher``: the launcher of a ``%%train --pool NAME`` job. Submitting sends the body to
the pool's warm ranks instead of starting processes, so the cell's ``Job`` (channel, events,
dashboard, run folder, controls) is the one any launch gives.

The task carries the job folder's files (the body, the ranks' share of the channel's key, pushed
values), not their paths: a pool's ranks may run on other nodes (Ray, Kubeflow) that do not see
this machine's folders. There, each rank keeps its log with the pool's own, on its node."""

from __future__ import annotations

import base64
from pathlib import Path

from hotswitch.backend.runtime.devices import ENV_DEVICE
from hotswitch.kernel.launch.job_files import job_files
from hotswitch.kernel.launch.launcher import Launcher, LaunchSpec, rank_log
from hotswitch.kernel.notebook.pools.pool import Pool
from hotswitch.kernel.worker.entry import ENV_JOB_NAME, ENV_SECRET_FILE
from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR

# Room in a task message for its other fields and the encoding, beside the files.
TASK_OVERHEAD_BYTES = 64 * 1024


def task_files(job_dir: Path) -> dict[str, str]:
    """The job folder's files as a task carries them (base64 text)."""
    return {name: base64.b64encode(data).decode() for name, data in job_files(job_dir).items()}


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
        size = sum(len(data) for data in task_files(spec.job_dir).values())
        if size + TASK_OVERHEAD_BYTES > self.pool.max_bytes:
            raise ValueError(
                f"the body and its pushed values come to {size} bytes (encoded), over what pool "
                f"{self.pool.name!r}'s channel carries ({self.pool.max_bytes} bytes); push less (save large values "
                "to a file the ranks read), or start the pool with a larger --max-message-bytes"
            )

    def submit(self, spec: LaunchSpec) -> str:
        self.check(spec)
        files = task_files(spec.job_dir)
        # the job's channel, limits and log folder (and --env), held while its body runs
        label = f"job {spec.env.get(ENV_JOB_NAME, '?')!r}"
        env = {**spec.env, ENV_DEVICE: self.pool.device}  # the ranks' devices were chosen at the pool's start
        env.pop(ENV_SECRET_FILE, None)  # a path here; the key travels in ``files``
        if not self.pool.job.launcher.shares_files:
            env.pop(ENV_LOG_DIR, None)
        task = self.pool.start_task("job", label, env=env, files=files)
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
