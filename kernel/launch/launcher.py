"""What every launcher provides, so Ray or Kubernetes launchers can be added beside torchrun.

A ``Launcher`` turns a ``LaunchSpec`` into a running ``Launch``. A launch owns every process it
started: ``terminate``/``kill`` reach all of them (not only the first), ``poll`` never blocks.
Per-rank stdout/stderr does not go through the launcher: each rank sends its own lines on the
job channel (see ``rank_stream``), so the output path is the same for every launcher; a launch
only keeps its agent's own output (``agent_output``) for failures that happen below Python.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

# The notebook's folder, for every rank: relative paths of a recipe resolve there (the ranks
# themselves run in the job folder, which goes away with the kernel). Read by
# hotswitch.backend.train.recipe under the same name.
ENV_NOTEBOOK_DIR = "HOTSWITCH_NOTEBOOK_DIR"


@dataclass(frozen=True)
class LaunchSpec:
    """One node's share of a job: ``nproc`` ranks running ``python -m hotswitch.kernel.worker body``.

    ``workdir`` is the notebook's folder (default: the working directory at launch)."""

    job_dir: Path
    body_path: Path
    nproc: int = 2
    nodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    env: dict = field(default_factory=dict)
    workdir: Path | None = None

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
        if self.nodes > 1 and not self.rdzv_endpoint:
            raise ValueError(f"--nodes {self.nodes} needs --rdzv-endpoint HOST:PORT, the same on every node")


class Launch(ABC):
    """A running launch."""

    @abstractmethod
    def poll(self) -> int | None:
        """The exit status once everything has exited (negative: killed by that signal), else None."""

    @abstractmethod
    def terminate(self) -> None:
        """SIGTERM (or the launcher's equivalent) to every process of the launch."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL to every process of the launch that is still alive."""

    @abstractmethod
    def alive_pids(self) -> list[int]:
        """Process ids of the launch still running on this machine."""

    @abstractmethod
    def agent_output(self) -> str:
        """What the launcher's agent itself printed (torchrun's error report, for example)."""


class Launcher(ABC):
    """Starts launches; ``name`` is the value of ``%%train --launcher``."""

    name: str

    @abstractmethod
    def start(self, spec: LaunchSpec) -> Launch:
        """Start the ranks of ``spec`` and return at once."""
