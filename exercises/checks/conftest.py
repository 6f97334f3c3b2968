"""What every check shares: the student's process, calling into it, readable failures, clean-up.

``pytest exercises/checks`` checks ``exercises/student``; ``--submission DIR`` checks another
folder with the same ``q*.py`` files. The checks never import a student's file: each question
gets a sandboxed process of its own for the student's code (``exercises/sandbox`` says how), and
``call(student.module("q1_chunks.py").get("split_by_cost"), [1, 2, 3], 2)`` runs the student's
function there and returns its answer here, as plain data. A crash, a hang or a trick in one
question's code costs that question's checks, nothing else.

A question's checks are in ``test_qN_*.py``; the grader's hidden checks of the same question,
where this folder has them, in ``hidden/test_qN_*.py``. The checks run
question by question, public ones first, each question's in the same student process.
"""

from __future__ import annotations

import hashlib
import random
import re
import secrets
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
    OwnWork,
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
    text = "the seed of every random case, a whole number (default: a new one each run)"
    add("--seed", type=int, default=None, help=text)
    text = (
        "whose work it is: Part B's options are lettered for this student id (exercises/options.py)"
    )
    add("--student", default="", help=text)


def pytest_configure(config: pytest.Config) -> None:
    # Orphans of the student's processes come to this process, so that they can be killed.
    processes.become_subreaper()
    if config.getoption("--seed", None) is None:
        config.option.seed = secrets.randbits(32)


def check_seed(run_seed: int, check: str) -> int:
    """A check's own seed, from the run's and its name: each check draws the same cases under
    the same run seed, whichever other checks ran before it."""
    return int.from_bytes(hashlib.sha256(f"{run_seed}:{check}".encode()).digest()[:4], "big")


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """This check's seed for its random cases (``random.Random(seed)``), from ``--seed``: the
    grader derives that from the course and the student, so a regrade draws the same cases."""
    return check_seed(request.config.getoption("--seed"), request.node.name)


@pytest.fixture
def student_id(request: pytest.FixtureRequest) -> str:
    """Whose work this is (``--student``, from the grader): Part B's options are lettered for
    this id (``exercises/options.py``); "" lets them keep the course's order."""
    return request.config.getoption("--student")


@pytest.fixture
def rng(seed: int) -> random.Random:
    """A random number generator seeded with this check's :func:`seed`."""
    return random.Random(seed)


def pytest_sessionfinish(session: pytest.Session) -> None:
    processes.kill_descendants()


def pytest_report_header(config: pytest.Config) -> list[str]:
    seed = f"random cases: --seed {config.getoption('--seed')}"
    try:
        sandbox = isolation.choose(config.getoption("--sandbox"))
    except RuntimeError as error:
        return [f"student code sandbox: {error}", seed]
    return [f"student code sandbox: {sandbox.description}", seed]


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


#: A check file's question: ``test_q3_step_wait.py`` -> ``q3``.
QUESTION = re.compile(r"test_(q\d+)_")


def question_of(item: pytest.Item) -> str:
    """The question a check belongs to, from its file's name (``""`` for other files)."""
    match = QUESTION.match(item.path.name)
    return match.group(1) if match else ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Question by question (q2 before q10), public checks before hidden ones, each file's
    checks in their own order: so one process serves each question's checks, then stops."""
    order = {id(item): index for index, item in enumerate(items)}

    def key(item: pytest.Item) -> tuple:
        question = question_of(item)
        number = int(question[1:]) if question else 0
        return (number, "hidden" in item.path.parent.name, order[id(item)])

    items.sort(key=key)


#: What each question's answer may call of the course's own code (``vecenvs`` and the
#: exercises' files, named as :mod:`exercises.sandbox.tracing` names them): the envs, and the
#: scaffolding its file starts from. An answer that calls anything else of it (question 5's
#: shares from ``Breakdown.by_role``, question 1's split from ``split_evenly``, a worker loop
#: that runs ``basic_worker``) only delegates, and its checks fail, saying so. Question 6 is
#: measured with ``vecenvs bench``; its model must come from the student's question 2.
OWN_WORK = {
    "q1": OwnWork(),
    "q2": OwnWork(allowed=("exercises/options.py",)),  # (a Part B letter, computed)
    "q3": OwnWork(
        allowed=("vecenvs/envs/", "exercises/pipe_env.py"),
        refused=("basic_worker",),
    ),
    "q4": OwnWork(
        allowed=("vecenvs/envs/", "exercises/pipe_env.py", "exercises/sandbox/toolkit.py"),
        refused=("basic_worker", "scripted_worker", "WorkerUnderTest"),
    ),
    "q5": OwnWork(allowed=("exercises/options.py",)),
    "q6": OwnWork(allowed=("",), refused=("vecenvs/bench/model.py",)),
}


class Processes:
    """One student process per question, started when its first check needs it and stopped
    when the checks move on to the next question."""

    def __init__(self, submission: Path, sandbox: isolation.Sandbox, student_id: str = ""):
        self.submission = submission
        self.sandbox = sandbox
        self.student_id = student_id
        self.question = ""
        self.process: StudentProcess | None = None

    def of(self, question: str) -> StudentProcess:
        if self.process is None or question != self.question:
            self.stop()
            self.question = question
            self.process = StudentProcess(
                self.submission, self.sandbox, OWN_WORK.get(question), self.student_id
            )
        return self.process

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


@pytest.fixture(scope="session")
def processes_by_question(
    request: pytest.FixtureRequest, submission: Path, sandbox: isolation.Sandbox
):
    manager = Processes(submission, sandbox, request.config.getoption("--student"))
    yield manager
    manager.stop()


@pytest.fixture
def student(request: pytest.FixtureRequest, processes_by_question: Processes) -> StudentProcess:
    """The student's code, in the process of this check's question."""
    return processes_by_question.of(question_of(request.node))


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


def right_letter(name: str, starts: str, student_id: str) -> str:
    """The letter under which ``student_id`` sees the option of Part B's question ``name``
    (``exercises/options.py``) that starts with ``starts``."""
    from exercises import options

    texts = options.QUESTIONS[name].options
    index = next(at for at, text in enumerate(texts) if text.startswith(starts))
    return options.letter_of(name, index, student_id)


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
