"""``--launcher ray``: a job's nodes on an existing Ray cluster (KubeRay on Kubernetes is the
same API), driven from the kernel.

One *node agent* actor per node of the job, placed by a ``STRICT_SPREAD`` placement group so
that no two share a Ray node. Each agent copies the job folder's files (the body, the channel's
key, pushed values) into a folder of its own, owner-only, and runs torchrun for its node there
(``TorchrunLauncher``: every process of the node tracked, torn down together); the nodes meet
in torchrun's c10d rendezvous on the first agent's address.

Liveness without the kernel's pid: the ranks watch their agent's process instead (the agent is
the "kernel" of its node), and Ray ends the agents when their owner, the kernel, goes away, so
the ranks of every node end with it. A detached job's agents and placement group are Ray's
"detached" kind, which outlive the kernel; once such a job has ended they wait for a kernel to
collect its logs (``%train_attach``) and release them, and release themselves after a while
(an hour, or ``$HOTSWITCH_RAY_LINGER_S`` of the kernel) if none comes. Handles
(``ray:JOB_ID:NODES``) name the agents, which are named actors in the ``hotswitch`` namespace.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass, field, replace

from hotswitch.kernel.channel.secrets import leaves_loopback
from hotswitch.kernel.launch.job_files import job_files
from hotswitch.kernel.launch.launcher import Launcher, LaunchGone, LaunchSpec
from hotswitch.kernel.launch.ray.node import ENV_LINGER, NodeAgent, agent_name
from hotswitch.kernel.worker.entry import ENV_ADDRESS

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
    remote = sorted(
        {n["NodeManagerAddress"] for n in nodes if n.get("Alive") and leaves_loopback(n["NodeManagerAddress"])}
    )
    if not leaves_loopback(host) and remote:
        raise ValueError(
            f"the Ray nodes at {', '.join(remote)} cannot reach this kernel's channel on {host}; give "
            "--channel-host with an address of this machine that they reach (the channel is then encrypted)"
        )


@dataclass
class RayJob:
    """A submitted job's placement group and agents (placed in the background: the cell returns
    at once); once it has ended, its logs and status."""

    nodes: int
    nproc: int
    group: object = None
    agents: list = field(default_factory=list)
    starting: threading.Thread | None = None  # placing the agents and starting torchrun
    error: str | None = None  # why it could not start
    code: int | None = None
    torn_down: bool = False  # a node failed and the others were asked to end
    rank_logs: list[str] = field(default_factory=list)
    agent_logs: list[str] = field(default_factory=list)

    def is_starting(self) -> bool:
        """Whether the agents are still being placed and torchrun started on them."""
        return self.starting is not None and self.starting.is_alive()

    def wait_started(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the start to end."""
        if self.starting is not None:
            self.starting.join(timeout)


