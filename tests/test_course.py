"""The course as an instructor runs it: the student release holds no solution, no hidden check and
no answer, and its GitHub Classroom workflow, run in a fresh release, gets the points it
declares; the policy file, the instructor's input files and the grader's outputs refuse or
neutralise bad input, and agree with each other.

Grading whole classes is in ``tests/test_exercises.py``.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath

import pytest
import yaml

from exercises import release
from exercises.grading import inputs, policy, reports
from exercises.grading.materials import Materials, Prediction, written
from exercises.grading.policy import Check, PolicyError
from exercises.grading.scores import Grade, ManualScore, Outcome

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
POLICY = policy.load()

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


@pytest.fixture(scope="module")
def student_release(tmp_path_factory) -> Path:
    """The release, built once for this file's tests (each copies it before changing it)."""
    out = tmp_path_factory.mktemp("release") / "vecenvs-course"
    release.build(out, POLICY)
    return out


# ------------------------------------------------------------------------------------------------
# The student release
# ------------------------------------------------------------------------------------------------


def test_release_holds_the_course_and_nothing_only_the_instructor_may_see(student_release):
    files = {path.relative_to(student_release).as_posix() for path in student_release.rglob("*")}
    for needed in [
        "vecenvs/__init__.py",
        "notebooks/01-timing-one-env.ipynb",
        "exercises/README.md",
        "exercises/pipe_env.py",
        "exercises/student/q1_chunks.py",
        "exercises/student/q6_measure.py",
        "exercises/checks/test_q3_step_wait.py",
        "exercises/checks/conftest.py",
        "exercises/sandbox/toolkit.py",
        "tests/data/profiles/subproc-cartpole-n8.speedscope.json",  # notebook 5 reads it
        "examples/mycart/mycart/env.py",  # docs/your-env.md and tests/test_userenv.py use it
        ".github/workflows/classroom.yml",
        ".github/classroom/autograding.json",
        "pyproject.toml",
    ]:
        assert needed in files, needed
    for secret in [
        "exercises/solutions",
        "exercises/checks/hidden",
        "exercises/grading",
        "exercises/grade.py",
        "exercises/gradescope.py",
        "exercises/policy.toml",
        "exercises/INSTRUCTORS.md",
        "tests/test_exercises.py",
        "tests/data/submissions",
        ".git",
        ".ci",
    ]:
        assert not any(f == secret or f.startswith(secret + "/") for f in files), secret
    makefile = (student_release / "Makefile").read_text()
    assert "grade:" not in makefile and "release:" not in makefile and "lab:" in makefile
    assert "gradescope:" not in makefile and "make gradescope" not in makefile
    assert release.find_leaks(student_release) == []
    # What the search looks for is really there to find: answers, solution lines, hidden names.
    answers = release.answers()
    assert answers["WHY_SUBPROC_WORKERS_WAIT"] == "b" and answers["FEWEST_WORKERS_FOR_IT"] == 3
    assert len(release._solution_lines(EXERCISES)) > 20


def renamed(function: str) -> str:
    """A solution's function as a student could copy it: every name renamed, no comments or
    docstring, other numbers."""
    for path in (EXERCISES / "solutions").glob("q*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == function:
                if ast.get_docstring(node) is not None:
                    node.body = node.body[1:]
                source = ast.unparse(node)  # no comments
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                names |= {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)} | {function}
                for name in sorted(names, key=len, reverse=True):
                    source = re.sub(rf"\b{name}\b", f"my_{name}_", source)
                return re.sub(r"\b\d+\.\d+\b", "0.5", source)
    raise AssertionError(f"no function {function} in the solutions")


@pytest.mark.parametrize(
    "leak, file, text",
    [
        ("instructor-only", "exercises/solutions/q1_chunks.py", "solution"),
        ("instructor-only", "exercises/checks/hidden/test_q1_hidden.py", "hidden"),
        ("a line of a solution", "notebooks/extra.py", "SOLUTION_LINE"),
        # A solution's function with other names, comments and constants, wherever it is.
        ("does what q4_worker_errors.py: careful_worker does", "exercises/sandbox/x.py", "RENAMED"),
        ("does what q1_chunks.py: split_by_cost does", "vecenvs/helpers.py", "RENAMED"),
        ("does what q3_step_wait.py: step_wait does", "notebooks/99-extra.ipynb", "RENAMED"),
        ("names a hidden check", "exercises/README.md", "see test_random_costs_get_the_best_split"),
        (
            "gives away WHY_SUBPROC_WORKERS_WAIT",
            "exercises/checks/test_q5_read_profile.py",
            '    assert answer == "b"',
        ),
        (
            "gives away FEWEST_WORKERS_FOR_IT",
            "exercises/student/q1_chunks.py",
            "FEWEST_WORKERS_FOR_IT = 3",
        ),
        (
            "gives away WHAT_THE_MODEL_LEAVES_OUT",
            "docs/answers.md",
            'WHAT_THE_MODEL_LEAVES_OUT = "c"',  # (its letter in the course's own order)
        ),
        (
            "speaks of the instructor's side",
            "docs/course/index.md",
            "holds the reference solutions",
        ),
        ("speaks of the instructor's side", "exercises/__init__.py", "python -m exercises.grade"),
    ],
)
def test_the_leak_search_finds_each_kind_of_leak(tmp_path, leak, file, text):
    if text == "SOLUTION_LINE":
        text = sorted(release._solution_lines(EXERCISES))[0]
    if text == "RENAMED":
        text = renamed(leak.split(": ")[1].split()[0])
        assert text not in release._solution_lines(EXERCISES)
        if file.endswith(".ipynb"):
            cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": text}
            text = json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    path = tmp_path / "release" / file  # the search reads any folder: one file is enough
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n" + text + "\n")
    assert any(leak in found for found in release.find_leaks(tmp_path / "release"))


