"""The command line: ``python -m vecenvs <command>`` (or just ``vecenvs <command>``).

One module per command (``bench``, ``autotune``, ``profile``, ``results``), each adding its own
subparser; what they share (options built from config fields, argument types, error reporting,
output) is in :mod:`vecenvs.cli.common`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from vecenvs.cli import autotune as autotune_command
from vecenvs.cli import bench as bench_command
from vecenvs.cli import profile as profile_command
from vecenvs.cli import results as results_command
from vecenvs.cli.bench import format_table
from vecenvs.cli.common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, Parser, Stop

__all__ = ["build_parser", "format_table", "main"]

#: The command modules, in the order ``--help`` lists them.
COMMANDS = (bench_command, autotune_command, profile_command, results_command)


def build_parser() -> argparse.ArgumentParser:
    """The ``vecenvs`` parser with one subparser per command module."""
    parser = Parser(
        prog="vecenvs",
        description="Measure and profile ways of stepping many gymnasium environments.",
    )
    commands = parser.add_subparsers(title="commands", dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a bad argument already reported by argparse
        return exit_.code if isinstance(exit_.code, int) else EXIT_BAD_INPUT
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what results files record
    try:
        return args.run(args, args.parser)
    except Stop as stop:
        print(f"{args.parser.prog}: {stop}", file=sys.stderr)
        return stop.code
    except KeyboardInterrupt:  # before or after the measuring (checking the env, say)
        print(f"{args.parser.prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
