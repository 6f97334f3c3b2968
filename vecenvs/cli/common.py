"""Pieces every ``python -m vecenvs`` command shares: argument types and error reporting.

Every command checks all of its input before doing any work, and reports a bad value as one
line naming the value and what was expected, with exit code 2 (the convention argparse uses).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import math
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

#: Exit codes shared by every command.
EXIT_OK = 0
EXIT_FAILED = 1  # the work itself failed (a backend crashed, py-spy could not attach, ...)
EXIT_BAD_INPUT = 2  # bad command-line input: nothing was run
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report it


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line (argparse adds the usage on top)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def fail(parser: argparse.ArgumentParser, message: object, *, code: int) -> int:
    """Print ``message`` as ``vecenvs <command>: error: ...`` and return ``code``."""
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return code


@contextlib.contextmanager
def machine_turn(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Wait for this machine's benchmark lock, saying so, and hold it: two measurements at
    once would spoil both (see :func:`vecenvs.bench.jobs.machine_turn`)."""
    from vecenvs.bench.jobs import machine_turn as take_turn

    def say(holder: str) -> None:
        print(
            f"{parser.prog}: another benchmark is running on this machine (pid {holder}); "
            "waiting for it to finish (Ctrl-C to stop waiting)",
            file=sys.stderr,
            flush=True,
        )

    with take_turn(say):
        yield


def add_store_arguments(group: argparse._ArgumentGroup) -> None:
    """``--store``, ``--no-store`` and ``--label``: where a measuring command saves its run."""
    group.add_argument(
        "--store",
        metavar="PATH",
        help="SQLite results store to save the run in (default: $VECENVS_STORE, "
        "else ~/.local/share/vecenvs/results.sqlite)",
    )
    group.add_argument("--no-store", action="store_true", help="do not save the run")
    group.add_argument("--label", help="a name for the run in the store")


def open_store(path: str | None) -> Any:
    """Open (or create) the results store now, so a bad path fails before any measuring.

    Raises:
        ValueError: the store's own one-line message (a directory, not writable, ...).
    """
    from vecenvs.bench.store import ResultsStore, StoreError

    try:
        return ResultsStore(path)
    except StoreError as error:
        raise ValueError(str(error)) from None


def check_writable(path: str, option: str) -> None:
    """Fail now, not after the measuring, if ``path`` can't be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{option} {path!r} is a directory; expected a file name")
    if not os.path.isdir(directory):
        raise ValueError(f"{option} {path!r}: directory {directory!r} does not exist")
    if not os.access(directory, os.W_OK):
        raise ValueError(f"{option} {path!r}: directory {directory!r} is not writable")


def unique(values: Sequence[Any]) -> list[Any]:
    """Drop repeats, keep the order: ``--num-envs 8 --num-envs 8`` measures N=8 once."""
    return list(dict.fromkeys(values))


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """argparse type: any finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def env_kwarg(text: str) -> tuple[str, Any]:
    """argparse type for ``--env-kwarg``: ``"step_seconds=1e-3"`` -> ``("step_seconds", 0.001)``."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY a Python name, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError):
        # So that render_mode=rgb_array works without shell-quoting the quotes.
        value = raw
    return key, value
