"""Exercise 3, reference solution: collect one step from every worker."""

from __future__ import annotations

import time
from multiprocessing.connection import wait

import numpy as np

from exercises.pipe_env import PipeVecEnv, WorkerError, WorkerTimeout


class MyPipeVecEnv(PipeVecEnv):
    """The pipe-based vector env, with a ``step_wait`` that has a deadline and reports errors."""

    def step_wait(self, timeout: float | None = None):
        """Collects one step's results from every worker."""
        seconds = self.timeout if timeout is None else timeout
        deadline = time.perf_counter() + seconds
        index_of = {pipe: index for index, pipe in enumerate(self.parent_pipes)}
        replies = {}
        try:
            # Read answers in whatever order they come; the slowest worker decides when we're done.
            while len(replies) < self.num_envs:
                pending = [pipe for pipe in self.parent_pipes if index_of[pipe] not in replies]
                ready = wait(pending, timeout=max(0.0, deadline - time.perf_counter()))
                if not ready:
                    raise WorkerTimeout(sorted(index_of[pipe] for pipe in pending), seconds)
                for pipe in ready:
                    index = index_of[pipe]
                    try:
                        replies[index] = pipe.recv()
                    except EOFError:  # the process died: say which env, not "EOFError"
                        raise WorkerError(
                            index, "(the worker process died without answering)"
                        ) from None
        finally:
            self.waiting = False
        for index in range(self.num_envs):
            ok, payload = replies[index]
            if not ok:
                raise WorkerError(index, payload)
        observations, rewards, terminations, truncations, infos = zip(
            *(replies[index][1] for index in range(self.num_envs))
        )
        return (
            np.stack(observations),
            np.array(rewards, dtype=np.float64),
            np.array(terminations, dtype=bool),
            np.array(truncations, dtype=bool),
            list(infos),
        )
