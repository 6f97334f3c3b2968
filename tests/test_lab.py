"""Is the lab ready on this machine? The student release's own check (``make test`` in a
student's copy, where it is the only test file; here one of the suite's): the package steps envs
in worker processes and ends them, the course's data is where the notebooks read it, and every
question's public checks can run here, their sandbox starting Python. It checks nothing of
anyone's answers: ``python -m pytest exercises/checks`` does.

Nothing here may need the developers' side of the repository (``tests/conftest.py``, the other
test files, the instructor's files): the release has none of it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import nbformat
import numpy as np
import psutil

import vecenvs
from exercises.sandbox import isolation
from exercises.sandbox.client import StudentProcess

ROOT = Path(__file__).resolve().parent.parent


def test_the_pool_steps_envs_in_worker_processes_and_ends_them():
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    with vecenvs.PoolVecEnv([lambda: gym.make("CartPole-v1")] * 4, num_workers=2) as envs:
        observations, _ = envs.reset(seed=0)
        assert observations.shape == (4, 4)
        observations, rewards, *_ = envs.step(np.zeros(4, dtype=np.int64))
        assert rewards.tolist() == [1.0] * 4
    left = [
        child
        for child in psutil.Process().children(recursive=True)
        if child.pid not in before and child.status() != psutil.STATUS_ZOMBIE
    ]
    assert psutil.wait_procs(left, timeout=10)[1] == []


def test_the_notebooks_and_their_data_are_there():
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    assert len(notebooks) >= 11
    for path in notebooks:
        nbformat.validate(nbformat.read(path, as_version=4))
    profiles = sorted((ROOT / "tests" / "data" / "profiles").glob("*.speedscope.json"))
    assert profiles, "notebook 5's recorded profiles"
    for path in [*profiles, ROOT / "exercises" / "data" / "profiles.json"]:
        assert json.loads(path.read_text())


def test_every_question_has_its_file_and_public_checks_that_collect():
    questions = sorted(
        re.match(r"(q\d+)_", path.name).group(1)
        for path in (ROOT / "exercises" / "student").glob("q*_*.py")
    )
    assert questions == [f"q{number}" for number in range(1, 7)]
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "exercises/checks", "--collect-only", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listing.returncode == 0, listing.stdout + listing.stderr
    for question in questions:
        assert re.search(rf"test_{question}_\w+\.py::test_", listing.stdout), question


def test_the_checks_can_run_student_code_here(tmp_path, capsys):
    sandbox = isolation.choose()
    student = StudentProcess(tmp_path, sandbox)
    try:
        student.start()  # Python started in the sandbox, and said hello
    finally:
        student.stop()
    with capsys.disabled():
        print(f"\nyour checks run student code in: {sandbox.description}")
