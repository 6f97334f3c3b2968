"""The instructor's files a grading run may be given, each read and checked before any grading:

- ``--roster``: GitHub Classroom's roster export (columns ``identifier`` and ``github_username``),
  which names each submission folder's student id. A folder named after a username (or ending
  in ``-<username>``, as Classroom named repositories) gets that row's id. (``make collect``
  names each folder after the student's id: no roster needed then.)
- ``--submitted``: when each student submitted (columns ``student`` and ``submitted_at``, an
  ISO 8601 time with its time zone), for the late penalty.
- ``--manual``: the scores of the parts graded by hand (columns ``student``, ``part``,
  ``points``, ``comment``): the sheet the grader writes (``_manual-scores.csv``), filled in.

``student`` is a folder's name or its student id. A mistake raises :class:`InputError` naming
the file, the row and the bad value.

And each student's folder, the one input a student wrote: :func:`find_work` says where in it the
question files are (the folder itself, a clone of the student release, or the one folder they
were uploaded in), and :func:`stage` copies them for the checks. A folder in which they cannot
be told apart is refused with a message naming the files it holds, as the student named them.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

from exercises.grading.policy import Policy
from exercises.grading.scores import ManualScore
from exercises.sandbox import isolation

#: The most rows read from one file (a class, not a database).
MAX_ROWS = 100_000
#: The question files as handed out: a student's folder is found by these names.
STUDENT_FILES = Path(__file__).resolve().parent.parent / "student"
QUESTION_FILES = frozenset([path.name for path in STUDENT_FILES.glob("q*.py")] + ["q6_sweep.json"])
#: In a clone of the student release: where the work and the notebooks are.
RELEASE_WORK, RELEASE_NOTEBOOKS = PurePosixPath("exercises/student"), PurePosixPath("notebooks")
#: Folders never searched for the work: hidden ones, caches, what archivers add.
SKIPPED = ("__pycache__", "__MACOSX", "node_modules")
#: How deep, and through how many folders, the work is looked for.
MAX_DEPTH, MAX_FOLDERS = 6, 2_000


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


def student_folder(name: str, known: dict[str, str], option: str) -> str:
    """The folder that ``name`` (a folder or a student id), given with ``option``, is."""
    if name not in known:
        raise InputError(
            f"{option} {name!r}: no such student among the submissions (expected a folder's "
            "name or a student id)"
        )
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


# ------------------------------------------------------------------------------------------------
# A student's folder
# ------------------------------------------------------------------------------------------------


class SubmissionRefused(InputError):
    """A student's folder whose work cannot be found; the message names its files (as they are
    named in it) and says what was expected."""


@dataclass(frozen=True)
class Work:
    """Where a student's question files are: ``folder`` (relative to the submission, ``.`` for
    its top), and the notebooks to take with them (a clone's ``notebooks``, or None)."""

    folder: PurePosixPath
    notebooks: PurePosixPath | None = None

    @property
    def note(self) -> str:
        """A note for the feedback when the work was not where it was expected ("" otherwise)."""
        if self.folder in (PurePosixPath("."), RELEASE_WORK):
            return ""
        return f"your question files were in the folder {self.folder}/: graded from there"


def _visible_tree(folder: Path) -> Iterable[tuple[PurePosixPath, list[str]]]:
    """(folder relative to ``folder``, its regular files' names), top down, never following a
    link and passing by hidden folders and caches; within :data:`MAX_DEPTH` and
    :data:`MAX_FOLDERS`."""
    for seen, (root, folders, names) in enumerate(os.walk(folder, followlinks=False), 1):
        relative = PurePosixPath(Path(root).relative_to(folder).as_posix())
        depth = 0 if relative == PurePosixPath(".") else len(relative.parts)
        folders[:] = sorted(
            name
            for name in folders
            if not name.startswith(".") and name not in SKIPPED and depth < MAX_DEPTH
        )
        if seen > MAX_FOLDERS:
            return
        files = [name for name in sorted(names) if not Path(root, name).is_symlink()]
        yield relative, [name for name in files if Path(root, name).is_file()]


def _is_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def find_work(folder: Path) -> Work:
    """Where the question files are in a student's ``folder``: the folder itself; a clone of
    the student release (``exercises/student``, with its ``notebooks``); or, when neither has
    any, the one folder below that holds them (uploaded inside a folder, or a release clone
    inside one). Raises :class:`SubmissionRefused` when no folder or several hold them."""
    top = PurePosixPath(".")
    tree = list(_visible_tree(folder))
    if all(_is_folder(folder / part) for part in ("exercises", str(RELEASE_WORK))):
        return Work(RELEASE_WORK, RELEASE_NOTEBOOKS if _is_folder(folder / "notebooks") else None)
    holding = sorted(
        {where for where, names in tree if QUESTION_FILES.intersection(names)},
        key=lambda where: (len(where.parts), str(where)),
    )
    if top in holding:
        return Work(top)
    if len(holding) == 1:
        (where,) = holding
        if where.parts[-2:] == RELEASE_WORK.parts:  # a release clone inside a folder
            clone = where.parent.parent
            notebooks = clone / RELEASE_NOTEBOOKS
            return Work(where, notebooks if _is_folder(folder / notebooks) else None)
        return Work(where)
    every = [str(where / name) for where, names in tree for name in names]
    expected = ", ".join(sorted(QUESTION_FILES))
    if not holding:
        shown = ", ".join(every[:20]) + (f" and {len(every) - 20} more" if len(every) > 20 else "")
        raise SubmissionRefused(
            f"no question file found in this submission (expected {expected}); it holds: "
            f"{shown or 'no files'}"
        )
    found = [
        str(where / name)
        for where, names in tree
        if where in holding
        for name in names
        if name in QUESTION_FILES
    ]
    raise SubmissionRefused(
        "question files in more than one folder, so which to grade is not clear: "
        f"{', '.join(found[:20])}. Hand in one copy of each, all in one folder"
    )


def stage(folder: Path, into: Path) -> tuple[list[str], str]:
    """Copies a student's work (:func:`find_work`) into ``into``, regular files only, within
    the sandbox's limits. Returns the notes about what was left out or where the work was found,
    and why the submission is refused ("" when it is not; then all of it is copied, for the
    parts graded by hand)."""
    try:
        work = find_work(folder)
    except SubmissionRefused as refused:
        return isolation.copy_submission(folder, into), str(refused)
    notes = [work.note] if work.note else []
    notes += isolation.copy_submission(folder / work.folder, into)
    if work.notebooks is not None and not (into / "notebooks").exists():
        copied = isolation.copy_submission(folder / work.notebooks, into / "notebooks")
        notes += [f"notebooks/{note}" for note in copied]
    return notes, ""


def files_digest(folder: Path) -> str:
    """A hash of the files under ``folder`` (names and contents): a staged copy's, to tell
    whether a student's work changed since it was graded."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            name = path.relative_to(folder).as_posix()
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
