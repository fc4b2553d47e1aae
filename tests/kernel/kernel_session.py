"""A real Jupyter kernel process driven through jupyter_client, for the tests and the benchmark."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

from hotswitch.kernel.launch.local.forked_ranks import RANK_PROCESS_NAME

TRAIN_BODY = """
import time
import torch.distributed as dist

dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(STEPS):
    x = torch.randn(8, 4)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= job.world_size
    opt.step()
    for control in job.control():
        job.emit({"type": "echo", "control": control})
    job.emit({"type": "step", "step": step, "loss": loss.item(), "sent_at": time.time()})
    print(f"step {step} loss {loss.item():.4f}")
    time.sleep(PAUSE)
dist.destroy_process_group()
"""


def train_body(steps: int = 3, pause: float = 0.0) -> str:
    return TRAIN_BODY.replace("STEPS", str(steps)).replace("PAUSE", str(pause))


def warm_body(steps: int = 3, pause: float = 0.0) -> str:
    """``train_body`` for a warm pool, whose ranks joined their process group when it started."""
    body = train_body(steps, pause)
    return body.replace('dist.init_process_group("gloo")\n', "").replace("dist.destroy_process_group()\n", "")


SHUTDOWN_WAIT_S = 120.0  # generous: it ends as soon as the kernel has exited


class SocketFileKernelManager(KernelManager):
    """A kernel manager whose kernel talks over Unix sockets in a folder of its own.

    Over TCP, jupyter_client picks five free ports and the kernel binds them a moment later; on a
    machine where other tests' ranks open connections all the while, one of those ports can be
    taken in between, and the kernel dies with "Address already in use". A socket file cannot be.
    """

    def __init__(self, **kwargs):
        super().__init__(transport="ipc", **kwargs)
        self.sockets = tempfile.TemporaryDirectory(prefix="hotswitch-kernel-")  # removed with the manager
        self.ip = str(Path(self.sockets.name) / "k")


class KernelSession:
    """Start ``kernel_name`` (from ``kernels_dir`` if given); run cells; collect output per cell."""

    def __init__(self, kernel_name: str = "python3", kernels_dir: Path | None = None):
        specs = KernelSpecManager(kernel_dirs=[str(kernels_dir)]) if kernels_dir else KernelSpecManager()
        self.manager = SocketFileKernelManager(kernel_name=kernel_name, kernel_spec_manager=specs)
        # A kernel asked to shut down stops its jobs and removes their folders on its way out;
        # jupyter_client kills it after 5 s by default, which a busy machine can outlast.
        self.manager.shutdown_wait_time = SHUTDOWN_WAIT_S
        self.manager.start_kernel()
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.pid = self.manager.provisioner.process.pid
        self.outputs: dict[str, list[dict]] = defaultdict(list)

    def execute(self, code: str, timeout: float = 120, wait: bool = True):
        """Run ``code``; return (msg_id, reply content or None when ``wait`` is False)."""
        msg_id = self.client.execute(code)
        if not wait:
            return msg_id, None
        reply = self.client.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=timeout)
        if reply["content"]["status"] == "aborted":
            # sent while the kernel still dropped the requests queued behind a failed cell (ipykernel's
            # stop_on_error): it never ran, so send it again
            return self.execute(code, timeout, wait)
        self.drain_until_idle(msg_id)
        return msg_id, reply["content"]

    def drain_until_idle(self, msg_id: str, timeout: float = 60) -> None:
        """Drain iopub until the kernel reports idle for ``msg_id``: all its output is in by then
        (iopub and the shell reply travel apart, and a loaded machine delays one or the other)."""
        deadline = time.monotonic() + timeout
        self.drain(0.1)
        while not self._idle(msg_id) and time.monotonic() < deadline:
            self.drain(0.1)

    def _idle(self, msg_id: str) -> bool:
        return any(
            m["msg_type"] == "status" and m["content"]["execution_state"] == "idle" for m in self.outputs[msg_id]
        )

    def drain(self, seconds: float = 0.2) -> None:
        """Move iopub messages that arrive within ``seconds`` into ``outputs`` by parent id."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
            except Exception:
                if time.monotonic() >= deadline:
                    return
                continue
            self.outputs[msg["parent_header"].get("msg_id")].append(msg)

    def text(self, msg_id: str) -> str:
        """All stream text, tracebacks and plain-text results that reached that cell."""
        parts = []
        for msg in self.outputs[msg_id]:
            content = msg["content"]
            if msg["msg_type"] == "stream":
                parts.append(content["text"])
            elif msg["msg_type"] == "error":
                parts.append("\n".join(content["traceback"]))
            elif msg["msg_type"] in ("execute_result", "display_data"):
                parts.append(content["data"].get("text/plain", ""))
        return "".join(parts)

    def value(self, expression: str):
        """Evaluate ``expression`` in the kernel and return its JSON-decoded value."""
        msg_id, reply = self.execute(f"import json as _json; print(_json.dumps({expression}))")
        assert reply["status"] == "ok", self.text(msg_id)
        return json.loads(self.text(msg_id).strip().splitlines()[-1])

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def shutdown(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=False)


