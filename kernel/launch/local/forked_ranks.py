"""torchrun's ranks forked from its agent instead of started afresh.

torchrun starts each rank as ``python -u -m hotswitch.kernel.worker BODY``: a new interpreter
that imports torch and hotswitch again, about 3 s of CPU per rank before its first line of work
(a 4-rank cell on a 2-core machine waits 6 s for it). The agent has imported both already, so
here each rank is a ``fork`` of the agent that runs the worker's ``main`` as that command would:
its own session (torchrun's ``start_new_session``), the environment torchrun gave it, the same
standard streams, argv, exit status and signals, and the agent's Python state reset where a
fresh interpreter would differ (signal handlers, exit handlers, the thread count). The process
is named ``hotswitch-rank`` (what ``ps`` and ``psutil``'s ``name()`` show; its command line is the
agent's).

A rank is forked only where that is safe and equal: on Linux, while the agent has not loaded the
CUDA driver (a CUDA context does not survive ``fork``; the agent never needs one, so this holds
unless something changes), for torchrun's own command for the worker (no NUMA wrapper) and
unless ``HOTSWITCH_FORK_RANKS=0``. Otherwise torchrun starts it as before.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import NoReturn

ENV_FORK_RANKS = "HOTSWITCH_FORK_RANKS"
WORKER_MODULE = "hotswitch.kernel.worker"
RANK_PROCESS_NAME = "hotswitch-rank"  # at most 15 bytes: the kernel's limit for a process name
PR_SET_NAME = 15
# what a rank's body imports first (the worker and the recipe's engine): imported once, in the agent
PRELOAD = ("hotswitch.kernel.worker.entry", "hotswitch.backend.train.run.recipe", "torch.distributed")


# A line the agent prints the moment one of its forked ranks ends (exit_reason.py reads them):
# torchrun's own report gives the second it noticed each failure, at its next poll, so ranks that
# end a few milliseconds apart look simultaneous there.
ENDED_MARK = "hotswitch agent:"


def ended_line(rank: str, at: float, code: int) -> str:
    return f"{ENDED_MARK} rank {rank} ended at {at:.6f}, exit code {code}"


_SAYING = threading.Lock()


def say(line: str) -> None:
    """``line`` on the agent's stderr in one write: ranks ending at once each say theirs from
    their own thread, and ``print``'s two writes (the text, then the newline) interleaved two
    lines into one that no reader could parse."""
    stream = sys.__stderr__
    if stream is None:  # no stderr at all: nobody to tell
        return
    with _SAYING:
        stream.write(line + "\n")
        stream.flush()


_ENDED = re.compile(rf"^{ENDED_MARK} rank (\d+) ended at ([\d.]+), exit code (-?\d+)$", re.M)


def ranks_ended(output: str) -> list[tuple[float, int, int]]:
    """(time, rank, exit code) of every ``ended_line`` in an agent's ``output``, earliest first."""
    return sorted((float(at), int(rank), int(code)) for rank, at, code in _ENDED.findall(output))


class ForkedRank:
    """The parts of ``subprocess.Popen`` that torchrun uses, for a forked child; says when the
    child ends (``ended_line``) as it happens.

    One thread waits for the child and is the only one that reaps it: it says when it ended,
    then sets ``returncode``, which ``poll`` only reads. (A ``poll`` that reaped the child
    itself could do so before a loaded machine ran the waiting thread, whose wait then found no
    child: the end went unsaid, and the job's exit reason named the rank it broke instead.)"""

    def __init__(self, pid: int, args: tuple, rank: str):
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        threading.Thread(target=self._say_when_it_ends, args=(rank,), name=f"rank-{rank}-end", daemon=True).start()

    def _say_when_it_ends(self, rank: str) -> None:
        try:
            _, status = os.waitpid(self.pid, 0)  # blocks until the child ends, and reaps it
        except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): ended, its status lost
            self.returncode = 1
            return
        code = os.waitstatus_to_exitcode(status)  # -N for signal N, as Popen says
        say(ended_line(rank, time.time(), code))
        self.returncode = code  # after the line: whoever sees the end finds it said

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(list(self.args), timeout or 0)
            time.sleep(0.02)
        return self.returncode  # type: ignore[return-value]  # set by the waiting thread

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def worker_argv(args: tuple) -> list[str] | None:
    """The worker's own arguments if ``args`` is torchrun's ``python -u -m hotswitch.kernel.worker ...``."""
    parts = [str(a) for a in args]
    if len(parts) >= 4 and parts[0] == sys.executable and parts[1:4] == ["-u", "-m", WORKER_MODULE]:
        return parts[4:]
    return None


