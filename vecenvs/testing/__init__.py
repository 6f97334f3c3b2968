"""A conformance checker for vector envs: run any backend through it to see if it is right.

The unit under test is a *backend*: a callable that builds a vector env from env factories,
``make_vector_env(env_fns, autoreset_mode=AutoresetMode.NEXT_STEP) -> VectorEnv``. Ours,
gymnasium's and a student's own all fit, for example::

    lambda fns, **kw: PoolVecEnv(fns, num_workers=2, **kw)
    gymnasium.vector.SyncVectorEnv

Each ``check_*`` function checks one thing and raises :class:`ConformanceError` (an
``AssertionError``, so it reads naturally in a pytest test) when the backend gets it wrong.
Every message says what was checked, what was expected, what came back, and a hint on what to
fix. :func:`check_vector_env` runs them all and reports every failure at once.

Example:
    >>> import gymnasium as gym
    >>> from vecenvs.testing import check_matches_sync
    >>> check_matches_sync(gym.vector.AsyncVectorEnv, "CartPole-v1")
    []

The reference for "right" is gymnasium's own :class:`gymnasium.vector.SyncVectorEnv`: given
the same envs, seeds and actions, a backend must return exactly what it returns, step by step.

Where each check lives (read them in this order):

- :mod:`~vecenvs.testing.api`: ``check_api``, the VectorEnv API, spaces and dtypes.
- :mod:`~vecenvs.testing.equality`: ``check_matches_sync``, step-by-step equality with SyncVectorEnv.
- :mod:`~vecenvs.testing.close`: ``check_close``, closing and the processes left behind.
- :mod:`~vecenvs.testing.propagation`: ``check_error_propagation``, env crashes reaching the caller.
- :mod:`~vecenvs.testing.suite`: ``check_vector_env``, all of them at once.
- :mod:`~vecenvs.testing.report` and :mod:`~vecenvs.testing.running`: how failures are worded,
  and how a backend is built, timed out and checked for leftover child processes.
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
