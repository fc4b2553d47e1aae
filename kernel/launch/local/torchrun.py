"""Local torchrun: one agent per node in its own session, every descendant tracked by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil

from hotswitch.backend.train.config.paths import ENV_NOTEBOOK_DIR
from hotswitch.kernel.launch.launcher import Launcher, LaunchGone, LaunchSpec, rank_log
from hotswitch.kernel.launch.local.loopback_agent import ENV_AGENT_EXIT, LOOPBACK, TORCHRUN
from hotswitch.kernel.launch.local.reserved_port import handed_fds

LOOPBACK_AGENT = "hotswitch.kernel.launch.local.loopback_agent"
# Once the agent is gone, its ranks end themselves within a second (their watchdog sees their
# parent change); any still running this long after are killed, so the job cannot hang on them.
ORPHAN_GRACE_S = 10.0


# A one-node job's rendezvous store takes whatever port is free as it binds (node 0 hosts it, and
# no other node needs to find it). A port probed free beforehand could be taken, on a busy machine,
# in the seconds before the agent had imported torch and bound it.
ANY_LOOPBACK_PORT = "127.0.0.1:0"


def torchrun_log_dir(spec: LaunchSpec) -> Path:
    """Where torchrun keeps its per-run folders: in the job's folder, removed with it (torchrun's
    own default is a fresh ``torchelastic_*`` folder in the temp directory per run, never removed)."""
    return spec.job_dir / "torchrun"


def torchrun_argv(spec: LaunchSpec) -> list[str]:
    """The command line: torchrun (through ``loopback_agent``, which keeps loopback stores off
    other interfaces); one node meets on a fresh 127.0.0.1 port, several at the c10d endpoint."""
    argv = [sys.executable, "-m", LOOPBACK_AGENT, *TORCHRUN, f"--nproc-per-node={spec.nproc}", "--max-restarts=0"]
    argv += [f"--log-dir={torchrun_log_dir(spec)}"]
    endpoint = spec.rdzv_endpoint or ANY_LOOPBACK_PORT
    argv += [
        f"--nnodes={spec.nodes}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={spec.rdzv_id or ('hotswitch' if spec.rdzv_endpoint else uuid.uuid4().hex)}",
        # Node 0 hosts the rendezvous store, so two agents on one machine never race for it.
        f"--rdzv-conf=is_host={int(spec.node_rank == 0)}",
    ]
    if endpoint.rsplit(":", 1)[0] in LOOPBACK:
        argv += ["--local-addr=127.0.0.1"]
    return [*argv, "-m", "hotswitch.kernel.worker", str(spec.body_path)]


def agent_env(spec: LaunchSpec) -> dict[str, str]:
    """The environment torchrun's agent (and so every rank) starts with."""
    workdir = Path(spec.workdir or os.getcwd()).resolve()
    exit_file = agent_exit_file(spec)
    return {
        **os.environ,
        **spec.env,
        "PYTHONUNBUFFERED": "1",
        ENV_NOTEBOOK_DIR: str(workdir),
        ENV_AGENT_EXIT: exit_file,
    }


def agent_exit_file(spec: LaunchSpec) -> str:
    return str(spec.job_dir / f"agent-node{spec.node_rank}.exit")


class AdoptedAgent:
    """A torchrun agent this process did not start (``Popen``'s ``pid``/``returncode``/``poll``):
    gone once psutil says so, its exit status then read from the file it writes as it exits."""

    def __init__(self, process: psutil.Process, exit_file: Path):
        self.pid = process.pid
        self.returncode: int | None = None
        self._process = process
        self._exit_file = exit_file

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                alive = self._process.is_running() and self._process.status() != psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                alive = False
            if not alive:
                text = self._exit_file.read_text().strip() if self._exit_file.exists() else ""
                self.returncode = int(text) if text.lstrip("-").isdigit() else -signal.SIGKILL  # ended unheard
        return self.returncode


