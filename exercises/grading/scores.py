"""One student's grade, computed once: every output (the table, the gradebook CSV, the feedback
file, Gradescope's ``results.json``) reads its numbers from a :class:`Grade`, so they agree.

Points per check come from the policy; a check that passed earns its points, one that failed or
did not run earns none. Manual parts earn what the instructor gave (nothing while not yet graded:
the total is then the points so far, and the gradebook leaves it blank). The total is rounded to
hundredths once, here.

The late penalty (:data:`LATE_RULE`) takes a share of the checks' points, never of the points
given by hand: on Gradescope the autograder's score is made when the submission arrives, before
any hand score exists, and Gradescope adds the hand scores to it afterwards, so the one rule
both ``make grade`` and Gradescope can apply, to the same total, is the one on the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from exercises.grading.materials import Materials
from exercises.grading.policy import Check, Policy

#: The late penalty, as the feedback and the guide say it.
LATE_RULE = (
    "the late penalty takes its share of the checks' points only; the points given by hand are "
    "not reduced"
)


@dataclass(frozen=True)
class Outcome:
    """What happened to one check: passed, or not, with the hint the check gave (or why it did
    not run)."""

    check: Check
    passed: bool
    hint: str = ""


@dataclass(frozen=True)
class ManualScore:
    """Points an instructor gave for a part graded by hand, and their comment."""

    points: float
    comment: str = ""


@dataclass
class Grade:
    """One student's grade under ``policy``."""

    folder: str  # the submission folder's name
    student_id: str  # the gradebook's key: the roster's id for this folder, or the folder's name
    policy: Policy
    outcomes: list[Outcome] = field(default_factory=list)
    status: str = "ok"  # ok, timed out, crashed, tampered, not graded
    notes: list[str] = field(default_factory=list)  # about the whole submission (files left out...)
    manual: dict[str, ManualScore] = field(default_factory=dict)  # part id -> score
    submitted: datetime | None = None
    materials: Materials | None = None
    seed: int | None = None  # the seed the hidden checks drew this student's cases from

    def points(self, outcome: Outcome) -> float:
        return self.policy.points(outcome.check) if outcome.passed else 0.0

    def question_points(self, question: str) -> float:
        return sum(self.points(o) for o in self.outcomes if o.check.question == question)

    @property
    def automatic(self) -> float:
        return sum(self.points(outcome) for outcome in self.outcomes)

    @property
    def manual_points(self) -> float:
        return sum(score.points for score in self.manual.values())

    @property
    def manual_pending(self) -> list[str]:
        """The manual parts no score was given for yet."""
        return [part for part in self.policy.manual if part not in self.manual]

    @property
    def complete(self) -> bool:
        """Whether every part has its score (no part graded by hand is pending)."""
        return not self.manual_pending

    @property
    def before_penalty(self) -> float:
        return self.automatic + self.manual_points

    @property
    def days_late(self) -> int:
        return self.policy.late.days_late(self.submitted)

    @property
    def penalty_share(self) -> float:
        """The share of the checks' points the late penalty takes, 0 to 1."""
        return self.policy.late.penalty(self.submitted)

    @property
    def penalty(self) -> float:
        """The points the late penalty takes (rounded as the total is)."""
        return round(self.before_penalty - self.total, 2)

    @property
    def total(self) -> float:
        """The grade (so far, while a part graded by hand is pending): the checks' points less
        the late penalty, plus the points given by hand, rounded to hundredths."""
        return round(self.automatic * (1 - self.penalty_share) + self.manual_points, 2)

    @property
    def max_points(self) -> float:
        return self.policy.max_points
