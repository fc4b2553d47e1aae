"""The entry module torchrun starts on every rank: ``python -m hotswitch.kernel.worker BODY``.

Connects the channel (address, key and limits come from ``HOTSWITCH_*`` environment variables
set by the kernel), reports "started", runs the cell body with ``hotswitch``, ``torch`` and
``job`` (a ``WorkerContext``) in its namespace, then reports "finished" or the rank's traceback.
Exit status: 0 on success, 1 if the body raised, the body's own status after ``sys.exit(N)``.
When the worker itself fails (the channel refuses a message, say), it prints a line marked
``WORKER_ERROR_MARK`` on its own stderr (the launcher's agent log), where the kernel finds it.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback

from hotswitch.backend.runtime.devices import ENV_DEVICE
from hotswitch.kernel.channel.messages import EndMessage
from hotswitch.kernel.channel.secrets import WorkerSecret
from hotswitch.kernel.channel.worker_end import WorkerChannel
from hotswitch.kernel.worker.context import WorkerContext
from hotswitch.kernel.worker.deadline import start_deadline
from hotswitch.kernel.worker.debugger import Breakpoints, keep_failure
from hotswitch.kernel.worker.fd_capture import BelowPython, say_on_agent_log
from hotswitch.kernel.worker.frame_locals import failing_locals
from hotswitch.kernel.worker.heartbeat import heartbeat_timeout, start_heartbeat
from hotswitch.kernel.worker.pushed import read_pushed
from hotswitch.kernel.worker.rank_log import (
    Tee,
    no_stacks_on_signal,
    note_in_rank_log,
    open_rank_log,
    stacks_on_signal,
)
from hotswitch.kernel.worker.rank_stream import RankStream
from hotswitch.kernel.worker.watchdog import start_watchdog

ENV_ADDRESS = "HOTSWITCH_CHANNEL"
ENV_SECRET_FILE = "HOTSWITCH_SECRET_FILE"  # the channel's key (and CURVE keys): a file, owner-only
ENV_KERNEL_PID = "HOTSWITCH_KERNEL_PID"
ENV_MAX_BYTES = "HOTSWITCH_MAX_MESSAGE_BYTES"
ENV_JOB_NAME = "HOTSWITCH_JOB_NAME"
ENV_NODE = "HOTSWITCH_NODE"  # the node a rank runs on, as its launcher names it (default: the host name)


def _required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"hotswitch worker: {name} is not set; start workers through %%train, not by hand")
    return value


def run_body(body_path: str, job: WorkerContext, namespace: dict | None = None) -> None:
    """Execute the body file in ``namespace`` (a warm pool's, kept across cells) or a fresh one;
    exceptions propagate."""
    import torch

    import hotswitch
    import hotswitch.backend

    with open(body_path) as f:
        code = compile(f.read(), body_path, "exec")
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    namespace.update(read_pushed(body_path))  # %%train --push values
    namespace.update(hotswitch=hotswitch, torch=torch, job=job)
    exec(code, namespace)


# A line the kernel looks for in the agent's output when a rank ends without a report.
WORKER_ERROR_MARK = "hotswitch worker error:"


def body_exit_status(stop: SystemExit) -> int:
    """The status ``sys.exit(code)`` asks for: 0 for None, the int itself, 1 for anything else."""
    if stop.code is None:
        return 0
    return stop.code if isinstance(stop.code, int) else 1


def report_own_error(rank: int, error: BaseException) -> None:
    """The worker itself failed (not the body): say why on the agent's output, where the kernel reads it."""
    say_on_agent_log(f"{WORKER_ERROR_MARK} rank {rank}: {type(error).__name__}: {error}\n")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        raise SystemExit("usage: python -m hotswitch.kernel.worker BODY_FILE")
    rank = int(os.environ.get("RANK", "0"))
    kernel_pid = os.environ.get(ENV_KERNEL_PID)
    start_watchdog(int(kernel_pid) if kernel_pid else None)
    try:
        channel, job = connect(rank)
    except (Exception, SystemExit) as error:
        report_own_error(rank, error)
        return 1
    status = run_reported(argv[0], job, channel)
    close_reported(channel, rank)
    return status


def close_reported(channel: WorkerChannel, rank: int) -> None:
    """Close the channel once the kernel has confirmed every message; what it never confirmed
    is said, with the count, in the rank's own log and on the agent's output."""
    lost = channel.close()
    if lost:
        note_in_rank_log(rank, f"hotswitch: {lost} messages of rank {rank} were not confirmed by the kernel")


def connect(rank: int) -> tuple[WorkerChannel, WorkerContext]:
    """The job's channel (from the ``HOTSWITCH_*`` environment), "started" sent on it and its
    heartbeat beating; and the ``job`` a body sees."""
    secret = WorkerSecret.read(_required(ENV_SECRET_FILE))
    channel = WorkerChannel(_required(ENV_ADDRESS), secret.key, rank, int(_required(ENV_MAX_BYTES)), secret.curve())
    channel.on_note = lambda text: note_in_rank_log(rank, text)
    job = WorkerContext(
        channel,
        rank=rank,
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        name=os.environ.get(ENV_JOB_NAME, "job"),
        device=os.environ.get(ENV_DEVICE, "cpu"),
    )
    host = socket.gethostname()
    node = os.environ.get(ENV_NODE) or host
    channel.send({"kind": "started", "pid": os.getpid(), "host": host, "node": node, "world_size": job.world_size})
    start_heartbeat(channel, heartbeat_timeout())
    start_deadline(channel, job.rank)
    return channel, job


def run_reported(body_path: str, job: WorkerContext, channel: WorkerChannel, namespace: dict | None = None) -> int:
    """Run the body (in ``namespace``, see ``run_body``) with its output on the channel, what it
    writes below Python too (``fd_capture``); report its end; its exit status. ``sys.stdout``,
    ``sys.stderr`` and fd 1 and 2 are as they were once it returns."""
    log = open_rank_log(job.rank)
    stacks_on_signal(log)
    below = BelowPython(channel.send_line, log)
    out, err = below.start()  # the descriptors as they were: the agent's log
    outer = sys.stdout, sys.stderr
    sys.stdout = RankStream(channel, "stdout", Tee(out, log))
    sys.stderr = RankStream(channel, "stderr", Tee(err, log))
    breakpoints = Breakpoints(channel, job.rank)
    try:
        status, report = run_catching(body_path, job, namespace)
    finally:
        breakpoints.remove()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception as error:
            report_own_error(job.rank, error)
        sys.stdout, sys.stderr = outer
        if not below.stop():
            note_in_rank_log(job.rank, "hotswitch: a process the body started still writes to its output")
        out.close()
        err.close()
        no_stacks_on_signal()
    if log is not None:
        with log:
            if report["kind"] == "error":
                log.write(report["traceback"])
    report["lines"] = channel.lines_sent  # so the kernel can tell whether any line went missing
    try:
        channel.send(report)
    except Exception as error:
        report_own_error(job.rank, error)
        return status or 1
    return status


def run_catching(body_path: str, job: WorkerContext, namespace: dict | None) -> tuple[int, EndMessage]:
    """The body run; its exit status and the report of its end (its traceback where it raised)."""
    try:
        run_body(body_path, job, namespace)
    except SystemExit as stop:
        status = body_exit_status(stop)
        if not status:
            return 0, {"kind": "finished"}
        if not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
        error = f"SystemExit: the body called sys.exit({stop.code!r}); exit status {status}"
        return status, {"kind": "error", "error": error, "traceback": error}
    except BaseException as error:
        # Drop this module's own frame: the user's body is the first frame they see.
        keep_failure(error)  # a warm pool's rank lives on: %train_debug opens pdb here
        caught = error.__traceback__  # never None in an except block
        text = "".join(traceback.format_exception(type(error), error, caught.tb_next if caught else None))
        text += failing_locals(caught)
        return 1, {"kind": "error", "error": f"{type(error).__name__}: {error}", "traceback": text}
    return 0, {"kind": "finished"}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
