"""What a grading run keeps, so that the next can change one student, or only the hand scores,
without running every check again: ``FEEDBACK_DIR/_grading.json``.

For each student folder it holds what the checks found (each check that passed, each failure's
hint, the status and the notes), what was collected for grading by hand, the seed, the inputs
that were used (the student id, the time submitted, the hand scores), and what the result
depends on: a hash of the student's staged files and one of the code that judged them (the
checks, the sandbox, the package). A later run (``--student``, ``--manual``) reads it, grades
whom it must, and writes every student's files again from the same numbers.

The file names hidden checks and their hints: it is the instructor's, like the log, and never
goes to a student. A file that is not what this module wrote is refused, naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from exercises.grading.materials import Materials, Prediction
from exercises.grading.policy import Check
from exercises.grading.scores import ManualScore

#: In the feedback folder (a class file: its name starts with ``_``, as no student's does).
FILE = "_grading.json"
#: The file's format; another is refused, not guessed at.
VERSION = 1


class SavedError(ValueError):
    """The saved results cannot be read; the message names the file."""


@dataclass
class Record:
    """One student's last grading, and the inputs it was given."""

    folder: str
    student_id: str
    status: str  # ok, timed out, crashed, refused, tampered, not graded
    passed: list[str] = field(default_factory=list)  # check keys (``q1/public/test_x``)
    hints: dict[str, str] = field(default_factory=dict)  # check key -> its failure's hint
    notes: list[str] = field(default_factory=list)
    materials: Materials | None = None
    seed: int | None = None
    submission: str = ""  # files_digest of the staged copy it was graded on
    judged_by: str = ""  # code_digest of what judged it
    graded_at: str = ""  # ISO 8601, UTC
    submitted: datetime | None = None
    manual: dict[str, ManualScore] = field(default_factory=dict)

    def passed_checks(self, known: list[Check]) -> set[Check]:
        return {check for check in known if check.key in set(self.passed)}

    def hints_of(self, known: list[Check]) -> dict[Check, str]:
        return {check: self.hints[check.key] for check in known if check.key in self.hints}


def code_digest(*paths: Path) -> str:
    """A hash of the code that judges (folders and files, caches left out)."""
    digest = hashlib.sha256()
    files = []
    for path in paths:
        files += sorted(path.rglob("*")) if path.is_dir() else [path]
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def load(feedback_dir: Path) -> dict[str, Record]:
    """folder -> its record, from ``feedback_dir/_grading.json`` ({} when there is none)."""
    path = feedback_dir / FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError(f"expected version {VERSION}")
        return {item["folder"]: _record(item) for item in data["students"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise SavedError(
            f"{path}: not the results a grading run saved ({type(error).__name__}: {error}); "
            "move it away to grade the class afresh"
        ) from None


def save(feedback_dir: Path, records: list[Record]) -> Path:
    """Writes every record to ``feedback_dir/_grading.json`` at once (renamed into place)."""
    feedback_dir.mkdir(parents=True, exist_ok=True)
    path = feedback_dir / FILE
    data = {"version": VERSION, "students": [_plain(record) for record in records]}
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return path


def _plain(record: Record) -> dict[str, Any]:
    data = asdict(record)
    data["submitted"] = None if record.submitted is None else record.submitted.isoformat()
    return data


def _record(item: dict[str, Any]) -> Record:
    materials = item.get("materials")
    if materials is not None:
        guesses = {
            str(notebook): {str(name): Prediction(**guess) for name, guess in names.items()}
            for notebook, names in materials.get("guesses", {}).items()
        }
        materials = Materials(
            explanation=materials.get("explanation"),
            numbers={str(k): str(v) for k, v in materials.get("numbers", {}).items()},
            guesses=guesses,
            problems=[str(problem) for problem in materials.get("problems", [])],
        )
    submitted = item.get("submitted")
    return Record(
        folder=str(item["folder"]),
        student_id=str(item["student_id"]),
        status=str(item["status"]),
        passed=[str(key) for key in item.get("passed", [])],
        hints={str(key): str(hint) for key, hint in item.get("hints", {}).items()},
        notes=[str(note) for note in item.get("notes", [])],
        materials=materials,
        seed=None if item.get("seed") is None else int(item["seed"]),
        submission=str(item.get("submission", "")),
        judged_by=str(item.get("judged_by", "")),
        graded_at=str(item.get("graded_at", "")),
        submitted=None if submitted is None else datetime.fromisoformat(submitted),
        manual={
            str(part): ManualScore(float(score["points"]), str(score.get("comment", "")))
            for part, score in item.get("manual", {}).items()
        },
    )
