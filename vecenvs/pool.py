"""``PoolVecEnv``: K processes, each stepping N/K envs, coordinated through shared memory.

The hybrid of the other two designs. With N cheap envs and few cores, one process per env
(SubprocVecEnv) pays a pipe round trip per env and makes N processes fight over the cores; a
plain loop (MultiEnv) leaves all cores but one idle. The pool runs one process per core, each a
MultiEnv over its chunk, so the cost of talking to processes is paid K times instead of N, and
the calling process steps the first chunk itself instead of sleeping while it waits. One step
is told top to bottom in :mod:`vecenvs.core`.

A step then costs about ``(N/K) t_env + t_sync``, against the loop's ``N t_env``: a speed-up of
about ``K N t_env / (N t_env + K t_sync)``, close to K once each chunk's work dwarfs ``t_sync``,
below 1 when it does not (the seed post's ``N t_env / (N t_env + t_os)``, for K workers).
Waking a sleeping process costs 50 µs or more on a VM, spinning on a word in shared memory a
fraction of a microsecond: why workers spin while steps come quickly, and why the parent steps
a chunk itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym

from vecenvs import doorbell
from vecenvs.checks import check_env_fns, check_seconds, check_whole_number
from vecenvs.core import ChunkedVecEnv, split_evenly
from vecenvs.cpus import available_cpus
from vecenvs.threads import DEFAULT_WORKER_THREADS, cap_env_fns, check_worker_threads
from vecenvs.workers import (
    Chunk,
    ChunkSpec,
    ProcessWorker,
    SharedMemoryWorker,
    process_context,
    serve_with_control,
)

__all__ = [
    "DEFAULT_SPIN_SECONDS",
    "PoolVecEnv",
    "WorkerCount",
    "WorkerStarter",
    "available_cpus",
    "check_num_workers",
    "split_evenly",
    "workers_for",
]

logger = logging.getLogger(__name__)

#: The longest spin before sleeping, where spinning is allowed (see :mod:`vecenvs.doorbell`).
DEFAULT_SPIN_SECONDS = doorbell.DEFAULT_SPIN_SECONDS


class PoolVecEnv(ChunkedVecEnv):
    """Steps N envs in K processes, N/K envs each, through shared memory.

    Args:
        env_fns: one function per env that makes it (a lambda, a ``functools.partial`` of
            ``gym.make``, a class), called in the process that steps the env.
        num_workers: K, from 1 to the number of envs; default one per CPU this process may use.
            The calling process is one of the K (see ``step_in_caller``), so K-1 worker
            processes are started: with K=1 the pool is the sequential loop.
        step_in_caller: the calling process steps a chunk itself, in ``step_wait``, instead of
            sleeping until the workers answer. False starts K worker processes and leaves the
            caller free between ``step_async`` and ``step_wait`` (to overlap its own work, such
            as a learner update), with every env under the ``timeout`` deadline.
        shared_memory: observations, rewards, flags and actions through shared memory
            (default). False pickles them over the pipes, to measure what shared memory buys;
            commands go through shared memory either way.
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; None for the platform's default.
        spin_seconds: the longest a process spins for an answer (or a command) before it
            sleeps; each spins for a few times as long as its waits have lasted, and not at
            all while they last longer than this (a policy that thinks between steps). None
            (default): :data:`DEFAULT_SPIN_SECONDS` for the processes that have a CPU of their
            own (:func:`~vecenvs.doorbell.spin_limits`), else 0 (the CPU is needed by the process
            we would wait for); 0 as well without ``shared_memory``, where every answer is a
            message read with a system call anyway, so a spin saves little and takes a core.
        worker_threads: the BLAS, OpenMP and torch threads each worker process may use
            (default 1); None leaves them alone. The caller's own chunk is not limited: it
            runs in your process (see :mod:`vecenvs.threads`).
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
        worker_threads: int | None = DEFAULT_WORKER_THREADS,
        **kwargs: Any,
    ):
        env_fns = check_env_fns(env_fns)
        num_workers = check_num_workers(num_workers, len(env_fns))
        self.step_in_caller = bool(step_in_caller)
        self.starter = WorkerStarter(
            env_fns,
            processes=num_workers - 1 if self.step_in_caller else num_workers,
            caller_steps=self.step_in_caller,
            shared_memory=shared_memory,
            start_method=start_method,
            spin_seconds=spin_seconds,
            worker_threads=worker_threads,
            loop=serve_with_control,
        )
        self.uses_shared_area = self.starter.shared_area
        self.spin_seconds, self.start_method = self.starter.spin_seconds, self.starter.start_method
        self.caller_spin_seconds = self.starter.caller_spin_seconds
        self.worker_threads = self.starter.worker_threads
        super().__init__(env_fns, num_workers, shared_memory=shared_memory, **kwargs)

    def _start_workers(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        for index, rows in enumerate(self.chunks):
            if index > 0 or not self.step_in_caller:
                self.workers.append(self.starter.start(index, self.spec_of(rows, env_fns)))
        if self.step_in_caller:
            # Made after the workers are forked, so that no worker inherits a copy of these envs.
            self.own = Chunk(self.spec_of(self.chunks[0], env_fns))


class WorkerStarter:
    """How a pool starts its worker processes, checked once: the start method, how long each
    side spins (:attr:`spin_seconds` for the workers, :attr:`caller_spin_seconds` for the
    caller), the threads each worker may use, and whether they share words in memory with the
    parent (not where this CPU has no barrier we trust: see :mod:`vecenvs.doorbell`).
    :class:`PoolVecEnv` and :class:`~vecenvs.async_pool.AsyncPoolVecEnv` each have one.

    Args:
        processes: how many worker processes the pool starts (for the default spin).
        caller_steps: whether the caller steps envs too, or only waits (for the default spin).
        loop: the worker's loop over its control words (see :class:`~vecenvs.workers.ProcessWorker`).
        Others: as for :class:`PoolVecEnv`.
    """

    def __init__(
        self,
        env_fns: list[Callable[[], gym.Env]],
        *,
        processes: int,
        caller_steps: bool,
        shared_memory: bool,
        start_method: str | None,
        spin_seconds: float | None,
        worker_threads: int | None,
        loop: Callable[..., None],
    ):
        self.worker_threads = check_worker_threads(worker_threads)
        if spin_seconds is None:
            longest = DEFAULT_SPIN_SECONDS if shared_memory else 0.0
            self.caller_spin_seconds, self.spin_seconds = doorbell.spin_limits(
                processes, caller_steps, available_cpus(), longest
            )
        else:
            self.spin_seconds = check_seconds("spin_seconds", spin_seconds, zero_ok=True)
            self.caller_spin_seconds = self.spin_seconds
        refused = doorbell.refuse_spinning_why()
        if refused is not None:  # said once per process: every pool here would say the same
            if not _REFUSALS:
                logger.warning("PoolVecEnv: %s", refused)
            _REFUSALS.add(refused)
        self.shared_area = refused is None
        self.context = process_context(start_method, env_fns)
        self.start_method: str = self.context.get_start_method()
        self.loop = loop

    def start(self, index: int, spec: ChunkSpec) -> ProcessWorker:
        """Starts the worker process of chunk ``index``."""
        spec = replace(spec, env_fns=cap_env_fns(spec.env_fns, self.worker_threads))
        if self.shared_area:
            return SharedMemoryWorker(index, spec, self.context, self.spin_seconds, self.loop)
        return ProcessWorker(index, spec, self.context)  # pipes, which the kernel orders


_REFUSALS: set[str] = set()  # what was logged about missing barriers (once per process)


def check_num_workers(num_workers: Any, num_envs: int) -> int:
    """K, checked: a whole number from 1 to the number of envs (default: the CPUs we may use).

    Shared by the pools and Ray's actors. Raises TypeError for what is not a whole number (numpy
    integers are; bools are not), ValueError below 1 or above the number of envs.
    """
    if num_workers is None:
        return workers_for(num_envs).count
    num_workers = check_whole_number("num_workers", num_workers)
    if num_workers > num_envs:
        raise ValueError(
            f"num_workers is {num_workers} but there are only {num_envs} envs: expected "
            f"1 <= num_workers <= {num_envs} (each worker needs at least one env)"
        )
    return num_workers


@dataclass(frozen=True)
class WorkerCount:
    """K for a pool over N envs (:func:`workers_for`): as many workers as the CPUs call for, but
    never more than N, since each worker needs at least one env."""

    #: K: ``min(wanted, num_envs)``.
    count: int
    #: What the CPUs call for: ``per_cpu`` x ``cpus``.
    wanted: int
    #: N, the envs the workers share.
    num_envs: int
    #: The CPUs this process may use (:func:`vecenvs.cpus.available_cpus`).
    cpus: int
    per_cpu: int = 1

    @property
    def capped(self) -> bool:
        """True when N, not the CPUs, decided K: there were fewer envs than wanted workers."""
        return self.count < self.wanted

    def __str__(self) -> str:
        """``"K=4 at N=4, not 8 (one per CPU): each worker needs at least one env"``."""
        per_cpu = "one" if self.per_cpu == 1 else str(self.per_cpu)
        if self.capped:
            return (
                f"K={self.count} at N={self.num_envs}, not {self.wanted} ({per_cpu} per CPU of "
                f"{self.cpus}): each worker needs at least one env"
            )
        return f"K={self.count} at N={self.num_envs}: {per_cpu} per CPU of {self.cpus}"


def workers_for(num_envs: int, *, per_cpu: int = 1, cpus: int | None = None) -> WorkerCount:
    """K for ``num_envs`` envs: ``per_cpu`` workers per CPU (default: the CPUs this process may
    use), capped at N. What the pools take when not told, and what the notebooks print, so that
    a reader sees when N, not the machine, set K.

    Example:
        >>> print(workers_for(4, cpus=8))
        K=4 at N=4, not 8 (one per CPU of 8): each worker needs at least one env
        >>> workers_for(64, cpus=8).count
        8
    """
    num_envs = check_whole_number("num_envs", num_envs)
    per_cpu = check_whole_number("per_cpu", per_cpu)
    cpus = available_cpus() if cpus is None else check_whole_number("cpus", cpus)
    wanted = per_cpu * cpus
    return WorkerCount(min(wanted, num_envs), wanted, num_envs, cpus, per_cpu)
