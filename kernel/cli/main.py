"""The ``hotswitch`` command line."""

from __future__ import annotations

import argparse
import os
import sys

from hotswitch.kernel.cli import (
    data_command,
    demo_command,
    kernel_command,
    lab_command,
    plan_switch_command,
    simulate_command,
    train_command,
)

COMMANDS = [
    demo_command,
    lab_command,
    train_command,
    data_command,
    plan_switch_command,
    simulate_command,
    kernel_command,
]


def command_line() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``hotswitch`` parser and each subcommand's (the docs print their help)."""
    parser = argparse.ArgumentParser(
        prog="hotswitch", description="Interactive LLM training with parallelism hot switching."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser, dict(sub.choices)


def main(argv: list[str] | None = None) -> int:
    parser, _ = command_line()
    args = parser.parse_args(argv)
    try:
        return args.run(args) or 0
    except ValueError as error:
        print(f"hotswitch {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C while a job was stopping: every rank was ended at once
        print(f"hotswitch {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): the rest is for nobody
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that exit's flush is quiet
        return 128 + 13  # what a shell reports for a process ended by SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
