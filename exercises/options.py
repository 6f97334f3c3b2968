"""Part B's multiple-choice questions, their options lettered in an order of each student's own.

    python -m exercises.options YOUR_STUDENT_ID

prints each question with its options lettered for you: answer with your letter. Everyone has
the same options; the order comes from the student id (as your instructor's class list has it,
which your feedback names), so the right letter differs from one student to the next and a
letter passed around says nothing. The same id gives the same order every time, here and when
your work is graded (and graded again).

The order is a hash of the question's name and the id: anyone may compute anyone's, which gives
nothing away that the options' words do not (knowing which option is right is the question).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import textwrap
from dataclasses import dataclass

LETTERS = "abcdefgh"


@dataclass(frozen=True)
class Question:
    """One multiple-choice question of Part B: the file it is in, the question, and its
    options in alphabetical order (an order nobody chose, so it says nothing of which is
    right; no student sees them lettered in it)."""

    file: str
    text: str
    options: tuple[str, ...]


QUESTIONS = {
    "WHAT_THE_MODEL_LEAVES_OUT": Question(
        "q2_overhead.py",
        "Notebook 4 measured a pool of 8 workers on 2 CPUs stepping slower than a pool of 2, "
        "while the model predicts the same speed-up for both. Which part of a real pool does "
        "the model leave out?",
        (
            "nothing: c = min(K, N, cpus) is 2 for both pools, so the model is right that they "
            "tie; the gap is noise in the measurement",
            "t_env is one constant, but each env step slows with more workers: 8 processes "
            "share the CPUs' caches and memory",
            "t_os is one constant, but each step() costs more with more workers: each is woken "
            "and waited for, 8 taking turns on 2 CPUs",
        ),
    ),
    "WHY_SUBPROC_WORKERS_WAIT": Question(
        "q5_read_profile.py",
        "Why are SubprocVecEnv's workers idle most of the time on CartPole?",
        (
            "a CartPole step is slow (milliseconds of physics), so each worker is mostly "
            "waiting for its own env to finish",
            "one CartPole step takes microseconds; then each worker waits for the parent to "
            "gather all 8 answers and reply",
            "the GIL lets one worker run Python at a time, so the other 7 wait for the lock "
            "while the one holding it steps",
        ),
    ),
}


def order(name: str, student: str) -> list[int]:
    """The question's options (their indices in :data:`QUESTIONS`) in ``student``'s order: the
    first is their ``a``. With no student id, the course's own order."""
    count = len(QUESTIONS[name].options)
    if not student:
        return list(range(count))

    def key(index: int) -> bytes:
        return hashlib.sha256(f"{name}\n{student}\n{index}".encode()).digest()

    return sorted(range(count), key=key)


def lettered(name: str, student: str) -> dict[str, str]:
    """``{letter: option}`` of a question, for ``student``."""
    options = QUESTIONS[name].options
    return {LETTERS[at]: options[index] for at, index in enumerate(order(name, student))}


def letter_of(name: str, option: int, student: str) -> str:
    """The letter ``student`` sees option ``option`` (an index in :data:`QUESTIONS`) under."""
    return LETTERS[order(name, student).index(option)]


def describe(student: str) -> str:
    """Every question, its options lettered for ``student``: what the command prints."""
    lines = [f"Part B's options, lettered for student id {student!r}:"]
    for name, question in QUESTIONS.items():
        lines += ["", f"{question.file}, {name}:", *textwrap.wrap(question.text, 96)]
        for letter, option in lettered(name, student).items():
            lines += textwrap.wrap(
                option, 96, initial_indent=f'  "{letter}": ', subsequent_indent="       "
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exercises.options", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("student", help="your student id, as your instructor's class list has it")
    args = parser.parse_args(argv)
    if not args.student.strip():
        parser.error("give your student id, e.g. python -m exercises.options s1234567")
    print(describe(args.student.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
