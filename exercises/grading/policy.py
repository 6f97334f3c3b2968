"""Points and policy in one file: ``exercises/policy.toml``.

The file gives every check its points (public checks, which students run themselves, and hidden
ones, which only the grader runs), the parts graded by hand, the due date and the late penalty,
and what the feedback shows of hidden checks. :func:`load` reads it and refuses a file with a
mistake, naming the bad value and what was expected; :meth:`Policy.check_against` then compares
it with the checks pytest collects, so that a check without points (or points for a check that
no longer exists) stops the grader before any student is graded.

    policy = load(Path("exercises/policy.toml"))
    policy.points(Check("q1", "test_covers_every_env_once", hidden=False))   # 2.0
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None  # type: ignore[assignment]

#: The policy the grader reads unless told otherwise.
DEFAULT = Path(__file__).resolve().parent.parent / "policy.toml"
#: Gradescope's visibilities for a test (``results.json``).
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
#: A question's id: ``q1``, ``q2``...; a check's name: a pytest test function's.
QUESTION_ID = re.compile(r"q\d+")
CHECK_NAME = re.compile(r"test_\w+")


class PolicyError(ValueError):
    """The policy file has a mistake; the message names it and says what was expected."""


@dataclass(frozen=True, order=True)
class Check:
    """One check: a test function in ``exercises/checks/test_<question>_*.py`` (public) or in
    ``exercises/checks/hidden/test_<question>_*.py`` (hidden)."""

    question: str
    name: str
    hidden: bool = False

    @property
    def key(self) -> str:
        """``"q1/public/test_name"``: how the policy file names it."""
        return f"{self.question}/{'hidden' if self.hidden else 'public'}/{self.name}"

    @property
    def title(self) -> str:
        """The name as words: ``test_covers_every_env`` -> ``covers every env``."""
        return self.name.removeprefix("test_").replace("_", " ")


@dataclass(frozen=True)
class Question:
    """A question's title and its checks' points (check name -> points)."""

    id: str
    title: str
    public: dict[str, float]
    hidden: dict[str, float]

    @property
    def max_points(self) -> float:
        return sum(self.public.values()) + sum(self.hidden.values())

    @property
    def public_points(self) -> float:
        return sum(self.public.values())

    def checks(self) -> list[Check]:
        return [Check(self.id, name) for name in self.public] + [
            Check(self.id, name, hidden=True) for name in self.hidden
        ]


@dataclass(frozen=True)
class Criterion:
    """One line of a manual part's rubric: what earns how many points."""

    points: float
    text: str


@dataclass(frozen=True)
class ManualPart:
    """A part graded by hand: its id (``q6_explanation``), title, points and rubric (whose
    criteria's points add up to the part's)."""

    id: str
    title: str
    points: float
    rubric: tuple[Criterion, ...] = ()


@dataclass(frozen=True)
class LatePolicy:
    """The due date and what lateness costs: ``per_day`` of the points for each started day
    after the grace period; more than ``last_day`` days late scores nothing."""

    due: datetime | None = None
    grace: timedelta = timedelta(0)
    per_day: float = 0.0
    last_day: int = 0

    def days_late(self, submitted: datetime | None) -> int:
        """Started days after the due date and the grace period (0 when on time or unknown)."""
        if self.due is None or submitted is None:
            return 0
        late = submitted - (self.due + self.grace)
        if late <= timedelta(0):
            return 0
        return math.ceil(late / timedelta(days=1))

    def penalty(self, submitted: datetime | None) -> float:
        """The share of the points taken off, 0 to 1."""
        days = self.days_late(submitted)
        if days == 0:
            return 0.0
        if days > self.last_day:
            return 1.0
        return round(min(1.0, days * self.per_day), 6)  # 3 x 0.1 is 0.3, not 0.30000000000000004


