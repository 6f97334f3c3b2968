"""What the checks build inside the student's process: env factories, a worker that answers
properly, and a harness that drives a student's worker over a real pipe.

A check names these as ``toolkit.NAME(...)`` (a :class:`~exercises.sandbox.wire.Expr`); the
runner builds them next to the student's code, because env factories and pipes cannot cross a
process boundary as data. Nothing here decides a score: the checks judge what comes back.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

import vecenvs  # noqa: F401  (registers vecenvs/Costly-v0 and vecenvs/Faulty-v0)
from exercises.pipe_env import Command, PipeVecEnv, answer
from vecenvs.envs import faulty_env_fns  # noqa: F401  (checks ask for it by name)


def env_fn(env_id: str, **kwargs: Any) -> Callable[[], gym.Env]:
    return functools.partial(gym.make, env_id, **kwargs)


def env_fns(env_id: str, num_envs: int, **kwargs: Any) -> list[Callable[[], gym.Env]]:
    return [env_fn(env_id, **kwargs)] * num_envs


class FailingEnv(gym.Wrapper):
    """CartPole that raises ``RuntimeError`` at the ``at``-th reset or step, once. The message
    ends with ``token``, chosen at random by the check: only a real traceback carries it."""

    def __init__(self, fail_on: str, at: int, token: str):
        super().__init__(gym.make("CartPole-v1"))
        self.fail_on, self.at, self.token = fail_on, at, token
        self.counts = {"reset": 0, "step": 0}

    def _count(self, phase: str) -> None:
        self.counts[phase] += 1
        if phase == self.fail_on and self.counts[phase] == self.at:
            raise RuntimeError(f"deliberate failure in {phase} #{self.at} ({self.token})")

    def reset(self, **kwargs: Any) -> Any:
        self._count("reset")
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        self._count("step")
        return self.env.step(action)


def failing_env_fn(fail_on: str, at: int, token: str) -> Callable[[], gym.Env]:
    return functools.partial(FailingEnv, fail_on, at, token)


def answering_worker(pipe: Any, env_fn: Callable[[], gym.Env]) -> None:
    """A worker that sends env errors back as ``(False, traceback)``, for question 3's checks
    (so that question 3 does not depend on question 4, whose solution the sandbox never shows)."""
    with contextlib.closing(env_fn()) as env, contextlib.suppress(EOFError):
        while (request := pipe.recv())[0] is not Command.CLOSE:
            try:
                reply = (True, answer(env, *request))
            except Exception:
                reply = (False, traceback.format_exc())
            pipe.send(reply)
        pipe.send((True, None))


class _CloseRecorder(gym.Wrapper):
    """Writes a file when closed, so the harness can tell whether the worker closed its env."""

    def __init__(self, env_fn: Callable[[], gym.Env], marker: str):
        super().__init__(env_fn())
        self.marker = marker

    def close(self) -> None:
        Path(self.marker).write_text("closed")
        super().close()


class WorkerUnderTest:
    """A student's worker function in a forked process, and the parent's end of its pipe;
    question 4's checks call its methods, each returning plain data saying what happened."""

    def __init__(self, worker_function: Callable, env_fn: Callable[[], gym.Env]):
        self.marker = os.path.join(tempfile.mkdtemp(prefix="closed-"), "env-closed")
        recorded = functools.partial(_CloseRecorder, env_fn, self.marker)
        # Started as the exercises' vector env starts its workers; then driven from here.
        envs = PipeVecEnv([recorded], worker=worker_function)
        self.pipe, self.process = envs.parent_pipes[0], envs.processes[0]

    def ask(self, command: str, data: Any = None, seconds: float = 5.0) -> dict:
        """Sends ``(Command[command], data)``; returns ``{"reply": ...}``, ``{"silent": True}``
        (no answer within ``seconds``) or ``{"dead": exit code}`` (the worker process ended)."""
        try:
            self.pipe.send((Command[command], data))
        except (BrokenPipeError, OSError):
            return self._dead(f"sending {command}")
        if not self.pipe.poll(seconds):
            if not self.process.is_alive():
                return self._dead(f"answering {command}")
            return {"silent": True}
        try:
            return {"reply": self.pipe.recv()}
        except (EOFError, OSError):  # closed or reset: the worker is gone
            return self._dead(f"answering {command}")

    def _dead(self, doing: str) -> dict:
        self.process.join(1.0)
        return {"dead": self.process.exitcode, "doing": doing}

    def close_pipe(self) -> None:
        """Closes the parent's end: the worker's ``recv()`` now raises ``EOFError``."""
        self.pipe.close()

    def join(self, seconds: float) -> dict:
        self.process.join(seconds)
        return {"alive": self.process.is_alive(), "exitcode": self.process.exitcode}

    def env_was_closed(self) -> bool:
        return os.path.exists(self.marker)

    def close(self) -> None:
        """Ends the worker, politely first."""
        self.pipe.close()
        self.process.join(2.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2.0)
