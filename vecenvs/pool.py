"""``PoolVecEnv``: K worker processes, each stepping N/K envs, results in shared memory.

The hybrid of the other two designs. With N cheap envs and few cores, one process per env
(SubprocVecEnv) pays a pipe round trip per env and makes N processes fight over the cores; a
plain loop (MultiEnv) leaves all cores but one idle. The pool starts one worker per core, and
each worker runs a MultiEnv over its chunk of envs, so the per-step cost of talking to
processes is paid K times instead of N times, and every core steps envs.

One step:
1. the parent checks the actions and writes them into shared memory;
2. it sends each worker a tiny STEP command (the pipe only wakes the worker up);
3. each worker steps its chunk, writing observations, rewards and flags into its own slice of
   shared memory, and answers with the chunk's infos (usually nothing);
4. the parent waits for all K answers (blocking, not spinning) and copies the observations out.

The overhead model from the seeds: ``speedup ~ K * N t_env / (N t_env + K t_os)``: the larger
each chunk's work ``N/K * t_env`` against the fixed cost ``t_os`` of a round trip, the closer the
pool gets to K times the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from vecenvs.process_env import ProcessVecEnv, available_cpus

__all__ = ["PoolVecEnv", "available_cpus", "split_evenly"]


class PoolVecEnv(ProcessVecEnv):
    """Steps N envs in K worker processes, N/K envs each, through shared memory.

    Args:
        env_fns: functions that each make one env (lambdas and notebook functions work).
        num_workers: K, the number of worker processes: from 1 to the number of envs. Default:
            the CPUs this process may use.
        shared_memory: pass observations, rewards, flags and actions through shared memory
            (default). False sends them pickled over the pipes, to measure what shared memory buys.
        step_in_caller: the calling process steps a chunk of envs itself while it waits for the
            workers, instead of sleeping: K workers + the caller split the envs K+1 ways.
        **kwargs: ``autoreset_mode``, ``start_method``, ``timeout``, ``start_timeout``, ``copy``:
            see :class:`~vecenvs.process_env.ProcessVecEnv`.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import PoolVecEnv
        >>> with PoolVecEnv([lambda: gym.make("CartPole-v1")] * 8, num_workers=2) as envs:
        ...     observations, infos = envs.reset(seed=0)
        >>> [len(chunk) for chunk in envs.chunks]
        [4, 4]
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        *,
        shared_memory: bool = True,
        step_in_caller: bool = False,
        **kwargs: Any,
    ):
        num_envs = len(env_fns) if hasattr(env_fns, "__len__") else 0
        if num_workers is None:
            num_workers = max(1, min(available_cpus(), num_envs) - int(step_in_caller))
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers is {num_workers!r}: expected a whole number >= 1")
        lanes = num_workers + int(step_in_caller)  # how many processes step envs
        if num_envs and lanes > num_envs:
            raise ValueError(
                f"num_workers is {num_workers}{' (+1 for the caller)' if step_in_caller else ''} but there are "
                f"only {num_envs} envs: expected 1 <= num_workers <= {num_envs - int(step_in_caller)} "
                f"(each process needs at least one env)"
            )
        self.num_workers = num_workers
        chunks = split_evenly(num_envs, lanes) if num_envs else []
        caller_chunk = chunks.pop(0) if step_in_caller and chunks else None
        super().__init__(env_fns, chunks, shared_memory=shared_memory, caller_chunk=caller_chunk, **kwargs)


def split_evenly(num_envs: int, num_workers: int) -> list[range]:
    """Splits env indices into ``num_workers`` contiguous chunks whose sizes differ by at most one.

    >>> split_evenly(10, 3)
    [range(0, 4), range(4, 7), range(7, 10)]
    """
    base, extra = divmod(num_envs, num_workers)
    chunks, start = [], 0
    for worker_index in range(num_workers):
        size = base + (1 if worker_index < extra else 0)
        chunks.append(range(start, start + size))
        start += size
    return chunks
