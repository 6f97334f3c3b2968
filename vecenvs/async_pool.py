"""``AsyncPoolVecEnv``: the pool, with each env stepped as soon as its action arrives.

The pool of :mod:`vecenvs.pool` steps in lock-step: one slow step (a straggler: a long physics
solve, a level loading) holds up the whole batch while every other worker sits idle. EnvPool's
asynchronous mode answers this (``num_envs=8, batch_size=4`` returns the 4 envs that finish
first and leaves the others running); this class does the same with Python worker processes,
under EnvPool's names and conventions::

    envs = AsyncPoolVecEnv(env_fns, num_workers=2, batch_size=16)
    envs.async_reset(seed=0)                 # every env starts resetting; nothing is returned
    while training:
        observations, rewards, terminations, truncations, infos = envs.recv()  # 16 envs
        env_ids = infos["env_id"]            # which env each row is (EnvPool's convention)
        envs.send(policy(observations), env_ids)   # only these envs step again

One round: ``send`` checks everything first, writes the actions into the envs' rows of shared
memory, counts one more step asked of each env (:class:`EnvWords`, one numpy operation) and
moves the generation word that every worker watches (actions that shared memory cannot carry as
given travel pickled, in a STEP_ENVS command). The worker, in a loop of its own (:func:`serve_envs`), steps those envs one
after the other and flags *each* as soon as it is done (its row of results, then three words:
commands finished, when, and whether a message with its infos follows). ``recv`` watches those
words and returns the first ``batch_size`` envs ready, the first finished first.

So a straggler delays only itself and the envs queued behind it in its worker: throughput is
bound by each worker's *average* step cost, not by the slowest env of every batch. The price: a
batch mixes envs at different points in time, so on-policy algorithms must keep a rollout buffer
per ``env_id`` (as EnvPool's documentation says). The rest is the pool's (the synchronous API,
deadlines, crash reports, closing); the two APIs mix as long as no env has a pending ``send``
when a synchronous call starts (``reset()`` waits for pending envs and drops their results).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from vecenvs import doorbell
from vecenvs.checks import check_env_fns, check_seconds, check_whole_number
from vecenvs.core import LOST, ChunkedVecEnv, one_caller
from vecenvs.doorbell import observe, publish
from vecenvs.errors import (
    AlreadyPendingCallError,
    EnvCrashedError,
    NoAsyncCallError,
    VecEnvError,
    WorkerTimeoutError,
)
from vecenvs.multi_env import ActionChecker, expand_seeds, split_reset_mask, tree_map
from vecenvs.pool import WorkerStarter, check_num_workers
from vecenvs.shm import SharedArea
from vecenvs.threads import DEFAULT_WORKER_THREADS
from vecenvs.workers import (
    DONE,
    MESSAGE,
    MESSAGES,
    NOTHING,
    REPLIES,
    STEPS,
    Chunk,
    Command,
    SharedMemoryWorker,
    WordCrew,
    command_waiter,
    loads,
    send,
    wake_parent,
)

__all__ = ["AsyncPoolVecEnv", "EnvCommand", "EnvWords", "serve_envs"]


class EnvCommand(Enum):
    """The async pool's commands over the pipe: answered env by env, as each env is done."""

    RESET_ENVS = "reset some envs"
    STEP_ENVS = "step some envs"


class EnvWords(NamedTuple):
    """The async pool's words per env, in the shared area (its ``env_words``)."""

    done: np.ndarray  # commands the env has carried out (written by its worker)
    reply: np.ndarray  # whether a message follows its latest result: MESSAGE or NOTHING (worker)
    requested: np.ndarray  # steps asked of it through shared memory (written by the parent)
    finished_at: np.ndarray  # when it was last done, in perf_counter seconds (worker)

    @classmethod
    def of(cls, area: SharedArea) -> EnvWords:
        done, reply, requested, finished_at = area.env_words
        return cls(done, reply, requested, finished_at.view(np.float64))


