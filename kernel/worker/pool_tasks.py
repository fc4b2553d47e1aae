"""The two kinds of work a warm pool's rank does between cells (see ``pool_serve``).

``run_job``: a ``%%train --pool`` body, run as that cell's own job: the job's ``HOTSWITCH_*``
variables (its channel, limits, log folder) and files (the body, the channel's key, pushed
values) come in the task and hold while it runs, so the body reports on the job's channel
exactly as a freshly launched rank would.

``run_ranks``: a ``%%ranks`` cell: its output lines and its value (that of a last expression) go
back as ``pool.log`` and ``pool.result`` events, its traceback as a ``pool.result`` with
"error". Values travel as JSON (a tensor as its list of numbers), anything else as its ``repr``:
the kernel never unpickles what a rank sends.
"""

from __future__ import annotations

import ast
import base64
import json
import linecache
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from hotswitch.kernel.channel.line_limit import cut_line
from hotswitch.kernel.channel.secrets import SECRET_FILE
from hotswitch.kernel.launch.job_files import write_job_files
from hotswitch.kernel.launch.owned_folders import owned_folder, remove_owned
from hotswitch.kernel.worker.context import WorkerContext
from hotswitch.kernel.worker.debugger import keep_failure
from hotswitch.kernel.worker.entry import ENV_SECRET_FILE, close_reported, connect, run_reported
from hotswitch.kernel.worker.fd_capture import BelowPython
from hotswitch.kernel.worker.frame_locals import failing_locals
from hotswitch.kernel.worker.rank_stream import LineStream

KEPT_BODIES: list[str] = []  # the pool job body whose lines linecache keeps (the last one)
MAX_LISTED = 4096  # tensors up to this many elements come back as numbers; bigger ones as repr


def run_job(message: dict, namespace: dict, pool: WorkerContext) -> int:
    """Run the body that ``message["files"]`` carry (with the channel's key and pushed values,
    written into a folder of this rank's own, owner-only, removed after) as the job
    ``message["env"]`` describes; its exit status (as ``run_reported`` gives it). The files come
    in the task because a rank on another node does not see the kernel's folders."""
    folder = owned_folder("hotswitch-pool-task-")  # swept, if this rank is killed mid-task
    write_job_files(folder, {name: base64.b64decode(data) for name, data in message["files"].items()})
    env = {**message["env"], ENV_SECRET_FILE: str(folder / SECRET_FILE)}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    channel = None
    keep_source(folder / "body.py")  # its folder goes once the job ends: pdb shows its lines still
    try:
        channel, job = connect(pool.rank)
        return run_reported(str(folder / "body.py"), job, channel, namespace)
    finally:
        if channel is not None:
            close_reported(channel, pool.rank)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        remove_owned(folder)


def keep_source(path: Path) -> None:
    """``path``'s lines in ``linecache`` under its name (with no time stamp, so no check drops them
    once the file is gone), where a post-mortem looks; the body kept before it is dropped."""
    while KEPT_BODIES:
        linecache.cache.pop(KEPT_BODIES.pop(), None)
    text = path.read_text()
    linecache.cache[str(path)] = (len(text), None, text.splitlines(keepends=True), str(path))
    KEPT_BODIES.append(str(path))


class TaskStream(LineStream):
    """``sys.stdout``/``sys.stderr`` during a ``%%ranks`` cell: each line goes to the kernel as
    a ``pool.log`` event of the task (and through to the rank's own stream)."""

    def __init__(self, send: Callable[[str, str], None], name: str, original):
        super().__init__(name, original)
        self.send = send  # (stream, line)

    def send_line(self, line: str) -> None:
        self.send(self._name, line)


def portable(value):
    """``value`` as JSON values: tensors as nested lists (a 0-d one as its number), anything that
    JSON cannot hold as its ``repr``."""
    import torch

    if isinstance(value, torch.Tensor) and value.numel() <= MAX_LISTED:
        value = value.detach().cpu().tolist()
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def cell_name(task: int) -> str:
    """The file name a ``%%ranks`` cell's code runs under, its source in ``linecache`` so that
    tracebacks and pdb show its lines (as IPython names its cells)."""
    return f"<%%ranks cell {task}>"


def execute(code: str, namespace: dict, name: str):
    """Run ``code`` in ``namespace`` as file ``name``; the value of its last statement if that is
    an expression."""
    linecache.cache[name] = (len(code), None, code.splitlines(keepends=True), name)
    tree = ast.parse(code, name)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, name, "exec"), namespace)
    if not isinstance(last, ast.Expr):  # no last statement, or not an expression
        return None
    return eval(compile(ast.Expression(last.value), name, "eval"), namespace)


def run_ranks(message: dict, namespace: dict, pool: WorkerContext) -> int:
    """Run a ``%%ranks`` cell, what it writes below Python captured too; report its value or
    traceback; 0, or 1 if it raised."""
    task = int(message["task"])

    def send(stream: str, line: str) -> None:
        pool.emit({"type": "pool.log", "task": task, "stream": stream, "line": cut_line(line)})

    below = BelowPython(send, None)
    out, err = below.start()
    outer = sys.stdout, sys.stderr
    sys.stdout = TaskStream(send, "stdout", out)
    sys.stderr = TaskStream(send, "stderr", err)
    breakpoints = pool.breakpoints()
    try:
        result = run_cell(message["code"], namespace, task)
    finally:
        breakpoints.remove()
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = outer
        below.stop()
        out.close()
        err.close()
    pool.emit(result)
    return 1 if "error" in result else 0


def run_cell(code: str, namespace: dict, task: int) -> dict:
    """The ``pool.result`` of running ``code``: its value, or its traceback."""
    result: dict = {"type": "pool.result", "task": task}
    try:
        result["value"] = portable(execute(code, namespace, cell_name(task)))
    except BaseException as error:  # the cell's failure is reported; the pool goes on
        # Drop this module's own frames: the cell's code is the first frame shown.
        frames = traceback.extract_tb(error.__traceback__)
        skip = next((i for i, f in enumerate(frames) if f.filename == cell_name(task)), 0)
        tb = error.__traceback__
        for _ in range(skip):
            tb = tb.tb_next if tb is not None else None
        keep_failure(error)  # for %train_debug's post-mortem
        result["error"] = f"{type(error).__name__}: {error}"
        result["traceback"] = "".join(traceback.format_exception(type(error), error, tb)) + failing_locals(tb)
    return result
