"""The errors a vector env can raise, each saying what went wrong and where.

A crash in a worker process must reach the user as more than a bare ``EOFError``: which env
failed, doing what, and the env's own traceback. These classes carry exactly that.

The errors for misuse of the async API and of a closed env are gymnasium's own
(:class:`gymnasium.error.AlreadyPendingCallError`, :class:`gymnasium.error.NoAsyncCallError`,
:class:`gymnasium.error.ClosedEnvironmentError`), so code written for gymnasium's vector envs
catches ours too.
"""

from __future__ import annotations

from gymnasium.error import (  # re-exported: one place to import every error from
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    NoAsyncCallError,
)

__all__ = [
    "AlreadyPendingCallError",
    "ClosedEnvironmentError",
    "EnvCrashedError",
    "NoAsyncCallError",
    "VecEnvError",
    "WorkerDiedError",
    "WorkerTimeoutError",
]


class VecEnvError(RuntimeError):
    """Base class of the errors raised by vecenvs' vector envs."""


class EnvCrashedError(VecEnvError):
    """An environment raised an exception while it was made, reset, stepped or called.

    Attributes:
        env_index: index of the failing env in the vector env (0 .. num_envs-1).
        command: what the env was doing: ``"make"``, ``"reset"``, ``"step"``, ``"call"``...
        error_type: name of the exception class the env raised, e.g. ``"ValueError"``.
        message: the env's own error message.
        remote_traceback: the traceback as formatted in the process that ran the env.
    """

    def __init__(
        self, env_index: int, command: str, error_type: str, message: str, remote_traceback: str
    ):
        self.env_index = env_index
        self.command = command
        self.error_type = error_type
        self.message = message
        self.remote_traceback = remote_traceback
        super().__init__(
            f"env {env_index} raised {error_type} during {command}: {message}\n\n"
            f"Traceback from the env:\n{remote_traceback.rstrip()}"
        )


class WorkerDiedError(VecEnvError):
    """A worker process ended while the parent was waiting for it (killed, crashed, exited).

    Attributes:
        worker_index: index of the worker process.
        env_indices: the envs that worker was running; their state is lost.
        exitcode: the process exit code; negative means it was killed by that signal; None
            when it is not known (a Ray actor's process, possibly on another machine).
    """

    def __init__(self, worker_index: int, env_indices: list[int], exitcode: int | None, doing: str):
        self.worker_index = worker_index
        self.env_indices = list(env_indices)
        self.exitcode = exitcode
        if exitcode is None:
            how = "exit code unknown"
        else:
            how = f"killed by signal {-exitcode}" if exitcode < 0 else f"exit code {exitcode}"
        super().__init__(
            f"worker {worker_index} (envs {_describe_indices(env_indices)}) died during {doing} "
            f"({how}). Its envs are lost: close this vector env and make a new one."
        )


class WorkerTimeoutError(VecEnvError, TimeoutError):
    """A worker did not answer within the deadline (a hung or very slow env).

    The vector env is closed when this is raised: a late answer could otherwise be read as the
    answer to the next command and return stale data.

    Attributes:
        worker_indices: the workers that had not answered.
        env_indices: the envs those workers were running.
        timeout: the deadline in seconds.
    """

    def __init__(self, worker_indices: list[int], env_indices: list[int], timeout: float, doing: str):
        self.worker_indices = list(worker_indices)
        self.env_indices = list(env_indices)
        self.timeout = timeout
        super().__init__(
            f"no answer to {doing} within {timeout:g} s from worker(s) {worker_indices} "
            f"(envs {_describe_indices(env_indices)}). The vector env has been closed; make a new "
            f"one, and raise `timeout=` if the env is legitimately this slow."
        )


def _describe_indices(indices: list[int]) -> str:
    """``[0, 1, 2, 3, 7]`` -> ``"0-3, 7"``: short enough to read in an error message."""
    parts: list[str] = []
    for index in sorted(indices):
        if parts and index == _last_of(parts[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{index}"
        else:
            parts.append(str(index))
    return ", ".join(parts)


def _last_of(part: str) -> int:
    return int(part.split("-")[-1])