def test_the_release_has_no_developers_side_and_passes_its_own_check(student_release, tmp_path):
    """Of the project's tests, the release holds its own check (``tests/test_lab.py``) and the
    data the notebooks read; no changelog or contributing guide, no developers' make targets, no
    docs section for instructors. Its ``make test`` runs the lab's check, which passes in it
    (run here as the Makefile runs it, with this venv's Python as the release's .venv)."""
    files = {path.relative_to(student_release).as_posix() for path in student_release.rglob("*")}
    tests = {f for f in files if f.startswith("tests/") and (student_release / f).is_file()}
    assert {f for f in tests if not f.startswith("tests/data/profiles/")} == {"tests/test_lab.py"}
    assert not {"CHANGELOG.md", "CONTRIBUTING.md"} & files
    assert "For instructors" not in (student_release / "docs/course/index.md").read_text()
    makefile = (student_release / "Makefile").read_text()
    assert "lint:" not in makefile and "docs:" not in makefile and "developer-only" not in makefile
    recipe = re.search(r"^test: \$\(VENV\)/\.installed-lab\n\t(.+)$", makefile, re.M)
    assert recipe, makefile
    command = recipe.group(1).replace("$(PYTHON)", sys.executable).split()
    assert command[1:] == ["-m", "pytest", "tests", "-p", "no:cacheprovider"]
    workdir = tmp_path / "student-repo"
    shutil.copytree(student_release, workdir)
    done = subprocess.run(
        command,
        cwd=workdir,
        env={**os.environ, "PYTHONPATH": str(workdir)},  # (pip install -e . in the release)
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b4 passed\b", done.stdout), done.stdout


#: Part B's right options, by how they start (the hidden checks know them the same way).
RIGHT_OPTIONS = {
    "WHAT_THE_MODEL_LEAVES_OUT": ("q2_overhead.py", "t_os is one constant"),
    "WHY_SUBPROC_WORKERS_WAIT": ("q5_read_profile.py", "one CartPole step takes"),
}


def letters_for(student: str) -> dict[str, str]:
    """The right letters as a student reads them from ``python -m exercises.options ID``."""
    printed = subprocess.run(
        [sys.executable, "-m", "exercises.options", student],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    found = {}
    for name, (_, starts) in RIGHT_OPTIONS.items():
        section = printed[printed.index(f", {name}:") :]
        found[name] = re.search(rf'"([a-c])": {re.escape(starts)}', section).group(1)
    return found


def test_part_bs_letters_are_each_students_own_and_graded_against_their_order(tmp_path):
    """Two students whose lists letter the right options differently each answer with their
    own letters and earn Part B's points; the same letters under the other's id earn nothing (a
    letter passed around says nothing); checked again, the same."""
    students = [str(n) for n in range(100)]
    first = students[0]
    second = next(
        other
        for other in students[1:]
        if all(letters_for(other)[name] != letters_for(first)[name] for name in RIGHT_OPTIONS)
    )
    folders = {}
    for student in (first, second):
        folder = folders[student] = tmp_path / f"work-{student}"
        folder.mkdir()
        for name, letter in letters_for(student).items():
            file = RIGHT_OPTIONS[name][0]
            text = re.sub(
                rf"^{name} = options\.letter_of\(.*?\n\)$",
                f'{name} = "{letter}"',
                (EXERCISES / "solutions" / file).read_text(),
                flags=re.M | re.S,
            )
            assert f'{name} = "{letter}"' in text
            (folder / file).write_text(text)

    def part_b(folder: Path, student: str) -> list[str]:
        """The hidden Part B checks of q2 and q5 that pass, for ``student``'s folder."""
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "exercises/checks/hidden",
                "-k",
                "part_b",
                f"--submission={folder}",
                f"--student={student}",
                "-p",
                "no:cacheprovider",
                "-rA",
                "-q",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return sorted(re.findall(r"^PASSED \S+::(test_\w+)", done.stdout, re.M))

    both = ["test_part_b_answer", "test_part_b_answers"]
    assert part_b(folders[first], first) == both
    assert part_b(folders[second], second) == both
    assert part_b(folders[first], second) == [] and part_b(folders[second], first) == []
    assert part_b(folders[first], first) == both  # again


def test_make_grade_and_make_release_run_the_instructors_commands():
    """``make grade`` and ``make release`` (dry runs: ``-o`` skips the install step)."""

    def dry_run(*arguments: str) -> str:
        return subprocess.run(
            ["make", "-n", "-o", ".venv/.installed", *arguments],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    grade = dry_run("grade", "SUBMISSIONS=/srv/class", "GRADE_ARGS=--manual m.csv")
    assert (
        "-m exercises.grade /srv/class --csv /srv/class/scores.csv --jobs 1 --manual m.csv" in grade
    )
    assert "--jobs 4" in dry_run("grade", "JOBS=4")
    collect = dry_run("collect", "ROSTER=r.csv", "CLONES=/srv/repos", "SUBMISSIONS=/srv/class")
    assert "-m exercises.collect /srv/repos /srv/class --roster r.csv" in collect
    # The guide names the gradebook the grader writes, and no other.
    guide = (EXERCISES / "INSTRUCTORS.md").read_text()
    assert "SUBMISSIONS/scores.csv" in guide and "grades.csv" not in guide
    assert "-m exercises.release /srv/out" in dry_run("release", "OUT=/srv/out")


def test_release_refuses_a_folder_it_could_damage(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    for out, why in [
        (tmp_path, "not empty"),
        (REPO, "overwrite"),
        (REPO / "docs" / "x", "inside the repository"),
    ]:
        with pytest.raises(release.ReleaseError, match=why):
            release.build(out, POLICY)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    done = subprocess.run(
        [sys.executable, "-m", "exercises.release", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and "ERROR:" in done.stderr and "Traceback" not in done.stderr


def test_classroom_workflow_run_in_a_fresh_release_gets_the_points_it_declares(
    student_release, tmp_path
):
    """Each test of ``.github/classroom/autograding.json`` is run as GitHub Classroom would, in
    a copy of the release whose student files are the reference solutions: every one passes, so
    the points earned are the points declared, which are the policy's for the public checks. The
    workflow (``classroom.yml``) declares the same commands and points; in the untouched release
    the first test fails."""
    workdir = tmp_path / "student-repo"
    shutil.copytree(student_release, workdir)
    tests = json.loads((workdir / ".github/classroom/autograding.json").read_text())["tests"]
    workflow = yaml.safe_load((workdir / ".github/workflows/classroom.yml").read_text())
    assert workflow["name"] == "Autograding Tests"
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    graders = [s for s in steps if "autograding-command-grader" in s.get("uses", "")]
    assert [(s["with"]["command"], s["with"]["max-score"]) for s in graders] == [
        (test["run"], test["points"]) for test in tests
    ]
    reporter = steps[-1]
    assert reporter["with"]["runners"].split(",") == [s["id"] for s in graders]
    assert set(reporter["env"]) == {f"{s['id'].upper()}_RESULTS" for s in graders}
    declared = sum(test["points"] for test in tests)
    assert declared == sum(q.public_points for q in POLICY.questions.values())

    # `python` is this venv's, as setup-python's is in the workflow; `pip install -e .` of the
    # release is PYTHONPATH here: the release's own package and exercises are the ones used.
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(workdir),
    }

    failures = []

    def run(test: dict) -> bool:
        done = subprocess.run(
            test["run"],
            shell=True,  # the workflow's own command line, as Classroom runs it
            cwd=workdir,
            env=environment,
            capture_output=True,
            text=True,
            timeout=test["timeout"] * 60,
            check=False,
        )
        if done.returncode:
            failures.append(f"{test['name']}:\n{done.stdout[-1500:]}")
        return done.returncode == 0

    assert not run(tests[0]), "an untouched release should fail its first check"
    failures.clear()
    for source in (EXERCISES / "solutions").iterdir():
        if source.suffix in (".py", ".json"):
            shutil.copy(source, workdir / "exercises" / "student" / source.name)
    earned = sum(test["points"] for test in tests if run(test))
    assert earned == declared, "\n\n".join(failures)


# ------------------------------------------------------------------------------------------------
# The policy and the instructor's files
# ------------------------------------------------------------------------------------------------


def write_policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, named",
    [
        ("[questions.q1.public]\ntest_a = -1\n", "test_a = -1"),
        ("[questions.q1.public]\ntest_a = 'two'\n", "test_a = 'two'"),
        ("[questions.x1.public]\ntest_a = 1\n", "[questions.x1]"),
        ("[questions.q1.public]\nnot_a_test = 1\n", "'not_a_test'"),
        (
            "[late]\npenalty_per_day = 1.5\n[questions.q1.public]\ntest_a = 1\n",
            "penalty_per_day = 1.5",
        ),
        ("[course]\ndue = 2026-01-01T10:00:00\n[questions.q1.public]\ntest_a = 1\n", "time zone"),
        ("[feedback]\nhidden_visibility = 'later'\n[questions.q1.public]\ntest_a = 1\n", "'later'"),
        ("[questions.q1.public]\ntest_a = 1\n[manual.x]\npoints = -2\n", "points = -2"),
        ("[course]\ntitel = 'typo'\n", "'titel'"),
        ("[course]\nseed = [1]\n[questions.q1.public]\ntest_a = 1\n", "seed = [1]"),
        ("[questions.q1\n", "not valid TOML"),
    ],
)
def test_a_bad_policy_is_refused_naming_the_bad_value(tmp_path, text, named):
    with pytest.raises(PolicyError) as refused:
        policy.load(write_policy(tmp_path, text))
    assert named in str(refused.value)


def test_the_policy_must_give_points_to_exactly_the_checks_there_are(tmp_path):
    rules = policy.load(
        write_policy(tmp_path, "[questions.q1.public]\ntest_a = 1\ntest_gone = 2\n")
    )
    with pytest.raises(PolicyError) as refused:
        rules.check_against([Check("q1", "test_a"), Check("q1", "test_new", hidden=True)])
    assert "q1/hidden/test_new has no points" in str(refused.value)
    assert "q1/public/test_gone, which is not a check" in str(refused.value)
    from exercises.grade import collect_checks

    POLICY.check_against(collect_checks())  # the course's own policy fits its checks


def test_late_penalty_counts_started_days_after_the_grace_period():
    due = datetime(2026, 5, 1, 12, tzinfo=timezone.utc)
    late = policy.LatePolicy(due, timedelta(minutes=15), per_day=0.1, last_day=3)
    for after, days, penalty in [
        (timedelta(minutes=-5), 0, 0.0),
        (timedelta(minutes=15), 0, 0.0),
        (timedelta(minutes=16), 1, 0.1),
        (timedelta(days=1, minutes=15), 1, 0.1),
        (timedelta(days=1, minutes=16), 2, 0.2),
        (timedelta(days=3, minutes=15), 3, 0.3),
        (timedelta(days=3, minutes=16), 4, 1.0),  # past the last day: nothing
    ]:
        assert late.days_late(due + after) == days and late.penalty(due + after) == penalty, after
    assert late.penalty(None) == 0.0 and policy.LatePolicy().penalty(due) == 0.0


def test_the_instructors_files_are_checked_before_grading(tmp_path):
    known = {"alice": "alice", "bob": "bob", "s-2": "bob"}
    files = {
        "times.csv": "student,submitted_at\nalice,2026-05-01T10:00:00\n",
        "times2.csv": "student,submitted_at\nzoe,2026-05-01T10:00:00Z\n",
        "manual.csv": "student,part,points,comment\nalice,q6_explanation,9,too many\n",
        "manual2.csv": "student,part,points\nalice,essay,1\n",
        "manual3.csv": "student,part,points\nalice,q6_explanation,1\nalice,q6_explanation,2\n",
        "roster.csv": "identifier,name\nx,y\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    for read, name, named in [
        (
            lambda p: inputs.read_submitted(p, known),
            "times.csv",
            "line 2: submitted_at = '2026-05-01T10:00:00'",
        ),
        (lambda p: inputs.read_submitted(p, known), "times2.csv", "no student 'zoe'"),
        (lambda p: inputs.read_manual(p, known, POLICY), "manual.csv", "points = '9'"),
        (lambda p: inputs.read_manual(p, known, POLICY), "manual2.csv", "part 'essay'"),
        (lambda p: inputs.read_manual(p, known, POLICY), "manual3.csv", "a second score"),
        (lambda p: inputs.read_roster(p, ["alice"]), "roster.csv", "no column 'github_username'"),
        (lambda p: inputs.read_roster(p, ["alice"]), "missing.csv", "cannot read"),
    ]:
        with pytest.raises(inputs.InputError) as refused:
            read(tmp_path / name)
        assert named in str(refused.value), str(refused.value)
    (tmp_path / "ok.csv").write_text(
        "student,part,points,comment\ns-2,predictions,3.5,ok\nalice,predictions,,\n"
    )
    assert inputs.read_manual(tmp_path / "ok.csv", known, POLICY) == {
        "bob": {"predictions": ManualScore(3.5, "ok")}
    }
    (tmp_path / "r.csv").write_text("identifier,github_username\ns-9,Alice\n")
    assert inputs.read_roster(tmp_path / "r.csv", ["hw1-alice", "bob"]) == {"hw1-alice": "s-9"}


def test_grade_refuses_bad_arguments_before_grading(tmp_path, capsys, monkeypatch):
    """Each refused before the checks are even listed (which would take seconds), in the words
    of argparse's usage errors, never a traceback."""
    from exercises import grade

    monkeypatch.setattr(grade, "collect_checks", lambda: pytest.fail("listed the checks"))
    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "bad.toml").write_text("[questions.q1.public]\ntest_a = -1\n")
    for options, named in [
        (["--policy", str(tmp_path / "bad.toml")], "test_a = -1"),
        (["--feedback", str(tmp_path / "class" / "feedback")], "--feedback"),
        (["--test-timeout", "0"], "--test-timeout 0.0"),
        (["--manual", str(tmp_path / "missing.csv")], "cannot read"),
    ]:
        with pytest.raises(SystemExit) as exited:
            grade.main([str(tmp_path / "class"), *options])
        error = capsys.readouterr().err
        assert exited.value.code == 2 and named in error, (options, error)
        assert "grading alice" not in error


# ------------------------------------------------------------------------------------------------
# What the grader writes
# ------------------------------------------------------------------------------------------------


def made_up_grade(folder: str = "ann", **changes) -> Grade:
    outcomes = []
    for index, check in enumerate(POLICY.checks()):
        passed = index % 3 != 0
        outcomes.append(Outcome(check, passed, "" if passed else f"hint for {check.name}"))
    grade = Grade(folder, f"id-{folder}", POLICY, outcomes)
    for name, value in changes.items():
        setattr(grade, name, value)
    return grade


def test_feedback_results_and_gradebook_agree(tmp_path):
    due = POLICY.late.due
    grade = made_up_grade(
        manual={"q6_explanation": ManualScore(6.5, "good")},
        submitted=due + POLICY.late.grace + timedelta(hours=1),
        materials=Materials(
            "I measured...",
            guesses={
                "01.ipynb": {
                    "MY_GUESS_A": Prediction(
                        "1", "MY_GUESS_A = 1  # a sample is a few calls", "before"
                    ),
                    "MY_GUESS_B": Prediction("None", "MY_GUESS_B = None", "not run"),
                }
            },
        ),
        seed=1234,
    )
    folder = reports.write_student_files(grade, tmp_path)
    assert folder == tmp_path / "ann"
    feedback = (folder / "feedback.txt").read_text()
    results = json.loads((folder / "results.json").read_text())
    reports.write_gradebook(tmp_path / "grades.csv", [grade], POLICY)
    row = next(csv.DictReader((tmp_path / "grades.csv").open()))
    total = grade.total
    assert results["score"] == total  # so far: Gradescope adds the hand scores to it
    assert f"Total: {total:g} of {POLICY.max_points:g} points so far" in feedback
    assert sum(test["score"] for test in results["tests"]) == pytest.approx(total)
    assert grade.penalty_share == POLICY.late.per_day and grade.penalty > 0
    # The late penalty takes its share of the checks' points, not of the hand scores.
    assert grade.penalty == round(grade.automatic * POLICY.late.per_day, 2)
    assert total == round(grade.automatic - grade.penalty + 6.5, 2)
    # A part not graded yet is blank in the gradebook, and so are the sums it is in.
    assert row["student_id"] == "id-ann" and float(row["q6_explanation"]) == 6.5
    assert row["predictions"] == row["manual"] == row["total"] == ""
    assert row["pending"] == "predictions" and float(row["checks"]) == grade.automatic
    assert row["seed"] == "1234"
    assert "1 of the 2 predictions" in feedback
    assert "1 with a comment of yours beside them, 1 run before the cell after them" in feedback
    assert "random cases: seed 1234" in feedback and results["extra_data"]["seed"] == 1234
    # The rubric of each part graded by hand, in the feedback; the part not graded yet pending,
    # not a failed test: it is in no test of results.json, its points in extra_data's pending.
    for part in POLICY.manual.values():
        for criterion in part.rubric:
            assert f"[{criterion.points:g}] {criterion.text}" in feedback
    assert (
        "the notebooks' predictions (MY_GUESS cells), written before running: pending" in feedback
    )
    names = [test["name"] for test in results["tests"]]
    assert not any("predictions" in name for name in names)
    assert [part["part"] for part in results["extra_data"]["pending"]] == ["predictions"]
    assert "pending: the notebooks' predictions" in results["output"]
    maxima = sum(test["max_score"] for test in results["tests"])
    assert maxima + POLICY.manual["predictions"].points == POLICY.max_points
    # Gradescope's documented fields: per-test visibility, the whole result as hidden as its
    # hidden checks (its score counts them), the grader's log never shown.
    assert {test["visibility"] for test in results["tests"] if "(hidden)" in test["name"]} == {
        POLICY.hidden_visibility
    }
    assert {test["visibility"] for test in results["tests"] if "(hidden)" not in test["name"]} == {
        "visible"
    }
    assert results["visibility"] == POLICY.hidden_visibility
    assert results["stdout_visibility"] == "hidden"
    assert all(
        test["status"] in ("passed", "failed") for test in results["tests"] if "status" in test
    )
    failed_public = next(o for o in grade.outcomes if not o.passed and not o.check.hidden)
    failed_hidden = next(o for o in grade.outcomes if not o.passed and o.check.hidden)
    assert failed_public.hint in feedback and failed_hidden.hint not in feedback
    by_name = {test["name"]: test for test in results["tests"]}
    assert (
        by_name[f"{failed_hidden.check.question}: {failed_hidden.check.title} (hidden)"]["output"]
        == ""
    )


def test_student_text_is_written_as_plain_text_and_safe_csv(tmp_path):
    hostile = '=HYPERLINK("http://x")\x1b[2J\u202efake\n<b>bold</b>'
    grade = made_up_grade(
        folder="-evil",
        student_id="=cmd|' /C calc'!A0",
        notes=[hostile],
        manual={"q6_explanation": ManualScore(1, "+SUM(A1)")},
        materials=Materials(hostile, {"CPUS": hostile}),
    )
    assert reports.plain(hostile) == '=HYPERLINK("http://x")\\u001b[2J\\u202efake\n<b>bold</b>'
    reports.write_gradebook(tmp_path / "grades.csv", [grade], POLICY)
    reports.write_manual_sheet(tmp_path / "manual.csv", [grade], POLICY)
    for name in ("grades.csv", "manual.csv"):
        for row in csv.reader((tmp_path / name).open()):
            for cell in row:
                assert not cell.startswith(("=", "+", "-", "@")), (name, cell)
                assert "\x1b" not in cell and "\u202e" not in cell
    text = reports.manual_parts_text([grade], POLICY) + reports.feedback_text(grade)
    assert "\x1b" not in text and "\u202e" not in text and "<b>bold</b>" in text  # text, as is
    # The apostrophes that guarded the id and the comment are taken off when it is read back.
    known = {"-evil": "-evil", "=cmd|' /C calc'!A0": "-evil"}
    assert inputs.read_manual(tmp_path / "manual.csv", known, POLICY) == {
        "-evil": {"q6_explanation": ManualScore(1, "+SUM(A1)")}
    }


def test_a_prediction_left_at_none_is_not_written():
    for text, expected in [
        ("None", False),
        ('{"computing: threads": None, "waiting: threads": None}', False),
        ("{4: None, 128: None}", False),
        ("0.5", True),
        ('{4: "multi", 128: None}', True),
        ("False", True),
    ]:
        assert written(text) is expected, text


def test_grades_total_is_rounded_once_and_used_everywhere():
    grade = made_up_grade(manual={"predictions": ManualScore(1 / 3)})
    assert grade.total == round(grade.before_penalty, 2)
    assert grade.penalty == 0 and reports.points(grade.total) == grade.total
    assert reports.results_json(grade)["score"] == grade.total


def test_a_students_seed_comes_from_the_course_and_the_student():
    """The same course seed and student draw the same cases; another student, another course
    seed (a new term, or ``--seed`` for one run) draw others; a bad seed is refused."""
    seed = POLICY.student_seed("s-001")
    assert seed == POLICY.student_seed("s-001") and 0 <= seed < 2**32
    assert POLICY.student_seed("s-002") != seed
    assert POLICY.student_seed("s-001", "another term") != seed
    assert POLICY.student_seed("s-001", POLICY.seed) == seed


def test_a_check_draws_its_cases_from_its_own_seed():
    """A check's seed depends on the run's seed and its name only, not on which checks ran before."""
    import importlib.util

    # (tests/conftest.py is already "conftest": load the checks' under a name of its own)
    spec = importlib.util.spec_from_file_location(
        "checks_conftest", EXERCISES / "checks/conftest.py"
    )
    checks_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks_conftest)
    check_seed = checks_conftest.check_seed
    assert check_seed(7, "test_a") == check_seed(7, "test_a") != check_seed(8, "test_a")
    assert check_seed(7, "test_a") != check_seed(7, "test_b")


def test_a_policy_part_graded_by_hand_needs_a_rubric_that_adds_up(tmp_path):
    base = "[questions.q1.public]\ntest_a = 1\n[manual.x]\npoints = 4\n"
    for rubric, named in [
        ("", "rubric = None"),
        ("rubric = []\n", "rubric = []"),
        ('rubric = [{ points = 3, criterion = "a" }]\n', "add up to 3 points, the part has 4"),
        ('rubric = [{ points = 4, criterion = "" }]\n', "criterion = ''"),
        ('rubric = [{ points = 4, criteria = "a" }]\n', "'criteria'"),
    ]:
        with pytest.raises(PolicyError) as refused:
            policy.load(write_policy(tmp_path, base + rubric))
        assert named in str(refused.value), (rubric, str(refused.value))
    good = 'rubric = [{ points = 3, criterion = "a" }, { points = 1, criterion = "b" }]\n'
    part = policy.load(write_policy(tmp_path, base + good)).manual["x"]
    assert [(c.points, c.text) for c in part.rubric] == [(3, "a"), (1, "b")]


def test_predictions_are_read_with_the_reasoning_around_them_and_when_they_ran(tmp_path):
    """The comments above, beside and below a MY_GUESS assignment come with its value, and the
    execution counts say whether the guess ran before the measurement after it."""
    from exercises.sandbox import toolkit

    cells = [
        {
            "cell_type": "code",
            "execution_count": 3,
            "source": "# I think threads lose: the GIL\nMY_GUESS = {'a': 2}  # x2\n# and so on\n\nz = 1",
        },
        {"cell_type": "code", "execution_count": 5, "source": "measure()"},
        {"cell_type": "code", "execution_count": 9, "source": "MY_GUESS_LATE = 3"},
        {"cell_type": "code", "execution_count": 7, "source": "measure()"},
        {"cell_type": "code", "execution_count": None, "source": "%time\nMY_GUESS_NONE = None"},
    ]
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells}))
    found = toolkit.notebook_guesses(str(tmp_path))["notebooks"]["nb.ipynb"]
    assert found["MY_GUESS"] == {
        "value": "{'a': 2}",
        "reasoning": "# I think threads lose: the GIL\nMY_GUESS = {'a': 2}  # x2\n# and so on",
        "ran": "before",
    }
    assert found["MY_GUESS_LATE"]["ran"] == "after"
    assert found["MY_GUESS_NONE"]["ran"] == "not run"
    guess = Prediction(**{k: v for k, v in found["MY_GUESS"].items()})
    assert guess.own_comments == ["# I think threads lose: the GIL", "# x2", "# and so on"]


