"""``--launcher ray``: a job's nodes on an existing Ray cluster (KubeRay on Kubernetes is the
same API), driven from the kernel.

One *node agent* actor per node of the job, placed by a ``STRICT_SPREAD`` placement group so
that no two share a Ray node. Each agent copies the job folder's files (the body, the channel's
key, pushed values) into a folder of its own, owner-only, and runs torchrun for its node there
(``TorchrunLauncher``: every process of the node tracked, torn down together); the nodes meet
in torchrun's c10d rendezvous on the first agent's address.

Liveness without the kernel's pid: the ranks watch their agent's process instead (the agent is
the "kernel" of its node), and Ray ends the agents when their owner, the kernel, goes away, so
the ranks of every node end with it. Handles (``ray:JOB_ID:NODES``) name the agents, which are
named actors in the ``hotswitch`` namespace.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from hotswitch.kernel.launch.launcher import Launcher, LaunchSpec
from hotswitch.kernel.launch.loopback_agent import LOOPBACK
from hotswitch.kernel.worker.entry import ENV_ADDRESS, ENV_KERNEL_PID, ENV_NODE, ENV_SECRET_FILE

NAMESPACE = "hotswitch"
CONNECT_TIMEOUT_S = 5.0
PLACEMENT_TIMEOUT_S = 60.0
RAY_EXTRA = "pip install 'hotswitch[ray]'"


def import_ray():
    """Ray, or an error that names the extra to install."""
    try:
        import ray
    except ImportError:
        raise ValueError(f"--launcher ray needs Ray on this machine: {RAY_EXTRA}") from None
    return ray


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise within ``timeout`` seconds, naming the address, if no Ray head listens there."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray-address takes the head's HOST:PORT (e.g. 10.0.0.1:6379), got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as error:
        raise ValueError(
            f"no Ray cluster answers at {address} ({error.strerror or error}); start one with "
            f"`ray start --head --port {port}` or give the address `ray status` prints"
        ) from None


def check_channel_reachable(channel_address: str, nodes: list[dict]) -> None:
    """Refuse a kernel channel bound to loopback when a Ray node is on another machine."""
    host = channel_address.removeprefix("tcp://").rpartition(":")[0]
    remote = sorted({n["NodeManagerAddress"] for n in nodes if n.get("Alive")} - set(LOOPBACK))
    if host in LOOPBACK and remote:
        raise ValueError(
            f"the Ray nodes at {', '.join(remote)} cannot reach this kernel's channel on {host}; give "
            "--channel-host with an address of this machine that they reach (the channel is then encrypted)"
        )


def job_files(job_dir: Path) -> dict[str, bytes]:
    """The files every node needs: the job folder's own (body, key, pushed values), no logs."""
    return {p.name: p.read_bytes() for p in job_dir.iterdir() if p.is_file() and not p.name.endswith(".log")}


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

    def submit(self, files: dict[str, bytes], fields: dict, env: dict) -> str:
        import ray

        from hotswitch.kernel.channel.secrets import SECRET_FILE
        from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR

        self.folder = Path(tempfile.mkdtemp(prefix="hotswitch-ray-"))
        for name, data in files.items():
            descriptor = os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as f:
                f.write(data)
        logs = self.folder / "logs"
        env = {
            **env,
            ENV_SECRET_FILE: str(self.folder / SECRET_FILE),
            ENV_LOG_DIR: str(logs),
            ENV_KERNEL_PID: str(os.getpid()),
            ENV_NODE: ray.get_runtime_context().get_node_id()[:12],
        }
        spec = LaunchSpec(self.folder, self.folder / "body.py", env=env, log_dir=logs, **fields)
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


@dataclass
class RayJob:
    """A submitted job's placement group and agents; once it has ended, its logs and status."""

    group: object
    agents: list
    nproc: int
    code: int | None = None
    torn_down: bool = False  # a node failed and the others were asked to end
    rank_logs: list[str] = field(default_factory=list)
    agent_logs: list[str] = field(default_factory=list)


