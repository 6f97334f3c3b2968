"""A pool step stays readable: at most 450 lines, in three files a student reads and one to skip;
and the caller's work for a step does not grow with the number of workers.

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
from vecenvs import core, doorbell, workers
from vecenvs.factory import env_fns_for

PACKAGE = os.path.dirname(vecenvs.__file__)
#: The worker process's own loop, which this process does not run, and the sleeping either
#: side does when a spin runs out: named here.
WORKER_LOOP = (
    workers.serve_with_control,
    workers.wake_parent,
    workers.Chunk.answer,
    doorbell.Waiter.wait,
    doorbell.Waiter._sleep,
    workers.WordCrew._alive,  # (the caller's, asleep)
    doorbell.publish,
    doorbell.observe,
    doorbell.fence,
    doorbell._RELEASE,
    doorbell._ACQUIRE,
    doorbell._FULL,
    doorbell.Doorbell.value,
    doorbell.Doorbell.sleep,
    doorbell.Doorbell.ring,
    doorbell._futex,
    doorbell.Spin.budget,
    doorbell.Spin.record,
)
#: Code objects counted with the function they are in (Python 3.11 compiles them apart).
COMPREHENSIONS = {"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"}
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
        for _ in range(core.LEARN_STEPS + 1):  # warmed up: what the first steps do once (such
            envs.step(actions)  # as looking for infos to share) is not the step
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
            if os.path.relpath(file, PACKAGE) == name and code.co_name not in COMPREHENSIONS
        )
        for name in files
    }
    assert sum(lines.values()) <= 450, f"one pool step runs through {lines} lines"


def _caller_calls_per_step(num_workers: int, num_envs: int = 64, steps: int = 200) -> float:
    """Python calls inside vecenvs per ``step`` of ``num_envs`` CartPoles in the caller: its work
    for the workers. Left out: the stepping of its own chunk (which shrinks as K grows) and the
    waiting (how often a wait looks again depends on timing, not on the protocol)."""
    calls, inside = 0, 0
    left_out = {workers.Chunk.serve.__code__, doorbell.Waiter.wait.__code__}

    def record(frame, event, arg):
        nonlocal calls, inside
        if event == "call" and frame.f_code in left_out:
            inside += 1
        elif event == "return" and frame.f_code in left_out:
            inside -= 1
        elif event == "call" and not inside and frame.f_code.co_filename.startswith(PACKAGE):
            calls += 1

    env_fns = env_fns_for("CartPole-v1", num_envs)
    with vecenvs.PoolVecEnv(env_fns, num_workers=num_workers, start_method="fork") as envs:
        envs.reset(seed=0)
        actions = np.zeros(num_envs, dtype=np.int64)
        for _ in range(core.LEARN_STEPS + 1):
            envs.step(actions)
        sys.setprofile(record)
        try:
            for _ in range(steps):
                envs.step(actions)
        finally:
            sys.setprofile(None)
    return calls / steps


def test_the_callers_work_for_a_step_does_not_grow_with_the_workers():
    """One word tells every worker, one comparison of their done words hears them all: from
    K=2 to K=8 the caller makes at most one more Python call per added worker (it was about 9
    with a word and a wait per worker). Counted, not timed: the count does not depend on load."""
    two, eight = _caller_calls_per_step(2), _caller_calls_per_step(8)
    assert eight - two <= 8 - 2, f"{two:.1f} calls per step at K=2, {eight:.1f} at K=8"