class RayLauncher(Launcher):
    """Starts and follows jobs on the Ray cluster at ``address`` (its head's HOST:PORT)."""

    name = "ray"
    shares_files = False  # the nodes have folders of their own
    status_every_s = 0.5

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

    def settings(self) -> dict:
        return {"ray_address": self.address}

    def submit(self, spec: LaunchSpec) -> str:
        nodes = self.ray.nodes()
        check_channel_reachable(spec.env.get(ENV_ADDRESS, ""), nodes)
        alive = sum(bool(n.get("Alive")) for n in nodes)
        if alive < spec.nodes:
            raise ValueError(
                f"--nodes {spec.nodes} needs {spec.nodes} Ray nodes; the cluster at {self.address} has {alive}"
            )
        job_id = f"{spec.job_dir.name}-{uuid.uuid4().hex[:8]}"
        job = RayJob(spec.nodes, spec.nproc)
        job.starting = threading.Thread(target=self._start_job, args=(job, job_id, spec), daemon=True)
        job.starting.start()
        handle = f"ray:{job_id}:{spec.nodes}"
        self.jobs[handle] = job
        return handle

    def _start_job(self, job: RayJob, job_id: str, spec: LaunchSpec) -> None:
        try:
            job.group, job.agents = self._place(job_id, spec.nodes, spec.detach)
            self._start(job_id, spec, job.agents)
        except Exception as error:
            job.error = f"the job could not start on the Ray cluster at {self.address}: {error}"
            if job.group is not None:
                self._free(job.group, job.agents)

    def _start(self, job_id: str, spec: LaunchSpec, agents: list) -> None:
        """Torchrun on every agent's node, meeting on the first."""
        endpoint = spec.rdzv_endpoint
        if endpoint is None:
            host, port = self.ray.get([agents[0].address.remote(), agents[0].reserve_port.remote()])
            endpoint = f"{host}:{port}"
        record = replace(spec, rdzv_endpoint=endpoint, rdzv_id=job_id, log_dir=None).record()
        files = job_files(spec.job_dir)
        env = {**spec.env, **({ENV_LINGER: os.environ[ENV_LINGER]} if ENV_LINGER in os.environ else {})}
        self.ray.get([a.submit.remote(files, {**record, "node_rank": k}, env) for k, a in enumerate(agents)])

    def _free(self, group, agents: list) -> None:
        from ray.util.placement_group import remove_placement_group

        for agent in agents:
            self.ray.kill(agent)
        remove_placement_group(group)

    def _place(self, job_id: str, nodes: int, detached: bool) -> tuple[object, list]:
        """One agent per node of the job, each on a Ray node of its own; ``detached``: agents and
        placement outlive this kernel's connection (Ray's detached lifetime)."""
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        lifetime = "detached" if detached else None
        group = placement_group([{"CPU": 1}] * nodes, strategy="STRICT_SPREAD", name=job_id, lifetime=lifetime)
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
                name=agent_name(job_id, k),
                lifetime=lifetime,
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=k),
            ).remote()
            for k in range(nodes)
        ]
        return group, agents

    def adopt(self, handle: str, spec: LaunchSpec) -> None:
        """Follow a detached job again: its agents and placement group, found by name."""
        from ray.util import get_placement_group

        _, job_id, nodes = handle.split(":")
        try:
            agents = [self.ray.get_actor(agent_name(job_id, k), namespace=NAMESPACE) for k in range(int(nodes))]
            group = get_placement_group(job_id)
        except ValueError:
            raise LaunchGone(f"the agents of Ray job {job_id} are gone (the job ended and was released)") from None
        started = threading.Thread(target=lambda: None)
        started.start()
        self.jobs[handle] = RayJob(int(nodes), spec.nproc, group, agents, started)

    def _job(self, handle: str) -> RayJob:
        try:
            return self.jobs[handle]
        except KeyError:
            raise ValueError(f"no Ray launch {handle!r} was submitted by this launcher") from None

    def status(self, handle: str) -> int | None:
        job = self._job(handle)
        if job.code is not None or job.is_starting():
            return job.code
        if job.error is not None:
            job.code = 1
            job.agent_logs = [job.error]
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
        job.wait_started(PLACEMENT_TIMEOUT_S + CONNECT_TIMEOUT_S)  # then there are agents to ask
        if job.code is None:
            self.ray.get([a.cancel.remote(force) for a in job.agents])

    def logs(self, handle: str, rank: int | None = None) -> str:
        job = self._job(handle)
        if rank is not None and not 0 <= rank < job.nodes * job.nproc:
            raise ValueError(f"the job has ranks 0-{job.nodes * job.nproc - 1}, not {rank}")
        if job.code is None and (job.is_starting() or job.error):
            return job.error or ""
        if job.code is None:
            if rank is not None:
                return self.ray.get(job.agents[rank // job.nproc].logs.remote(rank))
            texts = self.ray.get([a.logs.remote(None) for a in job.agents])
        else:
            if rank is not None:
                return job.rank_logs[rank]
            texts = job.agent_logs
        return "".join(f"[node {k}]\n{text}" for k, text in enumerate(texts))
