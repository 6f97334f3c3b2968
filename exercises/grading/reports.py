"""What one grading run writes: per student a feedback file and Gradescope's ``results.json``;
for the class the gradebook CSV, the table printed in the terminal, the sheet for the parts
graded by hand, and those parts collected for reading.

Every number comes from :class:`~exercises.grading.scores.Grade`, so the feedback file, the
``results.json`` score and the CSV's total are the same number. Everything a student wrote (a
folder name, an exception message in a hint, an explanation) is hostile input: it is written as
plain text with its control characters shown as escapes (:func:`plain`), never as Markdown or
HTML, and a CSV cell that a spreadsheet would take for a formula starts with an apostrophe
(:func:`cell`).
"""

from __future__ import annotations

import csv
import json
import os
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from exercises.grading.policy import ManualPart, Policy
from exercises.grading.scores import LATE_RULE, Grade, Outcome
from vecenvs.table import format_table

#: The files written for each student, in ``FEEDBACK_DIR/<folder>/``.
FEEDBACK_FILE, RESULTS_FILE = "feedback.txt", "results.json"
#: The class's files, in ``FEEDBACK_DIR``: their names start with ``_``, as no student's folder
#: does (the grader skips those), so that no student's feedback folder can take their place.
MANUAL_SHEET, MANUAL_PARTS = "_manual-scores.csv", "_manual-parts.txt"


#: What a student's seed means, said beside it.
SEED_NOTE = "from the course and your student id: a regrade draws the same cases"
#: Whose order Part B's options were lettered in (exercises/options.py), said beside the seed.
LETTERS_NOTE = "the options lettered for student id {id} (python -m exercises.options {id})"


def plain(text: str) -> str:
    """``text`` safe to print and to show as text: control and format characters (terminal
    escapes, right-to-left overrides...) become visible escapes; newlines and tabs stay."""
    return "".join(
        char
        if char in "\n\t" or unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Co")
        else f"\\u{ord(char):04x}"
        for char in str(text)
    )


