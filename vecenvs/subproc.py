"""``SubprocVecEnv``: one process per env, commands and pickled results over pipes.

The classic design (OpenAI baselines, Stable-Baselines3): every env gets a process of its own.
Each step, the parent pickles each env's action into that env's pipe, every worker steps its
env, pickles the observation, reward and flags back, and the parent waits for the slowest one.

That round trip costs tens of microseconds per env: far more than a CartPole step (~8 µs). So
for cheap envs this is slower than a plain loop, and once there are more envs than cores the
processes also queue for the CPU. It pays off when one env step costs much more than the
round trip (physics simulators, games). Run ``python -m vecenvs bench`` to see where the
crossover is on your machine.

All the process handling (start, deadlines, errors, close) is in
:mod:`vecenvs.process_env`; the child side is in :mod:`vecenvs.worker`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from vecenvs.batching import check_env_fns
from vecenvs.process_env import ProcessVecEnv

__all__ = ["SubprocVecEnv"]


class SubprocVecEnv(ProcessVecEnv):
    """Runs each env in its own process; results are pickled over pipes.

    Args:
        env_fns: functions that each make one env. Lambdas and functions defined in a notebook
            work under every start method (the processes come from ``multiprocess``, which
            pickles with dill).
        **kwargs: ``autoreset_mode``, ``start_method``, ``timeout``, ``start_timeout``, ``copy``:
            see :class:`~vecenvs.process_env.ProcessVecEnv`.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import SubprocVecEnv
        >>> with SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 2) as envs:
        ...     observations, infos = envs.reset(seed=0)
        ...     envs.step_async([0, 1])          # the workers step while we could do other work
        ...     observations, rewards, terminations, truncations, infos = envs.step_wait()
        >>> rewards
        array([1., 1.])
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], **kwargs: Any):
        env_fns = check_env_fns(env_fns)  # first: the split below needs a list of callables
        super().__init__(env_fns, [range(i, i + 1) for i in range(len(env_fns))], shared_memory=False, **kwargs)
