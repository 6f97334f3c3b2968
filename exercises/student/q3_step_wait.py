"""Exercise 3: collect one step from every worker (``step_wait``).

``exercises/pipe_env.py`` has a small vector env with one process per env. ``step_async``
sends each worker its action and returns at once; the workers step in parallel. Your
``step_wait`` collects the answers. It is the synchronisation barrier of notebook 3: it can
only return when the slowest worker has answered.

Write ``step_wait`` so that it:

1. waits for an answer from every worker, but never longer than ``timeout`` seconds in all
   (``self.timeout`` when None): ``multiprocessing.connection.wait(pipes, timeout=...)``
   returns the pipes that have something to read. Workers that are still silent at the
   deadline: ``raise WorkerTimeout(their_env_indices, timeout)``;
2. reads each answer with ``pipe.recv()``: ``(ok, payload)``. When ``ok`` is False the payload
   is the worker's traceback text: ``raise WorkerError(env_index, payload)``;
3. sets ``self.waiting = False`` (a new ``step_async`` is allowed again), also when it raises;
4. returns ``(observations, rewards, terminations, truncations, infos)`` batched in env order:
   observations as one array of shape ``(N, *observation_shape)`` with the envs' dtype,
   rewards as float64 ``(N,)``, terminations and truncations as bool ``(N,)``, infos as a
   list of N dicts. (``numpy.stack`` and ``numpy.array(..., dtype=...)`` do the batching.)

Check: ``pytest exercises/checks -k q3``.
"""

from __future__ import annotations

import time
from multiprocessing.connection import wait  # noqa: F401  (you will need it)

import numpy as np  # noqa: F401  (you will need it)

from exercises.pipe_env import PipeVecEnv, WorkerError, WorkerTimeout  # noqa: F401


class MyPipeVecEnv(PipeVecEnv):
    """The pipe-based vector env, with your ``step_wait``."""

    def step_wait(self, timeout: float | None = None):
        """Collects one step's results from every worker (see the module docstring)."""
        deadline = time.perf_counter() + (self.timeout if timeout is None else timeout)  # noqa: F841
        raise NotImplementedError("Exercise 3: write step_wait")
