"""Pieces every ``python -m vecenvs`` command shares: argument types and error reporting.

Every command checks all of its input before doing any work, and reports a bad value as one
line naming the value and what was expected, with exit code 2 (the convention argparse uses).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import math
import sys
from collections.abc import Iterator, Sequence
from typing import Any

#: Exit codes shared by every command.
EXIT_OK = 0
EXIT_FAILED = 1  # the work itself failed (a backend crashed, py-spy could not attach, ...)
EXIT_BAD_INPUT = 2  # bad command-line input: nothing was run
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report it


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line (argparse adds the usage on top)."""

    def error(self, message: str):  # type: ignore[override]
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
        print(f"{parser.prog}: another benchmark is running on this machine (pid {holder}); "
              "waiting for it to finish (Ctrl-C to stop waiting)", file=sys.stderr, flush=True)

    with take_turn(say):
        yield


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
