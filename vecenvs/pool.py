"""``PoolVecEnv``: K processes, each stepping N/K envs, results in shared memory.

The hybrid of the other two designs. With N cheap envs and few cores, one process per env
(SubprocVecEnv) pays a pipe round trip per env and makes N processes fight over the cores; a
plain loop (MultiEnv) leaves all cores but one idle. The pool uses one process per core, and
each runs a MultiEnv over its chunk of envs, so the per-step cost of talking to processes is
paid K times instead of N times, and every core steps envs. The calling process is one of the
K: it steps the first chunk itself instead of sleeping while it waits for the others.

One step:
1. the parent checks the actions and writes them into shared memory;
2. it sends each worker a tiny STEP command (the pipe only wakes the worker up);
3. each worker steps its chunk, writing observations, rewards and flags into its own slice of
   shared memory, and answers with the chunk's infos (usually nothing). Meanwhile the parent
   steps its own chunk, into its own slice;
4. the parent waits for the K-1 answers and copies the observations out.

The cost of a step is then about ``(N/K) t_env + t_os``: the chunk's env steps plus a fixed
overhead ``t_os`` for waking the workers and hearing back. The loop costs ``N t_env``, so the
pool's speed-up is about ``K N t_env / (N t_env + K t_os)``: close to K once each chunk's work
dwarfs ``t_os``, below 1 when it does not. (This is the overhead model of the seed post on
DummyVecEnv vs SubprocVecEnv vs a pool, ``fps_parallel / fps_sequential ~ N t_env / (N t_env + t_os)``,
written out for K workers.) On a VM, waking a sleeping process can cost 50 µs or more; that
is why the parent steps a chunk itself, and why, when every process has a CPU of its own,
waiting starts with a short spin (see ``spin_seconds``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from vecenvs.batching import check_env_fns
from vecenvs.process_env import ProcessVecEnv, available_cpus

__all__ = ["PoolVecEnv", "available_cpus", "check_num_workers", "split_evenly"]


class PoolVecEnv(ProcessVecEnv):
    """Steps N envs in K processes, N/K envs each, through shared memory.

    Args:
        env_fns: functions that each make one env (lambdas and notebook functions work).
        num_workers: K, how many processes step envs in parallel, from 1 to the number of envs.
            Default: one per CPU this process may use. The calling process is one of the K
            (see ``step_in_caller``), so K-1 worker processes are started: with K=1 the pool is
            the sequential loop.
        step_in_caller: the calling process steps a chunk of envs itself, in ``step_wait``,
            instead of sleeping until the workers answer: its chunk costs nothing extra, and one
            process fewer has to be woken up each step. False starts K worker processes and
            leaves the caller free between ``step_async`` and ``step_wait`` (to overlap its own
            work, such as a learner update, with the stepping). Choose False too when an env
            may hang: the caller's chunk runs in your process, like a plain loop, so only the
            workers' envs are under the ``timeout`` deadline.
        shared_memory: pass observations, rewards, flags and actions through shared memory
            (default). False sends them pickled over the pipes, to measure what shared memory buys.
        **kwargs: ``autoreset_mode``, ``start_method``, ``timeout``, ``start_timeout``, ``copy``,
            ``spin_seconds``: see :class:`~vecenvs.process_env.ProcessVecEnv`.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import PoolVecEnv
        >>> with PoolVecEnv([lambda: gym.make("CartPole-v1")] * 10, num_workers=3) as envs:
        ...     observations, infos = envs.reset(seed=0)
        ...     envs.caller_chunk, envs.chunks  # the caller steps envs 0-3, two workers the rest
        (range(0, 4), [range(4, 7), range(7, 10)])
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        *,
        step_in_caller: bool = True,
        shared_memory: bool = True,
        **kwargs: Any,
    ):
        env_fns = check_env_fns(env_fns)  # first: the split below needs a list of callables
        num_envs = len(env_fns)
        num_workers = check_num_workers(num_workers, num_envs)
        self.num_workers = num_workers
        self.step_in_caller = step_in_caller
        chunks = split_evenly(num_envs, num_workers)
        caller_chunk = chunks.pop(0) if step_in_caller else None
        super().__init__(env_fns, chunks, shared_memory=shared_memory, caller_chunk=caller_chunk, **kwargs)


def check_num_workers(num_workers: int | None, num_envs: int) -> int:
    """K, checked: a whole number from 1 to the number of envs (default: the CPUs we may use).

    Shared by every backend that splits its envs over workers (the pools, Ray's actors).

    Raises:
        ValueError: naming the bad ``num_workers`` and what was expected.
    """
    if num_workers is None:
        return max(1, min(available_cpus(), num_envs))
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers is {num_workers!r}: expected a whole number >= 1")
    if num_workers > num_envs:
        raise ValueError(
            f"num_workers is {num_workers} but there are only {num_envs} envs: expected "
            f"1 <= num_workers <= {num_envs} (each worker needs at least one env)"
        )
    return num_workers


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
