"""The grader as Gradescope's autograder: one command builds the zip, which grades one submission.

    python -m exercises.gradescope build autograder.zip     # or: make gradescope

Upload the zip as a programming assignment's autograder. It follows Gradescope's autograder
specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/): ``setup.sh``
and ``run_autograder`` at its root, the rest under ``/autograder/source`` once unpacked.
``setup.sh`` runs once, as root, when Gradescope builds the image: it installs Python and
bubblewrap with apt and this package (and pytest) into ``/autograder/source/.venv``.
``run_autograder`` runs for each submission: ``python -m exercises.gradescope run`` first makes
what only the instructor may read (the hidden checks, the policy with the course's seed) readable
by root only, then copies ``/autograder/submission`` (the student's files, or a clone of the
student release) into a
class of one, grades it as ``python -m exercises.grade`` does (hidden checks included, the
seed from the policy's course seed and the student's id), and writes its ``results.json`` to
``/autograder/results/results.json``. If grading itself fails, that file still appears and
says so, with a score of 0: the log (Gradescope's ``stdout``, the instructor's only) has why.

The zip holds what grading needs (the package, the checks public and hidden, the grader, the
policy, the sandbox, the question files as handed out and the notebooks, whose comments at
each prediction are the course's), and never the solutions. Student code runs in bubblewrap's
sandbox where the container lets it make namespaces; where it does not, as the unprivileged
user ``nobody``, who cannot read what is root's only (``exercises/sandbox/isolation.py``). The
log names the one that ran. Who may see what, in Gradescope's container, is in
``exercises/INSTRUCTORS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from exercises import release

EXERCISES = Path(__file__).resolve().parent
REPO = EXERCISES.parent
#: Gradescope's folder, and its parts (its specification's names).
AUTOGRADER = Path("/autograder")
#: What the zip's source holds: these files and folders of the repository (as git has them)...
SOURCE = ("vecenvs", "exercises", "notebooks", "pyproject.toml", "constraints.txt", "README.md")
SOURCE += ("LICENSE",)
#: ...less these, which grading does not need: the solutions above all.
LEFT_OUT = ("exercises/solutions", "exercises/INSTRUCTORS.md")
#: Runs once, as root, in Gradescope's image (Ubuntu; apt-get update has run before it).
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (written by
# `python -m exercises.gradescope build`). bubblewrap is the sandbox for the students' code;
# where the container refuses namespaces, student code runs as the unprivileged user nobody,
# who cannot read what only root may (the hidden checks, the policy): the log says which ran.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q python3 python3-venv python3-pip bubblewrap
cd /autograder/source
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -c constraints.txt -e . pytest pytest-timeout \\
    "tomli>=2; python_version < '3.11'"
# Everyone may read and run the rest (the package, the venv); these are root's only (run_autograder
# makes sure of it again before each grading).
chmod -R a+rX /autograder/source
chmod -R go-rwx exercises/checks/hidden exercises/policy.toml
"""
#: Runs for each submission.
RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission (written by `python -m exercises.gradescope build`):
# grade /autograder/submission, write /autograder/results/results.json.
cd /autograder/source || exit 1
PYTHONPATH=/autograder/source exec .venv/bin/python -m exercises.gradescope run --sandbox {sandbox}
"""
#: A folder name made of a student's id: these characters only.
UNSAFE = re.compile(r"[^A-Za-z0-9@.+-]")


class GradescopeError(RuntimeError):
    """The zip cannot be built; the message says why."""


def source_files(repo: Path = REPO) -> list[PurePosixPath]:
    """The repository's files (as git has them) that grading needs: :data:`SOURCE`, not
    :data:`LEFT_OUT`."""
    try:
        files = release.git_files(repo)
    except release.ReleaseError as error:
        raise GradescopeError(str(error)) from None
    return [
        path
        for path in files
        if path.parts[0] in SOURCE
        and "__pycache__" not in path.parts
        and not any(path == PurePosixPath(p) or PurePosixPath(p) in path.parents for p in LEFT_OUT)
    ]


def build(out: Path, repo: Path = REPO, sandbox: str = "auto") -> list[str]:
    """Writes the autograder zip to ``out``, whose ``run_autograder`` grades with ``--sandbox
    sandbox``; returns the names in it."""
    from exercises.sandbox import isolation

    if sandbox not in ("auto", *isolation.KINDS):
        raise GradescopeError(f"--sandbox {sandbox!r}: expected auto or one of {isolation.KINDS}")
    if out.suffix != ".zip":
        raise GradescopeError(f"{out}: expected a file name ending in .zip")
    if out.exists() and not out.is_file():
        raise GradescopeError(f"{out} exists and is not a file")
    files = source_files(repo)
    if not any(path == PurePosixPath("exercises/grade.py") for path in files):
        raise GradescopeError(f"{repo} has no exercises/grade.py: not the instructor's copy")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    names = []
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        scripts = (
            ("setup.sh", SETUP_SH),
            ("run_autograder", RUN_AUTOGRADER.format(sandbox=sandbox)),
        )
        for name, text in scripts:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # executable: Gradescope runs them as they are
            archive.writestr(info, text)
            names.append(name)
        for path in files:
            archive.write(repo / path, str(path))
            names.append(str(path))
    partial.replace(out)
    return names


# ------------------------------------------------------------------------------------------------
# In Gradescope's container
# ------------------------------------------------------------------------------------------------


def student_of(metadata: Any) -> tuple[str, str | None]:
    """The student's id (their ``sid``, else their email, else Gradescope's user id, else
    ``"student"``) and the submission's time (``created_at``), from Gradescope's
    ``submission_metadata.json``. Anything unexpected in it is left aside."""
    users = metadata.get("users") if isinstance(metadata, dict) else None
    user = users[0] if isinstance(users, list) and users and isinstance(users[0], dict) else {}
    student = next(
        (str(user[key]) for key in ("sid", "email", "id") if user.get(key) not in (None, "")),
        "student",
    )
    created = metadata.get("created_at") if isinstance(metadata, dict) else None
    return student, created if isinstance(created, str) else None


def folder_name(student: str) -> str:
    """A folder name for a student's id: only safe characters, never hidden (``.`` or ``_``)."""
    name = UNSAFE.sub("-", student)[:100].lstrip("._-")
    return name or "student"


