"""The ``hotswitch`` command line."""

from __future__ import annotations

import argparse
import sys

from hotswitch.kernel.cli import (
    demo_command,
    kernel_command,
    lab_command,
    plan_switch_command,
    simulate_command,
    train_command,
)

COMMANDS = [demo_command, lab_command, train_command, plan_switch_command, simulate_command, kernel_command]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hotswitch", description="Interactive LLM training with parallelism hot switching."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return args.run(args) or 0
    except ValueError as error:
        print(f"hotswitch {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
