"""A pool step stays readable: it runs through three files of ours and at most 600 lines.

The functions one ``PoolVecEnv.step`` runs, in the caller (with its own chunk) and in a worker
(the loop of :func:`vecenvs.workers.run_worker` and what it calls), must all live in
``core.py``, ``workers.py`` and ``multi_env.py``, and add up to at most 600 lines, docstrings
included: what a student reads to follow a step from the call to the answer.
"""

from __future__ import annotations

import inspect
import os
import sys

import numpy as np

import vecenvs
from vecenvs import workers
from vecenvs.factory import env_fns_for

PACKAGE = os.path.dirname(vecenvs.__file__)
#: The worker process's own loop, which this process does not run: named here.
WORKER_LOOP = (
    workers._serve_with_control,
    workers._spin_until,
    workers._sleep_until_given,
    workers._wake_parent,
    workers.fence,
    workers._serve,
    workers.Doorbell.value,
    workers.Doorbell.sleep,
    workers.Doorbell.ring,
    workers._futex,
    workers.AdaptiveSpin.budget,
    workers.AdaptiveSpin.record,
)


def _functions_of_one_step() -> dict[tuple[str, int], object]:
    seen: dict[tuple[str, int], object] = {}

    def record(frame, event, arg):
        code = frame.f_code
        if (
            event == "call"
            and code.co_filename.startswith(PACKAGE)
            and os.sep + "envs" + os.sep not in code.co_filename
        ):
            seen[(code.co_filename, code.co_firstlineno)] = code
        return None

    with vecenvs.PoolVecEnv(env_fns_for("CartPole-v1", 8), num_workers=2) as envs:
        envs.reset(seed=0)
        actions = np.zeros(8, dtype=np.int64)
        envs.step(actions)  # warmed up: what the first step does once is not the step
        sys.setprofile(record)
        try:
            envs.step(actions)
        finally:
            sys.setprofile(None)
    for function in WORKER_LOOP:
        code = function.__code__
        seen[(code.co_filename, code.co_firstlineno)] = code
    return seen


def test_a_pool_step_runs_through_three_files_and_at_most_600_lines():
    functions = _functions_of_one_step()
    files = {os.path.relpath(file, PACKAGE) for file, _ in functions}
    assert files == {"core.py", "workers.py", "multi_env.py"}, files
    lines = sum(
        len(inspect.getsourcelines(code)[0])
        for code in functions.values()
        if code.co_name != "<genexpr>"
    )
    assert lines <= 600, f"one pool step runs through {lines} lines"
