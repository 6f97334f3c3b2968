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
   shared memory, and answers with the chunk's infos (usually nothing). Meanwhile the parent
   steps a chunk of its own when it has a CPU for it (``step_in_caller``) instead of sleeping;
4. the parent waits for the K answers and copies the observations out.

The cost of a step is then about ``(N/K) t_env + t_os``: the chunk's env steps plus a fixed
overhead ``t_os`` for waking the workers and hearing back. The loop costs ``N t_env``, so the
pool's speed-up is about ``K N t_env / (N t_env + K t_os)``: close to K once each chunk's work
dwarfs ``t_os``, below 1 when it does not. (This is the overhead model of the seed post on
DummyVecEnv vs SubprocVecEnv vs a pool, ``fps_parallel / fps_sequential ~ N t_env / (N t_env + t_os)``,
written out for K workers.) On a VM, waking a sleeping process can cost 50 µs or more; that
is why the parent steps a chunk itself and, when every process has a CPU of its own, spins
for a moment before sleeping.
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
        num_workers: K, the number of worker processes to start, at least 1. Default: one per
            CPU this process may use, less one for the caller (see ``step_in_caller``).
        shared_memory: pass observations, rewards, flags and actions through shared memory
            (default). False sends them pickled over the pipes, to measure what shared memory buys.
        step_in_caller: the calling process steps a chunk of envs itself while the workers step
            theirs, instead of sleeping until they answer: the envs are split K+1 ways. Default:
            yes when the caller has a CPU of its own (K+1 <= CPUs), which is when it pays: the
            caller's chunk costs nothing extra, and one process fewer has to be woken up per step.
        **kwargs: ``autoreset_mode``, ``start_method``, ``timeout``, ``start_timeout``, ``copy``,
            ``spin_seconds``: see :class:`~vecenvs.process_env.ProcessVecEnv`.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import PoolVecEnv
        >>> with PoolVecEnv([lambda: gym.make("CartPole-v1")] * 8, num_workers=2, step_in_caller=False) as envs:
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
        step_in_caller: bool | None = None,
        **kwargs: Any,
    ):
        num_envs = len(env_fns) if hasattr(env_fns, "__len__") else 0
        cpus = available_cpus()
        if num_workers is None:
            num_workers = max(1, min(cpus - 1, num_envs - 1)) if cpus > 1 else 1
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers is {num_workers!r}: expected a whole number >= 1")
        if step_in_caller is None:
            step_in_caller = num_workers + 1 <= cpus and num_workers + 1 <= num_envs
        lanes = num_workers + int(step_in_caller)  # how many processes step envs
        if num_envs and lanes > num_envs:
            raise ValueError(
                f"num_workers is {num_workers}{' (+1 for the caller)' if step_in_caller else ''} but there are "
                f"only {num_envs} envs: expected 1 <= num_workers <= {num_envs - int(step_in_caller)} "
                f"(each process needs at least one env)"
            )
        self.num_workers = num_workers
        self.step_in_caller = step_in_caller
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
