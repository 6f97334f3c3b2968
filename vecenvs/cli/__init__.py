"""The command line: ``python -m vecenvs <command>`` (or just ``vecenvs <command>``).

One module per command, each adding its own subparser:

- :mod:`vecenvs.cli.bench`: ``bench``, measure backends side by side (a sweep over envs, N,
  backends and worker counts), store the results and fit the overhead model.
- :mod:`vecenvs.cli.profile`: ``profile``, run one configuration under py-spy and say where the
  time goes in every process.
- :mod:`vecenvs.cli.results`: ``results list | show | export``, read the results store.
- :mod:`vecenvs.cli.autotune`: ``autotune``, measure the ways of stepping N envs within a time
  budget and say which is fastest here.

What they share is in :mod:`vecenvs.cli.common`: the options that set a config field are
built from that field (its flag, help and type in the field's ``metadata``, its default the
field's own), and so are the env, output and error-reporting pieces every command uses.
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
from vecenvs.cli.common import EXIT_BAD_INPUT, Parser, Stop

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
    try:
        return args.run(args, args.parser)
    except Stop as stop:
        print(f"{args.parser.prog}: {stop}", file=sys.stderr)
        return stop.code
