"""What is graded by hand, collected from a student's files: question 6's explanation (and its
numbers, to read beside it) and the predictions written in the notebooks' ``MY_GUESS`` cells.

Like the checks, the grader never imports a student's file: both are read in the student's
sandboxed process (``toolkit.notebook_guesses`` parses the notebooks there, running none of
their cells), and only plain data comes back, checked here before it is used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exercises.sandbox import isolation
from exercises.sandbox.client import SandboxFailed, StudentCodeFailed, StudentProcess, toolkit

#: Question 6's file, and the names read from it for the instructor.
Q6_FILE = "q6_measure.py"
#: The question files as handed out (a q6 file still the same has nothing to read).
STUDENT_FILES = Path(__file__).resolve().parent.parent / "student"
#: The course's notebooks, as handed out (their comments at each prediction are the course's).
COURSE_NOTEBOOKS = Path(__file__).resolve().parent.parent.parent / "notebooks"
Q6_NUMBERS = (
    "CPUS",
    "ENV_ID",
    "ENV_KWARGS",
    "WORKERS",
    "COMMAND",
    "SWEEP",
    "BREAK_EVEN_N",
    "T_ENV_US",
    "T_OS_US",
    "PREDICTED_BREAK_EVEN_N",
)
#: The most characters of one value, or of the explanation, or of a prediction's reasoning, kept.
MAX_VALUE_CHARS, MAX_EXPLANATION_CHARS, MAX_REASONING_CHARS = 2_000, 20_000, 3_000
#: What a prediction's ``ran`` may say.
RAN = ("before", "after", "not run")


@dataclass(frozen=True)
class Prediction:
    """One ``MY_GUESS`` assignment of a notebook: its value's text, the lines around it with the
    student's comments (their reasoning), and whether its cell ran before the measurement
    (``"before"``, ``"after"``, ``"not run"``)."""

    value: str
    reasoning: str = ""
    ran: str = "not run"
    key: str = ""  # "<notebook file>/<variable>": where the course's notebook has it

    @property
    def own_comments(self) -> list[str]:
        """The comment lines that the course's notebook does not have at this assignment."""
        _course_comments()
        given = _COURSE_COMMENTS.get(self.key, set())
        return [line for line in _comments(self.reasoning) if line not in given]


def _comments(text: str) -> list[str]:
    """The comments of some code lines, each stripped (``x = 1  # why`` gives ``# why``)."""
    found = []
    for line in text.splitlines():
        at = line.find("#")
        if at >= 0 and line[at:].strip("# ").strip():
            found.append(line[at:].strip())
    return found


#: The course's own comments at each prediction (notebook/variable -> comment lines), read from
#: the instructor's notebooks when first needed: a student's reasoning is what is not in them.
_COURSE_COMMENTS: dict[str, set[str]] = {}


def _course_comments() -> None:
    if _COURSE_COMMENTS:
        return
    from exercises.sandbox import toolkit  # (the instructor's notebooks: parsed, never run)

    found = toolkit.notebook_guesses(str(COURSE_NOTEBOOKS))["notebooks"]
    for notebook, variables in found.items():
        for variable, guess in variables.items():
            key = f"{Path(notebook).name}/{variable}"
            _COURSE_COMMENTS[key] = set(_comments(guess["reasoning"]))
    _COURSE_COMMENTS.setdefault("", set())  # (read once, even with no notebook there)


