"""A node of a Ray job: the node agent actor, one per node of the job (``ray_launcher`` places
them). It copies the job folder's files (the body, the channel's key, pushed values) into a
folder of its own, owner-only, and runs torchrun for its node there (``TorchrunLauncher``: every
process of the node tracked and torn down together). Its ranks watch its pid as their kernel's:
Ray ends the agent when its owner, the kernel, goes away, and the ranks with it."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

from hotswitch.kernel.launch.job_files import write_job_files
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.worker.entry import ENV_KERNEL_PID, ENV_NODE, ENV_SECRET_FILE


class NodeAgent:
    """One node of a job, as a Ray actor: torchrun for that node in a folder of its own."""

    def __init__(self):
        from hotswitch.kernel.launch.torchrun import TorchrunLauncher

        self.launcher = TorchrunLauncher()
        self.handle: str | None = None
        self.folder: Path | None = None

    def address(self) -> str:
        """This node's IP address, as Ray knows it (where node 0 hosts the rendezvous)."""
        import ray

        return ray.util.get_node_ip_address()

    def free_port(self) -> int:
        with socket.socket() as probe:
            probe.bind((self.address(), 0))
            return probe.getsockname()[1]

    def submit(self, files: dict[str, bytes], record: dict, env: dict) -> str:
        """Torchrun for node ``record["node_rank"]`` of the job ``record`` describes."""
        import ray

        from hotswitch.kernel.channel.secrets import SECRET_FILE
        from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR

        self.folder = Path(tempfile.mkdtemp(prefix="hotswitch-ray-"))
        write_job_files(self.folder, files)
        logs = self.folder / "logs"
        env = {
            **env,
            ENV_SECRET_FILE: str(self.folder / SECRET_FILE),
            ENV_LOG_DIR: str(logs),
            ENV_KERNEL_PID: str(os.getpid()),
            ENV_NODE: ray.get_runtime_context().get_node_id()[:12],
        }
        spec = LaunchSpec.from_record(record, job_dir=self.folder, env=env, log_dir=logs)
        self.handle = self.launcher.submit(spec)
        return self.handle

    def status(self) -> int | None:
        return self.launcher.status(self.handle)

    def cancel(self, force: bool) -> None:
        self.launcher.cancel(self.handle, force)

    def logs(self, rank: int | None) -> str:
        return self.launcher.logs(self.handle, rank)

    def remove(self) -> None:
        """Delete this node's job folder (once every process of it has ended)."""
        if self.folder is not None and self.status() is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