@dataclass(frozen=True)
class Policy:
    """Everything ``policy.toml`` says (see the file itself for the format)."""

    title: str
    questions: dict[str, Question]
    manual: dict[str, ManualPart] = field(default_factory=dict)
    late: LatePolicy = LatePolicy()
    hidden_hints: bool = False
    hidden_visibility: str = "after_published"
    path: Path | None = None
    #: What the hidden checks' random cases are drawn from, with each student's id: the same
    #: course seed and student give the same cases at every regrade (``[course] seed``, by
    #: default the title; a new one for a new term draws new cases).
    seed: str = ""

    def student_seed(self, student_id: str, course_seed: str | None = None) -> int:
        """The seed of a student's random cases: a hash of the course's seed (or
        ``course_seed``, given for one run) and the student's id, a whole number below 2**32."""
        text = f"{self.seed if course_seed is None else course_seed}\n{student_id}"
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")

    @property
    def max_points(self) -> float:
        """The most a student can score: every check and every manual part."""
        automatic = sum(question.max_points for question in self.questions.values())
        return automatic + sum(part.points for part in self.manual.values())

    def checks(self) -> list[Check]:
        """Every check the policy gives points to, question by question, public first."""
        return [check for question in self.questions.values() for check in question.checks()]

    def points(self, check: Check) -> float:
        """A check's points (KeyError for a check the policy does not know)."""
        question = self.questions[check.question]
        return (question.hidden if check.hidden else question.public)[check.name]

    def check_against(self, collected: list[Check]) -> None:
        """Raises PolicyError unless the policy gives points to exactly the checks collected."""
        known, found = set(self.checks()), set(collected)
        problems = [
            f"the check {check.key} has no points in the policy: add `{check.name} = POINTS` "
            f"under [questions.{check.question}.{'hidden' if check.hidden else 'public'}]"
            for check in sorted(found - known)
        ]
        problems += [
            f"the policy gives points to {check.key}, which is not a check (renamed or removed?)"
            for check in sorted(known - found)
        ]
        if problems:
            raise PolicyError(f"{self.path or 'the policy'}: " + "; ".join(problems))


