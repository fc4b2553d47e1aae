"""``jobs``: every job this kernel launched, in launch order, and their common cleanup."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hotswitch.kernel.launch.owned_folders import owned_folder, remove_owned
from hotswitch.kernel.notebook.jobs.job import Job

JOBS_PREFIX = "hotswitch-jobs-"


WHY_CHARS = 80  # the longest reason %jobs shows on a job's line


class JobRegistry:
    """Indexable by position (``jobs[-1]``) or name (``jobs["run1"]``); ``close`` stops them all."""

    def __init__(self):
        self._jobs: list[Job] = []
        self._root: Path | None = None

    def new_job_dir(self, name: str) -> Path:
        """A fresh directory for one job's body and logs, under this registry's temp root (made
        at the first job, sweeping away the roots of kernels that died without removing theirs)."""
        if self._root is None or not self._root.is_dir():
            self._root = owned_folder(JOBS_PREFIX)
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self._root))

    def add(self, job: Job) -> None:
        """Add ``job``, in place of an ended job of its name (a cell run again); a running
        job's name is refused."""
        if self.running(job.name):
            raise ValueError(
                f"a job named {job.name!r} is running; %train_stop {job.name} first, or pick another --name"
            )
        self._jobs = [other for other in self._jobs if other.name != job.name] + [job]

    def running(self, name: str) -> bool:
        """Whether a job named ``name`` is here and has not ended."""
        return any(job.name == name and not job.done for job in self._jobs)

    def names(self) -> list[str]:
        return [job.name for job in self._jobs]

    def next_name(self) -> str:
        """``job1``, ``job2``, ...: the first such name not taken."""
        n = len(self._jobs) + 1
        while f"job{n}" in self.names():
            n += 1
        return f"job{n}"

    def __getitem__(self, key: int | str) -> Job:
        if isinstance(key, str):
            for job in self._jobs:
                if job.name == key:
                    return job
            raise KeyError(f"no job named {key!r}; the jobs are {self.names()}")
        if isinstance(key, bool) or not isinstance(key, int):
            raise TypeError(f"jobs[{key!r}]: index jobs by position (jobs[-1]) or name (jobs['run1'])")
        if not -len(self._jobs) <= key < len(self._jobs):
            raise IndexError(
                f"jobs[{key}]: there are {len(self._jobs)} jobs {self.names()}; give a position in "
                f"{-len(self._jobs)}..{len(self._jobs) - 1} or a name"
            )
        return self._jobs[key]

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self):
        return iter(list(self._jobs))

    def table(self, why_chars: int = WHY_CHARS) -> str:
        """One line per job: name, status, ranks, events, seconds running, and why it ended
        where it did not succeed (cut to ``why_chars``; ``jobs[NAME].exit_reason`` holds it whole)."""
        rows = [f"{'name':<12}{'status':<12}{'ranks':>6}{'events':>8}{'seconds':>9}  why"]
        for job in self._jobs:
            end = job.ended_at or time.time()
            ranks = job.spec.nproc * job.spec.nodes
            why = job.exit_reason or ""
            why = why if len(why) <= why_chars else why[: why_chars - 1] + "…"
            line = f"{job.name:<12}{job.status:<12}{ranks:>6}{len(job.events):>8}{end - job.started_at:>9.1f}  {why}"
            rows.append(line.rstrip())
        return "\n".join(rows)

    def close(self, grace: float = 2.0) -> None:
        """Stop every job still running, unless detached, and remove the job directories (a
        detached job's is in its run folder); safe to call twice."""
        for job in self._jobs:
            if not job.done and not job.detached:
                job.stop(grace=grace)
        if self._root is not None:
            remove_owned(self._root)
            self._root = None

    def __repr__(self) -> str:
        return self.table()
