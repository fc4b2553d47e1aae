"""What every launcher provides, shaped for remote jobs (torchx's verbs, without the dependency):
``submit(spec) -> handle``, ``status(handle)``, ``cancel(handle)``, ``logs(handle, rank)``.

A handle is a string: it can be written to a run folder and read back. A launcher answers for
every process its launch started (``cancel`` reaches all of them, not only the first), and
``status`` never blocks. No pid or node rank is part of the interface.

Live output does not go through the launcher: each rank sends its own lines on the job channel
(see ``rank_stream``), so the live path is the same for every launcher. ``logs`` is what stays
behind: each rank's output as it wrote it (every rank tees its output to ``rank-N.log`` in the
spec's ``log_dir``), and with ``rank=None`` the launcher's own (torchrun's error report, for
failures below Python).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LaunchSpec:
    """One node's share of a job: ``nproc`` ranks running ``python -m hotswitch.kernel.worker body``.

    ``workdir`` is the notebook's folder (default: the working directory at launch);
    ``log_dir`` where each rank writes ``rank-N.log`` (default: ``job_dir / "logs"``)."""

    job_dir: Path
    body_path: Path
    nproc: int = 2
    nodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    env: dict = field(default_factory=dict)
    workdir: Path | None = None
    log_dir: Path | None = None
    detach: bool = False  # the job outlives its kernel (``%%train --detach``)

    def __post_init__(self):
        if self.nproc < 1:
            raise ValueError(f"--nproc must be at least 1, got {self.nproc}")
        if self.nodes < 1:
            raise ValueError(f"--nodes must be at least 1, got {self.nodes}")
        if not 0 <= self.node_rank < self.nodes:
            raise ValueError(
                f"--node-rank must be in 0..{self.nodes - 1} for --nodes {self.nodes}, got {self.node_rank}"
            )
        if self.rdzv_endpoint is not None:
            host, _, port = self.rdzv_endpoint.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"--rdzv-endpoint takes HOST:PORT (e.g. 127.0.0.1:29500), got {self.rdzv_endpoint!r}")

    def record(self) -> dict:
        """The spec as JSON values, without its environment (which may hold what the user passed
        with --env): what a run folder keeps and another process reads back with ``from_record``."""
        return {
            "job_dir": str(self.job_dir),
            "nproc": self.nproc,
            "nodes": self.nodes,
            "node_rank": self.node_rank,
            "rdzv_endpoint": self.rdzv_endpoint,
            "rdzv_id": self.rdzv_id,
            "workdir": str(self.workdir) if self.workdir else None,
            "log_dir": str(self.log_dir) if self.log_dir else None,
            "detach": self.detach,
        }

    @classmethod
    def from_record(cls, record: dict, **changes) -> LaunchSpec:
        """The spec ``record`` describes (its body ``job_dir/body.py``), with ``changes``."""
        values = {**record, **changes}
        job_dir = Path(values.pop("job_dir"))
        paths = {key: Path(values[key]) if values.get(key) else None for key in ("workdir", "log_dir")}
        return cls(job_dir=job_dir, body_path=job_dir / "body.py", **{**values, **paths})


class LaunchGone(ValueError):
    """The launch a handle names has ended (nothing of it runs any more)."""


def rank_log(log_dir: Path, rank: int) -> Path:
    """Where rank ``rank`` tees its output (the worker writes it, ``logs`` reads it)."""
    return log_dir / f"rank-{rank}.log"


def rank_logs(log_dir: Path) -> list[Path]:
    """Every rank's log in ``log_dir`` (``rank_log``'s), by name."""
    return sorted(log_dir.glob("rank-*.log"))


class Launcher(ABC):
    """Starts and follows launches by handle; ``name`` is the value of ``%%train --launcher``.
    ``ranks_here``: the ranks run on this machine (so they can watch the kernel's pid);
    ``shares_files``: the ranks see this machine's folders at the same paths (this machine, or
    Slurm's shared filesystem), so they can write into a run folder;
    ``status_every_s``: how often a job's watcher asks ``status`` (a remote call for some)."""

    name: str
    ranks_here = False
    shares_files = True
    status_every_s = 0.1

    def check(self, spec: LaunchSpec) -> None:
        """Raise ValueError, saying what to change, if this launcher cannot run ``spec`` (every
        spec it can take passes by default)."""
        return None

    @abstractmethod
    def submit(self, spec: LaunchSpec) -> str:
        """Start the ranks of ``spec`` and return its handle at once."""

    @abstractmethod
    def status(self, handle: str) -> int | None:
        """None while any process of the launch runs; then its exit status (negative: ended by
        that signal)."""

    @abstractmethod
    def cancel(self, handle: str, force: bool = False) -> None:
        """Ask every process of the launch to end (SIGTERM or the launcher's equivalent); with
        ``force``, end them now (SIGKILL)."""

    @abstractmethod
    def logs(self, handle: str, rank: int | None = None) -> str:
        """What rank ``rank`` wrote to stdout and stderr so far; with None, what the launcher's
        own agent printed."""

    def settings(self) -> dict:
        """The options this launcher was made with, as ``named.make_launcher`` takes them."""
        return {}

    def adopt(self, handle: str, spec: LaunchSpec) -> None:
        """Follow ``handle``, submitted by another kernel with ``spec`` (``%train_attach``);
        ``LaunchGone`` if nothing of it runs any more."""
        raise ValueError(f"--launcher {self.name} cannot reattach to a job")

    def processes(self, handle: str) -> list[int]:
        """Process ids of the launch still running on this machine, for diagnostics (a remote
        launcher has none here)."""
        return []
