"""The errors a vector env can raise, each saying what went wrong and where.

A crash in a worker process must reach the user as more than a bare ``EOFError``: which env
failed, doing what, and the env's own traceback. :class:`EnvCrashedError` carries that, and is
*also* an instance of the exception class the env raised (as Ray does for its tasks): code that
catches ``ValueError`` around ``envs.step(...)`` still catches an env's ``ValueError`` raised
three processes away. Misuse of the async API and of a closed env raise gymnasium's own errors,
and a passed deadline a :class:`WorkerTimeoutError`, also ``multiprocessing.TimeoutError`` as
gymnasium's ``AsyncVectorEnv`` raises: code written for gymnasium's vector envs catches ours.
"""

from __future__ import annotations

import multiprocessing
import pickle
import traceback
from dataclasses import dataclass
from functools import cache
from typing import Any

import multiprocess
from gymnasium.error import (  # re-exported: one place to import every error from
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    NoAsyncCallError,
)

from vecenvs import main_guard

__all__ = [
    "AlreadyPendingCallError",
    "ClosedEnvironmentError",
    "ConcurrentCallError",
    "CrashReport",
    "EnvCrashedError",
    "NoAsyncCallError",
    "VecEnvError",
    "WorkerDiedError",
    "WorkerTimeoutError",
    "crash_error",
]


class VecEnvError(RuntimeError):
    """Base class of the errors raised by vecenvs' vector envs."""


