"""``PoolVecEnv``: K processes, each stepping N/K envs, coordinated through shared memory.

The hybrid of the other two designs. With N cheap envs and few cores, one process per env
(SubprocVecEnv) pays a pipe round trip per env and makes N processes fight over the cores; a
plain loop (MultiEnv) leaves all cores but one idle. The pool uses one process per core, and
each runs a MultiEnv over its chunk of envs, so the per-step cost of talking to processes is
paid K times instead of N times, and every core steps envs. The calling process is one of the
K: it steps the first chunk itself instead of sleeping while it waits for the others.

One step (the code: :mod:`vecenvs.core`, :mod:`vecenvs.workers`, :mod:`vecenvs.multi_env`):

1. the parent checks the actions and copies them into shared memory;
2. it tells each worker "step" by bumping a generation word in the worker's line of shared
   memory (no pipe, no pickle, no system call); a worker spinning on its word sees it at
   once, and sleeping workers are woken together with one ring of a doorbell;
3. each worker steps its chunk, writes observations, rewards and flags into its own rows of
   shared memory and sets its *done* word (its infos, if any, follow over its pipe);
   meanwhile the parent steps its own chunk;
4. the parent waits for the K-1 done words and copies the observations out.

The cost of a step is then about ``(N/K) t_env + t_sync``: the chunk's env steps plus a small
fixed cost of telling the workers and hearing back. The loop costs ``N t_env``, so the pool's
speed-up is about ``K N t_env / (N t_env + K t_sync)``: close to K once each chunk's work
dwarfs ``t_sync``, below 1 when it does not. (The overhead model of the seed post on
DummyVecEnv vs SubprocVecEnv vs a pool, ``fps_parallel / fps_sequential ~ N t_env / (N t_env +
t_os)``, written out for K workers.) Waking a sleeping process costs 50 µs or more on a VM;
spinning on a word in shared memory costs a fraction of a microsecond, which is why workers
spin while steps come quickly, and why the parent steps a chunk itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from vecenvs.checks import check_env_fns, check_seconds, check_whole_number
from vecenvs.core import ChunkedVecEnv, split_evenly
from vecenvs.workers import InProcessWorker, ProcessWorker, available_cpus, process_context

__all__ = [
    "DEFAULT_SPIN_SECONDS",
    "PoolVecEnv",
    "available_cpus",
    "check_num_workers",
    "split_evenly",
]

#: How long to spin before sleeping, when spinning is allowed. Waking a process that sleeps
#: cost 50 µs to over 500 µs on our 2-core VM; a spin of this length covers the time between
#: two steps of a tight loop and the usual skew between two workers. Workers stop spinning
#: while commands come slower than this (a slow policy between steps).
DEFAULT_SPIN_SECONDS = 1e-3


class PoolVecEnv(ChunkedVecEnv):
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
            work, such as a learner update, with the stepping), and puts every env under the
            ``timeout`` deadline (the caller's chunk runs in your process, like a plain loop).
        shared_memory: observations, rewards, flags and actions through shared memory
            (default). False sends them pickled over the pipes, to measure what shared memory
            buys; the workers are told what to do through shared memory either way.
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; None for the platform's default.
        spin_seconds: spin this long for an answer (or a command) before sleeping. None
            (default): :data:`DEFAULT_SPIN_SECONDS` when every process has a CPU of its own,
            else 0 (never spin: the CPU is needed by the process we would wait for).
        **kwargs: ``copy``, ``observation_mode``, ``autoreset_mode``, ``timeout``,
            ``start_timeout``: see :class:`~vecenvs.core.ChunkedVecEnv`.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import PoolVecEnv
        >>> with PoolVecEnv([lambda: gym.make("CartPole-v1") for _ in range(10)], num_workers=3) as envs:
        ...     observations, infos = envs.reset(seed=0)
        ...     envs.chunks  # the caller steps envs 0-2, two worker processes the rest
        [range(0, 3), range(3, 6), range(6, 10)]
    """

    uses_shared_area = True

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        *,
        step_in_caller: bool = True,
        shared_memory: bool = True,
        start_method: str | None = None,
        spin_seconds: float | None = None,
        **kwargs: Any,
    ):
        env_fns = check_env_fns(env_fns)
        num_workers = check_num_workers(num_workers, len(env_fns))
        processes = num_workers if not step_in_caller else num_workers - 1
        if spin_seconds is None:
            spin_seconds = DEFAULT_SPIN_SECONDS if processes + 1 <= available_cpus() else 0.0
        self.spin_seconds = check_seconds("spin_seconds", spin_seconds, zero_ok=True)
        self.step_in_caller = bool(step_in_caller)
        self.context = process_context(start_method, env_fns)
        self.start_method = self.context.get_start_method()
        super().__init__(env_fns, num_workers, shared_memory=shared_memory, **kwargs)

    def _start_workers(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        options = (self.autoreset_mode, self.observation_mode)
        for index, chunk in enumerate(self.chunks):
            if index > 0 or not self.step_in_caller:
                self.workers.append(
                    ProcessWorker(
                        index,
                        chunk,
                        [env_fns[i] for i in chunk],
                        self.context,
                        *options,
                        self.spin_seconds,
                    )
                )
        if self.step_in_caller:
            # Made after the workers are forked, so that no worker inherits a copy of these envs.
            self.workers.insert(
                0,
                InProcessWorker(0, self.chunks[0], [env_fns[i] for i in self.chunks[0]], *options),
            )


def check_num_workers(num_workers: Any, num_envs: int) -> int:
    """K, checked: a whole number from 1 to the number of envs (default: the CPUs we may use).

    Shared by every backend that splits its envs over workers (the pools, Ray's actors).

    Raises:
        TypeError: not a whole number (numpy integers are whole numbers; bools are not).
        ValueError: below 1, or more workers than envs.
    """
    if num_workers is None:
        return max(1, min(available_cpus(), num_envs))
    num_workers = check_whole_number("num_workers", num_workers)
    if num_workers > num_envs:
        raise ValueError(
            f"num_workers is {num_workers} but there are only {num_envs} envs: expected "
            f"1 <= num_workers <= {num_envs} (each worker needs at least one env)"
        )
    return num_workers
