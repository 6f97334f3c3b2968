"""The ceiling: the most env steps per second this machine gives, measured.

No vector env can step N envs faster than K processes that each step their share of the envs
in a plain loop and never wait for anyone. This module measures that as one more row of the
benchmark (backend ``"ceiling"``), beside the real backends in the same run; each row's
**efficiency** is its throughput over this one (:attr:`vecenvs.bench.Measurement.efficiency`).
It is measured, not computed as "CPUs x one env's rate": busy cores share caches, memory
bandwidth and turbo headroom, and a hyperthreaded core counts as two CPUs (on a 16-core Xeon,
CartPole's ceiling was 1.5M steps/s where 16 x one env's rate says 1.9M).

``min(K, N)`` processes build, reset and pick a ring of actions for their envs before any
timing. For a window the parent sends each "start at t0, stop at t0 + S" (t0 a few ms ahead, so
that all are awake; ``time.perf_counter`` is system-wide on Linux); each steps its envs round and
round until the deadline and answers with its env steps and when its last step ended. The
throughput is all their steps over t0 to the last end. Between windows they block on their
pipes, so the other backends' windows are not disturbed.

Example:
    >>> from vecenvs.bench.ceiling import Ceiling
    >>> with Ceiling("CartPole-v1", num_envs=8, num_workers=2) as ceiling:
    ...     env_steps, seconds = ceiling.run_for(0.1)
    >>> env_steps / seconds > 0
    True
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import multiprocess
import multiprocess.connection
import numpy as np

from vecenvs.checks import check_seconds, check_whole_number
from vecenvs.cpus import available_cpus
from vecenvs.envspec import EnvSource
from vecenvs.factory import env_fns_for
from vecenvs.threads import DEFAULT_WORKER_THREADS, cap_env_fns, check_worker_threads
from vecenvs.workers import exit_when_orphaned

__all__ = ["DESCRIPTION", "NAME", "Ceiling", "check_kwargs"]

#: The benchmark's name for this row (``--backend ceiling``, ``Backend("ceiling")``).
NAME = "ceiling"

#: How tables and the dashboard name this row (:func:`vecenvs.bench.engine.describe`).
DESCRIPTION = "ceiling (min(K, N) processes, no coordination: the machine's limit)"

#: How many actions are sampled up front and then cycled through while stepping, here and in
#: the engine: enough that the envs don't see one fixed action, few enough to sample in no time.
ACTION_RING_SIZE = 64

#: How far ahead of "now" a window starts: time for every process to wake up and be ready.
START_MARGIN_SECONDS = 0.005
START_MARGIN_PER_WORKER = 0.0005

#: The keyword arguments the ceiling takes (besides the env's).
KWARGS = ("num_workers", "start_method", "timeout", "worker_threads")


def check_kwargs(kwargs: Mapping[str, Any], num_envs: int) -> None:
    """Raise ``ValueError`` for arguments :class:`Ceiling` would refuse, before building.
    ``num_workers`` above N is allowed: the ceiling then runs N processes (min(K, N))."""
    unknown = sorted(set(kwargs) - set(KWARGS))
    if unknown:
        raise ValueError(f"the ceiling takes only {', '.join(KWARGS)}; got {', '.join(unknown)}")
    if kwargs.get("num_workers") is not None:
        check_whole_number("the ceiling's num_workers", kwargs["num_workers"])
    method, methods = kwargs.get("start_method"), multiprocess.get_all_start_methods()
    if method is not None and method not in methods:
        raise ValueError(f"start_method {method!r} is not one of {', '.join(methods)}")
    if kwargs.get("timeout") is not None:
        check_seconds("the ceiling's timeout", kwargs["timeout"])
    check_worker_threads(kwargs.get("worker_threads"))


class Ceiling:
    """``min(K, N)`` processes stepping their share of N envs each, with no coordination.

    K (``num_workers``) defaults to the CPUs this process may use; N is split as evenly as
    possible. Env i is reset with ``seed + i`` and samples its actions from a space seeded so.
    ``timeout`` is the longest wait, in seconds, for a process to build its envs or to answer
    after a window's deadline. ``worker_threads``: the BLAS, OpenMP and torch threads of each
    process, as the pools' workers have them (default 1; None leaves them alone; see
    :mod:`vecenvs.threads`).
    """

    def __init__(
        self,
        env_id: EnvSource,
        num_envs: int,
        *,
        env_kwargs: Mapping[str, Any] | None = None,
        num_workers: int | None = None,
        seed: int = 0,
        start_method: str | None = None,
        timeout: float = 60.0,
        worker_threads: int | None = DEFAULT_WORKER_THREADS,
    ):
        check_kwargs(
            {
                "num_workers": num_workers,
                "start_method": start_method,
                "timeout": timeout,
                "worker_threads": worker_threads,
            },
            num_envs,
        )
        env_fns = cap_env_fns(
            env_fns_for(env_id, num_envs, **dict(env_kwargs or {})), worker_threads
        )
        self.num_envs = num_envs
        self.num_workers = min(num_workers or available_cpus(), num_envs)
        self.timeout = timeout
        self._pipes: list[Any] = []
        self._processes: list[Any] = []
        context = multiprocess.get_context(start_method)
        try:
            for chunk in np.array_split(np.arange(num_envs), self.num_workers):
                parent_end, child_end = context.Pipe()
                process = context.Process(
                    target=_work,
                    args=(
                        [env_fns[i] for i in chunk],
                        seed + int(chunk[0]),
                        child_end,
                        os.getpid(),
                    ),
                    # daemon: if this process exits without closing, multiprocess ends its
                    # children; if it is killed, they notice by themselves (exit_when_orphaned).
                    daemon=True,
                )
                process.start()
                child_end.close()  # the child's end lives in the child only
                self._pipes.append(parent_end)
                self._processes.append(process)
            self._gather(time.perf_counter() + timeout, "building its envs")
        except BaseException:
            self.close()
            raise

    def run_for(self, seconds: float) -> tuple[int, float]:
        """One timed window: every process steps for ``seconds`` from a common start. Returns
        (all processes' env steps, seconds from that start to the end of the last step)."""
        margin = START_MARGIN_SECONDS + START_MARGIN_PER_WORKER * self.num_workers
        start_at = time.perf_counter() + margin
        for pipe in self._pipes:
            pipe.send(("run", (start_at, seconds)))
        replies = self._gather(start_at + seconds + self.timeout, "stepping")
        steps = sum(steps for steps, _ in replies)
        return steps, max(ended for _, ended in replies) - start_at

    def close(self) -> None:
        """Ask every process to close its envs, then join, terminate, kill; safe to call twice."""
        for pipe in self._pipes:
            with contextlib.suppress(OSError):  # already gone: joined or killed below
                pipe.send(("close", None))
        deadline = time.perf_counter() + 5.0
        for process in self._processes:
            process.join(max(0.0, deadline - time.perf_counter()))
        for stop in ("terminate", "kill"):
            for process in self._processes:
                if process.is_alive():
                    getattr(process, stop)()
                    process.join(1.0)
        for pipe in self._pipes:
            pipe.close()
        self._pipes, self._processes = [], []

    def __enter__(self) -> Ceiling:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _gather(self, deadline: float, doing: str) -> list[Any]:
        """Every process's ``(ok, payload)`` reply; raise if one failed, died or is too late."""
        replies: dict[int, Any] = {}
        while len(replies) < len(self._pipes):
            waiting = [i for i in range(len(self._pipes)) if i not in replies]
            # A pipe is ready when its process answered; a sentinel when its process ended.
            objects = [self._pipes[i] for i in waiting] + [
                self._processes[i].sentinel for i in waiting
            ]
            if not multiprocess.connection.wait(objects, max(0.0, deadline - time.perf_counter())):
                raise TimeoutError(
                    f"ceiling process {waiting[0]} did not answer within "
                    f"{self.timeout:g} s while {doing}"
                )
            for index in waiting:
                if self._pipes[index].poll():
                    try:
                        ok, payload = self._pipes[index].recv()
                    except EOFError:
                        ok, payload = False, "the process closed its pipe"
                    if not ok:
                        raise RuntimeError(
                            f"ceiling process {index} failed while {doing}:\n{payload}"
                        )
                    replies[index] = payload
                elif not self._processes[index].is_alive():
                    code = self._processes[index].exitcode
                    raise RuntimeError(
                        f"ceiling process {index} died while {doing} (exit code {code})"
                    )
        return [replies[index] for index in sorted(replies)]


def _work(env_fns: list[Callable[[], gym.Env]], seed: int, pipe: Any, parent_pid: int) -> None:
    """A ceiling process: build and reset its envs, then step them when told, until closed."""
    exit_when_orphaned(parent_pid)
    # Ctrl-C is for the parent, which then closes us; dying mid-window would lose the reply.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    envs: list[gym.Env] = []
    try:
        envs = [make() for make in env_fns]
        actions = []
        for index, env in enumerate(envs):
            env.reset(seed=seed + index)
            env.action_space.seed(seed + index)
            actions.append([env.action_space.sample() for _ in range(ACTION_RING_SIZE)])
        pipe.send((True, None))
        while True:
            command, payload = pipe.recv()  # the parent's two commands: "run" and "close"
            if command == "close":
                pipe.send((True, None))
                return
            pipe.send((True, _step_until(envs, actions, *payload)))
    except (EOFError, BrokenPipeError):
        pass  # the parent is gone: nobody to tell
    except Exception:
        pipe.send((False, traceback.format_exc()))
    finally:
        for env in envs:
            env.close()


def _step_until(
    envs: list[gym.Env], actions: list[list[Any]], start_at: float, seconds: float
) -> tuple[int, float]:
    """Step every env in turn from ``start_at`` for ``seconds``; return (env steps, end time)."""
    clock = time.perf_counter
    time.sleep(max(0.0, start_at - clock()))
    while clock() < start_at:  # sleep() may wake a little early
        pass
    deadline = start_at + seconds
    ring = ACTION_RING_SIZE
    steps = rounds = 0
    now = clock()
    # The plain loop: no message, no shared buffer, no waiting. Like the engine's loop, it reads
    # the clock once per round over its envs, and the last round may run past the deadline.
    while now < deadline:
        for env, env_actions in zip(envs, actions):
            _, _, terminated, truncated, _ = env.step(env_actions[rounds % ring])
            if terminated or truncated:
                env.reset()
        steps += len(envs)
        rounds += 1
        now = clock()
    return steps, now
