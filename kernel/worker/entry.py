"""The entry module torchrun starts on every rank: ``python -m hotswitch.kernel.worker BODY``.

Connects the channel (address, key and limits come from ``HOTSWITCH_*`` environment variables
set by the kernel), reports "started", runs the cell body with ``hotswitch``, ``torch`` and
``job`` (a ``WorkerContext``) in its namespace, then reports "finished" or the rank's traceback.
Exit status: 0 on success, 1 if the body raised.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback

from hotswitch.backend.runtime.devices import ENV_DEVICE
from hotswitch.kernel.channel.worker_end import WorkerChannel
from hotswitch.kernel.worker.context import WorkerContext
from hotswitch.kernel.worker.rank_stream import RankStream
from hotswitch.kernel.worker.watchdog import start_watchdog

ENV_ADDRESS = "HOTSWITCH_CHANNEL"
ENV_KEY = "HOTSWITCH_KEY"
ENV_KERNEL_PID = "HOTSWITCH_KERNEL_PID"
ENV_MAX_BYTES = "HOTSWITCH_MAX_MESSAGE_BYTES"
ENV_JOB_NAME = "HOTSWITCH_JOB_NAME"


def _required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"hotswitch worker: {name} is not set; start workers through %%train, not by hand")
    return value


def run_body(body_path: str, job: WorkerContext) -> None:
    """Execute the body file in a fresh namespace; exceptions propagate."""
    import torch

    import hotswitch
    import hotswitch.backend

    with open(body_path) as f:
        code = compile(f.read(), body_path, "exec")
    namespace = {"__name__": "__main__", "hotswitch": hotswitch, "torch": torch, "job": job}
    exec(code, namespace)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        raise SystemExit("usage: python -m hotswitch.kernel.worker BODY_FILE")
    rank = int(os.environ.get("RANK", "0"))
    kernel_pid = os.environ.get(ENV_KERNEL_PID)
    start_watchdog(int(kernel_pid) if kernel_pid else None)
    channel = WorkerChannel(
        _required(ENV_ADDRESS), bytes.fromhex(_required(ENV_KEY)), rank, int(_required(ENV_MAX_BYTES))
    )
    job = WorkerContext(
        channel,
        rank=rank,
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        name=os.environ.get(ENV_JOB_NAME, "job"),
        device=os.environ.get(ENV_DEVICE, "cpu"),
    )
    channel.send({"kind": "started", "pid": os.getpid(), "host": socket.gethostname(), "world_size": job.world_size})
    sys.stdout = RankStream(channel, "stdout", sys.__stdout__)
    sys.stderr = RankStream(channel, "stderr", sys.__stderr__)
    status = 0
    try:
        run_body(argv[0], job)
    except SystemExit as stop:
        status = 0 if stop.code in (None, 0) else 1
    except BaseException as error:
        status = 1
        # Drop this module's own frame: the user's body is the first frame they see.
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__.tb_next))
        channel.send({"kind": "error", "error": f"{type(error).__name__}: {error}", "traceback": text})
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    if status == 0:
        channel.send({"kind": "finished"})
    channel.close()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
