"""Collect a class by the deadline: each student's last commit that counts, from any git host.

    python -m exercises.collect CLONES SUBMISSIONS --roster roster.csv   # clone or fetch, then collect
    python -m exercises.collect CLONES SUBMISSIONS                       # a folder of clones already made
    # then: make grade SUBMISSIONS=...

With ``--roster``, a CSV file names each student's repository, on any git host or on this disk:
columns ``student`` (their id, which names their folder) and ``repository`` (a URL git can clone,
``https://...``, ``ssh://...``, ``git@host:path``, ``file://...``, or a path, relative to the
roster's folder), and optionally ``branch`` (the default branch when blank). GitHub Classroom's
grades export (``roster_identifier``, ``github_username``, ``student_repository_url``) is read as
such a roster too. Each repository is cloned into ``CLONES/<student>.git`` (a bare mirror), or
fetched there when it already is. Without ``--roster``, ``CLONES`` holds one git clone per
student, named as the student's folder will be.

For each, this takes the last commit whose committer date is at most the policy's due date plus
its grace period, or, with late submissions allowed (``[late] last_day``), plus that many days,
where a later commit still earns points; and says which commits after that it left out. Its files
(from ``git archive``, links left out) go into ``SUBMISSIONS/<student>/``, and
``SUBMISSIONS/submitted.csv`` gets ``student,submitted_at,commit,days_late,left_out``: the
grader's ``--submitted`` file, made here, not typed. ``--at-deadline`` takes on-time commits only.

A commit's date is what the student's git wrote (``GIT_COMMITTER_DATE`` sets it): the host keeps
the time each push arrived (GitHub's and GitLab's push events do), which is the evidence to look
at if a date is disputed. A student whose repository cannot be fetched, or has no commit that
counts, is named and left out; the others are collected.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from exercises.grading import inputs, policy
from exercises.grading.policy import Policy

#: The grader's --submitted file, written into the submissions folder.
SUBMITTED = "submitted.csv"
#: A student id names a folder: these characters, and not first a dot or an underscore (the
#: grader passes those by).
SAFE_ID = re.compile(r"[A-Za-z0-9@+-][A-Za-z0-9@.+_-]{0,99}")
#: A repository given as a URL (anything else is a path): scheme://..., or scp-like user@host:path.
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/:]+@[^/:]+:")
#: Seconds one git command may take (a clone of a student's repository, at worst).
GIT_TIMEOUT = 300
#: Never ask for a password, nor run a command from a URL (git's ext:: transport).
GIT_ENVIRONMENT = {"GIT_TERMINAL_PROMPT": "0", "GIT_SSH_COMMAND": "ssh -o BatchMode=yes"}
GIT_SAFETY = ["-c", "protocol.ext.allow=never"]


class CollectError(RuntimeError):
    """The class cannot be collected; the message says why."""


@dataclass(frozen=True)
class Collected:
    """One student's commit that counts (``commit`` empty when none does), and why not; the
    commits after the cutoff that were left out (``(commit, committer date)``, newest first)."""

    student: str
    commit: str = ""
    committed: datetime | None = None
    days_late: int = 0
    problem: str = ""
    left_out: tuple[tuple[str, datetime], ...] = field(default=())


@dataclass(frozen=True)
class Entry:
    """A roster's row: a student, where their repository is, and which branch (None: its
    default)."""

    student: str
    repository: str
    branch: str | None = None


@dataclass(frozen=True)
class Repository:
    """A repository on this disk: a clone (``path/.git``) or a bare one (``path`` itself)."""

    path: Path
    bare: bool

    def git(self, *arguments: str) -> bytes:
        where = [f"--git-dir={self.path}"] if self.bare else ["-C", str(self.path)]
        return _run_git(*where, *arguments)


def _run_git(*arguments: str) -> bytes:
    return subprocess.run(
        ["git", *GIT_SAFETY, *arguments],
        capture_output=True,
        check=True,
        timeout=GIT_TIMEOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **GIT_ENVIRONMENT},
    ).stdout


def _last_line(error: subprocess.CalledProcessError) -> str:
    lines = (error.stderr or b"").decode(errors="replace").strip().splitlines()
    return (lines or [f"exit code {error.returncode}"])[-1][:200]


def repository_at(folder: Path) -> Repository | None:
    """The git repository ``folder`` is (a clone or a bare one), or None."""
    if (folder / ".git").exists():
        return Repository(folder, bare=False)
    if (folder / "HEAD").is_file() and (folder / "objects").is_dir():
        return Repository(folder, bare=True)
    return None


def cutoff(rules: Policy, at_deadline: bool) -> datetime:
    """The latest commit time that counts: the due date and grace period, and the late days."""
    late = rules.late
    if late.due is None:
        raise CollectError(f"{rules.path or 'the policy'} has no [course] due date to collect by")
    deadline = late.due + late.grace
    return deadline if at_deadline else deadline + timedelta(days=late.last_day)


def last_commit(
    clone: Path, rules: Policy, until: datetime, student: str = "", branch: str | None = None
) -> Collected:
    """The last commit of ``clone``'s checked-out branch (or ``branch``) with a committer date
    up to ``until``, and the commits after ``until`` left out."""
    student = student or clone.name
    repository = repository_at(clone)
    if repository is None:
        return Collected(student, problem="not a git clone")
    tip = "HEAD" if branch is None else f"refs/heads/{branch}"
    # %ct: the committer date in seconds, which --before and --after compare (an ISO date with
    # an offset is taken literally by git; seconds are not).
    seconds = f"@{int(until.timestamp())}"
    try:
        line = repository.git("log", "-1", f"--before={seconds}", "--format=%H %ct", tip, "--")
        later = repository.git("log", f"--after={seconds}", "--format=%H %ct", tip, "--")
    except subprocess.CalledProcessError as error:
        return Collected(student, problem=f"git log failed: {_last_line(error)}")
    left_out = []
    for text in later.decode().splitlines():
        commit, stamp = text.split()
        when = datetime.fromtimestamp(int(stamp), tz=until.tzinfo)
        if when > until:  # (--after is inclusive of the second)
            left_out.append((commit, when))
    if not line.strip():
        return Collected(
            student, problem=f"no commit up to {until.isoformat()}", left_out=tuple(left_out)
        )
    commit, stamp = line.decode().split()
    committed = datetime.fromtimestamp(int(stamp), tz=until.tzinfo)
    return Collected(
        student, commit, committed, rules.late.days_late(committed), left_out=tuple(left_out)
    )


def export(clone: Path, commit: str, into: Path) -> None:
    """The files of ``commit`` into ``into`` (regular files and folders only: a link or
    anything else in a student's repository is left out, as the grader would)."""
    repository = repository_at(clone)
    if repository is None:
        raise CollectError(f"{clone} is not a git repository")
    data = io.BytesIO(repository.git("archive", "--format=tar", commit))
    with tarfile.open(fileobj=data) as archive:
        members = [m for m in archive.getmembers() if m.isfile() or m.isdir()]
        archive.extractall(into, members=members, filter="data")


# ------------------------------------------------------------------------------------------------
# A roster: clone or fetch each student's repository
# ------------------------------------------------------------------------------------------------


def read_roster(path: Path) -> list[Entry]:
    """The roster's students, in its order. Raises CollectError naming the row of a mistake."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:
            reader = csv.DictReader(file)
            columns = set(reader.fieldnames or [])
            rows = list(reader)
    except OSError as error:
        raise CollectError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as error:
        raise CollectError(f"{path} is not a CSV file in UTF-8: {error}") from None
    if len(rows) > inputs.MAX_ROWS:
        raise CollectError(f"{path}: more than {inputs.MAX_ROWS} rows")
    if {"student", "repository"} <= columns:
        student_of, repository_of = ("student",), "repository"
    elif "student_repository_url" in columns:  # GitHub Classroom's grades export
        student_of, repository_of = (
            ("roster_identifier", "github_username"),
            "student_repository_url",
        )
    else:
        raise CollectError(
            f"{path}: expected the columns student and repository (and optionally branch), or "
            f"GitHub Classroom's grades export (roster_identifier, github_username, "
            f"student_repository_url); its columns: {sorted(columns)}"
        )
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        cells = {key: (value or "").strip() for key, value in row.items() if key}
        student = next((cells.get(name, "") for name in student_of if cells.get(name)), "")
        repository = cells.get(repository_of, "")
        if not student and not repository:
            continue  # a blank row
        where = f"{path}, line {line}"
        if not SAFE_ID.fullmatch(student):
            raise CollectError(
                f"{where}: student {student!r}: a student id names their folder, so it is "
                "letters, digits and @ . + - _ only (up to 100), not first . or _"
            )
        if student.lower() in seen:
            raise CollectError(
                f"{where}: student {student!r} is also on line {seen[student.lower()]}"
            )
        seen[student.lower()] = line
        if not repository:
            raise CollectError(f"{where}: no repository for {student!r}")
        if repository.startswith("-"):
            raise CollectError(f"{where}: repository {repository!r}: not a URL or a path")
        if not URL.match(repository):
            local = Path(repository).expanduser()
            local = local if local.is_absolute() else path.resolve().parent / local
            if not local.is_dir():
                raise CollectError(
                    f"{where}: repository {repository!r}: no such folder ({local}), and not a "
                    "URL (https://..., ssh://..., git@host:path, file://...)"
                )
            repository = str(local)
        branch = cells.get("branch") or None
        if branch is not None and not _valid_branch(branch):
            raise CollectError(f"{where}: branch {branch!r}: not a branch name git accepts")
        entries.append(Entry(student, repository, branch))
    if not entries:
        raise CollectError(f"{path}: no students in it")
    return entries


def _valid_branch(name: str) -> bool:
    if name.startswith("-"):
        return False
    try:
        _run_git("check-ref-format", "--branch", name)
    except subprocess.CalledProcessError:
        return False
    return True


def fetch(entry: Entry, clones: Path) -> tuple[Path, str]:
    """``clones/<student>.git``, a bare mirror of the student's repository, made or brought up
    to date; and a problem ("" when none)."""
    mirror = clones / f"{entry.student}.git"
    try:
        if repository_at(mirror) is None:
            if mirror.exists():
                return mirror, f"{mirror} exists and is not a git repository"
            _run_git("clone", "--mirror", "--quiet", "--", entry.repository, str(mirror))
        else:
            repository = Repository(mirror, bare=True)
            repository.git("remote", "set-url", "origin", "--", entry.repository)
            repository.git("fetch", "--prune", "--quiet", "origin")
    except subprocess.CalledProcessError as error:
        return mirror, f"git could not fetch {entry.repository}: {_last_line(error)}"
    except subprocess.TimeoutExpired:
        return mirror, f"git did not fetch {entry.repository} within {GIT_TIMEOUT} s"
    return mirror, ""


# ------------------------------------------------------------------------------------------------
# The class
# ------------------------------------------------------------------------------------------------


def collect(
    clones: Path,
    out: Path,
    rules: Policy,
    at_deadline: bool = False,
    roster: list[Entry] | None = None,
    progress: bool = False,
) -> list[Collected]:
    """Collects every student into ``out``; writes ``out/submitted.csv``. With ``roster``, each
    repository is first cloned or fetched into ``clones``; without, ``clones`` holds a clone
    per student."""
    if out.exists() and any(out.iterdir()):
        raise CollectError(f"{out} is not empty: collect into a new folder")
    until = cutoff(rules, at_deadline)
    if roster is None:
        if not clones.is_dir():
            raise CollectError(f"{clones} is not a folder")
        sources = [
            (path.name, path, None, "")
            for path in sorted(clones.iterdir())
            if path.is_dir() and not path.is_symlink() and not path.name.startswith((".", "_"))
        ]
    else:
        clones.mkdir(parents=True, exist_ok=True)
        sources = []
        for entry in roster:
            if progress:
                print(f"fetching {entry.student} ...", file=sys.stderr, flush=True)
            mirror, problem = fetch(entry, clones)
            sources.append((entry.student, mirror, entry.branch, problem))
    out.mkdir(parents=True, exist_ok=True)
    found = []
    for student, clone, branch, problem in sources:
        if problem:
            found.append(Collected(student, problem=problem))
            continue
        collected = last_commit(clone, rules, until, student, branch)
        if collected.commit:
            export(clone, collected.commit, out / student)
        found.append(collected)
    partial = out / f".{SUBMITTED}.partial"
    with open(partial, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "submitted_at", "commit", "days_late", "left_out"])
        for item in found:
            if item.commit and item.committed is not None:
                when = item.committed.isoformat()
                left = " ".join(commit for commit, _ in item.left_out)
                writer.writerow([item.student, when, item.commit, item.days_late, left])
    partial.replace(out / SUBMITTED)
    return found


def describe(item: Collected, until: datetime) -> list[str]:
    """What was collected of a student, in lines for the terminal."""
    if item.commit:
        late = f", {item.days_late} day(s) late" if item.days_late else ""
        lines = [f"{item.student}: {item.commit[:10]} of {item.committed}{late}"]
    else:
        lines = [f"{item.student}: left out ({item.problem})"]
    if item.left_out:
        lines.append(
            f"  {len(item.left_out)} commit(s) after {until.isoformat()} left out: "
            + ", ".join(f"{commit[:10]} of {when}" for commit, when in item.left_out)
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exercises.collect", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "clones",
        type=Path,
        help="with --roster, where the repositories are cloned (made if missing); without, a "
        "folder of the students' git clones",
    )
    parser.add_argument("out", type=Path, help="the submissions folder to make (new or empty)")
    parser.add_argument(
        "--roster",
        type=Path,
        help="CSV of student,repository[,branch] (a URL on any git host, or a path), or GitHub "
        "Classroom's grades export",
    )
    parser.add_argument("--policy", type=Path, default=policy.DEFAULT, help="default: %(default)s")
    parser.add_argument(
        "--at-deadline",
        action="store_true",
        help="take only commits up to the due date and its grace period (no late ones)",
    )
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        parser.error("git is not installed")
    try:
        rules = policy.load(args.policy)
        roster = read_roster(args.roster) if args.roster else None
        found = collect(args.clones, args.out, rules, args.at_deadline, roster, progress=True)
        until = cutoff(rules, args.at_deadline)
    except (policy.PolicyError, CollectError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    for item in found:
        print("\n".join(describe(item, until)))
    collected = sum(bool(item.commit) for item in found)
    late = sum(bool(item.left_out) for item in found)
    print(
        f"collected {collected} of {len(found)} into {args.out} (commits up to "
        f"{until.isoformat()}; {late} student(s) with later commits left out); times in "
        f"{args.out / SUBMITTED}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
