"""How the checker reports: the error, the warning, and the wording of a failure."""

from __future__ import annotations

import contextlib
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

import numpy as np


class Failure(NamedTuple):
    """One failed check: its name (``"check_api[CartPole-v1, NextStep]"``) and its message."""

    check: str
    message: str


class ConformanceError(AssertionError):
    """A vector env does not behave as the gymnasium ``VectorEnv`` API requires.

    An ``AssertionError``, so a failed check reads as a failed test in pytest. ``failures``
    holds every failed check as a :class:`Failure`; ``passed``, how many checks passed (set
    by :func:`check_vector_env` only).
    """

    def __init__(self, failures: Sequence[Failure], passed: int | None = None):
        self.failures = [Failure(*failure) for failure in failures]
        self.passed = passed
        super().__init__(self._describe())

    def _describe(self) -> str:
        if len(self.failures) == 1 and self.passed is None:
            check, message = self.failures[0]
            return f"{check} failed: {message}"
        header = f"{len(self.failures)} conformance check(s) failed"
        if self.passed is not None:
            header += f" ({self.passed} passed)"
        parts = [f"{header}:"]
        for number, (check, message) in enumerate(self.failures, start=1):
            parts.append(f"[{number}] {check} failed: {message}")
        return "\n\n".join(parts)


class ConformanceWarning(UserWarning):
    """Something a check accepted but that is worth knowing, e.g. an unusual exception type."""


class _Stop(Exception):
    """Raised inside a check to stop it after a problem that makes going on pointless."""


def _indent(text: str, prefix: str) -> str:
    # Every line but the first, so multi-line values line up under their label.
    return text.replace("\n", "\n" + prefix)


class CheckRun:
    """Collects the problems and notes of one check, then raises or returns them.

    Problems that leave the vector env usable are collected so one run reports them all;
    :meth:`stop` ends the check when going on would only report follow-on failures.
    """

    def __init__(self, name: str):
        self.name = name
        self.problems: list[str] = []
        self.notes: list[str] = []

    def problem(
        self,
        checked: str,
        expected: str,
        got: str,
        hint: str,
        where: Sequence[tuple[str, str]] = (),
        details: str | None = None,
    ) -> None:
        """Record a problem, worded the same way everywhere, so students learn to read it once."""
        lines = [checked]
        for label, value in [*where, ("expected", expected), ("got", got), ("hint", hint)]:
            lines.append(f"  {label + ':':<10}{_indent(str(value), ' ' * 12)}")
        if details:
            lines.append("  " + _indent(details.rstrip(), "  "))
        self.problems.append("\n".join(lines))

    def stop(self, checked: str, expected: str, got: str, hint: str, **kwargs: Any) -> NoReturn:
        self.problem(checked, expected, got, hint, **kwargs)
        raise _Stop

    def crashed(
        self,
        checked: str,
        err: BaseException,
        expected: str = "no exception",
        hint: str = "see the traceback",
    ) -> NoReturn:
        """Stop the check on an exception, showing the end of its traceback."""
        self.stop(checked, expected, exception_summary(err), hint, details=traceback_tail(err))

    def note(self, text: str) -> None:
        self.notes.append(text)
        warnings.warn(ConformanceWarning(f"{self.name}: {text}"), stacklevel=3)

    def attempt(
        self, doing: str, action: Callable[[], Any], expected: str | tuple[str, ...], hint: str
    ) -> Any:
        """Run one call into the vector env; if it raises, record that and stop the check.

        ``expected`` is what the call should return, in words, or a tuple of field names, such
        as ``("observations", "infos")``: then a call not returning a tuple of that many items
        stops the check too.
        """
        fields = expected if isinstance(expected, tuple) else None
        if fields is not None:
            expected = f"({', '.join(fields)})"
        try:
            result = action()
        except Exception as err:
            self.crashed(f"{doing} raised an exception", err, str(expected), hint)
        if fields is not None and not (isinstance(result, tuple) and len(result) == len(fields)):
            self.stop(
                f"{doing} must return a {len(fields)}-tuple",
                str(expected),
                f"a {type_name(result)}: {show(result, limit=200)}",
                f"return {', '.join(fields)}, as gymnasium's VectorEnv does",
            )
        return result

    def running(self) -> contextlib.suppress:
        """Run the body of a check; a :meth:`stop` ends the body but not the check."""
        return contextlib.suppress(_Stop)

    def finish(self) -> list[str]:
        """Raise :class:`ConformanceError` if there were problems, else return the notes."""
        if self.problems:
            if len(self.problems) == 1:
                message = self.problems[0]
            else:
                message = f"{len(self.problems)} problems\n" + "\n".join(
                    f"({number}) {_indent(text, '    ')}"
                    for number, text in enumerate(self.problems, start=1)
                )
            raise ConformanceError([Failure(self.name, message)])
        return self.notes


def exception_summary(err: BaseException) -> str:
    first_line = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first_line}" if first_line else type(err).__name__


def traceback_tail(err: BaseException, lines: int = 30) -> str:
    """The last lines of ``err``'s traceback: where in the student's code it came from."""
    frames = err.__traceback__
    # Skip the checker's own frames: the student needs to see their code, not ours.
    while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
        frames = frames.tb_next
    text = "".join(traceback.format_exception(type(err), err, frames)).rstrip()
    kept = text.splitlines()[-lines:]
    return "traceback (last lines):\n" + "\n".join("  " + line for line in kept)


def show(value: Any, limit: int = 600) -> str:
    """A readable, exact rendering of a value: floats printed with all their digits."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            body = repr(value.tolist())
        else:
            body = np.array2string(value, separator=", ", floatmode="unique", threshold=24)
        text = f"{body} (dtype={value.dtype}, shape={value.shape})"
    elif isinstance(value, np.generic):
        text = f"{value.item()!r} ({value.dtype})"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_name(value: Any) -> str:
    return type(value).__name__
