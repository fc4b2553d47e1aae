"""``%%train``'s cell checked before anything launches: the body, the name and every option.

Each error names what was wrong, with the value given, and what to write instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from IPython.core.error import UsageError

from hotswitch.kernel.channel.secrets import leaves_loopback

INTERNAL_ENV_PREFIX = "HOTSWITCH_"
MIN_MESSAGE_BYTES = 1024  # a rank's traceback and a step event must fit
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JOB_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
NAME_RULE = "use letters, digits, '_', '-' and '.'"


def compile_body(cell: str):
    """The body compiled in the kernel; one without a statement is a UsageError, a SyntaxError
    propagates (IPython shows it and the cell fails, so Run All stops there)."""
    try:
        tree = ast.parse(cell, "<%%train cell>")
    except SyntaxError as error:
        raise error from None
    if not tree.body:
        raise UsageError("the %%train cell has no body; write the code every rank runs below the %%train line")
    return compile(tree, "<%%train cell>", "exec")


def parse_env(pairs: list[str] | None) -> dict:
    """``["A=1", "B=x=y"]`` -> ``{"A": "1", "B": "x=y"}``; hotswitch's own variables are refused."""
    env = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME.fullmatch(key):
            raise UsageError(f"--env takes KEY=VALUE with KEY a variable name, got {pair!r}")
        if key.upper().startswith(INTERNAL_ENV_PREFIX):
            raise UsageError(
                f"--env {key} is refused: {INTERNAL_ENV_PREFIX}* variables are set by hotswitch itself (the job's "
                "channel, key and limits); use the %%train options (--device, --max-message-bytes) instead"
            )
        env[key] = value
    return env


def valid_name(name: str) -> bool:
    """Whether ``name`` can name a job or a pool (their folders are named after it)."""
    return bool(_JOB_NAME.fullmatch(name))


def check_name(name: str) -> str:
    """``--name``'s value, or a UsageError quoting it."""
    if not valid_name(name):
        raise UsageError(f"--name {name!r} is not a valid job name; {NAME_RULE} (e.g. --name run1)")
    return name


def check_options(args) -> None:
    """Numbers and addresses of ``%%train``'s options; prints a warning for a public channel."""
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g} is not a duration; give seconds above 0, or leave it out")
    if args.max_message_bytes < MIN_MESSAGE_BYTES:
        raise UsageError(
            f"--max-message-bytes {args.max_message_bytes} is too small for a rank's events and tracebacks; "
            f"give at least {MIN_MESSAGE_BYTES} (default {4 * 1024 * 1024})"
        )
    if leaves_loopback(args.channel_host):
        print(
            f"[hotswitch] warning: --channel-host {args.channel_host} listens beyond this machine; anyone who can "
            "reach it can try to connect (messages are signed, and CURVE-encrypted off loopback). Use 127.0.0.1 "
            "unless ranks run on other nodes."
        )


def check_local_gpus(args) -> None:
    """``--device cuda`` with ranks on this machine: a GPU for each (``-n``), or UsageError
    before launch saying how many there are."""
    from hotswitch.backend.runtime.devices import local_gpus_problem

    if args.device == "cuda" and args.launcher == "local" and (problem := local_gpus_problem(args.nproc)):
        raise UsageError(f"--device cuda: {problem}")


def check_run_root(run_dir: str | None) -> None:
    """``--run-dir``: a folder that is, or can be made (made now, owner-only), or UsageError
    before anything is written."""
    if run_dir is None:
        return
    try:
        Path(run_dir).expanduser().mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as error:
        raise UsageError(
            f"--run-dir {run_dir}: not a folder run folders can be made in ({error.strerror or error})"
        ) from None
