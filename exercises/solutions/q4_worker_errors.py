"""Exercise 4, reference solution: a worker that reports its env's errors."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from exercises.pipe_env import Command, answer


def careful_worker(pipe: Any, env_fn: Callable[[], gym.Env]) -> None:
    """Serves commands for one env until CLOSE; errors go back to the parent as tracebacks."""
    # pipe_env.basic_worker's loop with the exercise's three additions (nothing the release
    # ships has this loop: release.find_leaks compares every function with it).
    env = None
    try:
        env = env_fn()
        while True:
            command, data = pipe.recv()
            if command is Command.CLOSE:
                pipe.send((True, None))
                return
            try:
                reply = (True, answer(env, command, data))
            except Exception:
                reply = (False, traceback.format_exc())
            pipe.send(reply)
    except EOFError:
        pass  # the parent closed its end: nobody is left to answer
    finally:
        if env is not None:
            env.close()
