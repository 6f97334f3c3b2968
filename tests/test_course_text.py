"""The words students read: multiple-choice options whose right answer cannot be told by its
form, a release that speaks to students, and notebooks that say what they teach and which
exercise practises it.

Instructor-only (it reads the solutions), like ``tests/test_course.py``.
"""

from __future__ import annotations

import ast
import collections
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest

from exercises import grade, options, release
from exercises.grading import policy
from exercises.grading.policy import LatePolicy

REPO = Path(__file__).resolve().parent.parent
STUDENT = REPO / "exercises" / "student"

#: An option of a multiple-choice question, in the comment above its ``NAME = None``:
#: ``#:   - text``, continued on ``#:`` lines indented past the dash. No letter: each student
#: has their own (``exercises/options.py``).
OPTION = re.compile(r"^#:\s+- (?P<text>.*)$")
#: The longest option may be at most this many times the shortest.
MOST_LENGTH_RATIO = 1.2


def multiple_choice(path: Path) -> dict[str, list[str]]:
    """``{NAME: [option text, ...]}`` for each ``NAME = None`` of a student file whose comment
    lists options, in the file's order."""
    lines = path.read_text().splitlines()
    holes = {
        node.lineno: target.id
        for node in ast.parse("\n".join(lines)).body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and node.value.value is None
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    questions = {}
    for lineno, name in holes.items():
        comment = []
        for line in reversed(lines[: lineno - 1]):
            if not line.startswith("#:"):
                break
            comment.insert(0, line)
        options: list[list[str]] = []
        for line in comment:
            match = OPTION.match(line)
            if match:
                options.append([match["text"].strip()])
            elif options and line.startswith("#:     "):
                options[-1].append(line[2:].strip())
        if options:
            questions[name] = [" ".join(words) for words in options]
    return questions


def length_problems(options: list[str], right: int) -> list[str]:
    """What gives the right answer (``options[right]``) away by its length: options of uneven
    length, or the right one the only longest or only shortest. Empty when nothing does."""
    lengths = [len(text) for text in options]
    others = [length for at, length in enumerate(lengths) if at != right]
    longest, shortest = max(lengths), min(lengths)
    problems = []
    if longest > MOST_LENGTH_RATIO * shortest:
        problems.append(f"lengths differ by more than {MOST_LENGTH_RATIO - 1:.0%}: {lengths}")
    if lengths[right] == longest and longest not in others:
        problems.append(f"the right answer {right} is the only longest option: {lengths}")
    if lengths[right] == shortest and shortest not in others:
        problems.append(f"the right answer {right} is the only shortest option: {lengths}")
    return problems


def test_the_option_reader_and_the_length_check_catch_a_telltale_question(tmp_path):
    path = tmp_path / "q9_probe.py"
    path.write_text(
        "#: Which?\n"
        "#:   - a short option\n"
        "#:   - the right option, which explains itself at length, as the right one\n"
        "#:     tends to do when nobody counts\n"
        "#:   - another short one\n"
        "WHICH = None\n"
        "NUMBER = None\n"
    )
    options = multiple_choice(path)["WHICH"]
    assert options[1].endswith("as the right one tends to do when nobody counts")
    assert set(multiple_choice(path)) == {"WHICH"}
    problems = length_problems(options, 1)
    assert len(problems) == 2 and "only longest" in problems[1], problems
    even = ["x" * 100, "y" * 110, "z" * 110]
    assert length_problems(even, 1) == []
    assert [problem[:40] for problem in length_problems(even, 0)] == [
        "the right answer 0 is the only shortest "
    ]


def test_each_multiple_choice_question_lists_the_options_each_student_letters():
    """The stubs list each question's options, unlettered, as ``exercises/options.py`` has them
    (in alphabetical order, which says nothing of which is right), and no answer can be told
    by its length. Each student letters them with ``python -m exercises.options``."""
    answers = release.answers()  # the solutions' letters, in the course's order (no student)
    questions = {
        name: (path.name, listed)
        for path in sorted(STUDENT.glob("q*.py"))
        for name, listed in multiple_choice(path).items()
    }
    assert (
        set(questions)
        == set(options.QUESTIONS)
        == {
            "WHAT_THE_MODEL_LEAVES_OUT",
            "WHY_SUBPROC_WORKERS_WAIT",
        }
    )
    for name, (file, listed) in questions.items():
        question = options.QUESTIONS[name]
        assert (file, listed) == (question.file, list(question.options)), name
        assert listed == sorted(listed), name
        right = options.LETTERS.index(answers[name])
        assert not length_problems(listed, right), (
            f"{file}: {name}: {length_problems(listed, right)}"
        )
        assert "python -m exercises.options YOUR_STUDENT_ID" in (STUDENT / file).read_text()


def test_each_student_letters_the_options_in_an_order_of_their_own():
    """The order comes from the student id alone: the same every time, different between
    students, the right letter spread over the letters; the command prints it."""
    name = "WHY_SUBPROC_WORKERS_WAIT"
    assert options.order(name, "") == [0, 1, 2]  # no student: the course's order
    letters = {student: options.letter_of(name, 1, student) for student in map(str, range(300))}
    assert letters == {student: options.letter_of(name, 1, student) for student in letters}
    assert set(letters.values()) == {"a", "b", "c"}
    assert min(collections.Counter(letters.values()).values()) > 60
    printed = subprocess.run(
        [sys.executable, "-m", "exercises.options", "s-7"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for name in options.QUESTIONS:
        for letter, text in options.lettered(name, "s-7").items():
            assert f'"{letter}": {text[:40]}' in " ".join(printed.split()), (letter, printed)


# ------------------------------------------------------------------------------------------------
# The release speaks to students
# ------------------------------------------------------------------------------------------------

#: What only the instructor's copy has or does: a student README must not send anyone there.
INSTRUCTOR_WORDS = ("make grade", "make release", "INSTRUCTORS", "solutions", "instructor's copy")
#: ``--json PATH`` in a command.
JSON_ARGUMENT = re.compile(r"--json\s+([\w./-]+)")


@pytest.fixture(scope="module")
def student_release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "course"
    release.build(out)
    return out


def test_the_release_readme_is_for_students(student_release):
    readme = (student_release / "README.md").read_text()
    assert readme != (REPO / "README.md").read_text()
    for words in INSTRUCTOR_WORDS:
        assert words.lower() not in readme.lower(), f"the release's README says {words!r}"
    assert "$" not in readme, "a $name of the template was left unfilled"
    rules = policy.load()
    assert readme.startswith(f"# {rules.title}\n")
    for question in rules.questions.values():
        stub = next((REPO / "exercises" / "student").glob(f"{question.id}_*.py")).name
        row = f"| {question.id}: {question.title} | `exercises/student/{stub}` | {question.max_points:g}:"
        assert row in readme, row
    assert f"In all, {rules.max_points:g} points." in readme
    assert "python -m pytest exercises/checks" in readme  # how to check
    assert rules.late.due is not None and rules.late.due.strftime("%Y-%m-%d %H:%M") in readme
    assert f"loses {rules.late.per_day:.0%} of its points" in readme
    # Every file the README names is in the release.
    for name in re.findall(r"`((?:exercises|notebooks)/[\w./-]+\.\w+)`", readme):
        if name != release.Q6_JSON:  # the student writes it
            assert (student_release / name).is_file(), name


def test_the_release_has_the_mit_license(student_release):
    text = (student_release / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 The vecenvs authors\n"), text[:80]
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    assert not (student_release / "exercises" / "student_readme.md").exists()


def test_question_6s_sweep_goes_where_the_grader_collects_it(student_release):
    """The stub, the release's README and the exercises' README all write the sweep into the
    folder the grader copies from a clone (``exercises/student``), under the name the checks
    read."""
    checks = (REPO / "exercises" / "checks" / "test_q6_measure.py").read_text()
    name = re.search(r'^JSON_FILE = "([^"]+)"$', checks, re.M).group(1)
    collected = (grade.RELEASE_WORK / name).as_posix()
    assert collected == release.Q6_JSON
    for file in ("exercises/student/q6_measure.py", "exercises/README.md", "README.md"):
        text = (student_release / file).read_text()
        paths = JSON_ARGUMENT.findall(text)
        assert paths and set(paths) == {collected}, f"{file}: --json {paths}, expected {collected}"


def test_the_due_sentence_follows_the_policy():
    due = datetime(2026, 5, 15, 21, 0, tzinfo=timezone.utc)
    late = LatePolicy(due=due, grace=timedelta(minutes=30), per_day=0.25, last_day=2)
    assert release._due_sentence(late) == (
        "Due **2026-05-15 21:00 UTC**. Work handed in after that (with 30 minutes' grace) loses "
        "25% of its points for each day late, a day begun counting as a whole one, and scores "
        "nothing more than 2 days late."
    )
    assert release._due_sentence(LatePolicy()) == "Your instructor tells you when the work is due."
    assert release._due_sentence(LatePolicy(due=due)) == "Due **2026-05-15 21:00 UTC**."


def test_a_template_with_a_name_the_release_does_not_fill_is_refused(tmp_path):
    template = tmp_path / "readme.md"
    template.write_text("# $title\n\n$homework\n")
    with pytest.raises(release.ReleaseError, match=r"\$name the release does not fill in"):
        release.student_readme(policy.load(), template)


# ------------------------------------------------------------------------------------------------
# Each notebook says what it teaches and which exercise practises it
# ------------------------------------------------------------------------------------------------

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))
GOALS = "**After this notebook you can:**"
NO_EXERCISE = "No graded question practises this notebook"
#: A question a notebook's last cell names, and the command that checks it.
NAMED = re.compile(r"\*\*Question (\d+)\*\*, `exercises/student/(q(\d+)_\w+\.py)`")
COMMAND = re.compile(r"`\.venv/bin/python -m pytest exercises/checks/(test_(q\d+_\w+)\.py)`")
#: A row of the exercises' README: the question's file, and the notebooks it builds on.
BACKGROUND = re.compile(r"^\| `(q\d+)_\w+\.py` \|.*\| notebooks? ([\d, and]+) \|$", re.M)


def practised(path: Path) -> list[str]:
    """The questions (``q1``...) a notebook's closing cell says practise it, after checking that
    the cell names each with its file and the command that checks it."""
    notebook = nbformat.read(path, as_version=4)
    opening, closing = notebook.cells[1], notebook.cells[-1]
    assert opening.cell_type == "markdown" and opening.source.startswith(GOALS), (
        f"{path.name}: the cell after the title should start with {GOALS!r}"
    )
    bullets = [line for line in opening.source.splitlines() if line.startswith("- ")]
    assert 2 <= len(bullets) <= 4, f"{path.name}: {len(bullets)} goals, expected 2 to 4"
    assert closing.cell_type == "markdown" and closing.source.startswith("## Practise it\n"), (
        f"{path.name}: the last cell should be '## Practise it'"
    )
    named = NAMED.findall(closing.source)
    commands = COMMAND.findall(closing.source)
    assert [stub.removesuffix(".py") for _, stub, _ in named] == [
        module for _, module in commands
    ], f"{path.name}: each question needs its check command: {named} / {commands}"
    for number, stub, question_number in named:
        assert number == question_number, f"{path.name}: Question {number} is {stub}"
        assert (STUDENT / stub).is_file(), f"{path.name} names {stub}, which is not there"
    for check, _ in commands:
        assert (REPO / "exercises" / "checks" / check).is_file(), f"{path.name} names {check}"
    if not named:
        assert NO_EXERCISE in closing.source, (
            f"{path.name}: name its exercise, or say there is none"
        )
    return [f"q{number}" for number, _, _ in named]


def test_every_notebook_says_what_it_teaches_and_which_exercise_practises_it():
    assert len(NOTEBOOKS) >= 11
    by_question: dict[str, set[int]] = {}
    for path in NOTEBOOKS:
        for question in practised(path):
            by_question.setdefault(question, set()).add(int(path.name[:2]))
    readme = (REPO / "exercises" / "README.md").read_text()
    background = {
        question: {int(number) for number in re.findall(r"\d+", notebooks)}
        for question, notebooks in BACKGROUND.findall(readme)
    }
    assert len(background) == 6, background
    assert by_question == background, (
        "the notebooks that name each question (left) and exercises/README.md's background "
        f"column (right) disagree: {by_question} / {background}"
    )


def test_the_notebook_reader_refuses_a_question_without_its_command(tmp_path):
    good = nbformat.read(NOTEBOOKS[0], as_version=4)
    assert practised(NOTEBOOKS[0]) == ["q6"]
    good.cells[-1].source = good.cells[-1].source.replace("`.venv/bin/python -m pytest", "`pytest")
    path = tmp_path / NOTEBOOKS[0].name
    nbformat.write(good, path)
    with pytest.raises(AssertionError, match="needs its check command"):
        practised(path)


# ------------------------------------------------------------------------------------------------
# Question 6's worked example is computed from its results file
# ------------------------------------------------------------------------------------------------

SOLUTIONS = REPO / "exercises" / "solutions"


def worked_example(tmp_path: Path, report: dict, monkeypatch) -> types.ModuleType:
    """The q6 solution, run beside ``report`` as its q6_sweep.json (and question 2's solution,
    which it imports by name from its folder, as the checks' sandbox lets it)."""
    folder = tmp_path / f"worked-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for name in ("q2_overhead.py", "q6_measure.py"):
        shutil.copy(SOLUTIONS / name, folder / name)
    (folder / "q6_sweep.json").write_text(json.dumps(report))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "q2_overhead", raising=False)
    spec = importlib.util.spec_from_file_location("worked_q6", folder / "q6_measure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_worked_example_says_what_its_file_measured(tmp_path, monkeypatch):
    report = json.loads((SOLUTIONS / "q6_sweep.json").read_text())
    run = report["run"]
    assert run["command"].startswith("vecenvs bench ")
    example = worked_example(tmp_path, report, monkeypatch)
    assert run["command"] == example.COMMAND
    medians = {
        (result["config"]["backend"], result["config"]["num_envs"]): result["median"]
        for result in report["results"]
    }
    assert [
        (n, medians["gym-sync", n], medians["pool", n]) for n, _, _ in example.SWEEP
    ] == example.SWEEP
    assert len(example.SWEEP) >= 6
    text = example.EXPLANATION
    assert 100 <= len(text.split()) <= 400
    assert f"at {len(example.SWEEP)} values of N" in text and run["started"][:10] in text
    assert f"{run['load_before']:.2f} when the sweep started" in text
    busy = run["load_before"] >= example.BUSY_LOAD_PER_CPU * example.CPUS
    assert ("kept the machine busy" in text) == busy and ("the machine was quiet" in text) != busy
    said = "first kept up with the loop at N=" in text
    assert said == (example.BREAK_EVEN_N is not None), text
    assert ("never kept up" in text) == (example.BREAK_EVEN_N is None), text


def test_the_worked_example_follows_a_quiet_sweep_with_a_break_even(tmp_path, monkeypatch):
    """The same file made quiet, its pool slower than the loop below N=6 and faster from there:
    the words change with the numbers."""
    report = json.loads((SOLUTIONS / "q6_sweep.json").read_text())
    report["run"]["load_before"] = 0.02
    report["run"]["load_after"] = 0.9
    loop = {
        r["config"]["num_envs"]: r["median"]
        for r in report["results"]
        if r["config"]["backend"] == "gym-sync"
    }
    sizes = sorted(loop)
    pivot = sizes[len(sizes) // 2]
    for result in report["results"]:
        num_envs = result["config"]["num_envs"]
        if result["config"]["backend"] == "pool":
            result["median"] = loop[num_envs] * (1.3 if num_envs >= pivot else 0.6)
    example = worked_example(tmp_path, report, monkeypatch)
    text = example.EXPLANATION
    assert pivot == example.BREAK_EVEN_N
    assert f"first kept up with the loop at N={pivot}:" in text
    below = sizes[sizes.index(pivot) - 1]
    assert f"At N={below} it ran at 0.60x the loop: sharing" in text
    assert "the machine was quiet" in text and "busy" not in text
    assert "never kept up" not in text
    assert 100 <= len(text.split()) <= 400


def test_question_6_imports_question_2_by_name_as_a_script_too(tmp_path):
    """The stub's way to use question 2 (``from q2_overhead import fit_model``) works when the
    file runs as a script; the checks' sandbox puts the folder on the path (tests/test_exercises.py
    grades a q6 that does it, in full)."""
    stub = (REPO / "exercises" / "student" / "q6_measure.py").read_text()
    assert "from q2_overhead import break_even_num_envs, fit_model" in stub
    for name in ("q2_overhead.py", "q6_measure.py", "q6_sweep.json"):
        shutil.copy(SOLUTIONS / name, tmp_path / name)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "q6_measure.py")],
        cwd=REPO,  # not the file's folder: Python puts the script's folder on the path itself
        env={**os.environ, "PYTHONPATH": str(REPO)},  # (q2's Part B letter uses exercises/)
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