# ------------------------------------------------------------------------------------------------
# Grading at scale: where the work is, what is kept between runs, the gradebook an LMS takes
# ------------------------------------------------------------------------------------------------


def test_a_students_work_is_found_where_they_put_it_or_refused_naming_their_files(tmp_path):
    """At the top, in a release clone, inside the one folder it was uploaded in (a release
    clone inside one too); refused, naming the student's own paths, when no folder or several
    hold question files. Links are never followed."""

    def submission(name: str, files: list[str]) -> Path:
        folder = tmp_path / name
        for file in files:
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            (folder / file).write_text("# work\n")
        folder.mkdir(exist_ok=True)
        return folder

    P = PurePosixPath
    cases = {
        "flat": (["q1_chunks.py", "notes/q2_overhead.py"], inputs.Work(P("."))),
        "clone": (
            ["exercises/student/q1_chunks.py", "notebooks/01.ipynb", "q9.py"],
            inputs.Work(P("exercises/student"), P("notebooks")),
        ),
        "uploaded": (
            ["myfolder/q1_chunks.py", "myfolder/q2_overhead.py"],
            inputs.Work(P("myfolder")),
        ),
        "zip-of-clone": (
            ["hw-main/exercises/student/q6_sweep.json", "hw-main/notebooks/01.ipynb"],
            inputs.Work(P("hw-main/exercises/student"), P("hw-main/notebooks")),
        ),
        "mac-zip": (["__MACOSX/q1_chunks.py", "work/q1_chunks.py"], inputs.Work(P("work"))),
    }
    for name, (files, expected) in cases.items():
        assert inputs.find_work(submission(name, files)) == expected, name
    assert "in the folder myfolder/" in inputs.find_work(tmp_path / "uploaded").note
    assert inputs.find_work(tmp_path / "flat").note == ""

    for name, files, named in [
        ("two-folders", ["a/q1_chunks.py", "b/q1_chunks.py", "b/q2_overhead.py"], "a/q1_chunks.py"),
        ("nothing", ["essay.txt", "sub/answers.md"], "sub/answers.md"),
        ("empty", [], "no files"),
    ]:
        with pytest.raises(inputs.SubmissionRefused) as refused:
            inputs.find_work(submission(name, files))
        assert named in str(refused.value) and str(tmp_path) not in str(refused.value), name
    linked = submission("linked", ["elsewhere.txt"])
    (linked / "exercises").symlink_to(EXERCISES)  # would reach the solutions
    with pytest.raises(inputs.SubmissionRefused, match="no question file"):
        inputs.find_work(linked)

    # Staged: only the work (and the clone's notebooks); refused, everything, for the hand parts.
    notes, refused = inputs.stage(tmp_path / "zip-of-clone", tmp_path / "copy")
    assert refused == "" and sorted(
        p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*.*")
    ) == ["notebooks/01.ipynb", "q6_sweep.json"]
    assert notes == [
        "your question files were in the folder hw-main/exercises/student/: graded from there"
    ]
    notes, refused = inputs.stage(tmp_path / "two-folders", tmp_path / "copy2")
    assert "more than one folder" in refused and (tmp_path / "copy2/b/q2_overhead.py").exists()


