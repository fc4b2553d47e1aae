"""A JupyterLab server for the browser test: loopback, a token, throwaway Jupyter folders, the
hotswitch kernel installed into a temporary prefix (never the user's home), and a teardown
that leaves no kernel, torchrun agent or rank behind even when the test fails."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil

from hotswitch.kernel.launch.launcher import rank_logs
from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR
from tests.kernel.kernel_session import is_rank

START_TIMEOUT_S = 90
STOP_GRACE_S = 20


@dataclass
class LabServer:
    token: str
    process: subprocess.Popen
    log: Path
    runtime: Path  # Jupyter's runtime folder: the server writes there where it listens
    url: str = ""  # http://127.0.0.1:PORT, once it listens

    def page(self, path: str) -> str:
        """The address of ``path`` (under the server's root) in JupyterLab, token included."""
        return f"{self.url}/lab/tree/{path}?token={self.token}"

    def descendants(self) -> list[psutil.Process]:
        """Every process the server started, kernels and what they launched included."""
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def kernels(self) -> list[psutil.Process]:
        """The kernels the server started (its own children)."""
        try:
            return psutil.Process(self.process.pid).children()
        except psutil.NoSuchProcess:
            return []

    def ranks(self) -> list[psutil.Process]:
        """The training ranks still alive (not the torchrun agent)."""
        return [p for p in self.descendants() if is_rank(p)]

    def rank_stacks(self, chars: int = 4000) -> str:
        """Every live rank's stacks (SIGUSR1: the worker writes them to its log) and its log's tail:
        what a job that stopped moving waits on."""
        out, ranks = [], self.ranks()
        logs = set()
        for rank in ranks:
            with suppress(psutil.Error, OSError, KeyError, ValueError):
                logs.add(Path(rank.environ()[ENV_LOG_DIR]))  # the job's: a forked rank has its agent's environment
                rank.send_signal(signal.SIGUSR1)
        time.sleep(1.0 if ranks else 0.0)
        for log in (path for folder in sorted(logs) for path in rank_logs(folder)):
            out.append(f"--- {log.name} ---\n{log.read_text(errors='replace')[-chars:]}")
        return "\n".join(out) or "no live ranks"

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _install_kernel(prefix: Path) -> None:
    cli = [sys.executable, "-m", "hotswitch.kernel.cli", "kernel", "install", "--prefix", str(prefix)]
    subprocess.run(cli, check=True, capture_output=True)


SETTINGS = {
    # Every cell attached to the page: the default windowing skips off-screen cells, which then
    # have no size for plotly to draw into, nor for a screenshot.
    "notebook-extension/tracker": {"windowingMode": "none"},
    # No "get notified about Jupyter news?" toast over the screenshots (and no look-up of news).
    "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def _page_config(config_dir: Path) -> None:
    """No build check: the page would ask the server, which runs node for ten seconds of CPU to
    answer that the prebuilt extensions need no build."""
    path = config_dir / "labconfig" / "page_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"buildCheck": False, "buildAvailable": False}))


def _settings(folder: Path) -> None:
    for plugin, values in SETTINGS.items():
        path = folder / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _wait_ready(server: LabServer) -> None:
    """Wait until the server answers; learn its port from the file it writes in the runtime folder
    (it binds whatever port is free: a port probed free beforehand can be taken, on a busy
    machine, in the seconds the server takes to start)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with suppress(OSError, ValueError, KeyError):
            listening = json.loads((server.runtime / f"jpserver-{server.process.pid}.json").read_text())
            server.url = f"http://127.0.0.1:{listening['port']}"
            with urllib.request.urlopen(f"{server.url}/api/status?token={server.token}", timeout=2) as reply:
                if reply.status == 200:
                    return
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"JupyterLab did not start within {START_TIMEOUT_S} s:\n{server.log_tail()}")
        time.sleep(0.5)


def _stop(server: LabServer) -> None:
    """SIGTERM the server (it shuts its kernels down, and they their jobs); then kill whatever
    of its process tree is still alive."""
    started = server.descendants()
    server.process.terminate()
    try:
        server.process.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(5)
    _, alive = psutil.wait_procs(started, timeout=STOP_GRACE_S)
    for p in alive:
        with suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=5)


@contextmanager
def lab_server(root: Path, home: Path, env: dict[str, str]) -> Iterator[LabServer]:
    """Serve ``root``; Jupyter's config, data, runtime and settings live under ``home``; ``env``
    is added to the server's (and so the kernels') environment."""
    _install_kernel(home / "prefix")
    _settings(home / "settings")
    _page_config(home / "config")
    token = secrets.token_hex(16)
    # kernels talk over socket files named after their connection files, in a folder whose name is
    # short enough for a Unix socket's (a TCP port could be taken before the kernel binds it)
    with tempfile.TemporaryDirectory(prefix="hotswitch-lab-") as runtime:
        server_env = {
            **os.environ,
            **env,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": runtime,
            "JUPYTER_PATH": str(home / "prefix" / "share" / "jupyter"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        }
        command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.port=0",
                   "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
                   f"--LabApp.workspaces_dir={home / 'workspaces'}", "--KernelManager.transport=ipc", "--allow-root",
                   "--LabApp.expose_app_in_browser=True",  # the test runs chosen cells through the app's commands
                   "--LabApp.extension_manager=readonly",  # loopback only: no extension index look-ups
                   "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]  # fmt: skip
        log = home / "lab.log"
        with open(log, "w") as out:
            process = subprocess.Popen(command, cwd=root, env=server_env, stdout=out, stderr=subprocess.STDOUT)
            server = LabServer(token, process, log, Path(runtime))
            try:
                _wait_ready(server)
                yield server
            finally:
                _stop(server)
