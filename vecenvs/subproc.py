"""``SubprocVecEnv``: one process per env, commands and pickled results over pipes.

The classic design (OpenAI baselines, Stable-Baselines3, gymnasium's ``AsyncVectorEnv``). Each
step the parent pickles each env's action into its pipe, every worker steps its env and pickles
the results back, and the parent waits for the slowest; both sides block in the kernel until
the other writes. That round trip costs tens of microseconds per env, far more than a CartPole
step (about 10 µs), and with more envs than cores the processes queue for the CPU: it pays off
only when an env step costs much more (physics simulators, games). ``python -m vecenvs bench``
shows the crossover. It is :mod:`vecenvs.core` with :mod:`vecenvs.workers` in *pipes* mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from vecenvs.checks import check_env_fns, check_pipes_only
from vecenvs.core import ChunkedVecEnv
from vecenvs.threads import DEFAULT_WORKER_THREADS, cap_env_fns, check_worker_threads
from vecenvs.workers import ProcessWorker, process_context

__all__ = ["SubprocVecEnv"]


class SubprocVecEnv(ChunkedVecEnv):
    """Runs each env in its own process; commands and results are pickled over pipes.

    Lambdas and functions defined in a notebook work under every start method (the processes come
    from ``multiprocess``, which pickles with dill).

    Args:
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; None for the platform's default.
        worker_threads: the BLAS, OpenMP and torch threads each env's process may use
            (default 1); None leaves them alone (see :mod:`vecenvs.threads`).
        **kwargs: ``copy``, ``observation_mode``, ``autoreset_mode``, ``timeout``,
            ``start_timeout``: see :class:`~vecenvs.core.ChunkedVecEnv`.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import SubprocVecEnv
        >>> with SubprocVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)]) as envs:
        ...     observations, infos = envs.reset(seed=0)
        ...     envs.step_async([0, 1])          # the workers step while we could do other work
        ...     observations, rewards, terminations, truncations, infos = envs.step_wait()
        >>> rewards
        array([1., 1.])
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        start_method: str | None = None,
        worker_threads: int | None = DEFAULT_WORKER_THREADS,
        **kwargs: Any,
    ):
        env_fns = check_env_fns(env_fns)
        check_pipes_only(type(self).__name__, kwargs)
        self.worker_threads = check_worker_threads(worker_threads)
        self.context = process_context(start_method, env_fns)
        self.start_method = self.context.get_start_method()
        super().__init__(env_fns, len(env_fns), **kwargs)

    def _start_workers(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        env_fns = cap_env_fns(env_fns, self.worker_threads)
        for index, rows in enumerate(self.chunks):
            self.workers.append(ProcessWorker(index, self.spec_of(rows, env_fns), self.context))