class EnvCrashedError(VecEnvError):
    """An environment raised an exception while it was made, reset, stepped or called.

    The instance you catch is usually also of the env's own exception class (see
    :func:`crash_error`). ``command`` is what the env was doing (``"make"``, ``"step"``...),
    ``error_type`` the name of its exception class, ``remote_traceback`` the traceback as
    formatted in the process that ran the env.
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

    # The env's exception class may have its own __str__ (KeyError quotes its message): ours wins.
    __str__ = BaseException.__str__

    def report(self) -> CrashReport:
        """This error as plain data, to pass on to another process (see :class:`CrashReport`)."""
        cause = next((base for base in type(self).__bases__ if base is not EnvCrashedError), None)
        return CrashReport(
            self.env_index,
            self.command,
            self.error_type,
            self.message,
            self.remote_traceback,
            _pickled(cause),
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # The class may be made on the fly: pickle the recipe, not the class.
        return _rebuild_crash, (self.report(), self.args)


class WorkerDiedError(VecEnvError):
    """A worker process ended while the parent was waiting for it (killed, crashed, exited).

    The envs it ran (``env_indices``) are lost. ``exitcode`` is negative for a signal, None when
    not known (a Ray actor's process, possibly on another machine).
    """

    def __init__(self, worker_index: int, env_indices: list[int], exitcode: int | None, doing: str):
        self.worker_index = worker_index
        self.env_indices = list(env_indices)
        self.exitcode = exitcode
        if exitcode is None:
            how = "exit code unknown"
        else:
            how = f"killed by signal {-exitcode}" if exitcode < 0 else f"exit code {exitcode}"
        cause = main_guard.explain(exitcode)  # the script's missing `if __name__ == "__main__":`
        if cause is not None:
            super().__init__(
                f"worker {worker_index} (envs {describe_indices(env_indices)}) stopped while "
                f"starting ({how}): {cause}."
            )
            return
        super().__init__(
            f"worker {worker_index} (envs {describe_indices(env_indices)}) died during {doing} "
            f"({how}). Its envs are lost: close this vector env and make a new one."
        )


class WorkerTimeoutError(
    VecEnvError, TimeoutError, multiprocessing.TimeoutError, multiprocess.TimeoutError
):
    """Workers did not answer within ``timeout`` seconds (a hung or very slow env).

    Also a ``TimeoutError`` and a ``multiprocessing.TimeoutError`` (what gymnasium's
    ``AsyncVectorEnv`` raises). The vector env is closed when this is raised: a late answer
    could otherwise be read as the answer to the next command and return stale data.
    """

    def __init__(
        self, worker_indices: list[int], env_indices: list[int], timeout: float, doing: str
    ):
        self.worker_indices = list(worker_indices)
        self.env_indices = list(env_indices)
        self.timeout = timeout
        super().__init__(
            f"no answer to {doing} within {timeout:g} s from worker(s) {worker_indices} "
            f"(envs {describe_indices(env_indices)}). The vector env has been closed; make a new "
            f"one, and raise `timeout=` if the env is legitimately this slow."
        )

    __str__ = BaseException.__str__  # not OSError's "[Errno ...]" format


class ConcurrentCallError(VecEnvError):
    """Two threads used one vector env at the same time.

    Two callers at once would read each other's answers from the workers: each public method
    refuses a second caller instead. (One thread may call ``step_async`` and another
    ``step_wait`` later; they just may not overlap.)
    """


@dataclass
class CrashReport:
    """Why a command failed, in plain data so it pickles whatever the env raised.

    ``error_class`` is the env's exception class pickled on its own: if the parent cannot load
    it (a class defined only in the worker), the report still arrives, without it.
    """

    env_index: int
    doing: str
    error_type: str
    message: str
    traceback: str
    error_class: bytes | None = None

    @classmethod
    def of(cls, env_index: int, doing: str, error: BaseException) -> CrashReport:
        """A report of ``error``, raised just now (its traceback is taken from the current one)."""
        return cls(
            env_index,
            doing,
            type(error).__name__,
            str(error),
            traceback.format_exc(),
            _pickled(type(error)),
        )

    def to_error(self) -> EnvCrashedError:
        """The :class:`EnvCrashedError` to raise in the parent."""
        try:
            cause = pickle.loads(self.error_class) if self.error_class else None
        except Exception:
            cause = None
        return crash_error(self, cause)


def crash_error(report: CrashReport, cause: type[BaseException] | None = None) -> EnvCrashedError:
    """An :class:`EnvCrashedError` for ``report`` that is also an instance of ``cause`` when it can be.

    The class is made once per cause: a subclass of both, also named ``EnvCrashedError``. Some
    classes cannot be mixed with ours (``OSError``'s have a memory layout of their own): then it
    is a plain :class:`EnvCrashedError`, and ``error_type`` still names the env's class.
    """
    error_class = (
        _crash_class(cause)  # type: ignore[arg-type]  # exception classes are hashable
        if isinstance(cause, type) and issubclass(cause, Exception)
        else EnvCrashedError
    )
    error = error_class.__new__(error_class)
    EnvCrashedError.__init__(
        error, report.env_index, report.doing, report.error_type, report.message, report.traceback
    )
    return error


@cache
def _crash_class(cause: type[BaseException]) -> type[EnvCrashedError]:
    if issubclass(cause, EnvCrashedError):
        return EnvCrashedError
    try:
        # Named like its base: tracebacks read "EnvCrashedError: env 3 raised ValueError during step".
        return type(
            "EnvCrashedError",
            (EnvCrashedError, cause),
            {"__module__": __name__, "__qualname__": "EnvCrashedError"},
        )
    except TypeError:  # "multiple bases have instance lay-out conflict"
        return EnvCrashedError


def _pickled(error_class: type[BaseException] | None) -> bytes | None:
    try:
        return pickle.dumps(error_class) if error_class is not None else None
    except Exception:  # a class the other side could not load anyway
        return None


def _rebuild_crash(report: CrashReport, args: tuple) -> EnvCrashedError:
    error = report.to_error()
    error.args = args
    return error


def describe_indices(indices: list[int]) -> str:
    """``[0, 1, 2, 3, 7]`` -> ``"0-3, 7"``: short enough to read in an error message."""
    runs: list[list[int]] = []
    for index in sorted(indices):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