@dataclass
class Materials:
    """A student's parts graded by hand. Every text here was written by the student: show it as
    plain text only (:func:`exercises.grading.reports.plain`)."""

    explanation: str | None = None
    numbers: dict[str, str] = field(default_factory=dict)  # q6 name -> the value, as text
    #: notebook -> variable -> the prediction
    guesses: dict[str, dict[str, Prediction]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def filled_guesses(self) -> int:
        """How many predictions were written (not left at ``None``)."""
        return sum(
            written(guess.value) for names in self.guesses.values() for guess in names.values()
        )

    @property
    def reasoned_guesses(self) -> int:
        """How many written predictions have a comment of the student's own beside them."""
        return sum(
            written(guess.value) and bool(guess.own_comments)
            for names in self.guesses.values()
            for guess in names.values()
        )

    @property
    def guesses_run_first(self) -> int:
        """How many written predictions ran before the cell after them (the measurement)."""
        return sum(
            written(guess.value) and guess.ran == "before"
            for names in self.guesses.values()
            for guess in names.values()
        )

    @property
    def all_guesses(self) -> int:
        return sum(len(names) for names in self.guesses.values())


#: What is left of a prediction cell's value when nothing was written: dict keys, None, brackets.
_UNWRITTEN = re.compile(r"""("[^"]*"|'[^']*'|-?\d+)\s*:|None|[\s{}\[\]():,]""")


def written(text: str) -> bool:
    """Whether a prediction's value text says anything (``None`` and ``{4: None, 128: None}``
    do not)."""
    return bool(_UNWRITTEN.sub("", text))


def collect(folder: Path, sandbox: isolation.Sandbox) -> Materials:
    """Reads the materials from a copy of the student's files, in a sandboxed process."""
    materials = Materials()
    q6, stub = folder / Q6_FILE, STUDENT_FILES / Q6_FILE
    started = q6.is_file() and not (stub.is_file() and q6.read_bytes() == stub.read_bytes())
    if not started and not any(folder.rglob("*.ipynb")):
        # Nothing to read: no sandbox to start (it costs a second or two per student).
        materials.problems.append(f"{Q6_FILE} {'not started' if q6.is_file() else 'not found'}")
        return materials
    student = StudentProcess(folder, sandbox)
    try:
        if started:
            _read_q6(student.module(Q6_FILE), materials)
        else:
            materials.problems.append(f"{Q6_FILE} {'not started' if q6.is_file() else 'not found'}")
        if any(folder.rglob("*.ipynb")):  # (no need to start the toolkit, and gymnasium, without)
            try:
                found = student.ask(
                    "call", toolkit.notebook_guesses(), "reading the notebooks' predictions", 20.0
                )
            except (StudentCodeFailed, SandboxFailed) as error:
                materials.problems.append(f"the notebooks could not be read: {error}"[:300])
            else:
                _read_guesses(found, materials)
    finally:
        student.stop()
    return materials


def _read_q6(module: Any, materials: Materials) -> None:
    try:
        explanation = module.get("EXPLANATION")
    except (StudentCodeFailed, SandboxFailed) as error:
        materials.problems.append(f"{Q6_FILE}: {error}"[:300])
        return
    if isinstance(explanation, str):
        materials.explanation = explanation.strip()[:MAX_EXPLANATION_CHARS]
    else:
        materials.problems.append(f"{Q6_FILE}: EXPLANATION is not text")
    for name in Q6_NUMBERS:
        try:
            materials.numbers[name] = repr(module.get(name))[:MAX_VALUE_CHARS]
        except StudentCodeFailed as error:
            materials.numbers[name] = f"(could not be read: {str(error)[:100]})"


def _read_guesses(found: Any, materials: Materials) -> None:
    """Keeps what has the promised shape, ``{"notebooks": {name: {variable: text}}, "problems":
    [text]}``, and notes anything else: the student's process could have sent anything."""
    if not isinstance(found, dict) or not isinstance(found.get("notebooks"), dict):
        materials.problems.append("the notebooks' predictions came back unreadable")
        return
    _course_comments()
    for notebook, names in found["notebooks"].items():
        if isinstance(notebook, str) and isinstance(names, dict):
            materials.guesses[notebook[:200]] = {
                name[:100]: Prediction(
                    str(guess.get("value", "?"))[:MAX_VALUE_CHARS],
                    str(guess.get("reasoning", ""))[:MAX_REASONING_CHARS],
                    guess.get("ran") if guess.get("ran") in RAN else "not run",
                    f"{Path(notebook).name[:200]}/{name[:100]}",
                )
                for name, guess in names.items()
                if isinstance(name, str) and isinstance(guess, dict)
            }
    problems = found.get("problems")
    if isinstance(problems, list):
        materials.problems += [str(problem)[:300] for problem in problems[:20]]