def failed_results(why: str) -> dict[str, Any]:
    """The results.json of a grading that could not finish: 0, and why, for the student."""
    return {
        "score": 0.0,
        "output": f"The autograder could not grade this submission ({why}). Your instructor has "
        "the log; this score is not your grade.",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }


def make_root_only(exercises: Path = EXERCISES) -> list[str]:
    """Makes what only the instructor may read in ``exercises`` (the hidden checks, the policy
    with the course's seed: ``isolation.SECRETS``) readable by its owner only, root's where this
    runs as root; returns what it changed. Where no namespace can be made, student code runs
    as another user, who then cannot read them."""
    from exercises.sandbox import isolation

    changed = []
    for name in isolation.SECRETS:
        top = exercises / name
        if not top.exists() or top.is_symlink():
            continue
        for path in [top, *(top.rglob("*") if top.is_dir() else [])]:
            if path.is_symlink():
                continue
            if os.geteuid() == 0:
                os.chown(path, 0, 0)
            path.chmod(0o700 if path.is_dir() else 0o600)
        changed.append(f"exercises/{name}")
    return changed


def run(root: Path = AUTOGRADER, sandbox: str = "auto") -> int:
    """Grades ``root/submission`` into ``root/results/results.json``; 0 when graded."""
    from exercises import grade  # (the grader's own imports, after the paths are known)

    # Before any student code runs: what it must not read is root's only.
    print(f"readable by root only: {', '.join(make_root_only()) or 'nothing found'}")
    with contextlib.suppress(OSError):
        (root / "submission_metadata.json").chmod(0o600)
    results = root / "results" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    try:
        metadata = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        metadata = {}
    student, created = student_of(metadata)
    outcome = 1
    with tempfile.TemporaryDirectory(prefix="gradescope-") as scratch:
        class_dir, feedback = Path(scratch, "class"), Path(scratch, "feedback")
        folder = class_dir / folder_name(student)
        arguments = [str(class_dir), "--feedback", str(feedback), "--sandbox", sandbox]
        try:
            shutil.copytree(root / "submission", folder, symlinks=True)
            if created:
                times = Path(scratch, "submitted.csv")
                with open(times, "w", newline="", encoding="utf-8") as file:
                    csv.writer(file).writerows(
                        [["student", "submitted_at"], [folder.name, created]]
                    )
                arguments += ["--submitted", str(times)]
            outcome = grade.main(arguments)
            text = (feedback / folder.name / "results.json").read_text(encoding="utf-8")
        except SystemExit as stop:  # the grader refused (its message is in the log above)
            text = json.dumps(failed_results(f"the grader stopped: {stop.code}"))
        except Exception as error:
            print(f"ERROR: grading failed: {error!r}", file=sys.stderr)
            text = json.dumps(failed_results(type(error).__name__))
    partial = results.with_name(".results.json.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(results)
    print(f"results written to {results}")
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exercises.gradescope", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    making = commands.add_parser("build", help="write the autograder zip to upload")
    making.add_argument("out", type=Path, help="the zip to write, e.g. autograder.zip")
    where = "where student code runs there (default: %(default)s, the best the container allows)"
    making.add_argument("--sandbox", default="auto", help=where)
    running = commands.add_parser("run", help="(in Gradescope's container) grade /autograder")
    running.add_argument("--root", type=Path, default=AUTOGRADER, help="default: %(default)s")
    running.add_argument("--sandbox", default="auto", help="default: %(default)s")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.root, args.sandbox)
    try:
        names = build(args.out, sandbox=args.sandbox)
    except GradescopeError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out} ({len(names)} files; no solutions). Upload it as the autograder.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