def hotswitch_kernels_dir(tmp_path_factory) -> Path:
    """The ``hotswitch`` kernelspec installed into a fresh prefix; its kernels folder."""
    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    cli = [sys.executable, "-m", "hotswitch.kernel.cli", "kernel", "install", "--prefix", str(prefix)]
    subprocess.run(cli, check=True, capture_output=True)
    return prefix / "share" / "jupyter" / "kernels"


def hotswitch_kernel(tmp_path_factory) -> KernelSession:
    """A real ``hotswitch`` kernel, its kernelspec installed into a fresh prefix."""
    return KernelSession("hotswitch", hotswitch_kernels_dir(tmp_path_factory))


def hotswitch_json(argv: list[str], cwd: Path, timeout: float) -> dict:
    """Run ``hotswitch ARGV --json`` and return what it printed, failing with its stderr."""
    command = [sys.executable, "-m", "hotswitch.kernel.cli", *argv, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def is_rank(process: psutil.Process) -> bool:
    """A live training rank: forked from its torchrun agent (named ``hotswitch-rank``; its command
    line is the agent's) or started afresh as ``python -m hotswitch.kernel.worker``. Not the agent,
    whose command line names the worker module too."""
    try:
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        cmdline = " ".join(process.cmdline())
        return "hotswitch.kernel.worker" in cmdline and (
            process.name() == RANK_PROCESS_NAME or "torch.distributed.run" not in cmdline
        )
    except psutil.Error:  # it ended meanwhile
        return False


def processes_mentioning(text: str) -> list[psutil.Process]:
    """Live processes whose command line contains ``text``."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and text in " ".join(p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            pass
    return found


def cpu_seconds(processes: list[psutil.Process]) -> float:
    """User + system CPU seconds spent so far by ``processes`` (those that ended meanwhile: 0)."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += sum(process.cpu_times()[:2])
    return round(total, 1)


# A wait on progress fails only once what it watches has not moved for STALL_S, or after CAP_S
# in all: a busy machine slows a test down, it never fails it.
STALL_S = 180
CAP_S = 1200


def wait_progressing(condition, progress, what: str, stall_s: float = STALL_S, cap_s: float = CAP_S) -> None:
    """Return once ``condition()`` is true. ``progress()`` gives anything that changes while the
    awaited work goes on (CPU seconds spent, processes left); once it has not changed for
    ``stall_s`` seconds (or ``cap_s`` have passed), fail saying ``what`` never happened."""
    started = changed = time.monotonic()
    seen = progress()
    while not condition():
        now, moved = time.monotonic(), progress()
        if moved != seen:
            seen, changed = moved, now
        if now - changed > stall_s or now - started > cap_s:
            why = f"nothing progressed for {now - changed:.0f} s" if now - changed > stall_s else f"{cap_s} s passed"
            raise AssertionError(f"{what} did not happen: {why} (last progress seen: {seen!r})")
        time.sleep(0.2)


def wait_none_mentioning(text: str, what: str) -> None:
    """Return once no live process's command line contains ``text``, waiting on progress (how
    many are left and the CPU they spend); fail saying ``what`` never happened."""

    def progress():
        left = processes_mentioning(text)
        return len(left), cpu_seconds(left)

    wait_progressing(lambda: not processes_mentioning(text), progress, what)


def wait_until(condition, timeout: float = 60.0, every: float = 0.1) -> bool:
    """Whether ``condition()`` holds within ``timeout`` seconds (generous: a busy machine slows a
    test down without failing it), checked every ``every`` seconds and ended as soon as it does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return bool(condition())


# writes below Python on every rank (fd 2, a child process), then rank 1 segfaults after last words
BELOW_AND_CRASH = """
import os, signal, subprocess, time
os.write(2, b"below python on rank %d\\n" % job.rank)
subprocess.run(["sh", "-c", "echo from a child of rank $RANK"], check=True)
if job.rank == 1:
    time.sleep(0.5)
    os.write(2, b"last words below python\\n")
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGSEGV)
time.sleep(120)
"""
