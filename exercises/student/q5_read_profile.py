"""Exercise 5: read a profile and say where the time goes.

``exercises/data/profiles.json`` holds two py-spy recordings of CartPole-v1 on a 2-core VM,
already sorted by ``vecenvs.profile`` into categories (notebook 5 shows how): SubprocVecEnv
with N=8, and the pool (2 workers: the calling process steps half the envs, one worker the
other half) with N=128. Each row is ``{"process", "category", "samples"}``; py-spy sampled
every process 100 times a second, busy or idle, so a process's samples are its wall-clock time.

Part A: write the two functions. Part B: replace each ``None`` with your answer, using your
functions on the data (``load_profiles()`` reads it for you). The checks you run say whether an
answer has the right form; whether it is right is graded later.

Check: ``pytest exercises/checks -k q5``.
"""

from __future__ import annotations

import json
from pathlib import Path

import exercises

DATA = Path(exercises.__file__).resolve().parent / "data" / "profiles.json"
SUBPROC = "subproc, CartPole-v1, N=8"
POOL = "pool (num_workers=2), CartPole-v1, N=128"


def load_profiles(path: Path = DATA) -> dict[str, list[dict]]:
    """Profile name -> its rows (given: you don't need to change this)."""
    return json.loads(Path(path).read_text())["profiles"]


# ---------------------------------------------------------------- Part A


def shares(rows: list[dict], process: str) -> dict[str, float]:
    """``{category: share}`` of one process's samples, the shares summing to 1.

    ``process`` is a process name such as ``"parent"`` or ``"worker 0"``, or ``"workers"``
    for all the processes except the parent pooled together (add up their samples first).
    """
    raise NotImplementedError("Exercise 5: write shares")


def busiest(rows: list[dict], process: str) -> str:
    """The category with the largest share of ``process``'s samples (``process`` as in ``shares``)."""
    raise NotImplementedError("Exercise 5: write busiest")


# ---------------------------------------------------------------- Part B
# Categories: "env compute", "serialization", "pipe & shm I/O", "waiting", "bookkeeping", "other".

#: SubprocVecEnv, N=8: where does the parent spend most of its time?
SUBPROC_PARENT_MOSTLY = None

#: SubprocVecEnv, N=8: and its workers, pooled?
SUBPROC_WORKERS_MOSTLY = None

#: SubprocVecEnv, N=8: what share of the workers' time (pooled, 0 to 1) is env compute?
SUBPROC_WORKERS_ENV_SHARE = None

#: The pool, N=128: where does its worker spend most of its time?
POOL_WORKERS_MOSTLY = None

#: Why are SubprocVecEnv's workers idle most of the time on CartPole?
#: One letter, from your own list: `python -m exercises.options YOUR_STUDENT_ID` letters these
#: options in an order of your own (your id as your instructor's class list has it).
#:   - a CartPole step is slow (milliseconds of physics), so each worker is mostly waiting
#:     for its own env to finish
#:   - one CartPole step takes microseconds; then each worker waits for the parent to gather
#:     all 8 answers and reply
#:   - the GIL lets one worker run Python at a time, so the other 7 wait for the lock while
#:     the one holding it steps
WHY_SUBPROC_WORKERS_WAIT = None
