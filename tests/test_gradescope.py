"""Gradescope's autograder, built by ``python -m exercises.gradescope build`` and run in
Gradescope's layout: the zip unpacked at ``/autograder/source``, a submission at
``/autograder/submission``, ``run_autograder`` run from ``/autograder``, and its
``/autograder/results/results.json`` checked against Gradescope's documented fields. The layout
is a temporary folder bound at ``/autograder`` by bubblewrap, over a read-only view of this
machine; ``setup.sh``'s apt and pip steps are not run here (no network): the unpacked
source's ``.venv`` is this checkout's virtual environment.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from exercises import gradescope
from exercises.grading import policy

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
POLICY = policy.load()

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

#: Gradescope's fields (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
TOP_FIELDS = {"score", "execution_time", "output", "visibility", "stdout_visibility"}
TOP_FIELDS |= {"extra_data", "tests", "leaderboard", "output_format", "test_output_format"}
TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number", "output"}
TEST_FIELDS |= {"output_format", "tags", "visibility", "extra_data"}
VISIBILITIES = {"visible", "hidden", "after_due_date", "after_published"}


def valid_results(path: Path) -> dict:
    """Reads a results.json and checks it against Gradescope's specification."""
    results = json.loads(path.read_text())
    assert set(results) <= TOP_FIELDS, set(results) - TOP_FIELDS
    assert isinstance(results["score"], (int, float))
    assert results["visibility"] in VISIBILITIES and results["stdout_visibility"] in VISIBILITIES
    for test in results["tests"]:
        assert set(test) <= TEST_FIELDS, set(test) - TEST_FIELDS
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], float)
        assert test.get("status", "passed") in ("passed", "failed")
        assert test["visibility"] in VISIBILITIES
    return results


def bwrap_or_skip() -> None:
    if shutil.which("bwrap") is None:
        message = "bubblewrap is needed to make Gradescope's /autograder layout"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def in_gradescope_layout(autograder: Path, marker: str) -> subprocess.CompletedProcess:
    """Runs ``/autograder/run_autograder`` with ``autograder`` bound at ``/autograder``, over a
    read-only view of this machine's top-level folders (a fresh /tmp, /dev and /proc)."""
    command = ["bwrap", "--die-with-parent", "--unshare-pid"]
    for entry in sorted(Path("/").iterdir()):
        if entry.name in ("proc", "dev", "tmp", "autograder"):
            continue
        if entry.is_symlink():
            command += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.is_dir():
            command += ["--ro-bind", str(entry), str(entry)]
    command += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # A checkout (and its .venv, which setup.sh's stands for) in /tmp stays visible, as one
    # anywhere else is through the read-only view above.
    for path in sorted({REPO.resolve(), Path(sys.prefix).resolve()}):
        if path.is_relative_to("/tmp"):
            command += ["--ro-bind", str(path), str(path)]
    command += ["--bind", str(autograder), "/autograder", "--chdir", "/autograder"]
    command += ["--setenv", "GRADE_TEST_MARKER", marker, "--", "/autograder/run_autograder"]
    return subprocess.run(command, capture_output=True, text=True, timeout=280, check=False)


def build(out: Path, *options: str) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "exercises.gradescope", "build", str(out), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("gradescope") / "autograder.zip")