def test_the_gradebook_leaves_pending_parts_blank_and_fills_the_total_once_all_are_scored():
    due = POLICY.late.due
    late = due + POLICY.late.grace + timedelta(days=1, hours=1)  # two started days
    pending = made_up_grade(submitted=late)
    complete = made_up_grade(
        submitted=late,
        manual={
            part: ManualScore(part_points.points / 2) for part, part_points in POLICY.manual.items()
        },
    )
    header = reports.gradebook_header(POLICY)
    row = dict(zip(header, reports.gradebook_row(pending)))
    assert [row[part] for part in POLICY.manual] == [""] * len(POLICY.manual)
    assert row["manual"] == row["total"] == "" and row["pending"] == " ".join(POLICY.manual)
    row = dict(zip(header, reports.gradebook_row(complete)))
    share = 2 * POLICY.late.per_day
    hand = sum(part.points / 2 for part in POLICY.manual.values())
    assert row["pending"] == "" and row["manual"] == hand
    # One late rule on both paths: the checks' points lose their share, the hand scores none.
    # Gradescope's total is its autograder's score plus the hand scores entered there, and the
    # autograder's score is that of the grade with nothing graded by hand yet.
    assert row["total"] == reports.points(complete.automatic * (1 - share) + hand)
    assert row["total"] == reports.points(reports.results_json(pending)["score"] + hand)
    assert reports.results_json(complete)["score"] == row["total"]