class Waiting(Enum):
    """What the async pool waits for its envs in (the words of its error messages)."""

    RECV = "recv"
    PENDING = "finishing the pending sends"


class _ReadyCount:
    """What the parent waits on (:class:`~vecenvs.doorbell.Waiter`): how many envs with a
    pending send are done, counted afresh each time; :attr:`found` holds the envs the last count
    found, so that what is read after the wait's ``observe()`` is what that count saw."""

    def __init__(self, pending: np.ndarray, done: np.ndarray, requested: np.ndarray):
        self.pending, self.done, self.requested = pending, done, requested
        self.found = np.zeros(0, dtype=np.int64)

    def count(self) -> int:
        self.found = np.flatnonzero(self.pending & (self.done >= self.requested))
        return len(self.found)


class AsyncPoolVecEnv(ChunkedVecEnv):
    """The pool with EnvPool's asynchronous API: ``async_reset``, ``send`` and ``recv``.

    Every env runs in a worker process (the caller steps none: it must stay free to hand out
    batches while the workers step). ``recv()`` returns ``batch_size`` envs, the first ready;
    ``infos["env_id"]`` (int32, EnvPool's convention; ``infos["_env_id"]`` is its all-True mask,
    as gymnasium's infos have for every key) says which env each row belongs to.

    Not a :class:`~vecenvs.pool.PoolVecEnv`: the same core (:class:`~vecenvs.core.ChunkedVecEnv`,
    whose synchronous API it keeps) and the pool's way of starting processes (a
    :class:`~vecenvs.pool.WorkerStarter`), with workers that serve :func:`serve_envs`.

    Args:
        env_fns: one function per env that makes it, called in the worker that steps the env.
        num_workers: K worker processes, from 1 to the number of envs; default one per CPU.
        batch_size: how many envs ``recv()`` returns, from 1 to ``num_envs``. Default
            ``num_envs``: then ``recv()`` waits for every env, like ``step()``. Smaller is what
            hides stragglers; EnvPool's examples often use half the envs.
        shared_memory: observations, rewards, flags and actions through shared memory
            (default); False pickles them over the pipes.
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; None for the platform's default.
        spin_seconds: the longest a process spins before it sleeps. None (default): as
            :func:`~vecenvs.doorbell.spin_limits` decides, the caller (which only waits)
            sleeping first: at K = CPUs the caller sleeps and the workers spin briefly.
        worker_threads: the BLAS, OpenMP and torch threads each worker may use (default 1);
            None leaves them alone.
        **kwargs: ``copy``, ``observation_mode``, ``autoreset_mode``, ``timeout``,
            ``start_timeout``: see :class:`~vecenvs.core.ChunkedVecEnv`.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import AsyncPoolVecEnv
        >>> with AsyncPoolVecEnv([lambda: gym.make("CartPole-v1") for _ in range(4)], num_workers=2, batch_size=2) as envs:
        ...     envs.async_reset(seed=0)
        ...     observations, rewards, terminations, truncations, infos = envs.recv()
        ...     envs.send(np.array([0, 1]), infos["env_id"])   # step the two envs just received
        ...     batch = envs.recv()                   # the next two ready, whichever they are
        >>> observations.shape, len(infos["env_id"])
        ((2, 4), 2)
    """

    area: SharedArea  # always one: every env is in a worker, told what to do through it
    crew: WordCrew  # (always: every worker is told by words)
    env_words = len(EnvWords._fields)
    uses_shared_area = True
    workers: list[SharedMemoryWorker]  # type: ignore[assignment]  # (the pool's, always)

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        *,
        batch_size: int | None = None,
        shared_memory: bool = True,
        start_method: str | None = None,
        spin_seconds: float | None = None,
        worker_threads: int | None = DEFAULT_WORKER_THREADS,
        **kwargs: Any,
    ):
        env_fns = check_env_fns(env_fns)
        num_envs = len(env_fns)
        num_workers = check_num_workers(num_workers, num_envs)
        self.batch_size = num_envs
        if batch_size is not None:
            self.batch_size = check_whole_number("batch_size", batch_size, 1, num_envs)
        if "step_in_caller" in kwargs:
            raise TypeError(
                "AsyncPoolVecEnv takes no step_in_caller: every env runs in a worker, so that the "
                "caller is free to hand out each batch as soon as it is ready"
            )
        # Set before the processes start: close() reads them if starting fails half-way.
        self._pending = np.zeros(num_envs, dtype=np.bool_)  # sent, not yet returned by recv()
        self._requested = np.zeros(num_envs, dtype=np.int64)  # commands given to each env so far
        self._messages: dict[int, tuple[bool, Any]] = {}  # env -> its latest message, read ahead
        refused = doorbell.refuse_spinning_why()
        if refused is not None:  # every env is told what to do through words: no way round them
            raise RuntimeError(f"AsyncPoolVecEnv cannot run here: {refused}")
        self.starter = WorkerStarter(
            env_fns,
            processes=num_workers,
            caller_steps=False,  # it hands out batches: it only waits
            shared_memory=shared_memory,
            start_method=start_method,
            spin_seconds=spin_seconds,
            worker_threads=worker_threads,
            loop=serve_envs,  # the async pool's own protocol, in each worker process
        )
        self.spin_seconds, self.start_method = self.starter.spin_seconds, self.starter.start_method
        self.caller_spin_seconds = self.starter.caller_spin_seconds
        self.worker_threads = self.starter.worker_threads
        super().__init__(env_fns, num_workers, shared_memory=shared_memory, **kwargs)
        area = self.area
        self._words = EnvWords.of(area)
        self._done = self._words.done  # commands each env has finished
        self._finished_at = self._words.finished_at
        self._has_message = self._words.reply
        self._worker_of = np.repeat(
            np.arange(self.num_workers), [len(chunk) for chunk in self.chunks]
        )
        self._checkers = {self.num_envs: self.check_actions}
        self._ready = _ReadyCount(self._pending, self._done, self._requested)
        self._env_obs: list[Any] = getattr(self, "_env_obs", [None] * self.num_envs)

    def _start_workers(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        for index, rows in enumerate(self.chunks):  # every chunk in a worker: none in the caller
            worker = self.starter.start(index, self.spec_of(rows, env_fns))
            assert isinstance(worker, SharedMemoryWorker), "checked: this CPU has its barriers"
            self.workers.append(worker)

    # ----------------------------------------------------------------- the async API

    @one_caller()
    def async_reset(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Starts resetting every env and returns at once; ``recv()`` returns them as they are done.

        The results come back like step results, with rewards 0 and flags False. ``seed`` and
        ``options`` as for ``reset`` (but a ``reset_mask`` is refused: every env resets).
        """
        self._check_free("async_reset()")
        seeds = expand_seeds(seed, self.num_envs)
        options, mask = split_reset_mask(options, self.num_envs)
        if mask is not None:
            raise ValueError(
                "async_reset() resets every env: options['reset_mask'] is not supported; use reset()"
            )
        self._give_envs(
            {
                index: (
                    EnvCommand.RESET_ENVS,
                    (list(chunk), seeds[chunk.start : chunk.stop], options),
                )
                for index, chunk in enumerate(self.chunks)
            },
            np.arange(self.num_envs),
        )

    @one_caller()
    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Sends actions to some envs and returns at once; collect the results with :meth:`recv`.

        ``actions``: one per env of ``env_ids``, in that order, batched like
        ``batch_space(single_action_space, len(env_ids))``. ``env_ids``: distinct envs, none of
        them pending; default every env (usually the ``infos["env_id"]`` of the last recv()).

        Raises:
            ValueError, TypeError: bad, out-of-range or repeated env ids, or bad actions.
            AlreadyPendingCallError: an env has already been sent an action not yet received.
        """
        self._check_free("send()", allow_pending=True)
        env_ids = self._check_env_ids(env_ids)
        checker = self._checker(len(env_ids))
        exact = checker(
            actions
        )  # (arrays of the space's dtypes: shared memory takes them as given)
        if self.shared_memory and exact:
            # The fast path: the actions and the requests in shared memory, one word for all.
            self.area.write_actions(actions, env_ids)
            publish()  # the actions before the requests that announce them
            self._words.requested[env_ids] += 1
            self._pending[env_ids] = True
            self._requested[env_ids] += 1
            self.crew.announce_for_envs()  # (each env answers by its own words)
            return
        # Each env's action, as given, pickled to its worker.
        env_actions = list(iterate(batch_space(self.single_action_space, len(env_ids)), actions))
        orders = {}
        for worker_index in np.unique(self._worker_of[env_ids]).tolist():
            positions = np.flatnonzero(self._worker_of[env_ids] == worker_index)
            values = [env_actions[p] for p in positions]
            orders[worker_index] = (
                EnvCommand.STEP_ENVS,
                (env_ids[positions].tolist(), values, None),
            )
        self._give_envs(orders, env_ids)

    @one_caller(close_on=(EnvCrashedError, *LOST))  # an env's crash leaves the others out of step
    def recv(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The 5-tuple of the first ``batch_size`` envs ready, the first finished first.

        ``infos["env_id"]`` holds their indices. ``timeout``: by default the constructor's.

        Raises:
            NoAsyncCallError: fewer than ``batch_size`` envs have a pending send, so waiting
                could never end (e.g. recv() before any send() or async_reset()).
            EnvCrashedError: an env raised; the vector env is closed.
            WorkerDiedError, WorkerTimeoutError: a worker died or an env took too long; closed.
        """
        self._check_free("recv()", allow_pending=True)
        timeout = (
            self.timeout if timeout is None else check_seconds("timeout", timeout, zero_ok=True)
        )
        pending = int(self._pending.sum())
        if pending < self.batch_size:
            if pending == 0:
                raise NoAsyncCallError(
                    "recv() has nothing to wait for: no env has a pending send(). Call async_reset() to "
                    "start, or send(actions, env_ids) for the envs of the last recv()",
                    "recv",
                )
            raise NoAsyncCallError(
                f"recv() returns batch_size={self.batch_size} envs, but only {pending} have a pending send() "
                f"(envs {np.flatnonzero(self._pending).tolist()}), so it would wait forever: send() actions "
                f"to at least {self.batch_size - pending} more env(s) first",
                "recv",
            )
        ready = self._wait_for(self.batch_size, timeout, Waiting.RECV)
        env_ids = ready[np.argsort(self._finished_at[ready], kind="stable")][: self.batch_size]
        results = self._batch_of(env_ids)
        self._pending[env_ids] = False  # only now: an interrupted recv() leaves them pending
        return results

    # ----------------------------------------------------------------- the sync API, guarded

    @one_caller()
    def reset_async(self, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        """Like the pool's; results of envs still pending from ``send`` are waited for and dropped first."""
        self._check_open()
        self._drop_pending(self.timeout)
        super().reset_async(seed=seed, options=options)

    def _drop_pending(self, timeout: float) -> None:
        """Waits for the envs still stepping from ``send`` and drops their results, reading
        the messages that came with them: a message left in a pipe would be taken for the
        answer to the next command."""
        if not self._pending.any():
            return
        self._wait_for(int(self._pending.sum()), timeout, Waiting.PENDING)
        for env in np.flatnonzero(self._pending & (self._has_message == MESSAGE)):
            self._message_of(int(env), timeout)
        self._pending[:] = False

    def _check_idle(self, method: str) -> None:
        super()._check_idle(method)
        if self._pending.any():
            raise AlreadyPendingCallError(
                f"cannot {method} while envs {np.flatnonzero(self._pending).tolist()} have a pending send(): "
                "recv() their results first (or reset(), which drops them)",
                "send",
            )

    def close_extras(
        self, timeout: float | None = None, terminate: bool = False, **kwargs: Any
    ) -> None:
        """Lets the envs still stepping finish (within the deadline), then closes like the pool."""
        if not terminate and getattr(self, "area", None) is not None:
            try:
                self._drop_pending(min(self.timeout, 10.0))
            except (VecEnvError, OSError):
                terminate = True  # a hung or dead worker: no point asking it politely
            self._pending[:] = False
        super().close_extras(timeout=timeout, terminate=terminate, **kwargs)

    # ----------------------------------------------------------------- checks

    def _check_free(self, method: str, allow_pending: bool = False) -> None:
        self._check_open()
        if self._state.value != "default":
            raise AlreadyPendingCallError(
                f"cannot {method} while a {self._state.value}() is pending: call {self._state.value}_wait() first",
                self._state.value,
            )
        if self._needs_reset:
            raise VecEnvError(f"{self._needs_reset}: call reset() before {method}")
        if not allow_pending:
            self._check_idle(method)

    def _check_env_ids(self, env_ids: Any) -> np.ndarray:
        """The env ids as an int array, or an error naming the bad value."""
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
            raise ValueError(
                f"env_ids {outside.tolist()} out of range: there are {self.num_envs} envs, 0 to {self.num_envs - 1}"
            )
        values, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            raise ValueError(
                f"env_ids has {values[counts > 1].tolist()} more than once: each env takes one action per send()"
            )
        busy = ids[self._pending[ids]]
        if busy.size:
            raise AlreadyPendingCallError(
                f"envs {busy.tolist()} already have a pending send(): recv() their results before sending them "
                "new actions",
                "send",
            )
        return ids.astype(np.int64)

    def _checker(self, count: int) -> ActionChecker:
        """Checks a batch of ``count`` actions (one checker per batch size, made once)."""
        if count not in self._checkers:
            self._checkers[count] = ActionChecker(self.single_action_space, count)
        return self._checkers[count]

    # ----------------------------------------------------------------- talking to workers

    def _give_envs(self, orders: dict[int, tuple[EnvCommand, Any]], env_ids: np.ndarray) -> None:
        """Gives per-env commands over the pipes, ``{chunk: (command, payload)}``, in one round;
        each of ``env_ids`` is pending until recv() returns it."""
        self.crew.give(orders, heard=False)  # (each env answers by its own words)
        self._pending[env_ids] = True
        self._requested[env_ids] += 1

    def _wait_for(self, count: int, timeout: float, waiting: Waiting) -> np.ndarray:
        """Waits until ``count`` pending envs are done; returns the done ones. Spin, then sleep."""
        deadline = time.perf_counter() + timeout
        if self.crew.waiter.wait(read=self._ready.count, target=count, deadline=deadline) is None:
            dead = [worker for worker in self.workers if not worker.process.is_alive()]
            late = self._pending & (self._done < self._requested)
            busy = np.unique(self._worker_of[late]).tolist()
            if dead:
                raise dead[0].died(waiting)
            raise WorkerTimeoutError(
                busy, [e for w in busy for e in self.chunks[w]], timeout, waiting.value
            )
        return self._ready.found  # (not counted again: what was read after the wait's observe)

    def _message_of(self, env: int, timeout: float) -> tuple[bool, Any]:
        """The message that came with env ``env``'s latest result (read from its worker's pipe)."""
        if env not in self._messages:
            worker = self.workers[self._worker_of[env]]
            deadline = time.perf_counter() + timeout
            while env not in self._messages:
                index, ok, payload = worker.read_message(deadline, Waiting.RECV)
                self._messages[index] = (ok, payload)
        return self._messages.pop(env)

    def _batch_of(self, env_ids: np.ndarray) -> tuple[Any, ...]:
        """The 5-tuple for these envs, rows in the order given, with ``infos["env_id"]``."""
        infos: dict[str, Any] = {}  # batched over every env first, then cut down to env_ids
        rewards = np.zeros(len(env_ids), dtype=np.float64)
        terminations = np.zeros(len(env_ids), dtype=np.bool_)
        truncations = np.zeros(len(env_ids), dtype=np.bool_)
        for position, env in enumerate(env_ids.tolist()):
            env_infos: tuple[dict[str, Any], ...] = ()
            if self._has_message[env] == MESSAGE:
                ok, payload = self._message_of(env, self.timeout)
                if not ok:
                    raise payload.to_error()
                if self.shared_memory:
                    env_infos = payload
                else:  # the results came with the message
                    env_infos, self._env_obs[env], *results = payload
                    rewards[position], terminations[position], truncations[position] = results
            for info in env_infos:
                infos = self._add_info(infos, info, env)
        if self.shared_memory:
            area = self.area
            rewards = area.rewards[env_ids]
            terminations, truncations = area.terminations[env_ids], area.truncations[env_ids]
            if area.array_observations:  # indexing with an array copies: valid after next send()
                observations = tree_map(lambda leaf: leaf[env_ids], area.observations)
            else:
                every = area.read_observations()
                observations = tuple(every[env] for env in env_ids)
        else:
            space = self.single_observation_space
            empty: Any = create_empty_array(space, n=len(env_ids), fn=np.zeros)
            observations = concatenate(space, [self._env_obs[env] for env in env_ids], empty)
        infos = _rows_of(infos, env_ids)
        infos["env_id"] = env_ids.astype(np.int32)
        infos["_env_id"] = np.ones(len(env_ids), dtype=np.bool_)
        return observations, rewards, terminations, truncations, infos


def _rows_of(infos: dict[str, Any], env_ids: np.ndarray) -> dict[str, Any]:
    """Infos batched over every env, cut down to the rows of ``env_ids`` in that order: what
    gymnasium's ``_add_info`` gives for a batch of those envs."""
    return {
        key: _rows_of(value, env_ids) if isinstance(value, dict) else value[env_ids]
        for key, value in infos.items()
    }


# ----------------------------------------------------------------- the worker process

#: How often the workers flag the envs they have stepped: an env slower than this is flagged
#: alone, the moment it is done (that is what hides stragglers); quicker ones in groups
#: (flagging costs about as much as stepping CartPole).
FLAG_SECONDS = 100e-6


def serve_envs(
    chunk: Chunk, area: SharedArea, line: memoryview, pipe: Any, spin_seconds: float
) -> None:
    """The async pool's worker loop: the pool's lock-step commands, and steps asked env by env.

    What a round can serve, in this order: commands over the pipe (``MESSAGES`` says how many:
    lock-step ones, answered once, or :class:`EnvCommand`, answered per env), a lock-step STEP
    whose actions are in shared memory (``STEPS``), and steps asked env by env in shared memory
    (``EnvWords.requested``). Unlike the lock-step pool's parent, ours gives more as soon as an
    env is flagged, so a round may find more than the generation it saw announced: it serves
    it, and the next round finds nothing new.
    """
    steps = messages = seen = 0
    words = EnvWords.of(area)
    asked = words.requested[chunk.rows.start : chunk.rows.stop]  # steps asked of our envs
    served = np.zeros(len(chunk.rows), dtype=np.int64)  # ... and carried out
    waiter, generation = command_waiter(area, line, spin_seconds)
    while True:
        seen = done = waiter.wait(read=generation, target=seen + 1, deadline=math.inf)
        reply = command = None
        while messages < line[MESSAGES]:
            messages += 1
            command, payload, given = loads(pipe.recv_bytes())
            done = max(done, given)  # (a CLOSE must say its own generation is done)
            if isinstance(command, EnvCommand):
                _serve_each(chunk, area, words, command, payload, pipe)
            else:
                reply = chunk.answer(command, payload)
        if steps < area.header[STEPS]:
            steps += 1
            reply = chunk.answer(Command.STEP, None)
        now_asked = asked.copy()  # read once: what is read after observe() is what it saw
        if (now_asked > served).any():
            observe()  # the requests before the actions they announce
            ready = np.flatnonzero(now_asked > served)
            served[ready] = now_asked[ready]
            requests = ((ready + chunk.rows.start).tolist(), None, None)
            _serve_each(chunk, area, words, EnvCommand.STEP_ENVS, requests, pipe)
        answer = None if reply is None or (reply[0] and reply[1] is None) else (None, *reply)
        if answer is not None:  # the answer follows over the pipe
            line[REPLIES] += 1
        publish()  # the results and REPLIES before the word that says they are there
        line[DONE] = done
        wake_parent(area)
        if answer is not None:
            send(pipe, answer)
        if command is Command.CLOSE:
            return


def _serve_each(
    chunk: Chunk, area: SharedArea, words: EnvWords, command: EnvCommand, payload: Any, pipe: Any
) -> None:
    """Resets or steps some envs, flagging each as done as soon as it is, in groups of what
    was done within :data:`FLAG_SECONDS`.

    ``payload``: the envs' indices, one seed (RESET_ENVS) or action (STEP_ENVS) each, and the
    reset's options. Values None: the actions are in shared memory, read all at once.
    """
    indices, values, options = payload
    if values is None:
        values = list(iterate(chunk.envs.action_space, area.read_actions(np.asarray(indices))))
    done: list[tuple[int, bool, Any]] = []  # (env, ok, its message or None), not yet flagged
    flagged_at = time.perf_counter()
    try:
        for index, value in zip(indices, values):
            local = index - chunk.rows.start
            if command is EnvCommand.RESET_ENVS:
                infos = chunk.envs.reset_env(local, value, options)
            else:
                infos = chunk.envs.step_env(local, value)
            done.append((index, True, _one_result(chunk, area, local, infos)))
            if time.perf_counter() - flagged_at >= FLAG_SECONDS:
                _flag(area, words, done, pipe)
                done, flagged_at = [], time.perf_counter()
    except EnvCrashedError as crash:
        done.append((crash.env_index, False, crash.report()))
    _flag(area, words, done, pipe)


def _one_result(chunk: Chunk, area: SharedArea, local: int, infos: tuple[dict, ...]) -> Any:
    """Env ``local`` of the chunk's results: into its row of shared memory (the message is then
    its infos, or None: the env wrote its reward and flags there already, see
    :meth:`Chunk.share <vecenvs.workers.Chunk.share>`), else all in the message."""
    envs, index = chunk.envs, chunk.rows.start + local
    if not area.has_data:
        rewards, terminations, truncations = envs.latest_results()
        results = rewards[local], terminations[local], truncations[local]
        return infos, envs.env_observations[local], *results
    area.write_observations(range(index, index + 1), envs.env_observations[local : local + 1])
    return infos or None


def _flag(area: SharedArea, words: EnvWords, done: list[tuple[int, bool, Any]], pipe: Any) -> None:
    """Flags envs as done: their rows of results are written already; messages follow."""
    if not done:
        return
    now = time.perf_counter()
    for index, ok, message in done:
        words.reply[index] = NOTHING if ok and message is None else MESSAGE
        words.finished_at[index] = now
    publish()  # their rows and words before the counts that say they are done
    for index, _, _ in done:
        words.done[index] += 1
    wake_parent(area)
    for index, ok, message in done:
        if not ok or message is not None:
            send(pipe, (index, ok, message))
