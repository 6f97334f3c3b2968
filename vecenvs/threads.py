"""Threads in workers: how many BLAS, OpenMP and torch threads each worker's envs may use.

numpy's matrix products run on a BLAS library (OpenBLAS in numpy's wheels, MKL in some
builds), torch's CPU ops on its own thread pool, and both start one thread per CPU by
default. That is right for one process on an idle machine. In a vector env it is not: K worker
processes each start a thread per CPU, so an env that does a small matrix product per step has
K x CPUs threads fighting over the CPUs, and OpenBLAS's idle threads keep spinning between
products: a slowdown often reported by users of Stable-Baselines3, Ray and PyTorch. Sample
Factory's workers have ``force_envs_single_thread`` for it.

So every worker of :class:`~vecenvs.pool.PoolVecEnv`, :class:`~vecenvs.async_pool.AsyncPoolVecEnv`,
:class:`~vecenvs.subproc.SubprocVecEnv` and :class:`~vecenvs.ray_env.RayVecEnv` sets its
thread pools to ``worker_threads`` threads (default :data:`DEFAULT_WORKER_THREADS`, one; None
leaves them as they are) before making its envs:

- the BLAS and OpenMP libraries loaded in the process, through `threadpoolctl
  <https://github.com/joblib/threadpoolctl>`_, which finds them wherever they come from
  (numpy's OpenBLAS, scipy's, an MKL, torch's ``libgomp``) and calls each one's own setter;
- torch's intra-op pool with ``torch.set_num_threads``, when torch is imported. threadpoolctl
  does not reach it in every build: torch links MKL statically (threadpoolctl cannot see it),
  and builds whose ATen backend is TBB or native ignore OpenMP. (On this lab's CPU wheel,
  torch 2.13, ``threadpool_limits(1)`` alone did bring ``torch.get_num_threads()`` to 1,
  through its ``libgomp``; ``set_num_threads`` is what torch documents, so it is called too.)

A library is only seen once it is loaded, and an env may import numpy's friends or torch in its
constructor: so the limit is set again after each env is made, when something new was imported
(:class:`CappedEnvFactory`). A library first loaded later, during a step, is not limited; set
its environment variable (``OMP_NUM_THREADS``...) for that. torch's inter-op pool (used only by
TorchScript's ``fork``) is left alone: torch refuses to resize it once it has been used.

What is *not* limited, on purpose: the calling process. :class:`~vecenvs.multi_env.MultiEnv`
and gymnasium's ``SyncVectorEnv`` step their envs in it, and so does the pool's caller chunk
(``step_in_caller=True``, the default): limiting its threads would change the user's own
process for the rest of its life (their policy, their learner's updates), where limiting a
worker changes only a process we started. To limit your own process too, use threadpoolctl
yourself, e.g. ``with threadpoolctl.threadpool_limits(1): ...`` around your loop, or
``PoolVecEnv(..., step_in_caller=False)`` to put every env in a worker.

Example:
    >>> from vecenvs.threads import limit_threads, thread_limits
    >>> limit_threads(1)  # this process, from now on
    >>> thread_limits()["blas"]
    1
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from vecenvs.checks import check_whole_number

__all__ = [
    "DEFAULT_WORKER_THREADS",
    "CappedEnvFactory",
    "cap_env_fns",
    "check_worker_threads",
    "limit_threads",
    "thread_limits",
]

#: Threads each worker's BLAS, OpenMP and torch pools may use unless told otherwise: one, as
#: Sample Factory's ``force_envs_single_thread`` and Ray's default ``OMP_NUM_THREADS`` do. A
#: worker is one of K processes already sharing the CPUs.
DEFAULT_WORKER_THREADS = 1


def check_worker_threads(worker_threads: Any) -> int | None:
    """``worker_threads`` checked: a whole number >= 1, or None (leave the threads alone).

    Raises TypeError (also a ValueError) for what is not a whole number, ValueError below 1.
    """
    if worker_threads is None:
        return None
    try:
        return check_whole_number("worker_threads", worker_threads)
    except ValueError as error:  # (WrongType is a ValueError too, and keeps its type here)
        raise type(error)(f"{error}, or None to leave the workers' threads alone") from None


# What limit_threads last did in this process: (pid, threads, modules imported by then). A
# forked child starts with its parent's record, hence the pid.
_last_limit: tuple[int, int, int] | None = None


def limit_threads(threads: int) -> None:
    """Sets this process's BLAS and OpenMP thread pools, and torch's if imported, to ``threads``.

    For the rest of the process's life (it is not a context manager: a worker is ours). Cheap
    when nothing was imported since the last call with the same number: a new native library
    arrives with an import, and finding the loaded libraries takes a millisecond or two.
    """
    global _last_limit
    threads = check_whole_number("threads", threads)
    now = (os.getpid(), threads, len(sys.modules))
    if now == _last_limit:
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)  # kept: the object only restores on exit from a `with`
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):  # (a half-imported torch has not)
        torch.set_num_threads(threads)
    _last_limit = (os.getpid(), threads, len(sys.modules))


def thread_limits() -> dict[str, int]:
    """The threads this process's pools may use now: ``{"blas": 1, "openmp": 1, "torch": 1}``.

    A kind of pool that is not loaded is left out; with several libraries of one kind (numpy's
    and scipy's OpenBLAS), the largest number. For checking a limit from inside an env, e.g.
    ``envs.call("thread_limits")`` on the teaching env ``vecenvs/Costly-v0``.
    """
    from threadpoolctl import threadpool_info

    limits: dict[str, int] = {}
    for pool in threadpool_info():
        kind = pool["user_api"]
        limits[kind] = max(limits.get(kind, 0), int(pool["num_threads"]))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        limits["torch"] = int(torch.get_num_threads())
    return limits


class CappedEnvFactory:
    """An env factory that sets the process's thread pools to ``threads`` before and after making
    its env (see the module docstring): what a worker runs instead of the factory it was given.

    Picklable (by dill, cloudpickle and Ray) as long as the factory it wraps is.
    """

    def __init__(self, env_fn: Callable[[], gym.Env], threads: int):
        self.env_fn = env_fn
        self.threads = threads

    def __call__(self) -> gym.Env:
        limit_threads(self.threads)  # before: numpy's BLAS is loaded already, whatever the env does
        env = self.env_fn()
        limit_threads(self.threads)  # after: the libraries the env's constructor imported
        return env

    def __repr__(self) -> str:
        return f"{self.env_fn!r} with {self.threads} thread(s)"


def cap_env_fns(
    env_fns: Sequence[Callable[[], gym.Env]], worker_threads: int | None
) -> list[Callable[[], gym.Env]]:
    """The factories a worker should run: each wrapped in a :class:`CappedEnvFactory`, or
    unchanged when ``worker_threads`` is None."""
    if worker_threads is None:
        return list(env_fns)
    return [CappedEnvFactory(env_fn, worker_threads) for env_fn in env_fns]
