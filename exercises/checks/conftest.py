"""What every check shares: the student's process, calling into it, readable failures, clean-up.

``pytest exercises/checks`` checks ``exercises/student``; ``--submission DIR`` checks another
folder with the same ``q*.py`` files. The checks never import a student's file: each check file
(one question) gets a sandboxed process of its own for the student's code (``exercises/sandbox``
says how), and ``call(student.module("q1_chunks.py").get("split_envs"), 10, 3)`` runs the
student's function there and returns its answer here, as plain data. A crash, a hang or a trick
in one question's code costs that question's checks, nothing else.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

import pytest

EXERCISES = Path(__file__).resolve().parent.parent
# The checks import ``exercises.*``: the folder above ``exercises`` must be importable.
if str(EXERCISES.parent) not in sys.path:
    sys.path.insert(0, str(EXERCISES.parent))

from exercises.sandbox import isolation, processes  # noqa: E402
from exercises.sandbox.client import (  # noqa: E402, F401  (re-exported for the checks)
    RemoteFunction,
    RemoteObject,
    StudentCodeFailed,
    StudentError,
    StudentProcess,
    toolkit,
)
from exercises.sandbox.wire import type_name  # noqa: E402  (re-exported for the checks)


def pytest_addoption(parser: pytest.Parser) -> None:
    add = parser.addoption
    text = "folder with the q*.py files to check (default: exercises/student)"
    add("--submission", default=str(EXERCISES / "student"), help=text)
    text = "where the student's code runs (default: the best this machine has)"
    add("--sandbox", default="auto", choices=("auto", *isolation.KINDS), help=text)


def pytest_configure(config: pytest.Config) -> None:
    # Orphans of the student's processes come to this process, so that they can be killed.
    processes.become_subreaper()


def pytest_sessionfinish(session: pytest.Session) -> None:
    processes.kill_descendants()


def pytest_report_header(config: pytest.Config) -> str:
    try:
        sandbox = isolation.choose(config.getoption("--sandbox"))
    except RuntimeError as error:
        return f"student code sandbox: {error}"
    return f"student code sandbox: {sandbox.kind}"


@pytest.fixture(scope="session")
def sandbox(request: pytest.FixtureRequest) -> isolation.Sandbox:
    chosen = isolation.choose(request.config.getoption("--sandbox"))
    if chosen.warning:
        warnings.warn(chosen.warning, stacklevel=1)
    return chosen


@pytest.fixture(scope="session")
def submission(request: pytest.FixtureRequest) -> Path:
    folder = Path(request.config.getoption("--submission")).resolve()
    if not folder.is_dir():
        pytest.fail(f"--submission {folder}: no such folder")
    return folder


@pytest.fixture(scope="module")
def student(submission: Path, sandbox: isolation.Sandbox):
    """The student's code, in a process of its own for this question's checks."""
    process = StudentProcess(submission, sandbox)
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def no_processes_left_behind(student: StudentProcess):
    """Whatever a check made the student's code start (a worker that never exits...) is killed
    after it, so one hung exercise cannot slow down the next."""
    yield
    student.clean_up()


def call(function: RemoteFunction, *args: Any, seconds: float = 10.0, **kwargs: Any) -> Any:
    """Calls a student's function over there, with a deadline; returns its answer. An exception
    it raises arrives as :class:`StudentError` (``error.is_a("ValueError")``); not done yet, a
    hang, a crash or an answer that is not data fail the check with a message saying so."""
    if not isinstance(function, RemoteFunction):
        fail(f"expected a function, found {type_name(function)} {function!r:.60}")
    return function.call_within(seconds, *args, **kwargs)


def expect_error(name: str, hint: str, function: RemoteFunction, *args: Any, **kwargs: Any):
    """:func:`call`, which must raise the exception class ``name``: returns that
    :class:`StudentError`, or fails the check with ``hint`` and what happened instead."""
    try:
        call(function, *args, **kwargs)
    except StudentError as error:
        if error.is_a(name):
            return error
        fail(f"{hint}; it raised {error.type_name}: {error.message}")
    fail(f"{hint}; it returned without an error")


def fail(message: str) -> NoReturn:
    """Fails the check with ``message`` alone: written for the student, it needs no stack."""
    pytest.fail(message, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """When the student's code failed to answer, the report shows only the message written for
    the student (with their traceback), not the checks' own stack."""
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(StudentCodeFailed):
        report.longrepr = str(call.excinfo.value)
    return report