class RayLauncher(Launcher):
    """Starts and follows jobs on the Ray cluster at ``address`` (its head's HOST:PORT)."""

    name = "ray"

    def __init__(self, address: str):
        self.ray = import_ray()
        check_reachable(address)
        self.address = address
        self.jobs: dict[str, RayJob] = {}
        if not self.ray.is_initialized():
            self.ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, configure_logging=False)
        connected = self.ray.get_runtime_context().gcs_address
        if connected.rpartition(":")[2] != address.rpartition(":")[2]:
            raise ValueError(f"this kernel is connected to the Ray cluster at {connected}; restart it to use {address}")

    def submit(self, spec: LaunchSpec) -> str:
        check_channel_reachable(spec.env.get(ENV_ADDRESS, ""), self.ray.nodes())
        job_id = f"{spec.job_dir.name}-{uuid.uuid4().hex[:8]}"
        group, agents = self._place(job_id, spec.nodes)
        try:
            handle = self._start(job_id, spec, agents)
        except BaseException:
            self._free(group, agents)
            raise
        self.jobs[handle] = RayJob(group, agents, spec.nproc)
        return handle

    def _start(self, job_id: str, spec: LaunchSpec, agents: list) -> str:
        """Torchrun on every agent's node, meeting on the first; the job's handle."""
        endpoint = spec.rdzv_endpoint
        if endpoint is None:
            host, port = self.ray.get([agents[0].address.remote(), agents[0].free_port.remote()])
            endpoint = f"{host}:{port}"
        env = {k: v for k, v in spec.env.items() if k != ENV_KERNEL_PID}
        fields = {"nproc": spec.nproc, "nodes": spec.nodes, "rdzv_endpoint": endpoint, "rdzv_id": job_id}
        fields["workdir"] = spec.workdir
        files = job_files(spec.job_dir)
        self.ray.get([a.submit.remote(files, {**fields, "node_rank": k}, env) for k, a in enumerate(agents)])
        return f"ray:{job_id}:{spec.nodes}"

    def _free(self, group, agents: list) -> None:
        from ray.util.placement_group import remove_placement_group

        for agent in agents:
            self.ray.kill(agent)
        remove_placement_group(group)

    def _place(self, job_id: str, nodes: int) -> tuple[object, list]:
        """One agent per node of the job, each on a Ray node of its own; an error naming the
        shortfall when the cluster has fewer nodes."""
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        alive = [n for n in self.ray.nodes() if n.get("Alive")]
        if len(alive) < nodes:
            raise ValueError(f"--nodes {nodes} needs {nodes} Ray nodes; the cluster at {self.address} has {len(alive)}")
        group = placement_group([{"CPU": 1}] * nodes, strategy="STRICT_SPREAD", name=job_id)
        try:
            self.ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError:
            remove_placement_group(group)
            raise ValueError(
                f"Ray could not place {nodes} node agents (1 CPU each, on {nodes} different nodes) within "
                f"{PLACEMENT_TIMEOUT_S:g} s; see `ray status` for free resources"
            ) from None
        actor = self.ray.remote(num_cpus=1, max_concurrency=4)(NodeAgent)
        agents = [
            actor.options(
                name=f"{job_id}-node{k}",
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=k),
            ).remote()
            for k in range(nodes)
        ]
        return group, agents

    def _job(self, handle: str) -> RayJob:
        try:
            return self.jobs[handle]
        except KeyError:
            raise ValueError(f"no Ray launch {handle!r} was submitted by this launcher") from None

    def status(self, handle: str) -> int | None:
        job = self._job(handle)
        if job.code is not None:
            return job.code
        codes = self.ray.get([a.status.remote() for a in job.agents])
        failed = next((code for code in codes if code), None)
        if failed is not None and not job.torn_down:  # torchrun's other nodes would wait on it
            job.torn_down = True
            self.cancel_agents(job)
        if any(code is None for code in codes):
            return None
        self._release(job, failed or 0)
        return job.code

    def _release(self, job: RayJob, code: int) -> None:
        """Keep every log, then free the job's folders, agents and placement group."""
        ranks = range(len(job.agents) * job.nproc)
        job.rank_logs = self.ray.get([job.agents[r // job.nproc].logs.remote(r) for r in ranks])
        job.agent_logs = self.ray.get([a.logs.remote(None) for a in job.agents])
        self.ray.get([a.remove.remote() for a in job.agents])
        self._free(job.group, job.agents)
        job.code = code

    def cancel(self, handle: str, force: bool = False) -> None:
        self.cancel_agents(self._job(handle), force)

    def cancel_agents(self, job: RayJob, force: bool = False) -> None:
        if job.code is None:
            self.ray.get([a.cancel.remote(force) for a in job.agents])

    def logs(self, handle: str, rank: int | None = None) -> str:
        job = self._job(handle)
        if rank is not None and not 0 <= rank < len(job.agents) * job.nproc:
            raise ValueError(f"the job has ranks 0-{len(job.agents) * job.nproc - 1}, not {rank}")
        if job.code is None:
            if rank is not None:
                return self.ray.get(job.agents[rank // job.nproc].logs.remote(rank))
            texts = self.ray.get([a.logs.remote(None) for a in job.agents])
        else:
            if rank is not None:
                return job.rank_logs[rank]
            texts = job.agent_logs
        return "".join(f"[node {k}]\n{text}" for k, text in enumerate(texts))
