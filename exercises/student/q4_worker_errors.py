"""Exercise 4: a worker that reports its env's errors instead of dying silently.

``basic_worker`` in ``exercises/pipe_env.py`` serves RESET, STEP and CLOSE for one env (its
``answer`` does what RESET and STEP ask). When the env raises, the worker process dies: the
parent sees its pipe close and learns nothing about why. Write ``careful_worker``, the same
loop with three additions:

1. when handling a command raises, send ``(False, traceback.format_exc())`` instead of the
   answer, and carry on serving commands (the parent decides what happens next);
2. close the env however the loop ends (CLOSE, the parent closing its end of the pipe, which
   makes ``pipe.recv()`` raise ``EOFError``, or anything else): ``try`` / ``finally``;
3. leave the loop quietly on ``EOFError``: there is nobody left to answer.

Run it yourself::

    from exercises.pipe_env import PipeVecEnv
    envs = PipeVecEnv([lambda: gymnasium.make("vecenvs/Faulty-v0", fail_on="step")], worker=careful_worker)

Check: ``pytest exercises/checks -k q4``.
"""

from __future__ import annotations

import traceback  # noqa: F401  (you will need it)
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from exercises.pipe_env import Command, answer  # noqa: F401  (you will need them)


def careful_worker(pipe: Any, env_fn: Callable[[], gym.Env]) -> None:
    """Serves commands for one env until CLOSE; errors go back to the parent as tracebacks."""
    raise NotImplementedError("Exercise 4: write careful_worker (start from basic_worker)")
