"""``ChunkedVecEnv``: N envs split into chunks, each chunk stepped by a worker.

Every parallel backend is this one class with a different kind of worker
(:mod:`vecenvs.workers`): :class:`~vecenvs.pool.PoolVecEnv` (processes, plus the caller stepping
a chunk itself), :class:`~vecenvs.subproc.SubprocVecEnv` (one process per env, pipes only),
:class:`~vecenvs.async_pool.AsyncPoolVecEnv` and :class:`~vecenvs.ray_env.RayVecEnv` (Ray
actors). Read one step top to bottom (``step`` is ``step_async`` then ``step_wait``, in one call):

1. :meth:`~ChunkedVecEnv.step_async` checks the whole batch of actions first (no env sees a
   bad one). With shared memory, and actions of the space's own dtype, it copies them into
   shared memory and moves one *generation* word that every worker watches
   (:meth:`WordCrew.give_step <vecenvs.workers.WordCrew.give_step>`); workers that went to sleep
   are woken with one ring of their doorbell. Otherwise each worker gets its envs' actions,
   exactly as given, pickled over its pipe.
2. Each worker steps its chunk (:class:`~vecenvs.workers.Chunk`, a
   :class:`~vecenvs.multi_env.MultiEnv` whose rewards and flags are its rows of shared
   memory), writes the observations and its numeric infos there too, and flags its *done*
   word; other infos, if any, travel over its pipe.
3. :meth:`~ChunkedVecEnv.step_wait` steps the caller's own chunk (a pool's first, :attr:`own`)
   while the workers step theirs, then waits for all of them at once: a short spin on their
   done words, read in one C call (Python's ``min``), then a sleep on the parent's doorbell, with a
   deadline, watching the processes
   (:meth:`WordCrew.hear <vecenvs.workers.WordCrew.hear>`).
4. It returns the observations (a copy of shared memory, unless ``copy=False``), rewards,
   flags and the infos, merged into gymnasium's format.

The rules it keeps: gymnasium's ``AsyncVectorEnv`` API and states (the same errors for calls
out of order) with exactly ``SyncVectorEnv``'s results. Every wait has a deadline and watches
the workers (:class:`~vecenvs.errors.WorkerTimeoutError`,
:class:`~vecenvs.errors.WorkerDiedError`; an env's exception is
:class:`~vecenvs.errors.EnvCrashedError` with its index and traceback); after one of these in
``reset`` or ``step`` the vector env closes itself (its envs are out of step), after one in
``call``/``get_attr``/``set_attr`` it stays usable. Workers ignore SIGINT: a ``*_wait``
interrupted by Ctrl-C can be called again, unless it left the caller's chunk half-stepped (then
it needs ``reset()``). One thread at a time (else :class:`~vecenvs.errors.ConcurrentCallError`).
``close()`` is idempotent and escalates: collect what is pending, CLOSE, join with a deadline,
terminate, kill; an env whose ``close()`` raises does not stop the others closing.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
from gymnasium.error import CustomSpaceError
from gymnasium.vector import AutoresetMode
from gymnasium.vector.async_vector_env import AsyncState
from gymnasium.vector.utils import concatenate, iterate

from vecenvs import doorbell
from vecenvs.checks import check_env_fns, check_seconds, check_whole_number
from vecenvs.errors import (
    AlreadyPendingCallError,
    ConcurrentCallError,
    EnvCrashedError,
    NoAsyncCallError,
    VecEnvError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.multi_env import (
    EnvsVectorEnv,
    ResetResult,
    StepResult,
    check_indices,
    copy_batch,
    expand_seeds,
    merge_infos,
    per_env_values,
    place_strays,
    split_reset_mask,
    tree_map,
)
from vecenvs.shm import InfoLayout, Layout, SharedArea
from vecenvs.workers import (
    Chunk,
    ChunkSpec,
    Command,
    Crew,
    SharedMemoryWorker,
    WordCrew,
    Worker,
)

__all__ = ["LOST", "ChunkedVecEnv", "one_caller", "split_evenly"]


#: Failures after which a vector env closes itself: its envs are lost, or their answers would
#: come late and be taken for the next command's.
LOST = (WorkerDiedError, WorkerTimeoutError)
#: Bytes per env of shared memory kept for numeric infos (what does not fit is pickled).
INFO_BYTES = 512
#: For how many steps the parent looks for infos to share (the same numeric keys twice running).
LEARN_STEPS = 4


def one_caller(
    close_on: tuple[type[BaseException], ...] = LOST,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The failure policy of every public method of a vector env, written once: one thread at a
    time (another gets :class:`~vecenvs.errors.ConcurrentCallError`), and the vector env closed
    (``self._close_after_failure()``) when the method raises one of ``close_on``."""

    def decorate(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not self._lock.acquire(blocking=False):
                raise ConcurrentCallError(
                    f"{type(self).__name__}.{method.__name__}() was called while another thread is using this vector env: "
                    "its workers answer one caller at a time. Use one vector env per thread, or a lock around each call."
                )
            try:
                return method(self, *args, **kwargs)
            except close_on:
                self._close_after_failure()
                raise
            finally:
                self._lock.release()

        return guarded

    return decorate


class ChunkedVecEnv(EnvsVectorEnv):
    """Base class: N envs in K chunks, each stepped by a worker (see the module docstring).

    Subclasses start the workers in :meth:`_start_workers` (and may make the caller's own
    chunk, :attr:`own`) and say whether they share a :class:`~vecenvs.shm.SharedArea`
    (:attr:`uses_shared_area`).

    Args:
        env_fns: one function per env that makes it, called in the process that steps the env.
        num_workers: K, how many chunks (each at least one env).
        copy: return copies of the observations (False: a buffer the next step overwrites).
        observation_mode, autoreset_mode: as for :class:`~vecenvs.multi_env.MultiEnv`.
        shared_memory: observations, rewards, flags and actions through shared memory.
        timeout: seconds to wait for any answer from the workers (``*_wait`` take their own).
        start_timeout: seconds a worker may take to make an env (and to start): the deadline
            moves on with each env it makes, so an env slow to make is waited for, and one whose
            constructor hangs is not.
    """

    #: Whether the workers share control words (and, with ``shared_memory``, data) with us.
    uses_shared_area = False
    #: Words per env in the shared area, for a protocol that answers env by env.
    env_words = 0
    #: The longest the caller spins for its workers' answers (see :mod:`vecenvs.doorbell`).
    caller_spin_seconds = 0.0

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int,
        *,
        copy: bool = True,
        observation_mode: str | tuple[gym.Space, gym.Space] = "same",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        shared_memory: bool = False,
        timeout: float = 60.0,
        start_timeout: float = 120.0,
    ):
        self._owner = os.getpid()  # a forked child holding a copy of this object must not close it
        self._lock = threading.RLock()
        self.workers: list[Worker] = []  # every chunk's worker but the caller's own, in order
        self.own: Chunk | None = None  # the caller's own chunk (the first), stepped in *_wait
        self._own_order: tuple[Command, Any] | None = None  # what it is to do there
        self.area: SharedArea | None = None  # set before anything can fail: close() reads these
        self.crew = Crew(self.workers)  # the workers as one (a WordCrew once they share words)
        env_fns = check_env_fns(env_fns)
        self.num_envs = len(env_fns)
        self.num_workers = check_whole_number("num_workers", num_workers, 1, self.num_envs)
        self.timeout = check_seconds("timeout", timeout)
        start_timeout = check_seconds("start_timeout", start_timeout)
        self.copy = copy
        self.observation_mode = observation_mode
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.chunks = split_evenly(self.num_envs, self.num_workers)
        self._state = AsyncState.DEFAULT
        self._needs_reset = ""  # why the envs are out of step (an interrupted step), or ""
        try:
            self._start_workers(env_fns)
            self._greet(start_timeout, shared_memory)
        except BaseException:
            self.close(terminate=True)
            raise

    def _start_workers(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        """Starts the workers, one per chunk but :attr:`own`, into :attr:`workers` in chunk order
        (each added as soon as it exists, so that a failure half-way still stops those started)."""
        raise NotImplementedError

    def _greet(self, start_timeout: float, shared_memory: bool) -> None:
        """Waits for every worker's hello, checks the spaces, sets up shared memory."""
        deadline = time.perf_counter() + start_timeout
        hellos = [worker.hello(deadline, start_timeout) for worker in self.workers]
        if self.own is not None:
            hellos.insert(0, self.own.hello())
        observation_spaces = [space for hello in hellos for space in hello[0]]
        action_spaces = [space for hello in hellos for space in hello[1]]
        metadata, render_mode = hellos[0][2:]
        self._set_spaces(
            observation_spaces, action_spaces, self.observation_mode, metadata, render_mode
        )
        if self.uses_shared_area:
            # Raises gymnasium's own TypeError for a space shared memory cannot hold (Graph, Sequence).
            layout = Layout(
                self.num_workers,
                self.num_envs,
                self.single_observation_space,
                self.single_action_space,
                data=shared_memory,
                futex=doorbell.FUTEX,
                env_words=self.env_words,
                info_bytes=INFO_BYTES if shared_memory else 0,
            )
            try:
                self.area = SharedArea(layout)
            except CustomSpaceError as error:  # a Space of your own: as AsyncVectorEnv says it
                raise ValueError(
                    f"shared_memory=True cannot hold observations of {self.single_observation_space} ({error}): "
                    "pass shared_memory=False to send them pickled over the pipes instead"
                ) from error
        if self.own is not None:
            self.own.share(self.area)
        for worker in self.workers:
            worker.setup(self.area)
        deadline = time.perf_counter() + start_timeout  # (the hellos may have moved theirs on)
        for worker in self.workers:
            worker.finish_setup(deadline)
        if self.workers and isinstance(self.workers[0], SharedMemoryWorker):
            assert self.area is not None  # (its workers are told by words: all of them)
            self.crew = WordCrew(self.workers, self.area, self.caller_spin_seconds)
        self.info_arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # shared numeric infos
        self._learning = LEARN_STEPS if self.area is not None and self.area.has_data else 0
        self._numeric_keys: InfoLayout | None = None  # what the last step's infos would share
        if self.area is not None:
            self.area.release_file()  # every worker has its own copy of it now
        self.shared_memory = self.area is not None and self.area.has_data
        if not self.shared_memory:  # the parent batches what the workers send
            self._make_batch()
        elif self.area is not None and self.area.array_observations:
            self._shared_observations = self.area.observations  # views: the workers write there
        else:
            self._shared_observations = None

    @property
    def caller_chunk(self) -> range | None:
        """The envs this process steps itself (None: the workers step them all)."""
        return None if self.own is None else self.own.rows

    @property
    def processes(self) -> list[Any]:
        """The worker processes (``multiprocess.Process``), if the workers are processes."""
        return [worker.process for worker in self.workers if hasattr(worker, "process")]

    def spec_of(self, rows: range, env_fns: list[Callable[[], gym.Env]]) -> ChunkSpec:
        """What the worker of the envs ``rows`` needs to make them."""
        fns = [env_fns[i] for i in rows]
        return ChunkSpec(fns, rows, self.autoreset_mode, self.observation_mode)

    def _give(self, orders: dict[int, tuple[Command, Any]]) -> None:
        """Gives each chunk in ``orders``, ``{chunk index: (command, payload)}``, its command:
        the caller's own chunk keeps its order for ``*_wait``, the workers get theirs at once,
        in one round."""
        if self.own is not None and 0 in orders:
            command, payload = orders.pop(0)  # a copy, as a pipe would give: what the caller
            payload = deepcopy(payload) if command is Command.STEP else payload  # changes later
            self._own_order = (command, payload)  # must not reach its envs
        if orders:
            self.crew.give(orders)

    # ----------------------------------------------------------------- reset

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> ResetResult:
        """Resets the envs (all, or those in ``options["reset_mask"]``); returns observations and infos."""
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    @one_caller()
    def reset_async(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Sends the reset to the workers and returns at once; collect it with :meth:`reset_wait`."""
        self._check_idle("reset_async")
        seeds = expand_seeds(seed, self.num_envs)
        options, mask = split_reset_mask(options, self.num_envs)
        orders = {}
        for index, chunk in enumerate(self.chunks):
            chunk_options = options
            if mask is not None:
                if not mask[chunk.start : chunk.stop].any():
                    continue  # none of its envs: not asked
                chunk_options = {**(options or {}), "reset_mask": mask[chunk.start : chunk.stop]}
            orders[index] = (Command.RESET, (seeds[chunk.start : chunk.stop], chunk_options))
        self._give(orders)
        self._state = AsyncState.WAITING_RESET

    @one_caller()
    def reset_wait(self, timeout: float | None = None) -> ResetResult:
        """Waits for the reset sent by :meth:`reset_async`; returns observations and infos."""
        timeout = self._check_waiting(
            AsyncState.WAITING_RESET, "reset_wait", "reset_async", timeout
        )
        answers = self._gather(Command.RESET, timeout, close_on_crash=True)
        self._state, self._needs_reset = AsyncState.DEFAULT, ""
        observations, _, _, _, infos = self._batch(answers, {})
        return observations, infos

    # ----------------------------------------------------------------- step

    @one_caller()
    def step(self, actions: Any) -> StepResult:
        """Steps every env; returns observations, rewards, terminations, truncations, infos:
        :meth:`step_async` then :meth:`step_wait`, in one call."""
        self._send_step(actions)
        return self._step_results(self.timeout)

    @one_caller()
    def step_async(self, actions: Any) -> None:
        """Sends the actions to the workers and returns at once; collect with :meth:`step_wait`."""
        self._send_step(actions)

    @one_caller()
    def step_wait(self, timeout: float | None = None) -> StepResult:
        """Waits for the step sent by :meth:`step_async`; returns the 5-tuple of batched results.
        With a chunk of its own, this is where the calling process steps it. ``timeout``: by
        default the constructor's."""
        timeout = self._check_waiting(AsyncState.WAITING_STEP, "step_wait", "step_async", timeout)
        return self._step_results(timeout)

    def _send_step(self, actions: Any) -> None:
        """The first half of a step: check the actions, then hand them to the workers."""
        self._check_idle("step_async")
        if self._needs_reset:
            raise VecEnvError(f"{self._needs_reset}: call reset() before stepping again")
        exact = self.check_actions(actions)  # (arrays of the space's dtypes: taken as given)
        area = self.area
        if exact and self.shared_memory and area is not None:
            # The fast path: the actions go into shared memory, and one word tells every worker.
            if isinstance(area.actions, np.ndarray):  # (copyto, without its Python wrapper)
                area.actions[...] = actions
            else:  # a dict or tuple of arrays
                tree_map(np.copyto, area.actions, actions)
            if self.own is not None:
                self._own_order = (Command.STEP, None)
            self.crew.give_step()
        else:
            env_actions = list(iterate(self.action_space, actions))  # each env's action, as given
            steps = [env_actions[chunk.start : chunk.stop] for chunk in self.chunks]
            self._give({index: (Command.STEP, payload) for index, payload in enumerate(steps)})
        self._state = AsyncState.WAITING_STEP

    def _step_results(self, timeout: float) -> StepResult:
        """The second half: step the caller's own chunk, hear the workers, batch the results."""
        answers = self._gather(Command.STEP, timeout, close_on_crash=True)
        self._state = AsyncState.DEFAULT
        results = self._batch(answers, self.info_arrays)
        if self._learning:
            self._learn_infos(results[-1])
        return results

    # ----------------------------------------------------------------- call and attributes

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls method ``name`` of every env (or reads the attribute if it is not callable)."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    @one_caller()
    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Starts :meth:`call` in every worker and returns at once; collect with :meth:`call_wait`."""
        self._check_idle("call_async")
        self._post_per_env(
            Command.CALL, range(self.num_envs), lambda local, _: (local, name, args, kwargs)
        )
        self._call_name = name
        self._state = AsyncState.WAITING_CALL

    @one_caller()
    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """Waits for the call sent by :meth:`call_async`; returns each env's result."""
        timeout = self._check_waiting(AsyncState.WAITING_CALL, "call_wait", "call_async", timeout)
        try:
            return self._per_env_results(self._gather(Command.CALL, timeout, name=self._call_name))
        finally:
            self._state = AsyncState.DEFAULT

    @one_caller()
    def call_at(
        self, indices: Sequence[int], name: str, *args: Any, **kwargs: Any
    ) -> tuple[Any, ...]:
        """Like :meth:`call`, in the envs ``indices`` only (in that order)."""
        return self._per_env(
            Command.CALL, indices, lambda local, _: (local, name, args, kwargs), name
        )

    @one_caller()
    def get_attr_at(self, indices: Sequence[int], name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of the envs ``indices``."""
        return self._per_env(Command.GET_ATTR, indices, lambda local, _: (local, name), name)

    @one_caller()
    def set_attr_at(self, indices: Sequence[int], name: str, values: Any) -> None:
        """Like :meth:`set_attr`, in the envs ``indices`` only (one value each, or one for all)."""
        indices = check_indices(indices, self.num_envs)
        value_of = dict(zip(indices, per_env_values(values, len(indices))))
        self._per_env(
            Command.SET_ATTR,
            indices,
            lambda local, envs: (local, name, [value_of[i] for i in envs]),
            name,
        )

    def render(self) -> tuple[Any, ...]:
        """The frames rendered by every env."""
        return self.call("render")

    def _per_env(
        self,
        command: Command,
        indices: Sequence[int],
        payload_for: Callable[[list[int], list[int]], Any],
        name: str,
    ) -> Any:
        self._check_idle(f"{command.value}_at")
        indices = check_indices(indices, self.num_envs)
        self._post_per_env(command, indices, payload_for)
        results = self._per_env_results(self._gather(command, self.timeout, name=name))
        if command is Command.SET_ATTR:
            return None
        # The results come in env order.
        order = sorted(range(len(indices)), key=lambda position: indices[position])
        ordered = [None] * len(indices)
        for result, position in zip(results, order):
            ordered[position] = result
        return tuple(ordered)

    def _post_per_env(
        self,
        command: Command,
        indices: Sequence[int],
        payload_for: Callable[[list[int], list[int]], Any],
    ) -> None:
        """Gives each worker whose chunk holds some of ``indices`` ``payload_for(its envs' indices
        within the chunk, the same in the whole vector env)``, in env order."""
        orders = {}
        for chunk_index, chunk in enumerate(self.chunks):
            mine = sorted(index for index in indices if chunk.start <= index < chunk.stop)
            if mine:
                payload = payload_for([index - chunk.start for index in mine], mine)
                orders[chunk_index] = (command, payload)
        self._give(orders)

    @staticmethod
    def _per_env_results(answers: dict[int, Any]) -> tuple[Any, ...]:
        return tuple(
            result for worker_index in sorted(answers) for result in (answers[worker_index] or ())
        )

    # ----------------------------------------------------------------- waiting for workers

    def _gather(
        self, command: Command, timeout: float, close_on_crash: bool = False, name: str = ""
    ) -> dict[int, Any]:
        """Every answer due, ``{chunk index: payload}``: the caller's own chunk is served now,
        while the workers serve theirs; then the workers', heard all at once. Raises
        EnvCrashedError (the lowest env's; with ``close_on_crash``, reset and step, closed first:
        the envs are out of step), WorkerDiedError, WorkerTimeoutError (closed first)."""
        deadline = time.perf_counter() + timeout
        answers: dict[int, Any] = {}
        crashes: list[EnvCrashedError] = []
        if self._own_order is not None:
            assert self.own is not None
            own_command, payload = self._own_order
            self._own_order = None
            try:
                answers[0] = self.own.serve(own_command, payload)
            except EnvCrashedError as crash:
                crashes.append(crash)
            except BaseException:  # Ctrl-C: a reset or step of our chunk may be half done
                if own_command in (Command.RESET, Command.STEP):
                    self._interrupted(own_command)
                raise
        try:
            heard, their_crashes = self.crew.hear(deadline, command)
        except (WorkerTimeoutError, WorkerDiedError) as failure:
            self._worker_failed(failure, timeout, command, name)
        answers.update(heard)
        crashes += their_crashes
        if crashes:
            self._crashed(min(crashes, key=lambda error: error.env_index), close_on_crash)
        return answers

    def _worker_failed(
        self,
        failure: WorkerTimeoutError | WorkerDiedError,
        timeout: float,
        command: Command,
        name: str,
    ) -> NoReturn:
        """A worker died or missed the deadline: close the vector env, then raise."""
        stuck = self.crew.late()
        self._close_after_failure()
        what = f"{command.value}({name!r})" if name else command.value
        if isinstance(failure, WorkerTimeoutError):  # every worker still due is named
            envs = [i for w in stuck for i in self.chunks[w]]
            raise WorkerTimeoutError(stuck, envs, timeout, what) from None
        died = WorkerDiedError(failure.worker_index, failure.env_indices, failure.exitcode, what)
        raise died from failure.__cause__  # (Ray's RayActorError, say: what said it died)

    def _interrupted(self, command: Command) -> None:
        self._needs_reset = f"a {command.value} was interrupted half-way (Ctrl-C?), so some envs stepped and others did not"
        self._state = AsyncState.DEFAULT

    def _crashed(self, first: EnvCrashedError, close_on_crash: bool) -> NoReturn:
        """Raise the first env's crash; with ``close_on_crash`` close the vector env first."""
        if close_on_crash:
            self._close_after_failure()
            closed = "The vector env has been closed (its envs are out of step): make a new one."
            first.args = (f"{first.args[0]}\n\n{closed}",)
        raise first

    def _batch(self, answers: dict[int, Any], info_arrays: dict[str, Any]) -> tuple[Any, ...]:
        """The batched 5-tuple from the answers to RESET or STEP: read from shared memory, where
        the chunks wrote them (numeric infos too: ``info_arrays``), only the other infos and
        the strays answered (else see :meth:`_unpack`)."""
        if not self.shared_memory:
            observations, rewards, terminations, truncations, answered = self._unpack(answers)
        else:
            area = self.area
            assert area is not None
            observations = self._shared_observations
            if observations is None:  # not plain arrays: decoded from shared memory each time
                observations = area.read_observations()
            rewards, terminations, truncations = area.rewards, area.terminations, area.truncations
            answered = [(self.chunks[i].start, *answer) for i, answer in answers.items() if answer]
        infos = {}
        for key, (values, mask) in info_arrays.items():  # the numbers, from shared memory
            if mask.any():
                infos[key], infos[f"_{key}"] = values.copy(), mask.copy()
        if chunk_infos := [(start, part) for start, part, _ in answered if part]:
            infos = self._with_pickled(infos, chunk_infos)  # and the infos that came pickled
        for _, _, strays in answered:  # and the values no chunk's batch could hold
            place_strays(infos, strays)
        if self.copy:
            observations = copy_batch(observations)
        return observations, rewards.copy(), terminations.copy(), truncations.copy(), infos

    def _with_pickled(
        self, shared: dict[str, Any], pickled: list[tuple[int, dict[str, Any]]]
    ) -> dict[str, Any]:
        """The infos from shared memory with those the chunks pickled, ``(first env, infos)``.
        Where a chunk pickled a key that others wrote into shared memory (its values were of
        another dtype: rare), every chunk's infos are merged in chunk order, so that
        :func:`merge_infos` gives the key the dtype of the first env that had it, as gymnasium
        does."""
        if not any(key in shared for _, part in pickled for key in part):
            return {**shared, **merge_infos(pickled, self.num_envs)}
        parts = []
        for chunk in self.chunks:
            rows = slice(chunk.start, chunk.stop)
            part = {
                k: v[rows]
                for k, v in shared.items()
                if not k.startswith("_") and shared[f"_{k}"][rows].any()
            }
            part.update({f"_{k}": shared[f"_{k}"][rows] for k in list(part)})
            parts.append((chunk.start, part))
        return merge_infos(sorted(parts + pickled, key=lambda part: part[0]), self.num_envs)

    def _learn_infos(self, infos: dict[str, Any]) -> None:
        """In the first steps: once two steps running have the same numeric infos, has them
        written into shared memory from then on (one round of SHARE_INFOS)."""
        self._learning -= 1
        assert self.area is not None
        keys = InfoLayout.learn(infos).fit(self.area.layout.info_bytes)
        if not keys.keys or keys != self._numeric_keys:
            self._numeric_keys = keys
            return
        self._learning = 0
        self._give({index: (Command.SHARE_INFOS, keys) for index in range(len(self.chunks))})
        self._gather(Command.SHARE_INFOS, self.timeout)
        self.info_arrays = self.area.info_arrays(keys)

    def _unpack(self, answers: dict[int, Any]) -> tuple[Any, ...]:
        """Without shared memory: the chunks' results, which came in their answers, batched."""
        answered = []  # (first env, infos, strays) of the chunks with any
        for chunk_index, answer in answers.items():
            env_obs, rewards, terminations, truncations, infos, strays = answer
            chunk = self.chunks[chunk_index]
            self._env_obs[chunk.start : chunk.stop] = env_obs
            self._rewards[chunk.start : chunk.stop] = rewards
            self._terminations[chunk.start : chunk.stop] = terminations
            self._truncations[chunk.start : chunk.stop] = truncations
            if infos or strays:
                answered.append((chunk.start, infos, strays))
        self._observations = concatenate(
            self.single_observation_space, self._env_obs, self._observations
        )
        batch = self._observations, self._rewards, self._terminations, self._truncations
        return (*batch, answered)

    # ----------------------------------------------------------------- states

    def _check_idle(self, method: str) -> None:
        self._check_open()
        if self._state is not AsyncState.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `{method}` while waiting for a pending call to `{self._state.value}` to complete: "
                f"call {self._state.value}_wait() first",
                str(self._state.value),
            )
        if self.crew.due:
            self._drain_interrupted()

    def _drain_interrupted(self) -> None:
        """Drops the answers to a call interrupted by Ctrl-C, before the next call."""
        try:
            self._drain(time.perf_counter() + self.timeout)
        except VecEnvError:
            self._close_after_failure()
            raise

    def _check_waiting(
        self, state: AsyncState, method: str, needed: str, timeout: float | None
    ) -> float:
        self._check_open()
        if self._state is not state:
            message = f"Calling `{method}` without any prior call to `{needed}`."
            raise NoAsyncCallError(message, state.value)
        return self.timeout if timeout is None else check_seconds("timeout", timeout, zero_ok=True)

    # ----------------------------------------------------------------- closing

    def __del__(self) -> None:
        # Garbage collection must not leave processes behind either; but a forked child holding
        # a copy of this object must leave the parent's workers alone.
        if not getattr(self, "closed", True) and getattr(self, "_owner", None) == os.getpid():
            self._state = AsyncState.DEFAULT
            self.close(terminate=True)

    @one_caller()
    def close(self, **kwargs: Any) -> None:
        """Closes the envs and stops the workers (see the module docstring); idempotent."""
        if getattr(self, "_owner", None) == os.getpid():
            super().close(**kwargs)

    def close_extras(
        self, timeout: float | None = None, terminate: bool = False, **kwargs: Any
    ) -> None:
        """Stops the workers: politely (finish what is pending, CLOSE, join), then by force.

        ``timeout``: seconds for the polite part (default: the constructor's, at most 10);
        ``terminate``: skip the polite part.
        """
        self.closed = True  # from here on, errors must not start another close
        grace = min(getattr(self, "timeout", 10.0), 10.0) if timeout is None else timeout
        deadline = time.perf_counter() + grace
        first_close_error = None
        if self._state is not AsyncState.DEFAULT:
            warnings.warn(
                f"Calling `close` while waiting for a pending call to `{self._state.value}` to complete.",
                stacklevel=3,
            )
        if not terminate and self.workers:
            try:
                self._drain(deadline)
                self.crew.give({worker.index: (Command.CLOSE, None) for worker in self.workers})
                crashes = self.crew.hear(deadline, Command.CLOSE)[1]  # an env's close() raised:
                first_close_error = min(crashes, key=lambda error: error.env_index, default=None)
            except (VecEnvError, OSError):
                terminate = True  # a dead or stuck worker: the force below deals with it
        self._own_order = None
        if self.own is not None:
            try:
                self.own.envs.close()
            except EnvCrashedError as error:  # the lowest env's error is the one raised
                first_close_error = error
        for worker in self.workers:
            try:
                worker.stop(deadline, terminate)
            except EnvCrashedError as error:
                first_close_error = first_close_error or error
        self._state = AsyncState.DEFAULT
        if self.area is not None:
            self.area.release_file()  # (already done, unless starting failed half-way)
        if first_close_error is not None:
            raise first_close_error

    def _drain(self, deadline: float) -> None:
        """Collects (and drops) every answer still due, so that none is read as a later one's
        (a failed command's crash too: the worker itself is fine)."""
        while self.crew.due:
            self.crew.hear(deadline, Command.CLOSE)

    def _close_after_failure(self) -> None:
        if not self.closed:
            self._state = AsyncState.DEFAULT  # nothing to warn about: the failure is being raised
            self.close(terminate=True)


def split_evenly(num_envs: int, num_workers: int) -> list[range]:
    """Splits env indices into ``num_workers`` contiguous chunks whose sizes differ by at most one.

    The first chunks are the smaller ones: the first is the caller's own in a pool, and the
    caller also does the serial part of every step (checking actions, batching results).

    >>> split_evenly(10, 3)
    [range(0, 3), range(3, 6), range(6, 10)]
    """
    base, extra = divmod(num_envs, num_workers)
    chunks, start = [], 0
    for worker_index in range(num_workers):
        size = base + (1 if worker_index >= num_workers - extra else 0)
        chunks.append(range(start, start + size))
        start += size
    return chunks