def test_what_a_run_saves_reads_back_the_same_and_a_strange_file_is_refused(tmp_path):
    from exercises.grading import saved

    record = saved.Record(
        "ann",
        "s-1",
        "ok",
        passed=["q1/public/test_a"],
        hints={"q1/hidden/test_b": "expected 3"},
        notes=["files: x: not a regular file, left out"],
        materials=Materials(
            "I measured",
            {"CPUS": "2"},
            {"01.ipynb": {"MY_GUESS": Prediction("1", "# why", "before", "01.ipynb/MY_GUESS")}},
        ),
        seed=7,
        submission="abc",
        judged_by="def",
        graded_at="2026-11-28T10:00:00+00:00",
        submitted=POLICY.late.due,
        manual={"predictions": ManualScore(3.5, "ok")},
    )
    saved.save(tmp_path, [record, saved.Record("bob", "bob", "not graded")])
    assert saved.load(tmp_path) == {"ann": record, "bob": saved.Record("bob", "bob", "not graded")}
    assert saved.load(tmp_path / "none") == {}
    (tmp_path / saved.FILE).write_text('{"version": 99}')
    with pytest.raises(saved.SavedError, match="move it away"):
        saved.load(tmp_path)


def test_the_time_for_a_class_elsewhere_is_labelled_computed():
    from exercises.grading import timing

    here = timing.estimate(10.0, 6.0, 2, 2.0, 200, cpus=2, here=2, start=4)
    assert here["seconds"] == 1204 and "measured here" in here["how"]
    elsewhere = timing.estimate(10.0, 6.0, 2, 2.0, 200, cpus=8, here=2, start=4)
    efficiency = 10.0 / 6.0 / 2
    assert elsewhere["seconds"] == round(200 * 10.0 / (8 * efficiency) + 4)
    assert elsewhere["how"].startswith("computed, not measured")
    cpu_bound = timing.estimate(10.0, 6.0, 2, 20.0, 200, cpus=8, here=2)
    assert cpu_bound["seconds"] == 200 * 20 // 8  # the CPU time is a floor


def test_the_guides_times_are_those_of_the_results_file():
    """Words follow numbers: the guide's timing section is what the timing command writes from
    its results file, which says when, where, at what load, with which command and commit."""
    from exercises.grading import timing

    path = timing.DEFAULT_OUT
    document = json.loads(path.read_text())
    assert {"started", "ended", "command", "commit", "load_before", "load_after"} <= set(
        document["run"]
    )
    assert document["same_totals"] and document["machine"]["logical_cpus"]
    guide = (EXERCISES / "INSTRUCTORS.md").read_text()
    section = guide[guide.index(timing.GUIDE_START) : guide.index(timing.GUIDE_END)]
    expected = timing.guide_text(document, str(path.relative_to(REPO)))
    assert section == f"{timing.GUIDE_START}\n{expected}\n"
    assert any(
        item["cpus"] == 8 and "computed, not measured" in item["how"]
        for item in document["estimates"]
    )
