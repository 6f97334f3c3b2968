"""The graded exercises: the grader scores the reference solutions, untouched student files and
broken ones correctly, prints hints for failures, and ends within its deadlines without leaving
processes behind.

Each grading runs ``python -m exercises.grade`` as a user would, over a temp folder of
submissions (one subfolder per student).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
QUESTIONS = ("q1", "q2", "q3", "q4", "q5")

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

# A student who got some things wrong: q1 drops the remainder, q3 returns lists and reads the
# pipes with no deadline (a hang) and ignores ok, q4 lets an env's exception kill the worker,
# q5 has the functions right and two answers wrong.
BROKEN = {
    "q1_chunks.py": """
        def split_envs(num_envs, num_workers):
            size = num_envs // num_workers
            return [range(w * size, (w + 1) * size) for w in range(num_workers)]
    """,
    "q3_step_wait.py": """
        from exercises.pipe_env import PipeVecEnv

        class MyPipeVecEnv(PipeVecEnv):
            def step_wait(self, timeout=None):
                payloads = [pipe.recv()[1] for pipe in self.parent_pipes]
                self.waiting = False
                observations, rewards, terminations, truncations, infos = zip(*payloads)
                return list(observations), list(rewards), list(terminations), list(truncations), list(infos)
    """,
    "q4_worker_errors.py": """
        from exercises.pipe_env import Command

        def careful_worker(pipe, env_fn):
            env = env_fn()
            while True:
                command, data = pipe.recv()
                if command is Command.CLOSE:
                    pipe.send((True, None))
                    break
                if command is Command.RESET:
                    pipe.send((True, env.reset(seed=data)))
                else:
                    pipe.send((True, env.step(data)))
            env.close()
    """,
}

# A student whose code hangs where pytest-timeout cannot reach (SIGALRM blocked), after starting
# a child process of its own: only the grader's hard deadline ends it, process group and all.
HANGING_Q1 = """
    import signal
    import subprocess
    import sys
    import time

    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(600)
"""


def make_submissions(root: Path, students: dict[str, dict[str, str]]) -> Path:
    """``root/<student>/``: the untouched student files, with some replaced."""
    for student, replaced in students.items():
        folder = root / student
        shutil.copytree(EXERCISES / "student", folder, ignore=shutil.ignore_patterns("__pycache__"))
        for filename, source in replaced.items():
            (folder / filename).write_text(textwrap.dedent(source))
    return root


def grade(submissions: Path, *options: str, marker: str = "", timeout: float = 150) -> subprocess.CompletedProcess:
    environment = {**os.environ, "GRADE_TEST_MARKER": marker}
    return subprocess.run([sys.executable, "-m", "exercises.grade", str(submissions), *options],
                          check=False, cwd=REPO, env=environment, capture_output=True, text=True, timeout=timeout)


def table_row(output: str, student: str) -> list[str]:
    for line in output.splitlines():
        if line.split()[:1] == [student]:
            return line.split()
    raise AssertionError(f"no row for {student} in the grader's table:\n{output}")


def processes_with_marker(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("GRADE_TEST_MARKER") == marker:
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_grader_scores_reference_untouched_and_broken_submissions(tmp_path):
    solutions = {path.name: path.read_text() for path in (EXERCISES / "solutions").glob("q*.py")}
    submissions = make_submissions(tmp_path / "class", {
        "alice": solutions,   # the reference solutions
        "bob": {},            # the untouched student files
        "carol": {**solutions, **BROKEN, "q5_read_profile.py": solutions["q5_read_profile.py"]
                  .replace('SUBPROC_PARENT_MOSTLY = busiest(_PROFILES[SUBPROC], "parent")',
                           'SUBPROC_PARENT_MOSTLY = "pipe & shm I/O"')
                  .replace('WHY_SUBPROC_WORKERS_WAIT = "b"', 'WHY_SUBPROC_WORKERS_WAIT = "c"')},
    })
    marker = uuid.uuid4().hex
    done = grade(submissions, "--csv", str(tmp_path / "scores.csv"), "--test-timeout", "20", marker=marker)
    output = done.stdout
    assert done.returncode == 0, done.stdout + done.stderr

    assert table_row(output, "alice") == ["alice", "3/3", "5/5", "5/5", "5/5", "5/5", "23/23", "ok"], output
    assert table_row(output, "bob") == ["bob", "0/3", "0/5", "0/5", "0/5", "0/5", "0/23", "ok"], output
    assert table_row(output, "carol") == ["carol", "1/3", "5/5", "2/5", "1/5", "3/5", "12/23", "ok"], output

    # The hints a student can act on, per failed check.
    assert "not done yet: Exercise 3: write step_wait" in output
    assert "observations is a list: expected a numpy array" in output          # carol's shapes
    assert "did not return within 8 s" in output                              # carol's hang
    assert "died while answering STEP" in output                               # carol's worker
    assert "SUBPROC_PARENT_MOSTLY = 'pipe & shm I/O': not where most of the time goes" in output
    assert "alice:" not in output, "the reference solutions should need no hint"

    with open(tmp_path / "scores.csv", newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert [rows["carol"][q] for q in QUESTIONS] == ["1", "5", "2", "1", "3"]
    assert rows["alice"]["total"] == rows["alice"]["out_of"] == "23"
    assert processes_with_marker(marker) == []


def test_hard_deadline_kills_a_hung_student_and_everything_it_started(tmp_path):
    submissions = make_submissions(tmp_path / "class", {"dave": {"q1_chunks.py": HANGING_Q1}})
    marker = uuid.uuid4().hex
    done = grade(submissions, "--student-timeout", "6", "--test-timeout", "60", marker=marker, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert table_row(done.stdout, "dave") == ["dave", "0/3", "0/5", "0/5", "0/5", "0/5", "0/23", "timed", "out"]
    assert "did not finish within 6 s" in done.stdout
    # The student's pytest and the child its code started were killed with their process group.
    assert processes_with_marker(marker) == []


def test_reference_solutions_pass_when_checked_directly():
    """What a student runs on their own work: ``pytest exercises/checks --submission DIR``."""
    done = subprocess.run([sys.executable, "-m", "pytest", "exercises/checks", "-q",
                           "--submission", "exercises/solutions"],
                          check=False, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "23 passed" in done.stdout