def test_the_zip_has_gradescopes_two_scripts_at_its_root_and_no_solution(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as archive:
        names = set(archive.namelist())
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    assert {"setup.sh", "run_autograder"} <= names
    assert all(modes[name] & 0o111 for name in ("setup.sh", "run_autograder"))
    for needed in [
        "exercises/grade.py",
        "exercises/policy.toml",
        "exercises/checks/hidden/test_q1_hidden.py",
        "exercises/sandbox/runner.py",
        "vecenvs/__init__.py",
        "pyproject.toml",
    ]:
        assert needed in names, needed
    assert not any(name.startswith("exercises/solutions") for name in names)
    assert not any(name.startswith(("tests/", ".git")) for name in names)


def test_a_path_that_is_no_zip_is_refused(tmp_path):
    with pytest.raises(gradescope.GradescopeError, match="ending in .zip"):
        gradescope.build(tmp_path / "autograder.tar")


def test_the_students_id_and_time_come_from_gradescopes_metadata():
    metadata = {
        "created_at": "2026-12-19T10:00:00.0+00:00",
        "users": [{"email": "ann@uni.example", "id": 7, "name": "Ann", "sid": ""}],
    }
    assert gradescope.student_of(metadata) == ("ann@uni.example", metadata["created_at"])
    assert gradescope.student_of({"users": "nonsense"}) == ("student", None)
    assert gradescope.folder_name("../_evil name\n") == "evil-name-"
    assert gradescope.folder_name("...") == "student"


@pytest.mark.timeout(900)
def test_run_autograder_in_gradescopes_layout_grades_a_perfect_a_blank_and_a_hostile_submission(
    autograder_zip, tmp_path
):
    """Each submission graded as Gradescope would: the perfect one scores every check, the
    blank one none, and the hostile one (the solutions, plus a q1 that writes a forged
    results.json and reads the hidden checks) scores its checks and nothing it forged."""
    bwrap_or_skip()
    solutions = {
        path.name: path.read_text()
        for path in [
            *(EXERCISES / "solutions").glob("q*.py"),
            EXERCISES / "solutions/q6_sweep.json",
        ]
    }
    forged = json.dumps({"score": 1000, "tests": []})
    hostile_q1 = solutions["q1_chunks.py"] + (
        "\nimport contextlib, pathlib\n"
        "with contextlib.suppress(OSError):\n"
        "    pathlib.Path('/autograder/results').mkdir(parents=True, exist_ok=True)\n"
        f"    pathlib.Path('/autograder/results/results.json').write_text({forged!r})\n"
        "with contextlib.suppress(OSError):\n"
        "    LEAKED = pathlib.Path('/autograder/source/exercises/policy.toml').read_text()\n"
    )
    blank = {path.name: path.read_text() for path in (EXERCISES / "student").glob("q*.py")}
    submissions = {
        "perfect": solutions,
        "blank": blank,
        "hostile": {**solutions, "q1_chunks.py": hostile_q1},
    }
    expected_automatic = sum(question.max_points for question in POLICY.questions.values())
    expected = {"perfect": expected_automatic, "blank": 0.0, "hostile": expected_automatic}
    for name, files in submissions.items():
        results, log = grade_in_layout(autograder_zip, tmp_path / name, name, files)
        assert results["score"] == expected[name], log
        assert "student code runs in: bwrap" in log
    # Without a sandbox (as where bubblewrap cannot run), the hostile code's forged results.json
    # does not survive either: the grader writes the real one after its processes are gone.
    unsandboxed = build(tmp_path / "none.zip", "--sandbox", "none")
    results, log = grade_in_layout(
        unsandboxed, tmp_path / "none", "hostile", submissions["hostile"]
    )
    assert "student code runs in: none" in log
    assert results["score"] == expected_automatic, log


def grade_in_layout(zip_file: Path, autograder: Path, name: str, files: dict) -> tuple[dict, str]:
    """Unpacks the zip as Gradescope's image build does, puts ``files`` in the submission, runs
    ``run_autograder`` in the layout; returns the checked results.json and the log."""
    with zipfile.ZipFile(zip_file) as archive:
        archive.extractall(autograder / "source")
    for script in ("setup.sh", "run_autograder"):  # (zipfile does not keep modes)
        (autograder / "source" / script).chmod(0o755)
    # What Gradescope's image build does: setup.sh's venv (here, this checkout's), and the
    # run_autograder it copies to /autograder.
    (autograder / "source" / ".venv").symlink_to(Path(sys.prefix).resolve())  # (not via /tmp)
    shutil.copy2(autograder / "source" / "run_autograder", autograder / "run_autograder")
    (autograder / "submission").mkdir()
    for filename, text in files.items():
        (autograder / "submission" / filename).write_text(text)
    metadata = {"users": [{"email": f"{name}@uni.example", "sid": f"s-{name}"}]}
    (autograder / "submission_metadata.json").write_text(json.dumps(metadata))
    done = in_gradescope_layout(autograder, uuid.uuid4().hex)
    log = f"{name}:\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, log
    results = valid_results(autograder / "results" / "results.json")
    assert results["extra_data"]["seed"] == POLICY.student_seed(f"s-{name}")
    assert [part["part"] for part in results["extra_data"]["pending"]] == list(POLICY.manual)
    assert "Traceback" not in results["output"]
    return results, log


@pytest.mark.timeout(600)
def test_one_late_rule_on_gradescope_and_make_grade(tmp_path):
    """A submission two days late, graded by ``gradescope run`` (as in Gradescope's container)
    and by ``make grade`` with the same time: the autograder's score plus the hand scores (which
    Gradescope adds) is make grade's total once the hand scores are merged in. The penalty takes
    its share of the checks' points, never of the hand scores, on both paths."""
    from datetime import timedelta

    late = POLICY.late.due + POLICY.late.grace + timedelta(days=1, hours=3)  # 2 started days
    share = POLICY.late.penalty(late)
    assert 0 < share < 1
    files = {
        path.name: path.read_text()
        for path in [*(EXERCISES / "student").glob("q*.py")]
        + [EXERCISES / "solutions" / name for name in ("q1_chunks.py", "q2_overhead.py")]
    }
    checks = POLICY.questions["q1"].max_points + POLICY.questions["q2"].max_points
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    metadata = {"created_at": late.isoformat(), "users": [{"sid": "s-late", "email": "x@y"}]}
    (root / "submission_metadata.json").write_text(json.dumps(metadata))
    done = subprocess.run(
        [sys.executable, "-m", "exercises.gradescope", "run", "--root", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = valid_results(root / "results" / "results.json")
    assert results["score"] == round(checks * (1 - share), 2), results["output"]
    penalty = next(test for test in results["tests"] if test["name"].startswith("late penalty"))
    assert penalty["score"] == -round(checks * share, 2)

    # make grade: the same files and time, then the hand scores merged in.
    folder = tmp_path / "class" / "s-late"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    (tmp_path / "times.csv").write_text(f"student,submitted_at\ns-late,{late.isoformat()}\n")
    hand = {part.id: part.points / 2 for part in POLICY.manual.values()}
    (tmp_path / "hand.csv").write_text(
        "student,part,points\n" + "".join(f"s-late,{p},{v}\n" for p, v in hand.items())
    )
    grading = [sys.executable, "-m", "exercises.grade", str(tmp_path / "class")]
    grading += ["--csv", str(tmp_path / "scores.csv"), "--no-hints"]
    for options in (
        ["--submitted", str(tmp_path / "times.csv")],
        ["--manual", str(tmp_path / "hand.csv")],
    ):
        done = subprocess.run(
            [*grading, *options], cwd=REPO, capture_output=True, text=True, timeout=280, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "scores.csv", newline="") as file:
        row = next(iter(csv.DictReader(file)))
    assert float(row["total"]) == round(results["score"] + sum(hand.values()), 2)
    assert float(row["late_penalty"]) == -penalty["score"]
