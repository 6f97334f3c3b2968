"""Collect a class by the deadline: each student's last commit that counts, from their clone.

    python -m exercises.collect CLONES SUBMISSIONS      # then: make grade SUBMISSIONS=...

``CLONES`` holds one git clone per student (``gh classroom clone student-repos`` names them
``<assignment>-<username>``). For each, this takes the last commit whose committer date is at
most the policy's due date plus its grace period, or, with late submissions allowed
(``[late] last_day``), plus that many days, where a later commit still earns points. Its files
(from ``git archive``, links left out) go into ``SUBMISSIONS/<clone's name>/``, and
``SUBMISSIONS/submitted.csv`` gets ``student,submitted_at,commit,days_late``: the grader's
``--submitted`` file, made here, not typed. ``--at-deadline`` takes on-time commits only.

A commit's date is what the student's git wrote (``GIT_COMMITTER_DATE`` sets it): GitHub keeps
the time each push arrived, which is the evidence to look at if a date is disputed. A clone with
no commit that counts, or that is not a git repository, is named and left out.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from exercises.grading import policy
from exercises.grading.policy import Policy

#: The grader's --submitted file, written into the submissions folder.
SUBMITTED = "submitted.csv"


class CollectError(RuntimeError):
    """The class cannot be collected; the message says why."""


@dataclass(frozen=True)
class Collected:
    """One clone's commit that counts (``commit`` empty when none does), and why not."""

    student: str
    commit: str = ""
    committed: datetime | None = None
    days_late: int = 0
    problem: str = ""


def cutoff(rules: Policy, at_deadline: bool) -> datetime:
    """The latest commit time that counts: the due date and grace period, and the late days."""
    late = rules.late
    if late.due is None:
        raise CollectError(f"{rules.path or 'the policy'} has no [course] due date to collect by")
    deadline = late.due + late.grace
    return deadline if at_deadline else deadline + timedelta(days=late.last_day)


def _git(clone: Path, *arguments: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(clone), *arguments], capture_output=True, check=True, timeout=120
    ).stdout


def last_commit(clone: Path, rules: Policy, until: datetime) -> Collected:
    """The last commit of ``clone``'s checked-out branch with a committer date up to ``until``."""
    if not (clone / ".git").exists():
        return Collected(clone.name, problem="not a git clone")
    try:
        # %ct: the committer date in seconds, which --before compares (an ISO date with an
        # offset is taken literally by git; seconds are not).
        line = _git(
            clone, "log", "-1", f"--before=@{int(until.timestamp())}", "--format=%H %ct", "HEAD"
        )
    except subprocess.CalledProcessError as error:
        detail = error.stderr.decode(errors="replace").strip().splitlines()
        return Collected(clone.name, problem=f"git log failed: {(detail or ['?'])[-1][:200]}")
    if not line.strip():
        return Collected(clone.name, problem=f"no commit up to {until.isoformat()}")
    commit, seconds = line.decode().split()
    committed = datetime.fromtimestamp(int(seconds), tz=until.tzinfo)
    return Collected(clone.name, commit, committed, rules.late.days_late(committed))


def export(clone: Path, commit: str, into: Path) -> None:
    """The files of ``commit`` into ``into`` (regular files and folders only: a link or
    anything else in a student's repository is left out, as the grader would)."""
    data = io.BytesIO(_git(clone, "archive", "--format=tar", commit))
    with tarfile.open(fileobj=data) as archive:
        members = [m for m in archive.getmembers() if m.isfile() or m.isdir()]
        archive.extractall(into, members=members, filter="data")


def collect(clones: Path, out: Path, rules: Policy, at_deadline: bool = False) -> list[Collected]:
    """Collects every clone in ``clones`` into ``out``; writes ``out/submitted.csv``."""
    if not clones.is_dir():
        raise CollectError(f"{clones} is not a folder")
    if out.exists() and any(out.iterdir()):
        raise CollectError(f"{out} is not empty: collect into a new folder")
    until = cutoff(rules, at_deadline)
    folders = sorted(
        path
        for path in clones.iterdir()
        if path.is_dir() and not path.is_symlink() and not path.name.startswith((".", "_"))
    )
    out.mkdir(parents=True, exist_ok=True)
    found = []
    for clone in folders:
        collected = last_commit(clone, rules, until)
        if collected.commit:
            export(clone, collected.commit, out / clone.name)
        found.append(collected)
    partial = out / f".{SUBMITTED}.partial"
    with open(partial, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "submitted_at", "commit", "days_late"])
        for item in found:
            if item.commit and item.committed is not None:
                when = item.committed.isoformat()
                writer.writerow([item.student, when, item.commit, item.days_late])
    partial.replace(out / SUBMITTED)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exercises.collect", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("clones", type=Path, help="a folder of the students' git clones")
    parser.add_argument("out", type=Path, help="the submissions folder to make (new or empty)")
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
        found = collect(args.clones, args.out, rules, args.at_deadline)
    except (policy.PolicyError, CollectError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    for item in found:
        if item.commit:
            late = f", {item.days_late} day(s) late" if item.days_late else ""
            print(f"{item.student}: {item.commit[:10]} of {item.committed}{late}")
        else:
            print(f"{item.student}: left out ({item.problem})")
    collected = sum(bool(item.commit) for item in found)
    print(f"collected {collected} of {len(found)} into {args.out}; times in {args.out / SUBMITTED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