def load(path: Path = DEFAULT) -> Policy:
    """Reads and checks a policy file. Raises PolicyError naming the first bad value."""
    if tomllib is None:
        raise PolicyError(
            "reading the policy (TOML) needs Python 3.11+, or `pip install tomli` on Python 3.10"
        )
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as error:
        raise PolicyError(f"cannot read the policy file {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"{path} is not valid TOML: {error}") from None
    try:
        return _parse(data, Path(path))
    except PolicyError as error:
        raise PolicyError(f"{path}: {error}") from None


def _parse(data: dict[str, Any], path: Path) -> Policy:
    _only(data, "the file", {"course", "late", "feedback", "questions", "manual"})
    course = _table(data, "course")
    _only(course, "[course]", {"title", "due", "seed"})
    late = _table(data, "late")
    _only(late, "[late]", {"grace_minutes", "penalty_per_day", "last_day"})
    feedback = _table(data, "feedback")
    _only(feedback, "[feedback]", {"hidden_hints", "hidden_visibility"})

    due = course.get("due")
    if due is not None:
        if not isinstance(due, datetime):
            raise PolicyError(
                f"[course] due = {due!r}: expected a TOML date and time, e.g. 2026-05-15T23:59:00Z"
            )
        if due.tzinfo is None:
            raise PolicyError(
                f"[course] due = {due.isoformat()}: give its time zone (a Z or +02:00 at the end)"
            )
    late_policy = LatePolicy(
        due=due,
        grace=timedelta(minutes=_number(late, "grace_minutes", "[late]", 0.0)),
        per_day=_number(late, "penalty_per_day", "[late]", 0.0, at_most=1.0),
        last_day=int(_number(late, "last_day", "[late]", 0.0, whole=True)),
    )

    questions: dict[str, Question] = {}
    for question_id, table in _table(data, "questions").items():
        where = f"[questions.{question_id}]"
        if not QUESTION_ID.fullmatch(question_id):
            raise PolicyError(f"{where}: a question's id is q and a number, e.g. q1")
        if not isinstance(table, dict):
            raise PolicyError(f"{where}: expected a table")
        _only(table, where, {"title", "public", "hidden"})
        parts = {}
        for part in ("public", "hidden"):
            checks = _table(table, part, where)
            for name in checks:
                if not CHECK_NAME.fullmatch(name):
                    raise PolicyError(
                        f"[questions.{question_id}.{part}] {name!r}: expected a check's name (test_...)"
                    )
            parts[part] = {
                name: _number(checks, name, f"[questions.{question_id}.{part}]", 0.0)
                for name in checks
            }
        questions[question_id] = Question(
            question_id, _text(table, "title", where, question_id), parts["public"], parts["hidden"]
        )
    if not questions:
        raise PolicyError("no [questions.qN] tables: give every check its points")

    manual = {}
    for part_id, table in _table(data, "manual").items():
        where = f"[manual.{part_id}]"
        if not isinstance(table, dict):
            raise PolicyError(f"{where}: expected a table")
        _only(table, where, {"title", "points", "rubric"})
        points = _number(table, "points", where, 0.0)
        rubric = _rubric(table.get("rubric"), where, points)
        manual[part_id] = ManualPart(part_id, _text(table, "title", where, part_id), points, rubric)

    visibility = feedback.get("hidden_visibility", "after_published")
    if visibility not in VISIBILITIES:
        raise PolicyError(
            f"[feedback] hidden_visibility = {visibility!r}: expected one of {VISIBILITIES}"
        )
    hidden_hints = feedback.get("hidden_hints", False)
    if not isinstance(hidden_hints, bool):
        raise PolicyError(f"[feedback] hidden_hints = {hidden_hints!r}: expected true or false")
    title = _text(course, "title", "[course]", "the exercises")
    seed = course.get("seed", title)
    if isinstance(seed, bool) or not isinstance(seed, (str, int)) or not str(seed).strip():
        raise PolicyError(f"[course] seed = {seed!r}: expected some text or a whole number")
    return Policy(
        title=title,
        seed=str(seed),
        questions=dict(sorted(questions.items(), key=lambda item: int(item[0][1:]))),
        manual=manual,
        late=late_policy,
        hidden_hints=hidden_hints,
        hidden_visibility=visibility,
        path=path,
    )


def _rubric(rubric: Any, where: str, points: float) -> tuple[Criterion, ...]:
    """A manual part's rubric: a list of ``{points = 2, criterion = "..."}`` whose points add up
    to the part's."""
    if not isinstance(rubric, list) or not rubric:
        raise PolicyError(
            f"{where} rubric = {rubric!r}: expected a list of criteria, "
            '[{ points = 2, criterion = "what earns them" }, ...]'
        )
    criteria = []
    for number, item in enumerate(rubric, 1):
        place = f"{where} rubric, criterion {number}"
        if not isinstance(item, dict):
            raise PolicyError(f"{place} = {item!r}: expected {{ points = ..., criterion = ... }}")
        _only(item, place, {"points", "criterion"})
        criteria.append(
            Criterion(_number(item, "points", place, 0.0), _text(item, "criterion", place, ""))
        )
    total = sum(criterion.points for criterion in criteria)
    if not math.isclose(total, points):
        raise PolicyError(
            f"{where}: the rubric's criteria add up to {total:g} points, the part has {points:g}"
        )
    return tuple(criteria)


def _table(data: dict[str, Any], name: str, where: str = "the file") -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise PolicyError(f"{where}: {name} = {value!r}: expected a table")
    return value


def _only(table: dict[str, Any], where: str, allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise PolicyError(f"{where}: unknown key {unknown[0]!r}; expected one of {sorted(allowed)}")


def _text(table: dict[str, Any], key: str, where: str, default: str) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"{where} {key} = {value!r}: expected some text")
    return value


def _number(
    table: dict[str, Any],
    key: str,
    where: str,
    default: float,
    *,
    at_most: float = math.inf,
    whole: bool = False,
) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(f"{where} {key} = {value!r}: expected a number")
    if not (0 <= value <= at_most) or (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        bound = f" from 0 to {at_most:g}" if at_most < math.inf else " of at least 0"
        raise PolicyError(f"{where} {key} = {value!r}: expected {kind}{bound}")
    return float(value)
