"""``AsyncPoolVecEnv``: the pool, with each env stepped as soon as its action arrives.

The pool of :mod:`vecenvs.pool` steps in lock-step: ``step()`` returns when *every* env has
stepped. One slow step (a straggler: a long physics solve, a game loading a level, a network
hiccup) then holds up the whole batch, and every other worker sits idle until it is done.

EnvPool answers this with an asynchronous mode (its author's introduction is one of the seeds:
``num_envs=8, batch_size=4`` returns the 4 envs that finish first and leaves the other 4
running in the background). This class does the same with Python worker processes, under
EnvPool's names and conventions::

    envs = AsyncPoolVecEnv(env_fns, num_workers=2, batch_size=16)
    envs.async_reset(seed=0)                 # every env starts resetting; nothing is returned
    while training:
        observations, rewards, terminations, truncations, infos = envs.recv()  # 16 envs
        env_ids = infos["env_id"]            # which env each row is (EnvPool's convention)
        envs.send(policy(observations), env_ids)   # only these envs step again

How one round goes:

1. ``send(actions, env_ids)`` checks everything first (ids, duplicates, envs still busy, the
   actions' shape), writes the actions into the envs' rows of shared memory, and sends each
   worker that runs one of these envs a STEP_ENVS message naming its envs.
2. A worker steps the envs named, one after the other, and answers after *each* env (see
   :mod:`vecenvs.worker`). Its results are already in shared memory; the answer carries the
   env's index and its infos.
3. ``recv()`` reads answers from any worker as they come, and returns as soon as ``batch_size``
   envs are ready, in the order they finished, with their indices in ``infos["env_id"]``.

So a straggler delays only itself and the envs queued behind it in the same worker; the other
workers keep stepping, and their envs keep coming back. Throughput is then bound by the
*average* step cost of each worker's envs, not by the slowest env of every batch. The price is
that a batch mixes envs at different points in time, which on-policy algorithms must allow for
(EnvPool's documentation says the same). Run ``python -m vecenvs bench --backend pool
--backend pool-async`` on the teaching env with stragglers to see the difference.

Everything else is the sync pool's: starting the workers, the synchronous API (``reset``,
``step``, ``step_async`` / ``step_wait``, ``call``...), deadlines, crash reports, closing. The
two APIs can be mixed as long as no env has a pending ``send`` when a synchronous call starts
(``reset()`` drops pending results, as gymnasium's reset drops a pending step).

Why a subclass rather than a ``batch_size=`` option on :class:`~vecenvs.pool.PoolVecEnv`: the
lock-step pool is the one to read first, and its step is short; the async bookkeeping (which
envs are pending, which answers have come, which workers are busy) would double it and serve
only one use. Here it sits in one file that adds to the pool and changes none of it.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, iterate

from vecenvs.actions import ActionChecker
from vecenvs.batching import (
    check_env_fns,
    expand_seeds,
    split_reset_mask,
    tree_index,
    tree_put,
    tree_slice,
)
from vecenvs.errors import (
    AlreadyPendingCallError,
    NoAsyncCallError,
    VecEnvError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.pool import PoolVecEnv
from vecenvs.process_env import State, _closed_after
from vecenvs.worker import Command, dumps, loads

__all__ = ["AsyncPoolVecEnv"]


class AsyncPoolVecEnv(PoolVecEnv):
    """The pool with EnvPool's asynchronous API: ``async_reset``, ``send`` and ``recv``.

    Every env runs in a worker process (the caller steps none: it must stay free to hand out
    batches while the workers step). ``recv()`` returns ``batch_size`` envs, the first ready;
    ``infos["env_id"]`` (int32, EnvPool's convention; ``infos["_env_id"]`` is its all-True mask,
    as gymnasium's infos have for every key) says which env each row belongs to.

    Args:
        env_fns: functions that each make one env.
        num_workers: K worker processes, from 1 to the number of envs; default one per CPU.
        batch_size: how many envs ``recv()`` returns, from 1 to ``num_envs``. Default
            ``num_envs``: then ``recv()`` waits for every env, like ``step()``. Smaller is what
            hides stragglers; EnvPool's examples often use half the envs.
        shared_memory: actions and results through shared memory (default), or pickled over
            the pipes.
        **kwargs: ``autoreset_mode``, ``start_method``, ``timeout``, ``start_timeout``, ``copy``,
            ``spin_seconds``: see :class:`~vecenvs.process_env.ProcessVecEnv`.

    Raises:
        ValueError: a bad ``batch_size`` or ``num_workers``, before any process starts.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import AsyncPoolVecEnv
        >>> with AsyncPoolVecEnv([lambda: gym.make("CartPole-v1")] * 4, num_workers=2, batch_size=2) as envs:
        ...     envs.async_reset(seed=0)
        ...     observations, rewards, terminations, truncations, infos = envs.recv()
        ...     envs.send([0, 1], infos["env_id"])   # step the two envs just received
        ...     batch = envs.recv()                   # the next two ready, whichever they are
        >>> observations.shape, len(infos["env_id"])
        ((2, 4), 2)
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        *,
        batch_size: int | None = None,
        shared_memory: bool = True,
        **kwargs: Any,
    ):
        env_fns = check_env_fns(env_fns)
        num_envs = len(env_fns)
        if batch_size is None:
            batch_size = num_envs
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or not 1 <= batch_size <= num_envs:
            raise ValueError(f"batch_size is {batch_size!r}: expected a whole number from 1 to num_envs ({num_envs})")
        if "step_in_caller" in kwargs:
            raise TypeError(
                "AsyncPoolVecEnv takes no step_in_caller: every env runs in a worker, so that the "
                "caller is free to hand out each batch as soon as it is ready"
            )
        self.batch_size = int(batch_size)
        # Set before the processes start: close() reads them if starting fails half-way.
        self._pending = np.zeros(num_envs, dtype=np.bool_)  # sent, not yet returned by recv()
        self._in_flight: list[int] = []  # per worker: answers still due
        self._ready: deque[tuple[int, list[dict[str, Any]]]] = deque()  # (env, its infos), first done first
        super().__init__(env_fns, num_workers, step_in_caller=False, shared_memory=shared_memory, **kwargs)
        self._in_flight = [0] * len(self.chunks)
        self._worker_of = np.repeat(np.arange(len(self.chunks)), [len(chunk) for chunk in self.chunks])
        self._action_checkers: dict[int, ActionChecker] = {self.num_envs: self.check_actions}
        self._infos = _InfoBatch(self.batch_size)

    # ----------------------------------------------------------------- the async API

    def async_reset(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Starts resetting every env and returns at once; ``recv()`` returns them as they are done.

        The reset results come back like step results, with rewards 0 and flags False.

        Args:
            seed: as for ``reset``: an int seeds env i with ``seed + i``; or one seed per env.
            options: passed to every env's reset (a ``reset_mask`` is refused: all envs reset).
        """
        self._check_open()
        self._refuse_while_pending("async_reset()")
        seeds = expand_seeds(seed, self.num_envs)
        options, mask = split_reset_mask(options, self.num_envs)
        if mask is not None:
            raise ValueError("async_reset() resets every env: options['reset_mask'] is not supported; use reset()")
        self._state = State.NEEDS_RESET  # until every worker has been told (Ctrl-C)
        for worker_index, chunk in enumerate(self.chunks):
            payload = (list(range(len(chunk))), seeds[chunk.start : chunk.stop], options)
            self._dispatch(worker_index, Command.RESET_ENVS, payload, np.arange(chunk.start, chunk.stop))
        self._state = State.IDLE

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Sends actions to some envs and returns at once; collect the results with :meth:`recv`.

        Args:
            actions: one action per env of ``env_ids``, in the same order, batched like
                ``batch_space(single_action_space, len(env_ids))``.
            env_ids: the envs to step: a list or array of distinct indices, none of them
                pending; default every env. Usually the ``infos["env_id"]`` of the last recv().

        Raises:
            ValueError: bad, out-of-range or repeated env ids, or actions of the wrong shape.
            AlreadyPendingCallError: an env has already been sent an action not yet received.
        """
        self._check_open()
        self._check_usable("send()")
        env_ids = self._check_env_ids(env_ids)
        checker = self._checker(len(env_ids))
        actions = checker(actions)
        self._state = State.NEEDS_RESET  # until every worker has been told (Ctrl-C)
        if self.shared is not None:
            tree_put(self._shared_actions, env_ids, actions)  # the workers read them from there
            env_actions = None
        else:
            env_actions = list(iterate(checker.action_space, actions))
        for worker_index, positions in self._by_worker(env_ids):
            chunk_start = self.chunks[worker_index].start
            indices = [int(env_ids[p]) - chunk_start for p in positions]
            payload = (indices, None if env_actions is None else [env_actions[p] for p in positions])
            self._dispatch(worker_index, Command.STEP_ENVS, payload, env_ids[positions])
        self._state = State.IDLE

    def recv(self, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Waits for the first ``batch_size`` envs to be ready and returns their results.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)`` of ``batch_size`` envs,
            in the order they finished; ``infos["env_id"]`` holds their indices.

        Args:
            timeout: seconds to wait; by default the constructor's ``timeout``.

        Raises:
            NoAsyncCallError: fewer than ``batch_size`` envs have a pending send, so waiting
                could never end (e.g. recv() before any send() or async_reset()).
            EnvCrashedError: an env raised; the vector env is closed.
            WorkerDiedError, WorkerTimeoutError: a worker died or an env took too long; closed.
        """
        self._check_open()
        self._check_usable("recv()")
        pending = int(self._pending.sum())
        if pending < self.batch_size:
            if pending == 0:
                raise NoAsyncCallError(
                    "recv() has nothing to wait for: no env has a pending send(). Call async_reset() to "
                    "start, or send(actions, env_ids) for the envs of the last recv()", "recv"
                )
            raise NoAsyncCallError(
                f"recv() returns batch_size={self.batch_size} envs, but only {pending} have a pending send() "
                f"(envs {np.flatnonzero(self._pending).tolist()}), so it would wait forever: send() actions "
                f"to at least {self.batch_size - pending} more env(s) first", "recv"
            )
        self._wait_until(lambda: len(self._ready) >= self.batch_size, timeout or self.timeout, "recv")
        batch = list(itertools.islice(self._ready, self.batch_size))
        results = self._batch_of(batch)
        for _ in batch:  # only now: an interrupted recv() leaves them ready for the next one
            self._ready.popleft()
        self._pending[results[4]["env_id"]] = False
        return results

    # ----------------------------------------------------------------- the sync API, guarded

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Like the pool's ``reset``; results of envs still pending from ``send`` are dropped first."""
        self._check_open()
        if self._pending.any():
            self._wait_until(lambda: not any(self._in_flight), self.timeout, "reset (finishing the pending sends)")
            self._ready.clear()
            self._pending[:] = False
        return super().reset(seed=seed, options=options)

    def step_async(self, actions: Any) -> None:
        """Like the pool's ``step_async`` (every env, lock-step); refused while envs are pending."""
        self._check_open()
        self._refuse_while_pending("step()")
        super().step_async(actions)

    def _per_env(self, command: Command, payload_for: Any, on_caller: Any, doing: str) -> tuple[Any, ...]:
        self._check_open()
        self._refuse_while_pending(doing)
        return super()._per_env(command, payload_for, on_caller, doing)

    def close_extras(self, terminate: bool = False, **kwargs: Any) -> None:
        """Lets the envs still stepping finish (within the deadline), then closes like the pool."""
        self._closing = True
        if not terminate and any(self._in_flight):
            try:
                self._wait_until(lambda: not any(self._in_flight), min(self.timeout, 10.0), "close (finishing the pending sends)")
            except (VecEnvError, OSError):
                terminate = True  # a hung or dead worker: no point asking it politely
        super().close_extras(terminate=terminate, **kwargs)

    # ----------------------------------------------------------------- checks

    def _check_usable(self, doing: str) -> None:
        if self._state is State.STEPPING:
            raise AlreadyPendingCallError(f"cannot {doing} while a step() is pending: call step_wait() first", "step")
        if self._state is State.NEEDS_RESET:
            raise VecEnvError(f"a step or reset was interrupted half-way (Ctrl-C?): call reset() before {doing}")

    def _refuse_while_pending(self, doing: str) -> None:
        if self._pending.any():
            raise AlreadyPendingCallError(
                f"cannot {doing} while envs {np.flatnonzero(self._pending).tolist()} have a pending send(): "
                "recv() their results first (or reset(), which drops them)", "send"
            )

    def _check_env_ids(self, env_ids: Any) -> np.ndarray:
        """The env ids as an int array, or a ValueError naming the bad value."""
        if env_ids is None:
            ids = np.arange(self.num_envs)
        else:
            ids = np.asarray(env_ids)
            if ids.ndim == 0:
                ids = ids.reshape(1)  # one env id, as EnvPool accepts
            if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
                raise ValueError(
                    f"env_ids is {env_ids!r:.100}: expected a non-empty list or 1-D array of env indices "
                    f"(whole numbers from 0 to {self.num_envs - 1})"
                )
        outside = ids[(ids < 0) | (ids >= self.num_envs)]
        if outside.size:
            raise ValueError(f"env_ids {outside.tolist()} out of range: there are {self.num_envs} envs, 0 to {self.num_envs - 1}")
        values, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            raise ValueError(f"env_ids has {values[counts > 1].tolist()} more than once: each env takes one action per send()")
        busy = ids[self._pending[ids]]
        if busy.size:
            raise AlreadyPendingCallError(
                f"envs {busy.tolist()} already have a pending send(): recv() their results before sending them "
                "new actions", "send"
            )
        return ids.astype(np.int64)

    def _checker(self, count: int) -> ActionChecker:
        """Checks a batch of ``count`` actions (one checker per batch size, made once)."""
        checker = self._action_checkers.get(count)
        if checker is None:
            checker = self._action_checkers[count] = ActionChecker(batch_space(self.single_action_space, count), count)
        return checker

    # ----------------------------------------------------------------- talking to workers

    def _by_worker(self, env_ids: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(worker, positions in env_ids of its envs)``, keeping the order the envs were given."""
        workers = self._worker_of[env_ids]
        for worker_index in np.unique(workers):
            yield int(worker_index), np.flatnonzero(workers == worker_index)

    def _dispatch(self, worker_index: int, command: Command, payload: Any, env_ids: np.ndarray) -> None:
        """Sends a per-env command; each of ``env_ids`` is pending until recv() returns it."""
        self._send(worker_index, dumps((command, payload)), command.value)
        self._pending[env_ids] = True
        self._in_flight[worker_index] += len(env_ids)

    def _wait_until(self, done: Callable[[], bool], timeout: float, doing: str) -> None:
        """Reads answers from any worker until ``done()``, within ``timeout``, watching for dead workers."""
        deadline = time.perf_counter() + timeout
        while not done():
            ready = self._watcher.wait(max(deadline - time.perf_counter(), 0.0))
            if not ready:
                busy = [w for w, count in enumerate(self._in_flight) if count]
                waiting_envs = sorted(set(np.flatnonzero(self._pending).tolist()) - {env for env, _ in self._ready})
                self._close_after_failure()
                raise WorkerTimeoutError(busy, waiting_envs, timeout, doing)
            for worker_index, died in ready:
                if not died:
                    self._read_answers(worker_index)
            for worker_index, died in ready:
                if died:  # its envs are lost, whether we were waiting for them or not
                    self.processes[worker_index].join(1.0)  # so that its exit code is known
                    exitcode = self.processes[worker_index].exitcode
                    self._close_after_failure()
                    raise WorkerDiedError(worker_index, list(self.chunks[worker_index]), exitcode, doing)

    def _read_answers(self, worker_index: int) -> None:
        """Takes every answer that has arrived from one worker (a worker answers once per env)."""
        pipe = self.pipes[worker_index]
        try:
            while pipe.poll():
                ok, payload = loads(pipe.recv_bytes())
                self._take_answer(worker_index, ok, payload)
        except (EOFError, OSError):
            pass  # the worker is gone: its sentinel reports it

    def _take_answer(self, worker_index: int, ok: bool, payload: Any) -> None:
        if not ok:  # an env crashed: the envs are out of step, so close, as the sync pool does
            self._close_after_failure()
            raise _closed_after(payload.to_error())
        self._in_flight[worker_index] -= 1
        env_index, infos, *results = payload
        if results:  # no shared memory: the observation, reward and flags came with the answer
            observation, reward, terminated, truncated = results
            buffers = self.buffers
            row = tree_slice(buffers.observations, env_index, env_index + 1)
            concatenate(self.single_observation_space, [observation], row)
            buffers.rewards[env_index] = reward
            buffers.terminations[env_index] = terminated
            buffers.truncations[env_index] = truncated
        self._ready.append((env_index, infos))

    def _batch_of(self, batch: list[tuple[int, list[dict[str, Any]]]]) -> tuple[Any, ...]:
        """The 5-tuple for these envs, rows in the order given, with ``infos["env_id"]``."""
        env_ids = np.array([env for env, _ in batch], dtype=np.int32)
        infos: dict[str, Any] = {}
        for position, (_, env_infos) in enumerate(batch):
            for info in env_infos:
                infos = self._infos._add_info(infos, info, position)
        infos["env_id"] = env_ids
        infos["_env_id"] = np.ones(len(batch), dtype=np.bool_)
        buffers = self.buffers
        # Indexing with an array copies: the rows stay valid after the next send().
        return (tree_index(buffers.observations, env_ids), buffers.rewards[env_ids],
                buffers.terminations[env_ids], buffers.truncations[env_ids], infos)


class _InfoBatch(VectorEnv):
    """Just enough of a VectorEnv for gymnasium's own ``_add_info`` to batch ``num_envs`` infos.

    A recv() batch is ``batch_size`` envs, not ``num_envs``: batching its infos with this keeps
    them exactly in gymnasium's format (dict of arrays with ``_key`` masks, nested dicts).
    """

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
