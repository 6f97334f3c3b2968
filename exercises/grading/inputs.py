"""The instructor's files a grading run may be given, each read and checked before any grading:

- ``--roster``: GitHub Classroom's roster export (columns ``identifier`` and ``github_username``),
  which names each submission folder's student id. A folder named after a username (or ending
  in ``-<username>``, as ``gh classroom clone`` names repositories) gets that row's id.
- ``--submitted``: when each student submitted (columns ``student`` and ``submitted_at``, an
  ISO 8601 time with its time zone), for the late penalty.
- ``--manual``: the scores of the parts graded by hand (columns ``student``, ``part``,
  ``points``, ``comment``): the sheet the grader writes (``_manual-scores.csv``), filled in.

``student`` is a folder's name or its student id. A mistake raises :class:`InputError` naming
the file, the row and the bad value.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from exercises.grading.policy import Policy
from exercises.grading.scores import ManualScore

#: The most rows read from one file (a class, not a database).
MAX_ROWS = 100_000


class InputError(ValueError):
    """A file given to the grader has a mistake; the message names the file, row and value."""


def _rows(path: Path, needed: Iterable[str]) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) for each row of a CSV file that has the ``needed`` columns."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:
            reader = csv.DictReader(file)
            missing = [name for name in needed if name not in (reader.fieldnames or [])]
            if missing:
                raise InputError(
                    f"{path}: no column {missing[0]!r} (its columns: {reader.fieldnames})"
                )
            rows = []
            for row in reader:
                if len(rows) >= MAX_ROWS:
                    raise InputError(f"{path}: more than {MAX_ROWS} rows")
                cells = {key: _unquoted((value or "").strip()) for key, value in row.items() if key}
                rows.append((reader.line_num, cells))
            return rows
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as error:
        raise InputError(f"{path} is not a CSV file in UTF-8: {error}") from None


def _unquoted(text: str) -> str:
    """A cell as written before :func:`exercises.grading.reports.cell` guarded it."""
    return text[1:] if text[:1] == "'" and text[1:2] in ("=", "+", "-", "@") else text


def read_roster(path: Path, folders: list[str]) -> dict[str, str]:
    """folder -> student id, for the folders the roster names (the others keep their name)."""
    ids: dict[str, str] = {}
    users: dict[str, str] = {}
    for line, row in _rows(path, ("identifier", "github_username")):
        user, identifier = row["github_username"], row["identifier"]
        if user and identifier:
            if user.lower() in users:
                raise InputError(f"{path}, line {line}: github_username {user!r} appears twice")
            users[user.lower()] = identifier
    for folder in folders:
        name = folder.lower()
        matches = [user for user in users if name == user or name.endswith(f"-{user}")]
        if matches:
            ids[folder] = users[max(matches, key=len)]
    taken: dict[str, str] = {}
    for folder, identifier in ids.items():
        if identifier in taken:
            raise InputError(
                f"{path}: folders {taken[identifier]!r} and {folder!r} are both student {identifier!r}"
            )
        taken[identifier] = folder
    return ids


def _student(path: Path, line: int, name: str, known: dict[str, str]) -> str:
    """The folder that ``name`` (a folder or a student id) is."""
    if name not in known:
        raise InputError(f"{path}, line {line}: no student {name!r} among the submissions")
    return known[name]


def read_submitted(path: Path, known: dict[str, str]) -> dict[str, datetime]:
    """folder -> when it was submitted. ``known``: folder or student id -> folder."""
    times: dict[str, datetime] = {}
    for line, row in _rows(path, ("student", "submitted_at")):
        folder = _student(path, line, row["student"], known)
        text = row["submitted_at"]
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise InputError(
                f"{path}, line {line}: submitted_at = {text!r}: expected an ISO 8601 time with "
                "its time zone, e.g. 2026-05-15T23:59:00+00:00"
            )
        times[folder] = when
    return times


def read_manual(
    path: Path, known: dict[str, str], policy: Policy
) -> dict[str, dict[str, ManualScore]]:
    """folder -> part -> score. Empty ``points`` cells are parts not graded yet."""
    scores: dict[str, dict[str, ManualScore]] = {}
    for line, row in _rows(path, ("student", "part", "points")):
        if not row["points"]:
            continue
        folder = _student(path, line, row["student"], known)
        part = policy.manual.get(row["part"])
        if part is None:
            raise InputError(
                f"{path}, line {line}: part {row['part']!r} is not one of the policy's manual "
                f"parts ({', '.join(policy.manual) or 'none'})"
            )
        try:
            points = float(row["points"])
        except ValueError:
            points = math.nan
        if not 0 <= points <= part.points:
            raise InputError(
                f"{path}, line {line}: points = {row['points']!r}: expected a number from 0 to "
                f"{part.points:g} for {part.id}"
            )
        if part.id in scores.get(folder, {}):
            raise InputError(
                f"{path}, line {line}: a second score for {row['student']} / {part.id}"
            )
        scores.setdefault(folder, {})[part.id] = ManualScore(points, row.get("comment", ""))
    return scores
