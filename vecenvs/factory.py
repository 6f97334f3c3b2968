"""``make_vec``: one call that builds any backend, ours or gymnasium's, from an env id.

The benchmark, the notebooks and the dashboard all build their vector envs here, so that two
backends being compared are given exactly the same envs.

Example:
    >>> import vecenvs
    >>> with vecenvs.make_vec("CartPole-v1", num_envs=8, backend="pool", num_workers=2) as envs:
    ...     observations, infos = envs.reset(seed=0)
    >>> observations.shape
    (8, 4)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode, VectorEnv

__all__ = ["BACKENDS", "env_fns_for", "make_vec"]


def _multi(env_fns, autoreset_mode, **kwargs):
    from vecenvs.multi_env import MultiEnv

    return MultiEnv(env_fns, autoreset_mode=autoreset_mode, **kwargs)


def _subproc(env_fns, autoreset_mode, **kwargs):
    from vecenvs.subproc import SubprocVecEnv

    return SubprocVecEnv(env_fns, autoreset_mode=autoreset_mode, **kwargs)


def _pool(env_fns, autoreset_mode, **kwargs):
    from vecenvs.pool import PoolVecEnv

    return PoolVecEnv(env_fns, autoreset_mode=autoreset_mode, **kwargs)


def _gym_sync(env_fns, autoreset_mode, **kwargs):
    return gym.vector.SyncVectorEnv(env_fns, autoreset_mode=autoreset_mode, **kwargs)


def _gym_async(env_fns, autoreset_mode, shared_memory, **kwargs):
    return gym.vector.AsyncVectorEnv(
        env_fns, autoreset_mode=autoreset_mode, shared_memory=shared_memory, **kwargs
    )


#: Backend name -> builder taking ``(env_fns, autoreset_mode, **kwargs)``.
#: Ours first, then gymnasium's own, which the benchmark uses as the reference.
BACKENDS: dict[str, Callable[..., VectorEnv]] = {
    "multi": _multi,
    "subproc": _subproc,
    "pool": _pool,
    "gym-sync": _gym_sync,
    "gym-async": partial(_gym_async, shared_memory=False),
    "gym-async-shm": partial(_gym_async, shared_memory=True),
}


def env_fns_for(env_id: str, num_envs: int, **env_kwargs: Any) -> list[Callable[[], gym.Env]]:
    """``num_envs`` factories for ``gym.make(env_id, **env_kwargs)``.

    The env id is checked here, in this process, so a typo fails at once with gymnasium's own
    "did you mean" message rather than inside N worker processes.
    """
    gym.spec(env_id)  # raises gymnasium.error.NameNotFound & co. for an unknown id
    return [partial(gym.make, env_id, **env_kwargs) for _ in range(num_envs)]


def make_vec(
    env_id: str,
    num_envs: int,
    backend: str = "pool",
    *,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    env_kwargs: dict[str, Any] | None = None,
    **backend_kwargs: Any,
) -> VectorEnv:
    """Build ``num_envs`` copies of ``env_id`` stepped by ``backend``.

    Args:
        env_id: a registered gymnasium id, e.g. ``"CartPole-v1"`` or ``"vecenvs/Costly-v0"``.
        num_envs: how many envs, at least 1.
        backend: one of :data:`BACKENDS`: ``"multi"`` (sequential, this process), ``"subproc"``
            (a process per env), ``"pool"`` (K processes x N/K envs), ``"gym-sync"``,
            ``"gym-async"`` or ``"gym-async-shm"`` (gymnasium's own, for comparison).
        autoreset_mode: gymnasium's ``AutoresetMode`` (or its string value).
        env_kwargs: keyword arguments for ``gym.make``, e.g. ``{"step_seconds": 1e-3}``.
        **backend_kwargs: passed to the backend, e.g. ``num_workers=2`` for the pool.

    Raises:
        ValueError: unknown backend or ``num_envs`` < 1.
        gymnasium.error.UnregisteredEnv: unknown env id.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {sorted(BACKENDS)}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a whole number >= 1, got {num_envs!r}")
    env_fns = env_fns_for(env_id, num_envs, **(env_kwargs or {}))
    return BACKENDS[backend](env_fns, AutoresetMode(autoreset_mode), **backend_kwargs)
