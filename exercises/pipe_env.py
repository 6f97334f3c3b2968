"""A small pipe-based vector env, the scaffolding of exercises 3 and 4. Read it; don't edit it.

One process per env, as in ``vecenvs.SubprocVecEnv`` but without the safety nets, so that
you can add them yourself. The parent and each worker talk over a pipe:

    parent --(Command, data)--> worker     (Command.RESET, seed) / (Command.STEP, action) / (Command.CLOSE, None)
    parent <--(ok, payload)---- worker     (True, result) or (False, the worker's traceback as text)

Every reply says whether it worked *before* the parent unpacks it. On success the payload is:

- RESET: ``(observation, info)``
- STEP: ``(observation, reward, terminated, truncated, info)``; when an episode ends the worker
  resets its env at once and sends the new episode's first observation (simpler than
  gymnasium's default, which resets on the next step)
- CLOSE: ``None``, then the worker exits

Exercise 3 writes :meth:`PipeVecEnv.step_wait`, the parent collecting one step from every
worker. Exercise 4 writes a worker that sends its traceback instead of dying silently.
:func:`basic_worker` below is where exercise 4 starts; :func:`answer` does what a command asks.

Processes are forked (``multiprocess``'s "fork" start method): the worker function and the env
factories need not be importable by name, so they can live in your exercise file. Fork exists
on Linux and macOS; on Windows, use WSL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import multiprocess

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["Command", "PipeVecEnv", "WorkerError", "WorkerTimeout", "answer", "basic_worker"]


class Command(Enum):
    """What the parent asks a worker to do."""

    RESET = "reset"
    STEP = "step"
    CLOSE = "close"


class WorkerError(RuntimeError):
    """An env failed in its worker; carries the env's index and the worker's traceback text."""

    def __init__(self, env_index: int, remote_traceback: str):
        self.env_index = env_index
        self.remote_traceback = remote_traceback
        super().__init__(f"env {env_index} failed in its worker process:\n{remote_traceback}")


class WorkerTimeout(TimeoutError):
    """Some workers did not answer in time; carries their env indices."""

    def __init__(self, env_indices: Sequence[int], seconds: float):
        self.env_indices = list(env_indices)
        super().__init__(f"env(s) {self.env_indices} did not answer within {seconds:g} s")


def answer(env: gym.Env, command: Command, data: Any) -> Any:
    """Does what a RESET or STEP command asks of ``env``; returns the payload to send back."""
    match command:
        case Command.RESET:
            return env.reset(seed=data)
        case Command.STEP:
            observation, reward, terminated, truncated, info = env.step(data)
            if terminated or truncated:
                observation, _ = env.reset()
            return observation, reward, terminated, truncated, info
    raise ValueError(f"unknown command {command!r}")


def basic_worker(pipe: Any, env_fn: Callable[[], gym.Env]) -> None:
    """Serves commands for one env until CLOSE. No error handling at all (see exercise 4):
    if the env raises, this process dies and the parent only sees the pipe close."""
    env = env_fn()
    while True:
        command, data = pipe.recv()
        if command is Command.CLOSE:
            pipe.send((True, None))
            break
        pipe.send((True, answer(env, command, data)))
    env.close()


def _run_worker(worker: Callable, pipe: Any, env_fn: Callable, parent_pipes: list) -> None:
    # Closes the parent's pipe ends the child inherited through fork: a worker holding its own
    # parent end open would never see EOF when the parent closes it.
    for parent_pipe in parent_pipes:
        parent_pipe.close()
    worker(pipe, env_fn)


class PipeVecEnv:
    """N envs, one worker process each (running ``worker(pipe, env_fn)``), talking over pipes.

    ``timeout``: seconds to wait for the workers' answers. What a step needs: ``parent_pipes``
    (the parent's end of each worker's pipe, in env order), ``processes`` (the worker processes,
    in env order), ``waiting`` (True between ``step_async`` and the end of ``step_wait``).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        worker: Callable = basic_worker,
        timeout: float = 10.0,
    ):
        context = multiprocess.get_context("fork")
        self.num_envs = len(env_fns)
        self.timeout = timeout
        self.waiting = False
        self.closed = False
        self.parent_pipes, self.processes = [], []
        for env_fn in env_fns:
            parent_pipe, worker_pipe = context.Pipe()
            # daemon=True: if the parent dies without closing us, the workers go with it.
            process = context.Process(
                target=_run_worker,
                daemon=True,
                args=(worker, worker_pipe, env_fn, [*self.parent_pipes, parent_pipe]),
            )
            process.start()
            worker_pipe.close()  # the worker's end lives in the worker: close our copy of it
            self.parent_pipes.append(parent_pipe)
            self.processes.append(process)

    def reset(self, seed: int | None = None) -> tuple[list, list]:
        """Resets every env (env i gets ``seed + i``); returns observations and infos as lists."""
        for index, pipe in enumerate(self.parent_pipes):
            pipe.send((Command.RESET, None if seed is None else seed + index))
        replies = []
        for index, pipe in enumerate(self.parent_pipes):
            if not pipe.poll(self.timeout):
                raise WorkerTimeout([index], self.timeout)
            try:
                ok, payload = pipe.recv()
            except EOFError:
                raise WorkerError(index, "(the worker process died without answering)") from None
            if not ok:
                raise WorkerError(index, payload)
            replies.append(payload)
        observations, infos = zip(*replies)
        return list(observations), list(infos)

    def step_async(self, actions: Sequence[Any]) -> None:
        """Sends each worker its action; returns at once, while the workers step."""
        if self.waiting:
            raise RuntimeError("step_async called again before step_wait collected the last step")
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        for pipe, action in zip(self.parent_pipes, actions):
            pipe.send((Command.STEP, action))
        self.waiting = True

    def step_wait(self, timeout: float | None = None):
        """Exercise 3 (``exercises/student/q3_step_wait.py`` subclasses this and writes it)."""
        raise NotImplementedError("PipeVecEnv.step_wait is exercise 3")

    def step(self, actions: Sequence[Any]):
        """``step_async`` then ``step_wait``."""
        self.step_async(actions)
        return self.step_wait()

    def close(self) -> None:
        """Asks every worker to stop, then makes sure it did. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        for pipe in self.parent_pipes:
            try:
                pipe.send((Command.CLOSE, None))
            except (OSError, ValueError):
                pass  # that worker is already gone
        for process in self.processes:
            process.join(timeout=2.0)
            if process.is_alive():  # hung in an env, or never read its CLOSE: stop it
                process.kill()
                process.join(timeout=2.0)
        for pipe in self.parent_pipes:
            pipe.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
