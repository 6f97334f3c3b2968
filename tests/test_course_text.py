"""The words students read: multiple-choice options whose right answer cannot be told by its
form, a release that speaks to students, and notebooks that say what they teach and which
exercise practises it.

Instructor-only (it reads the solutions), like ``tests/test_course.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from exercises import release

REPO = Path(__file__).resolve().parent.parent
STUDENT = REPO / "exercises" / "student"

#: An option of a multiple-choice question, in the comment above its ``NAME = None``:
#: ``#:   "a": text``, continued on ``#:`` lines indented past the letter.
OPTION = re.compile(r'^#:\s+"(?P<letter>[a-z])":\s*(?P<text>.*)$')
#: The longest option may be at most this many times the shortest.
MOST_LENGTH_RATIO = 1.2


def multiple_choice(path: Path) -> dict[str, dict[str, str]]:
    """``{NAME: {letter: option text}}`` for each ``NAME = None`` of a student file whose comment
    lists lettered options."""
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
        options: dict[str, list[str]] = {}
        letter = None
        for line in comment:
            match = OPTION.match(line)
            if match:
                letter = match["letter"]
                options[letter] = [match["text"].strip()]
            elif letter is not None:
                options[letter].append(line[2:].strip())
        if options:
            questions[name] = {key: " ".join(words) for key, words in options.items()}
    return questions


def length_problems(options: dict[str, str], right: str) -> list[str]:
    """What gives the right answer away by its length: options of uneven length, or the right
    one the only longest or only shortest. Empty when nothing does."""
    lengths = {letter: len(text) for letter, text in options.items()}
    others = [length for letter, length in lengths.items() if letter != right]
    longest, shortest = max(lengths.values()), min(lengths.values())
    problems = []
    if longest > MOST_LENGTH_RATIO * shortest:
        problems.append(f"lengths differ by more than {MOST_LENGTH_RATIO - 1:.0%}: {lengths}")
    if lengths[right] == longest and longest not in others:
        problems.append(f"the right answer {right!r} is the only longest option: {lengths}")
    if lengths[right] == shortest and shortest not in others:
        problems.append(f"the right answer {right!r} is the only shortest option: {lengths}")
    return problems


def test_the_option_reader_and_the_length_check_catch_a_telltale_question(tmp_path):
    path = tmp_path / "q9_probe.py"
    path.write_text(
        "#: Which?\n"
        '#:   "a": a short option\n'
        '#:   "b": the right option, which explains itself at length, as the right one\n'
        "#:        tends to do when nobody counts\n"
        '#:   "c": another short one\n'
        "WHICH = None\n"
        "NUMBER = None\n"
    )
    options = multiple_choice(path)["WHICH"]
    assert options["b"].endswith("as the right one tends to do when nobody counts")
    assert set(multiple_choice(path)) == {"WHICH"}
    problems = length_problems(options, "b")
    assert len(problems) == 2 and "only longest" in problems[1], problems
    even = {"a": "x" * 100, "b": "y" * 110, "c": "z" * 110}
    assert length_problems(even, "b") == []
    assert [problem[:40] for problem in length_problems(even, "a")] == [
        "the right answer 'a' is the only shortes"
    ]


def test_no_multiple_choice_answer_can_be_told_by_its_length():
    answers = release.answers()
    questions = {
        (path.name, name): options
        for path in sorted(STUDENT.glob("q*.py"))
        for name, options in multiple_choice(path).items()
    }
    names = {name for _, name in questions}
    assert {"WHAT_THE_MODEL_LEAVES_OUT", "WHY_SUBPROC_WORKERS_WAIT"} <= names, names
    for (file, name), options in questions.items():
        right = answers[name]
        assert right in options, (
            f"{file}: {name}'s answer {right!r} is not one of {sorted(options)}"
        )
        assert not length_problems(options, right), (
            f"{file}: {name}: {length_problems(options, right)}"
        )