def cell(value: Any) -> Any:
    """A CSV cell: numbers as they are, text as :func:`plain` text, and text that a spreadsheet
    would run as a formula (``=``, ``+``, ``-``, ``@``) behind an apostrophe."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = plain(value).replace("\n", " ").replace("\t", " ")
    return f"'{text}" if text[:1] in ("=", "+", "-", "@") else text


def points(value: float) -> int | float:
    """Points for a CSV or JSON file: a whole number as an int, else rounded to hundredths."""
    value = round(value, 2)
    return int(value) if value == int(value) else value


def number(value: float) -> str:
    """Points as people write them: ``12``, ``7.5``, ``3.25``."""
    return f"{round(value, 2):g}"


def _write(path: Path, text: str) -> None:
    """Writes the whole file, then renames it into place: no one reads half a file. A file that
    already says ``text`` is left as it is (a regrade of one student touches no one else's)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


# ------------------------------------------------------------------------------------------------
# One student
# ------------------------------------------------------------------------------------------------


def feedback_text(grade: Grade) -> str:
    """The feedback file a student is given: the total, each check with its points and, for a
    failed one, the hint; the parts graded by hand; lateness."""
    policy = grade.policy
    so_far = "" if grade.complete else " so far"
    lines = [
        f"Feedback for {grade.folder}"
        + (f" (student id {grade.student_id})" if grade.student_id != grade.folder else ""),
        policy.title,
        "",
        f"Total: {number(grade.total)} of {number(grade.max_points)} points{so_far}",
        f"  checks: {number(grade.automatic)} of {number(_automatic_max(policy))}",
    ]
    if policy.manual:
        pending = f" ({len(grade.manual_pending)} not graded yet)" if grade.manual_pending else ""
        manual_max = sum(part.points for part in policy.manual.values())
        lines.append(
            f"  graded by hand: {number(grade.manual_points)} of {number(manual_max)}{pending}"
        )
    if grade.penalty_share:
        lines.append(
            f"  late: {grade.days_late} day(s) after the due date and its grace period: "
            f"-{grade.penalty_share:.0%} of the checks' points (-{number(grade.penalty)} points; "
            f"{LATE_RULE})"
        )
    if grade.status != "ok":
        lines.append(f"  grading: {grade.status}")
    if grade.seed is not None:
        lines.append(f"  random cases: seed {grade.seed} ({SEED_NOTE})")
        lines.append(f"  Part B's letters: {LETTERS_NOTE.format(id=grade.student_id)}")
    for question in policy.questions.values():
        outcomes = [o for o in grade.outcomes if o.check.question == question.id]
        lines += [
            "",
            f"{question.id}  {question.title}: "
            f"{number(grade.question_points(question.id))} of {number(question.max_points)}",
        ]
        for outcome in outcomes:
            lines += _outcome_lines(grade, outcome)
    if policy.manual:
        lines += ["", "Graded by hand (the points each criterion of the rubric earns)"]
        for part in policy.manual.values():
            score = grade.manual.get(part.id)
            got = (
                f"pending: not graded yet (of {number(part.points)})"
                if score is None
                else f"{number(score.points)} of {number(part.points)}"
            )
            lines.append(f"  {part.title}: {got}")
            lines += rubric_lines(part, "      ")
            if score is not None and score.comment:
                lines.append(f"      comment: {score.comment}")
    materials = grade.materials
    if materials is not None:
        words = len(materials.explanation.split()) if materials.explanation else 0
        lines += [
            "",
            f"Collected for grading by hand: question 6's explanation ({words} words); "
            f"{materials.filled_guesses} of the {materials.all_guesses} predictions in your "
            f"notebooks' MY_GUESS cells written ({len(materials.guesses)} notebook(s) found), "
            f"{materials.reasoned_guesses} with a comment of yours beside them, "
            f"{materials.guesses_run_first} run before the cell after them.",
        ]
    if grade.notes:
        lines += ["", "Notes", *(f"  {note}" for note in grade.notes)]
    return plain("\n".join(lines)) + "\n"


def rubric_lines(part: ManualPart, indent: str) -> list[str]:
    """A manual part's rubric, a criterion a line: ``[2] says what was measured ...``."""
    return [f"{indent}[{number(item.points)}] {item.text}" for item in part.rubric]


def _outcome_lines(grade: Grade, outcome: Outcome) -> list[str]:
    check = outcome.check
    got = f"{number(grade.points(outcome))} of {number(grade.policy.points(check))}"
    kind = "hidden check" if check.hidden else "check"
    mark = "passed" if outcome.passed else "FAILED"
    lines = [f"  {mark}  {kind}: {check.title}  ({got})"]
    if not outcome.passed and outcome.hint and (not check.hidden or grade.policy.hidden_hints):
        lines += [f"          {line}" for line in outcome.hint.splitlines()]
    return lines


def results_json(grade: Grade) -> dict[str, Any]:
    """Gradescope's autograder results, as its specification describes them
    (https://gradescope-autograders.readthedocs.io/en/latest/specs/): ``tests[]`` with ``score``,
    ``max_score``, ``status``, ``output`` and ``visibility``; the top-level ``score`` (the total,
    as in the CSV), ``output``, ``visibility``, ``stdout_visibility`` and ``extra_data``.

    Hidden checks get the policy's ``hidden_visibility``, and so does the whole result (the
    top-level ``visibility``, which is also the default of a test without one), because its
    ``score`` and ``output`` count the hidden checks: public checks keep ``"visible"``. A part
    graded by hand that has no score yet is no test (it would show as failed, 0 of its
    points): the ``output`` says it is pending, ``extra_data["pending"]`` lists it. The grader's
    log (``stdout``) names hidden cases: never shown."""
    policy = grade.policy
    tests = []
    numbers = {question: 0 for question in policy.questions}
    for outcome in grade.outcomes:
        check = outcome.check
        numbers[check.question] += 1
        hidden = check.hidden
        show_hint = not outcome.passed and (not hidden or policy.hidden_hints)
        tests.append(
            {
                "name": f"{check.question}: {check.title}" + (" (hidden)" if hidden else ""),
                "number": f"{check.question[1:]}.{numbers[check.question]}",
                "score": grade.points(outcome),
                "max_score": policy.points(check),
                "status": "passed" if outcome.passed else "failed",
                "output": plain(outcome.hint) if show_hint else "",
                "visibility": policy.hidden_visibility if hidden else "visible",
            }
        )
    pending = []
    for part in policy.manual.values():
        score = grade.manual.get(part.id)
        rubric = "\n".join(rubric_lines(part, ""))
        if score is None:
            pending.append({"part": part.id, "title": part.title, "max_score": part.points})
            continue
        tests.append(
            {
                "name": f"{part.title} (graded by hand)",
                "score": score.points,
                "max_score": part.points,
                "output": plain(f"{score.comment}\n\nRubric:\n{rubric}".strip()),
                "visibility": "visible",
            }
        )
    if grade.penalty:
        tests.append(
            {
                "name": f"late penalty: {grade.days_late} day(s), -{grade.penalty_share:.0%} of "
                "the checks' points",
                "score": -grade.penalty,
                "max_score": 0.0,
                "visibility": "visible",
            }
        )
    summary = f"{number(grade.total)} of {number(grade.max_points)} points ({policy.title})"
    if grade.status != "ok":
        summary += f"; grading: {grade.status}"
    if grade.seed is not None:
        summary += f"\nrandom cases: seed {grade.seed} ({SEED_NOTE})"
        summary += f"\nPart B's letters: {LETTERS_NOTE.format(id=grade.student_id)}"
    for part in pending:
        summary += (
            f"\npending: {part['title']} ({number(part['max_score'])} points), graded by hand, "
            "not graded yet"
        )
    any_hidden = any(outcome.check.hidden for outcome in grade.outcomes)
    return {
        "score": grade.total,
        "output": plain(summary + "".join(f"\n{note}" for note in grade.notes)),
        "visibility": policy.hidden_visibility if any_hidden else "visible",
        "stdout_visibility": "hidden",
        "extra_data": {"seed": grade.seed, "pending": pending},
        "tests": tests,
    }


def write_student_files(grade: Grade, feedback_dir: Path) -> Path:
    """``feedback_dir/<folder>/feedback.txt`` and ``results.json``; returns that folder."""
    folder = feedback_dir / grade.folder
    folder.mkdir(parents=True, exist_ok=True)
    _write(folder / FEEDBACK_FILE, feedback_text(grade))
    _write(
        folder / RESULTS_FILE, json.dumps(results_json(grade), indent=1, ensure_ascii=False) + "\n"
    )
    return folder


# ------------------------------------------------------------------------------------------------
# The class
# ------------------------------------------------------------------------------------------------


def _automatic_max(policy: Policy) -> float:
    return sum(question.max_points for question in policy.questions.values())


def gradebook_header(policy: Policy) -> list[str]:
    return [
        "student_id",
        "folder",
        *policy.questions,
        "checks",
        *policy.manual,
        "manual",
        "days_late",
        "late_penalty",
        "total",
        "max_points",
        "pending",
        "status",
        "seed",
    ]


def gradebook_row(grade: Grade) -> list[Any]:
    """A student's row. A part graded by hand with no score yet is a blank cell, not 0, and so
    are the sums it is part of (``manual``, ``total``): an LMS takes a blank for "not graded
    yet"; ``pending`` names the parts that are."""
    pending = grade.manual_pending
    manual = [
        "" if part in pending else points(grade.manual[part].points) for part in grade.policy.manual
    ]
    return [
        cell(grade.student_id),
        cell(grade.folder),
        *(points(grade.question_points(question)) for question in grade.policy.questions),
        points(grade.automatic),
        *manual,
        "" if pending else points(grade.manual_points),
        grade.days_late,
        points(grade.penalty),
        "" if pending else points(grade.total),
        points(grade.max_points),
        cell(" ".join(pending)),
        cell(grade.status),
        "" if grade.seed is None else grade.seed,
    ]


def write_gradebook(path: Path, grades: Sequence[Grade], policy: Policy) -> None:
    """The gradebook: one row per student, keyed by student id: points per question, the
    checks' sum, per part graded by hand (blank while pending), the late penalty, the total
    (blank while a part is pending), the parts pending."""
    path = path.resolve()
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(gradebook_header(policy))
        writer.writerows(gradebook_row(grade) for grade in grades)
    os.replace(partial, path)


def format_class_table(grades: Sequence[Grade], policy: Policy) -> str:
    """Students down; points per question, by hand, late, the total and the status across."""
    header = [
        "student",
        *(f"{q} ({number(question.max_points)})" for q, question in policy.questions.items()),
        *(["by hand"] if policy.manual else []),
        "late",
        f"total ({number(policy.max_points)})",
        "status",
    ]
    rows = []
    for grade in grades:
        rows.append(
            [
                plain(grade.folder).replace("\n", "\\n"),
                *(number(grade.question_points(q)) for q in policy.questions),
                *(
                    [number(grade.manual_points) + ("*" * bool(grade.manual_pending))]
                    if policy.manual
                    else []
                ),
                f"-{grade.penalty_share:.0%}" if grade.penalty_share else "",
                number(grade.total),
                grade.status,
            ]
        )
    table = format_table(header, rows, left=(0, len(header) - 1))
    if policy.manual and any(grade.manual_pending for grade in grades):
        table += (
            "\n* a part graded by hand has no score yet: the total is the points so far "
            "(blank in the gradebook CSV, whose 'pending' column names the part)"
        )
    return table


def write_manual_sheet(path: Path, grades: Sequence[Grade], policy: Policy) -> None:
    """The sheet to grade the manual parts on, one row per student and part, with the scores
    given so far: fill in ``points`` (and ``comment``), then grade again with ``--manual``."""
    rows = [["student", "folder", "part", "max_points", "points", "comment"]]
    for grade in grades:
        for part in policy.manual.values():
            score = grade.manual.get(part.id)
            rows.append(
                [
                    cell(grade.student_id),
                    cell(grade.folder),
                    part.id,
                    points(part.points),
                    "" if score is None else points(score.points),
                    "" if score is None else cell(score.comment),
                ]
            )
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows(rows)
    os.replace(partial, path)


def manual_parts_text(grades: Iterable[Grade], policy: Policy) -> str:
    """Every student's question 6 explanation and numbers, and their notebooks' predictions
    with the comments around them, each beside its part's rubric, to read while filling in the
    manual sheet."""
    parts = policy.manual

    def rubric(part_id: str) -> list[str]:
        part = parts.get(part_id)
        if part is None:
            return []
        return [f"  rubric ({number(part.points)} points):", *rubric_lines(part, "    ")]

    lines = ["The parts graded by hand, as the students wrote them (plain text).", ""]
    for grade in grades:
        lines += ["=" * 78, f"{grade.folder}  (student id {grade.student_id})", "=" * 78]
        materials = grade.materials
        if materials is None:
            lines += ["(not collected: " + grade.status + ")", ""]
            continue
        lines += ["Question 6, explanation [q6_explanation]:", *rubric("q6_explanation"), ""]
        lines += [materials.explanation or "(none)", ""]
        lines += ["Question 6, numbers:"]
        lines += [f"  {name} = {text}" for name, text in materials.numbers.items()] or ["  (none)"]
        lines += [
            "",
            f"Predictions [predictions] ({materials.filled_guesses} of {materials.all_guesses} "
            f"written, {materials.reasoned_guesses} with a comment of the student's, "
            f"{materials.guesses_run_first} run before the cell after them):",
            *rubric("predictions"),
        ]
        for notebook, names in sorted(materials.guesses.items()):
            for name, guess in names.items():
                lines.append(f"  {notebook}: {name} = {guess.value}  (ran {guess.ran})")
                lines += [f"      | {line}" for line in guess.reasoning.splitlines()]
        if not materials.guesses:
            lines.append("  (no notebook with MY_GUESS cells found)")
        lines += [f"  note: {problem}" for problem in materials.problems]
        lines.append("")
    return plain("\n".join(lines)) + "\n"


def write_class_files(feedback_dir: Path, grades: Sequence[Grade], policy: Policy) -> None:
    """The manual sheet and the collected manual parts, in ``feedback_dir``."""
    feedback_dir.mkdir(parents=True, exist_ok=True)
    if policy.manual:
        write_manual_sheet(feedback_dir / MANUAL_SHEET, grades, policy)
    _write(feedback_dir / MANUAL_PARTS, manual_parts_text(grades, policy))
