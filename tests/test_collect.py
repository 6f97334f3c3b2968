"""Collecting a class from its GitHub Classroom clones by the deadline: real git repositories
made here, their commits dated with GIT_COMMITTER_DATE around the policy's due date."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from exercises import collect
from exercises.grading import inputs, policy

REPO = Path(__file__).resolve().parent.parent
POLICY = policy.load()
DUE = POLICY.late.due


def commit(clone: Path, when: datetime, files: dict[str, str], message: str) -> str:
    """Writes ``files`` into ``clone`` and commits them, dated ``when`` (author and committer)."""
    for name, text in files.items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text(text)
    stamp = when.isoformat()
    environment = {**os.environ, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_DATE": stamp}
    environment |= {"GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@x", "GIT_COMMITTER_NAME": "s"}
    environment |= {"GIT_COMMITTER_EMAIL": "s@x"}
    subprocess.run(["git", "-C", str(clone), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(clone), "commit", "-q", "-m", message], check=True, env=environment
    )
    return subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def new_clone(clones: Path, name: str) -> Path:
    clone = clones / name
    clone.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    return clone


def test_each_clones_last_commit_that_counts_is_collected_with_its_lateness(tmp_path):
    clones, out = tmp_path / "clones", tmp_path / "submissions"
    work = "exercises/student/q1_chunks.py"
    template = DUE - timedelta(days=14)
    # On time: the last commit before the due date counts, not the one after the last late day.
    ann = new_clone(clones, "hw-ann")
    commit(ann, template, {work: "# the stub\n"}, "template")
    on_time = commit(ann, DUE - timedelta(hours=1), {work: "# ann's answer\n"}, "done")
    commit(ann, DUE + timedelta(days=POLICY.late.last_day + 1), {work: "# too late\n"}, "later")
    # Within the grace period: on time.
    bea = new_clone(clones, "hw-bea")
    commit(bea, template, {work: "# the stub\n"}, "template")
    in_grace = commit(bea, DUE + POLICY.late.grace - timedelta(minutes=1), {work: "# bea\n"}, "x")
    # Two days and a moment late: three started days.
    cal = new_clone(clones, "hw-cal")
    commit(cal, template, {work: "# the stub\n"}, "template")
    late = commit(
        cal, DUE + POLICY.late.grace + timedelta(days=2, minutes=5), {work: "# cal\n"}, "y"
    )
    # Only commits after the last day that counts, and a folder that is no clone: left out.
    dan = new_clone(clones, "hw-dan")
    commit(dan, DUE + timedelta(days=POLICY.late.last_day + 2), {work: "# dan\n"}, "z")
    (clones / "notes").mkdir()

    done = subprocess.run(
        [sys.executable, "-m", "exercises.collect", str(clones), str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "hw-dan: left out (no commit up to" in done.stdout
    assert "notes: left out (not a git clone)" in done.stdout
    assert (out / "hw-ann" / work).read_text() == "# ann's answer\n"
    assert (out / "hw-cal" / work).read_text() == "# cal\n"
    assert not (out / "hw-dan").exists() and not (out / "hw-ann" / ".git").exists()
    with open(out / "submitted.csv", newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert {name: rows[name]["commit"] for name in rows} == {
        "hw-ann": on_time,
        "hw-bea": in_grace,
        "hw-cal": late,
    }
    assert {name: rows[name]["days_late"] for name in rows} == {
        "hw-ann": "0",
        "hw-bea": "0",
        "hw-cal": "3",
    }
    # The grader reads the file as its --submitted input, and counts the same days late.
    times = inputs.read_submitted(out / "submitted.csv", {name: name for name in rows})
    assert POLICY.late.days_late(times["hw-cal"]) == 3
    assert times["hw-ann"] == DUE - timedelta(hours=1)

    # --at-deadline: the late commit does not count; cal's template does.
    strict = tmp_path / "strict"
    collect.collect(clones, strict, POLICY, at_deadline=True)
    assert (strict / "hw-cal" / work).read_text() == "# the stub\n"


def test_collecting_refuses_a_folder_it_would_mix_into(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "alice").mkdir()
    with pytest.raises(collect.CollectError, match="not empty"):
        collect.collect(tmp_path, tmp_path / "out", POLICY)
    with pytest.raises(collect.CollectError, match="not a folder"):
        collect.collect(tmp_path / "none", tmp_path / "new", POLICY)
