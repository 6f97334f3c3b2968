"""A conformance checker for vector envs: run any backend through it to see if it is right.

The unit under test is a *backend*: a callable that builds a vector env from env factories,
``make_vector_env(env_fns, autoreset_mode=AutoresetMode.NEXT_STEP) -> VectorEnv``. Ours,
gymnasium's and a student's own all fit, e.g. ``gymnasium.vector.SyncVectorEnv`` or
``lambda fns, **kw: PoolVecEnv(fns, num_workers=2, **kw)``. The reference for "right" is
gymnasium's own ``SyncVectorEnv``: given the same envs, seeds and actions, a backend must return
exactly what it returns, step by step.

Each ``check_*`` function checks one thing, in its own module (read them in this order):
``check_api`` (:mod:`~vecenvs.testing.api`), ``check_matches_sync``
(:mod:`~vecenvs.testing.equality`), ``check_close`` (:mod:`~vecenvs.testing.close`),
``check_error_propagation`` (:mod:`~vecenvs.testing.propagation`); ``check_vector_env``
(:mod:`~vecenvs.testing.suite`) runs them all and reports every failure at once. Each raises
:class:`ConformanceError` (an ``AssertionError``, so it reads naturally in a pytest test) whose
message says what was checked, what was expected, what came back, and a hint on what to fix
(:mod:`~vecenvs.testing.report`; building, timing out and counting leftover child processes
are in :mod:`~vecenvs.testing.running`).

Example:
    >>> import gymnasium as gym
    >>> from vecenvs.testing import check_matches_sync
    >>> check_matches_sync(gym.vector.AsyncVectorEnv, "CartPole-v1")
    []
"""

from vecenvs.testing.api import check_api
from vecenvs.testing.close import check_close
from vecenvs.testing.equality import check_matches_sync
from vecenvs.testing.propagation import check_error_propagation
from vecenvs.testing.report import ConformanceError, ConformanceWarning, Failure
from vecenvs.testing.suite import DEFAULT_ENV_IDS, check_vector_env

__all__ = [
    "DEFAULT_ENV_IDS",
    "ConformanceError",
    "ConformanceWarning",
    "Failure",
    "check_api",
    "check_close",
    "check_error_propagation",
    "check_matches_sync",
    "check_vector_env",
]