def fork_is_safe() -> bool:
    """Linux, and no CUDA driver loaded in this process (a child could not use a CUDA context)."""
    if os.environ.get(ENV_FORK_RANKS, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        with open("/proc/self/maps") as maps:
            return "libcuda.so" not in maps.read()
    except OSError:
        return False


def fork_rank(args: tuple, env: dict[str, str], stdout: str | None, stderr: str | None) -> ForkedRank | None:
    """Fork a rank for torchrun's command ``args`` (its output to the files ``stdout`` and
    ``stderr`` where torchrun redirects it); None where it must be started afresh."""
    argv = worker_argv(args)
    if argv is None or not fork_is_safe():
        return None
    for stream in (sys.stdout, sys.stderr):  # nothing the agent buffered is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    ready, told = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready)
        _run_rank(argv, env, (stdout, stderr), told)
    os.close(told)
    os.read(ready, 1)  # as Popen returns: the child leads its own session, torchrun may signal it
    os.close(ready)
    return ForkedRank(pid, args, env.get("RANK", "?"))


def _run_rank(argv: list[str], env: dict[str, str], redirects: tuple, told: int) -> NoReturn:
    """In the child: become what ``python -u -m hotswitch.kernel.worker ARGV`` would be, run it, exit."""
    status = 1
    try:
        os.setsid()
        os.write(told, b"s")
        os.close(told)
        _become_a_fresh_rank(env, redirects)
        sys.argv = [WORKER_MODULE, *argv]
        from hotswitch.kernel.worker.entry import main

        status = main(argv)
    except SystemExit as stop:
        status = _exit_status(stop.code)
    except BaseException:  # as an interpreter would: the traceback on stderr, status 1
        traceback.print_exc()
    finally:
        _exit(status)


def _become_a_fresh_rank(env: dict[str, str], redirects: tuple) -> None:
    atexit._clear()  # the agent's exit handlers are the agent's
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)  # torchrun's agent turns SIGTERM into an exception
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, path in zip((1, 2), redirects):
        if path:  # torchrun opened (and emptied) it for this rank
            opened = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.dup2(opened, target)
            os.close(opened)
    # the agent's sockets (its stores' listeners and connections) are the agent's: as Popen's
    # close_fds, a rank holds only its standard streams
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.environ.clear()
    os.environ.update(env)
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit():  # OpenMP read its variables when the agent loaded torch
        import torch

        torch.set_num_threads(int(threads))
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_NAME, RANK_PROCESS_NAME.encode(), 0, 0, 0)


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _exit(status: int) -> NoReturn:
    """Leave as an interpreter does: its other threads joined, exit handlers run, streams flushed."""
    try:
        with contextlib.suppress(Exception):
            threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter calls at exit
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(status & 0xFF)


def install() -> None:
    """Make this torchrun agent fork its ranks (see the module's docstring); a torch without the
    hook keeps starting them afresh."""
    try:
        from torch.distributed.elastic.multiprocessing import api
        from torch.distributed.elastic.multiprocessing.subprocess_handler import SubprocessHandler
    except ImportError:
        return
    if not hasattr(api, "get_subprocess_handler") or not hasattr(SubprocessHandler, "_popen"):
        return
    if not fork_is_safe():
        return
    for module in PRELOAD:
        __import__(module)

    class ForkingHandler(SubprocessHandler):
        def __init__(self, entrypoint: str, args: tuple, env: dict[str, str], stdout, stderr, *rest, **kwargs):
            self.redirects = (stdout, stderr)  # the files torchrun sends this rank's output to, if any
            super().__init__(entrypoint, args, env, stdout, stderr, *rest, **kwargs)

        def _popen(self, args, env):
            forked = fork_rank(args, env, *self.redirects)
            return forked if forked is not None else super()._popen(args, env)

    api.get_subprocess_handler = ForkingHandler  # same signature
