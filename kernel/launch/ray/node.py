"""A node of a Ray job: the node agent actor, one per node of the job (``ray.launcher`` places
them). It copies the job folder's files (the body, the channel's key, pushed values) into a
folder of its own, owner-only, and runs torchrun for its node there (``TorchrunLauncher``: every
process of the node tracked and torn down together). Its ranks watch its pid as their kernel's:
Ray ends the agent when its owner, the kernel, goes away, and the ranks with it. A detached
job's agent outlives the kernel: once its node's ranks have ended, it keeps their logs for a
kernel to collect and, if none releases it within ``ENV_LINGER`` seconds, releases itself (the
first node's agent also the job's placement group)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from hotswitch.kernel.launch.job_files import write_job_files
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.owned_folders import owned_folder, remove_owned
from hotswitch.kernel.worker.entry import ENV_KERNEL_PID, ENV_NODE, ENV_SECRET_FILE

# How long a detached job's agents wait, once their ranks have ended, for a kernel to collect the
# logs (the submitting kernel's own $HOTSWITCH_RAY_LINGER_S, if set).
ENV_LINGER = "HOTSWITCH_RAY_LINGER_S"
LINGER_S = 3600.0
POLL_S = 1.0


def agent_name(job_id: str, node: int) -> str:
    """The named actor of node ``node`` of the job (in the ``hotswitch`` namespace)."""
    return f"{job_id}-node{node}"


class NodeAgent:
    """One node of a job, as a Ray actor: torchrun for that node in a folder of its own."""

    def __init__(self):
        from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher

        self.launcher = TorchrunLauncher()
        self.handle: str | None = None
        self.folder: Path | None = None
        self.reserved: socket.socket | None = None  # the first node's rendezvous port, held for torchrun

    def address(self) -> str:
        """This node's IP address, as Ray knows it (where node 0 hosts the rendezvous)."""
        import ray

        return ray.util.get_node_ip_address()

    def reserve_port(self) -> int:
        """A port for the job's rendezvous on this node, held until this node's torchrun listens
        on it (``reserved_port``): the others are told it before that torchrun has started."""
        from hotswitch.kernel.launch.local.reserved_port import reserve

        self.reserved = reserve(self.address())
        return self.reserved.getsockname()[1]

    def submit(self, files: dict[str, bytes], record: dict, env: dict) -> str:
        """Torchrun for node ``record["node_rank"]`` of the job ``record`` describes."""
        import ray

        from hotswitch.kernel.channel.secrets import SECRET_FILE
        from hotswitch.kernel.launch.local.reserved_port import handed_over
        from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR

        self.folder = owned_folder("hotswitch-ray-")  # swept, if this actor is killed first
        write_job_files(self.folder, files)
        logs = self.folder / "logs"
        env = {
            **env,
            ENV_SECRET_FILE: str(self.folder / SECRET_FILE),
            ENV_LOG_DIR: str(logs),
            ENV_KERNEL_PID: str(os.getpid()),
            ENV_NODE: ray.get_runtime_context().get_node_id()[:12],
            **(handed_over(self.reserved) if self.reserved else {}),
        }
        spec = LaunchSpec.from_record(record, job_dir=self.folder, env=env, log_dir=logs)
        try:
            self.handle = self.launcher.submit(spec)
        finally:
            if self.reserved:
                self.reserved.close()  # torchrun holds its own copy now
                self.reserved = None
        if spec.detach:
            linger = float(env.get(ENV_LINGER, LINGER_S))
            job = (record["rdzv_id"], spec.nodes, spec.node_rank)
            threading.Thread(target=self.release_when_forgotten, args=(*job, linger), daemon=True).start()
        return self.handle

    def release_when_forgotten(self, job_id: str, nodes: int, node: int, linger: float) -> None:
        """Once this node's ranks have ended and ``linger`` seconds more have passed (no kernel
        having released the job meanwhile), free this agent and its folder; the first node's
        agent then waits for the others to go and frees the job's placement group (which ends
        it too)."""
        import ray
        from ray.util import get_current_placement_group, remove_placement_group

        while self.status() is None:
            time.sleep(POLL_S)
        time.sleep(linger)
        self.remove()
        if node == 0:
            others = [agent_name(job_id, k) for k in range(1, nodes)]
            deadline = time.monotonic() + linger + 60.0
            while others and time.monotonic() < deadline:
                others = [name for name in others if named_actor_alive(name)]
                time.sleep(POLL_S)
            group = get_current_placement_group()
            if group is not None:
                remove_placement_group(group)
        ray.kill(ray.get_runtime_context().current_actor)

    def submitted(self) -> str:
        """This node's handle; RuntimeError before ``start`` submitted it."""
        if self.handle is None:
            raise RuntimeError("this node's ranks have not been started")
        return self.handle

    def status(self) -> int | None:
        return self.launcher.status(self.submitted())

    def cancel(self, force: bool) -> None:
        self.launcher.cancel(self.submitted(), force)

    def logs(self, rank: int | None) -> str:
        return self.launcher.logs(self.submitted(), rank)

    def remove(self) -> None:
        """Delete this node's job folder (once every process of it has ended)."""
        if self.folder is not None and self.status() is not None:
            remove_owned(self.folder)


def named_actor_alive(name: str) -> bool:
    import ray

    try:
        ray.get_actor(name)
    except ValueError:
        return False
    return True
