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


def host(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A bare repository standing for a git host's (``hosts/<name>.git``), and a clone of it to
    commit and push from (``work/<name>``)."""
    remote = tmp_path / "hosts" / f"{name}.git"
    subprocess.run(
        ["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)], check=True
    )
    work = new_clone(tmp_path / "work", name)
    subprocess.run(["git", "-C", str(work), "remote", "add", "origin", str(remote)], check=True)
    return remote, work


def push(work: Path, branch: str = "HEAD") -> None:
    subprocess.run(["git", "-C", str(work), "push", "-q", "origin", f"{branch}:main"], check=True)


def collect_with(roster: Path, clones: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "exercises.collect", str(clones), str(out), "--roster", str(roster)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_roster_of_repositories_on_any_host_is_fetched_and_collected_naming_what_was_left_out(
    tmp_path,
):
    """Repositories named by URL (file://, as https:// or ssh:// would be) or by path, cloned
    into mirrors, fetched again on the next collection; each student's last commit that counts,
    and every commit after the cutoff named as left out; a repository that cannot be fetched is
    named, and the others are collected."""
    work_file = "q1_chunks.py"
    cutoff = collect.cutoff(POLICY, at_deadline=False)
    ann_remote, ann = host(tmp_path, "ann")
    commit(ann, DUE - timedelta(days=3), {work_file: "# start\n"}, "start")
    on_time = commit(ann, DUE - timedelta(hours=1), {work_file: "# ann\n"}, "done")
    too_late = [
        commit(ann, cutoff + timedelta(hours=hours), {work_file: f"# {hours}\n"}, "late")
        for hours in (1, 30)
    ]
    push(ann)
    bea = new_clone(tmp_path / "disk", "bea-repo")  # a path on this disk, not bare
    late = commit(
        bea, DUE + POLICY.late.grace + timedelta(days=1, hours=2), {work_file: "# b\n"}, "x"
    )
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "student,repository\n"
        f"s-ann,{ann_remote.as_uri()}\n"
        "s-bea,disk/bea-repo\n"  # relative to the roster's folder
        f"s-cal,{(tmp_path / 'hosts' / 'missing.git').as_uri()}\n"
    )
    clones = tmp_path / "clones"
    done = collect_with(roster, clones, tmp_path / "first")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"s-ann: {on_time[:10]} of {DUE - timedelta(hours=1)}" in lines
    left = next(line for line in lines if "left out:" in line)
    assert f"2 commit(s) after {cutoff.isoformat()} left out" in left
    assert all(commit_[:10] in left for commit_ in too_late), left
    assert any(line.startswith("s-bea: " + late[:10]) and "2 day(s) late" in line for line in lines)
    assert any(
        line.startswith("s-cal: left out (git could not fetch") and "missing.git" in line
        for line in lines
    ), done.stdout
    assert (tmp_path / "first" / "s-ann" / work_file).read_text() == "# ann\n"
    assert (clones / "s-ann.git" / "HEAD").is_file()  # a bare mirror, kept for the next time
    with open(tmp_path / "first" / "submitted.csv", newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert set(rows) == {"s-ann", "s-bea"}
    assert rows["s-ann"]["left_out"] == " ".join(reversed(too_late))  # newest first
    assert rows["s-bea"]["days_late"] == "2" and rows["s-bea"]["left_out"] == ""

    # Ann pushes a later commit that still counts: the next collection fetches it.
    newer = commit(ann, DUE, {work_file: "# ann, at the deadline\n"}, "again")
    subprocess.run(["git", "-C", str(ann), "push", "-q", "-f", "origin", "HEAD:main"], check=True)
    done = collect_with(roster, clones, tmp_path / "second")
    assert done.returncode == 0, done.stderr
    assert f"s-ann: {newer[:10]}" in done.stdout
    assert (tmp_path / "second" / "s-ann" / work_file).read_text() == "# ann, at the deadline\n"


def test_github_classrooms_export_is_one_roster_and_a_bad_row_is_refused_by_its_line(tmp_path):
    remote, work = host(tmp_path, "hw1-ann")
    commit(work, DUE - timedelta(hours=2), {"q1_chunks.py": "# ann\n"}, "done")
    push(work)
    export = tmp_path / "grades.csv"
    export.write_text(
        "assignment_name,assignment_url,starter_code_url,github_username,roster_identifier,"
        "student_repository_name,student_repository_url,submission_timestamp,points_awarded,"
        "points_available\n"
        f"hw1,u,s,ann-gh,s-001,hw1-ann,{remote.as_uri()},,0,100\n"
        f"hw1,u,s,bob-gh,,hw1-bob,{remote.as_uri()},,0,100\n"  # no roster id: the username
    )
    assert [(entry.student, entry.repository) for entry in collect.read_roster(export)] == [
        ("s-001", remote.as_uri()),
        ("bob-gh", remote.as_uri()),
    ]
    done = collect_with(export, tmp_path / "clones", tmp_path / "out")
    assert done.returncode == 0 and (tmp_path / "out" / "s-001" / "q1_chunks.py").exists()

    for rows, named in [
        ("student,repository\n../evil,x\n", "line 2: student '../evil'"),
        ("student,repository\n_x,x\n", "student '_x'"),
        (f"student,repository\na,{remote}\nA,{remote}\n", "line 3: student 'A' is also on line 2"),
        ("student,repository\na,\n", "line 2: no repository for 'a'"),
        ("student,repository\na,-uploadpack=touch x\n", "not a URL or a path"),
        ("student,repository\na,no/such/folder\n", "no such folder"),
        (f"student,repository,branch\na,{remote},..bad\n", "branch '..bad'"),
        ("identifier,github_username\ns,a\n", "expected the columns student and repository"),
    ]:
        (tmp_path / "bad.csv").write_text(rows)
        with pytest.raises(collect.CollectError) as refused:
            collect.read_roster(tmp_path / "bad.csv")
        assert named in str(refused.value), (rows, str(refused.value))
