"""A pool step stays readable: at most 450 lines, in three files a student reads and one to skip.

The functions one ``PoolVecEnv.step`` runs, in the caller (with its own chunk) and in a worker
(the loop of :func:`vecenvs.workers.serve_with_control` and what it calls), must all live in
``core.py``, ``workers.py`` and ``multi_env.py`` (the protocol) and ``doorbell.py`` (waiting
and memory ordering, the low-level layer a student may take on trust), and add up to at most
450 lines, docstrings included: what a student reads to follow a step from the call to the
answer.
"""

from __future__ import annotations

import inspect
import os
import sys

import numpy as np

import vecenvs
from vecenvs import doorbell, workers
from vecenvs.factory import env_fns_for

PACKAGE = os.path.dirname(vecenvs.__file__)
#: The worker process's own loop, which this process does not run: named here.
WORKER_LOOP = (
    workers.serve_with_control,
    workers.CommandWait.after,
    workers.wake_parent,
    workers.Chunk.answer,
    doorbell.wait,
    doorbell.publish,
    doorbell.observe,
    doorbell.fence,
    doorbell._ORDER,
    doorbell._FULL,
    doorbell.Doorbell.value,
    doorbell.Doorbell.sleep,
    doorbell.Doorbell.ring,
    doorbell._futex,
    doorbell.AdaptiveSpin.budget,
    doorbell.AdaptiveSpin.record,
)
#: The protocol, and the low-level layer under it.
PROTOCOL = {"core.py", "workers.py", "multi_env.py"}
LOW_LEVEL = {"doorbell.py"}


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


def test_a_pool_step_runs_through_the_protocol_and_the_low_level_layer_in_at_most_450_lines():
    functions = _functions_of_one_step()
    files = {os.path.relpath(file, PACKAGE) for file, _ in functions}
    assert PROTOCOL <= files <= PROTOCOL | LOW_LEVEL, files
    lines = {
        name: sum(
            len(inspect.getsourcelines(code)[0])
            for (file, _), code in functions.items()
            if os.path.relpath(file, PACKAGE) == name and code.co_name != "<genexpr>"
        )
        for name in files
    }
    assert sum(lines.values()) <= 450, f"one pool step runs through {lines} lines"