class TorchrunLaunch:
    """Tracks the agent and every process it starts (torchrun puts each rank in a new session,
    so signalling the agent's process group alone would miss the ranks)."""

    def __init__(self, spec: LaunchSpec, process: subprocess.Popen | AdoptedAgent, output_path: Path):
        self.spec = spec
        self._process = process
        self._output_path = output_path
        self._known: dict[int, psutil.Process] = {}
        self._lock = threading.Lock()  # the watcher and the notebook thread both look
        self._orphaned_at: float | None = None  # when the agent was first seen gone with ranks left
        self._refresh()

    def _refresh(self) -> None:
        with self._lock:
            self._refresh_locked()

    def _refresh_locked(self) -> None:
        if self._process.returncode is not None:  # reaped: its pid may now be another process's
            return
        try:
            agent = psutil.Process(self._process.pid)
            for p in [agent, *agent.children(recursive=True)]:
                self._known.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def _alive(self) -> list[psutil.Process]:
        alive = []
        with self._lock:
            known = list(self._known.values())
        for p in known:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        return alive

    def poll(self) -> int | None:
        """None while the agent or any of its processes runs; then the agent's exit status."""
        self._refresh()
        code = self._process.poll()
        orphans = [p for p in self._alive() if p.pid != self._process.pid]
        if code is not None and orphans:
            self._end_orphans(orphans)
        if code is None or orphans:
            return None
        return code

    def _end_orphans(self, orphans: list[psutil.Process]) -> None:
        """The agent is gone (killed, say) but some of its processes are not: SIGKILL them once
        they have had ``ORPHAN_GRACE_S`` to end themselves."""
        if self._orphaned_at is None:
            self._orphaned_at = time.monotonic()
        elif time.monotonic() - self._orphaned_at > ORPHAN_GRACE_S:
            for p in orphans:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()  # psutil checks the pid was not reused

    def _signal_all(self, sig: int) -> None:
        self._refresh()
        if self._process.returncode is None:  # once reaped, its group id may be another's
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, sig)
        for p in self._alive():
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(sig)  # psutil checks the pid was not reused

    def terminate(self) -> None:
        self._signal_all(signal.SIGTERM)

    def kill(self) -> None:
        self._signal_all(signal.SIGKILL)
        self._process.poll()

    def alive_pids(self) -> list[int]:
        self._refresh()  # a rank forked since the last poll counts too
        return [p.pid for p in self._alive()]

    def agent_output(self) -> str:
        try:
            return self._output_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class TorchrunLauncher(Launcher):
    """``--launcher local``: torchrun on this machine (one node, or one node of a c10d job).

    A handle names the job folder and the node (``local:NODE:JOB_DIR``); this launcher answers for
    the handles it submitted."""

    name = "local"
    ranks_here = True
    agent_module = LOOPBACK_AGENT  # the agent's module: how ``adopt`` knows its process

    def __init__(self):
        self._launches: dict[str, TorchrunLaunch] = {}

    def check(self, spec: LaunchSpec) -> None:
        if spec.nodes > 1 and not spec.rdzv_endpoint:
            raise ValueError(
                f"--nodes {spec.nodes} with --launcher local needs --rdzv-endpoint HOST:PORT, the same on every "
                "node (each node runs its own kernel); --launcher ray starts every node from this one"
            )

    def submit(self, spec: LaunchSpec) -> str:
        self.check(spec)
        output_path = spec.job_dir / f"agent-node{spec.node_rank}.log"
        env = agent_env(spec)
        with open(output_path, "wb") as output:
            process = subprocess.Popen(
                self.agent_argv(spec),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=spec.job_dir,
                start_new_session=True,  # no terminal signal reaches it; we stop it ourselves
                pass_fds=handed_fds(spec.env),  # a rendezvous port held for it (``reserved_port``)
            )
        handle = self.handle_of(spec)
        self._launches[handle] = TorchrunLaunch(spec, process, output_path)
        return handle

    def agent_argv(self, spec: LaunchSpec) -> list[str]:
        """The command of the node's agent, the process whose descendants are the job."""
        return torchrun_argv(spec)

    def handle_of(self, spec: LaunchSpec) -> str:
        return f"local:{spec.node_rank}:{spec.job_dir}"

    def adopt(self, handle: str, spec: LaunchSpec) -> None:
        body = str(spec.body_path)
        for process in psutil.process_iter(["cmdline"]):
            cmdline = process.info["cmdline"] or []
            if self.agent_module in cmdline and body in cmdline:
                output_path = spec.job_dir / f"agent-node{spec.node_rank}.log"
                self._launches[handle] = TorchrunLaunch(
                    spec, AdoptedAgent(process, Path(agent_exit_file(spec))), output_path
                )
                return
        raise LaunchGone(f"no process of {handle} runs on this machine any more")

    def launch(self, handle: str) -> TorchrunLaunch:
        try:
            return self._launches[handle]
        except KeyError:
            raise ValueError(f"no local launch {handle!r} was submitted by this launcher") from None

    def status(self, handle: str) -> int | None:
        return self.launch(handle).poll()

    def cancel(self, handle: str, force: bool = False) -> None:
        launch = self.launch(handle)
        launch.kill() if force else launch.terminate()

    def logs(self, handle: str, rank: int | None = None) -> str:
        launch = self.launch(handle)
        if rank is None:
            return launch.agent_output()
        first = launch.spec.node_rank * launch.spec.nproc
        if not first <= rank < first + launch.spec.nproc:
            raise ValueError(f"rank {rank} does not run on this node (ranks {first}-{first + launch.spec.nproc - 1})")
        try:
            return rank_log(launch.spec.log_dir or launch.spec.job_dir / "logs", rank).read_text(errors="replace")
        except FileNotFoundError:
            return ""  # not started yet

    def processes(self, handle: str) -> list[int]:
        return self.launch(handle).alive_pids()
