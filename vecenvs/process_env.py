"""The parent side of a vector env whose envs live in worker processes.

``ProcessVecEnv`` holds what SubprocVecEnv and PoolVecEnv share: starting the workers, sending
them commands, waiting for the answers, turning failures into clear errors, and closing. The
two subclasses only decide how envs are split over workers, whether step results travel
through shared memory or through the pipes, and whether the calling process steps a chunk of
envs itself while it waits.

The rules it keeps:
- Every wait has a deadline and watches the worker processes themselves (their *sentinels*), so
  a hung env ends in :class:`~vecenvs.errors.WorkerTimeoutError` and a killed worker in
  :class:`~vecenvs.errors.WorkerDiedError`, never in a hang.
- Waiting blocks in the kernel (one ``poll()`` over the pipes and sentinels). A short spin comes first
  only when every process involved has a CPU of its own (see ``spin_seconds``): on a 2-core
  machine, a parent spinning beside two workers would steal a core from the workers it waits for.
  And it comes only while spins pay off: when other programs keep the CPUs busy, spins run out
  and are then skipped for a while (:class:`~vecenvs.worker.AdaptiveSpin`).
- Workers ignore SIGINT, so Ctrl-C in a notebook interrupts only the parent. A ``step_wait``
  interrupted while waiting for the workers can be called again to collect the step. If the
  interruption left some envs stepped and others not, the env says it needs ``reset()``.
- After an env crashes in ``reset`` or ``step``, or a worker dies or hangs, the vector env closes
  itself: its envs are no longer in step with each other, and going on would mean returning
  stale data. A crash in ``call``/``get_attr``/``set_attr`` leaves it usable.
- ``close()`` is idempotent and escalates: collect what is pending, ask each worker to close,
  join with a deadline, then terminate, then kill.
"""

from __future__ import annotations

import math
import os
import select
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import dill
import gymnasium as gym
import multiprocess
import multiprocess.connection
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from vecenvs.actions import ActionChecker
from vecenvs.batching import (
    StepBuffers,
    check_env_fns,
    expand_seeds,
    merge_infos,
    split_reset_mask,
    tree_assign,
    tree_copy,
    tree_slice,
)
from vecenvs.errors import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    EnvCrashedError,
    NoAsyncCallError,
    VecEnvError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.multi_env import InfoRecords, MultiEnv, per_env_values
from vecenvs.shared_memory import SharedBuffers
from vecenvs.worker import AdaptiveSpin, Command, dumps, loads, run_worker

__all__ = ["DEFAULT_SPIN_SECONDS", "ProcessVecEnv", "available_cpus"]

START_METHODS = ("fork", "forkserver", "spawn")

#: How long to poll before blocking, when spinning is allowed. Waking a process that sleeps in
#: poll() cost 50 µs to over 500 µs on our 2-core VM; a spin of this length covers the time
#: between two steps of a tight loop and the usual skew between two lanes. Measured there
#: (ratio to SyncVectorEnv, caller + 1 worker, paired rounds): CartPole-v1 N=128, no spin
#: 1.40x, 1 ms 1.63x; HumanoidStandup-v5 N=32, no spin 1.65x, 1 ms 1.82x. Workers stop
#: spinning while commands come slower than this (a slow policy between steps); the parent
#: spins only right after its own chunk, when the answers are due.
DEFAULT_SPIN_SECONDS = 1e-3


class State(Enum):
    """Where the parent is in the command cycle."""

    IDLE = "idle"
    STEPPING = "stepping"  # step_async sent, step_wait not yet done
    NEEDS_RESET = "needs reset"  # interrupted half-way: some envs stepped, some did not


class ProcessVecEnv(VectorEnv):
    """Base class: envs split into chunks, each chunk stepped by a worker process.

    Args:
        env_fns: functions that each make one env.
        chunks: the env indices each worker process runs, e.g. ``[range(0, 4), range(4, 8)]``.
        shared_memory: step results and actions through shared memory (True) or pickled over
            the pipes (False).
        caller_chunk: envs this process steps itself, in ``step_wait``, while the workers step
            theirs; None leaves all the stepping to the workers.
        autoreset_mode: gymnasium's ``AutoresetMode``.
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; None for the platform's default.
        timeout: seconds to wait for any answer from the workers. (Envs in ``caller_chunk``
            run in this process, as in a plain loop: no deadline can stop them.)
        start_timeout: seconds to wait for the workers to make their envs.
        copy: return copies of the observations (False: a buffer the next step overwrites).
        spin_seconds: poll this long for an answer before blocking; workers poll as long for
            their next command. None (default): :data:`DEFAULT_SPIN_SECONDS` when every process
            (workers and this one) has a CPU of its own, else 0 (never spin).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        chunks: list[range],
        *,
        shared_memory: bool,
        caller_chunk: range | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        start_method: str | None = None,
        timeout: float = 60.0,
        start_timeout: float = 120.0,
        copy: bool = True,
        spin_seconds: float | None = None,
    ):
        # Everything is checked before the first process starts.
        env_fns = check_env_fns(env_fns)
        if start_method is not None and start_method not in START_METHODS:
            raise ValueError(f"start_method is {start_method!r}: expected one of {START_METHODS} or None")
        _check_seconds("timeout", timeout)
        _check_seconds("start_timeout", start_timeout)
        if spin_seconds is None:
            spin_seconds = DEFAULT_SPIN_SECONDS if len(chunks) + 1 <= available_cpus() else 0.0
        _check_seconds("spin_seconds", spin_seconds, zero_ok=True)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.context = multiprocess.get_context(start_method)
        self.start_method = self.context.get_start_method()
        if self.start_method != "fork":
            _check_picklable(env_fns, self.start_method)

        self.num_envs = len(env_fns)
        self.chunks = chunks
        self.caller_chunk = caller_chunk
        self.timeout = float(timeout)
        self.copy = copy
        self.spin_seconds = float(spin_seconds)
        self._spin = AdaptiveSpin(self.spin_seconds)  # spins only while spinning pays off
        self.processes: list[Any] = []
        self.pipes: list[Any] = []
        self.caller_envs: MultiEnv | None = None
        self._state = State.IDLE
        self._awaiting: list[int] = []  # workers whose answer to the last command is still due
        self._replies: dict[int, Any] = {}  # answers collected so far for that command
        self._caller_records: InfoRecords | None = None  # the caller chunk's infos, once stepped
        self._caller_work: Callable[[], InfoRecords] | None = None  # steps the caller's chunk
        self._closing = False  # close() is under way: errors must not start another close()

        try:
            self.shared: SharedBuffers | None = None
            if shared_memory and chunks:  # (with no worker there is nobody to share with)
                # The buffers must exist before the workers start (they inherit them), and their
                # layout depends on the spaces: so look at one env here, as gymnasium does.
                observation_space, action_space = _spaces_of(env_fns[0])
                self.shared = SharedBuffers(observation_space, action_space, self.num_envs, self.context)
            self._start_workers(env_fns)
            if caller_chunk is not None:
                # Made while the workers make theirs, and after forking, so no worker inherits them.
                self.caller_envs = MultiEnv(
                    [env_fns[i] for i in caller_chunk], autoreset_mode=self.autoreset_mode, copy=False, first_index=caller_chunk.start
                )
            self._greet_workers(start_timeout)
        except BaseException:
            self.close(terminate=True)
            raise

    # ----------------------------------------------------------------- starting

    def _start_workers(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        with _sigint_ignored():  # children inherit "ignore SIGINT" from the moment they exist
            for worker_index, chunk in enumerate(self.chunks):
                parent_pipe, child_pipe = self.context.Pipe()
                process = self.context.Process(
                    target=run_worker,
                    args=(
                        worker_index,
                        [env_fns[i] for i in chunk],
                        chunk.start,
                        self.autoreset_mode,
                        child_pipe,
                        self.shared,
                        self.spin_seconds,
                    ),
                    name=f"vecenvs-worker-{worker_index}",
                    # daemon: if the parent exits without close(), multiprocess terminates the
                    # workers at exit instead of waiting for them forever.
                    daemon=True,
                )
                process.start()
                child_pipe.close()  # the parent's copy: now the pipe hits EOF when the worker dies
                self.processes.append(process)
                self.pipes.append(parent_pipe)
                self._awaiting.append(worker_index)  # each worker says hello once its envs exist
        self._watcher = _Watcher(self.pipes, [process.sentinel for process in self.processes])

    def _greet_workers(self, start_timeout: float) -> None:
        """Waits for every worker's hello (its spaces), checks they agree, and sets up the buffers."""
        hello = self._collect("start-up (making the envs)", start_timeout)
        if self.caller_envs is not None:
            first = self.caller_envs
            spaces = (first.single_observation_space, first.single_action_space, first.metadata, first.render_mode)
        else:
            spaces = hello[0]
        observation_space, action_space, metadata, render_mode = spaces
        for worker_index, (other_observation_space, other_action_space, _, _) in hello.items():
            if other_observation_space != observation_space or other_action_space != action_space:
                raise ValueError(
                    f"the envs of worker {worker_index} (from env {self.chunks[worker_index].start}) have "
                    f"spaces {other_observation_space}, {other_action_space} but env 0 has "
                    f"{observation_space}, {action_space}: every env of a vector env must have the same spaces"
                )
        self.single_observation_space, self.single_action_space = observation_space, action_space
        self.observation_space = batch_space(observation_space, self.num_envs)
        self.action_space = batch_space(action_space, self.num_envs)
        self.metadata = {**metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = render_mode
        self.check_actions = ActionChecker(self.action_space, self.num_envs)

        if self.shared is not None:
            self.buffers = self.shared.step_buffers()
            self._shared_actions = self.shared.actions()
        else:
            self.buffers = StepBuffers(
                create_empty_array(observation_space, n=self.num_envs, fn=np.zeros),
                np.zeros(self.num_envs, dtype=np.float64),
                np.zeros(self.num_envs, dtype=np.bool_),
                np.zeros(self.num_envs, dtype=np.bool_),
            )
        if self.caller_envs is not None:
            # The caller's chunk writes its results straight into its slice of the batch.
            self.caller_envs.buffers = self.buffers.slice(self.caller_chunk.start, self.caller_chunk.stop)

    # ----------------------------------------------------------------- the VectorEnv API

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Resets the envs (all, or those in ``options["reset_mask"]``); returns observations and infos."""
        self._check_open()
        seeds = expand_seeds(seed, self.num_envs)
        options, mask = split_reset_mask(options, self.num_envs)
        self._state = State.NEEDS_RESET  # until every env has answered

        def part(chunk: range) -> tuple[Any, ...] | None:
            chunk_mask = None if mask is None else mask[chunk.start : chunk.stop]
            if chunk_mask is not None and not chunk_mask.any():
                return None
            return [seeds[i] for i in chunk], options, chunk_mask

        payloads = {w: part(chunk) for w, chunk in enumerate(self.chunks)}
        self._send_all(Command.RESET, {w: payload for w, payload in payloads.items() if payload is not None})
        caller_part = part(self.caller_chunk) if self.caller_envs is not None else None
        caller_records = self._on_caller(lambda: self.caller_envs.reset_into_buffers(*caller_part)) if caller_part else []
        replies = self._collect_or_close("reset", self.timeout)
        self._state = State.IDLE
        observations, _, _, _, infos = self._gather(replies, caller_records)
        return observations, infos

    def step(self, actions: Any):
        """Steps every env; returns observations, rewards, terminations, truncations, infos."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Sends the actions to the workers and returns at once; collect with :meth:`step_wait`."""
        self._check_open()
        if self._state is State.STEPPING:
            raise AlreadyPendingCallError(
                "a step is already pending: call step_wait() to collect it (or reset() to drop it) before sending new actions",
                "step",
            )
        if self._state is State.NEEDS_RESET:
            raise VecEnvError(
                "a step or reset was interrupted half-way (Ctrl-C?), so some envs stepped and others did not: "
                "call reset() before stepping again"
            )
        actions = self.check_actions(actions)
        self._state = State.NEEDS_RESET  # until every worker has its actions
        caller = self.caller_chunk
        if self.shared is not None:
            # The actions go into shared memory; the message only says "step".
            tree_assign(self._shared_actions, actions)
            self._send_all(Command.STEP, dict.fromkeys(range(len(self.chunks))))
            if caller is not None:
                caller_actions = tree_slice(self._shared_actions, caller.start, caller.stop)
                self._caller_work = lambda: self.caller_envs.step_into_buffers(caller_actions)
        else:
            # Each worker gets its envs' actions, one by one: a list of small actions pickles
            # several times faster than a slice of the batch array.
            env_actions = list(iterate(self.action_space, actions))
            self._send_all(Command.STEP, {w: env_actions[c.start : c.stop] for w, c in enumerate(self.chunks)})
            if caller is not None:
                self._caller_work = lambda: self.caller_envs.step_each(env_actions[caller.start : caller.stop])
        self._caller_records = None
        self._state = State.STEPPING

    def step_wait(self, timeout: float | None = None):
        """Waits for the step sent by :meth:`step_async`; returns the 5-tuple of batched results.

        With a caller chunk, this is where the calling process steps its own envs.

        Args:
            timeout: seconds to wait for the workers; by default the constructor's ``timeout``.
        """
        self._check_open()
        if self._state is State.NEEDS_RESET:
            raise VecEnvError("a step or reset was interrupted half-way (Ctrl-C?): call reset() before stepping again")
        if self._state is not State.STEPPING:
            raise NoAsyncCallError("no step is pending: call step_async(actions) before step_wait()", "step")
        if self.caller_envs is not None and self._caller_records is None:
            self._state = State.NEEDS_RESET  # if interrupted, the caller's chunk is half-stepped
            self._caller_records = self._on_caller(self._caller_work)
            self._state = State.STEPPING
        replies = self._collect_or_close("step", timeout or self.timeout)
        self._state = State.IDLE
        return self._gather(replies, self._caller_records or [])

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls method ``name`` of every env (or reads the attribute if it is not callable)."""
        return self._per_env(
            Command.CALL, lambda chunk: (name, args, kwargs), lambda envs, chunk: envs.call(name, *args, **kwargs), f"call({name!r})"
        )

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every env."""
        return self._per_env(Command.GET_ATTR, lambda chunk: name, lambda envs, chunk: envs.get_attr(name), f"get_attr({name!r})")

    def set_attr(self, name: str, values: Any) -> None:
        """Sets attribute ``name`` of every env: to ``values[i]`` for a list/tuple, else to ``values``."""
        self._check_open()
        values = per_env_values(values, self.num_envs)
        self._per_env(
            Command.SET_ATTR,
            lambda chunk: (name, values[chunk.start : chunk.stop]),
            lambda envs, chunk: envs.set_attr(name, values[chunk.start : chunk.stop]),
            f"set_attr({name!r})",
        )

    def render(self) -> tuple[Any, ...]:
        """The frames rendered by every env."""
        return self.call("render")

    def __enter__(self) -> ProcessVecEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Garbage collection must not leave processes behind either.
        if not getattr(self, "closed", True) and getattr(self, "processes", None):
            self.close(terminate=True)

    # ----------------------------------------------------------------- closing

    def close_extras(self, terminate: bool = False, **kwargs: Any) -> None:
        """Stops the workers: politely (finish, CLOSE, join), then by force.

        Args:
            terminate: skip the polite part and terminate the workers at once.
        """
        self._closing = True
        grace = min(getattr(self, "timeout", 10.0), 10.0)
        if not terminate:
            try:
                if self._awaiting:
                    try:
                        self._collect("close (finishing what was pending)", grace)
                    except EnvCrashedError:
                        pass  # that step failed; the workers are fine and can close politely
                alive = [w for w, process in enumerate(self.processes) if process.is_alive()]
                self._send_all(Command.CLOSE, dict.fromkeys(alive))
                self._collect("close", grace)
            except (VecEnvError, OSError):
                pass  # a dead or stuck worker: the force below deals with it
        deadline = time.perf_counter() + (0.0 if terminate else grace)
        for process in self.processes:
            process.join(max(0.0, deadline - time.perf_counter()))
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join(1.0)
            if process.is_alive():  # ignored SIGTERM, e.g. stuck in C code
                process.kill()
                process.join(1.0)
        for pipe in self.pipes:
            pipe.close()
        if self.caller_envs is not None:
            self.caller_envs.close()
        self._awaiting, self._replies = [], {}

    # ----------------------------------------------------------------- talking to workers

    def _send_all(self, command: Command, payloads: dict[int, Any]) -> None:
        """Sends each worker in ``payloads`` its command; their answers become due.

        Answers still due from an earlier command (one interrupted by Ctrl-C) are collected and
        dropped first: read later, they would pass for answers to this command.
        """
        if self._awaiting:
            self._collect_or_close(f"{command.value} (finishing an interrupted command first)", self.timeout)
        messages: dict[int, bytes] = {}  # pickle a payload shared by all workers only once
        for worker_index, payload in payloads.items():
            message = messages.get(id(payload))
            if message is None:
                message = messages[id(payload)] = dumps((command, payload))
            self._send(worker_index, message, command.value)
            self._awaiting.append(worker_index)

    def _send(self, worker_index: int, message: bytes, doing: str) -> None:
        """Sends one pickled command to a worker; a worker that is gone becomes WorkerDiedError."""
        try:
            self.pipes[worker_index].send_bytes(message)
        except OSError:  # BrokenPipeError: the worker is gone
            self.processes[worker_index].join(1.0)
            exitcode = self.processes[worker_index].exitcode
            self._close_after_failure()
            raise WorkerDiedError(worker_index, list(self.chunks[worker_index]), exitcode, doing) from None

    def _per_env(
        self,
        command: Command,
        payload_for: Callable[[range], Any],
        on_caller: Callable[[MultiEnv, range], Any],
        doing: str,
    ) -> tuple[Any, ...]:
        """Runs call/get_attr/set_attr on every env; returns the per-env results in env order.

        ``payload_for(chunk)`` is what a worker running ``chunk`` is sent; ``on_caller`` does the
        same work on the caller's own chunk.
        """
        self._check_open()
        if self._state is not State.IDLE:
            raise AlreadyPendingCallError(f"cannot {doing} while a step is pending: call step_wait() (or reset()) first", "step")
        self._send_all(command, {w: payload_for(chunk) for w, chunk in enumerate(self.chunks)})
        results: dict[int, Any] = {}  # first env of a chunk -> that chunk's results
        try:
            if self.caller_envs is not None:
                results[self.caller_chunk.start] = on_caller(self.caller_envs, self.caller_chunk)
        except BaseException:
            # The workers' answers to this command must not be read as answers to the next one.
            try:
                self._collect(doing, self.timeout)
            except EnvCrashedError:
                pass  # the caller's own error is the one to report (it has the lowest env index)
            raise
        results.update((self.chunks[w].start, reply) for w, reply in self._collect(doing, self.timeout).items())
        return tuple(result for start in sorted(results) for result in (results[start] or ()))

    def _on_caller(self, work: Callable[[], InfoRecords]) -> InfoRecords:
        """Runs the caller chunk's part of a reset/step; a crash there closes the env like a worker's."""
        try:
            return work()
        except EnvCrashedError as crash:
            self._close_after_failure()
            raise _closed_after(crash) from None

    def _collect_or_close(self, doing: str, timeout: float) -> dict[int, Any]:
        """Like :meth:`_collect`, but an env crash closes the vector env (its envs are out of step)."""
        try:
            return self._collect(doing, timeout)
        except EnvCrashedError as crash:
            self._close_after_failure()
            raise _closed_after(crash) from None

    def _collect(self, doing: str, timeout: float) -> dict[int, Any]:
        """Waits for the answers still due; returns ``{worker index: payload}``.

        Answers that arrived before an interruption (Ctrl-C) are kept, so calling again picks up
        where it stopped.

        Raises:
            EnvCrashedError: an env raised (the one with the lowest index, if several did).
            WorkerDiedError: a worker process ended; the vector env is closed.
            WorkerTimeoutError: no answer in time; the vector env is closed.
        """
        deadline = time.perf_counter() + timeout
        waiting = {w for w in self._awaiting if w not in self._replies}
        if waiting and self._spin.wait([self.pipes[w].fileno() for w in waiting]):
            # The fast path: every answer is already there, no need to ask the kernel to wait.
            for worker_index in list(waiting):
                self._receive(worker_index, waiting)
        while waiting:
            ready = self._watcher.wait(max(deadline - time.perf_counter(), 0.0))
            if not ready:
                stuck = sorted(waiting)
                self._close_after_failure()
                raise WorkerTimeoutError(stuck, self._envs_of(stuck), timeout, doing)
            for worker_index, died in ready:
                if not died and worker_index in waiting:
                    self._receive(worker_index, waiting)
            for worker_index, died in ready:
                # A worker that died, even one not asked this time, leaves its envs lost.
                if died and (worker_index in waiting or worker_index not in self._replies):
                    self.processes[worker_index].join(1.0)  # so that its exit code is known
                    exitcode = self.processes[worker_index].exitcode
                    self._close_after_failure()
                    raise WorkerDiedError(worker_index, list(self.chunks[worker_index]), exitcode, doing)
        replies, self._replies, self._awaiting = self._replies, {}, []
        failures = [payload for ok, payload in replies.values() if not ok]
        if failures:
            raise min(failures, key=lambda report: report.env_index).to_error()
        return {w: payload for w, (ok, payload) in sorted(replies.items())}

    def _receive(self, worker_index: int, waiting: set[int]) -> None:
        """Reads a worker's answer, if it can: a worker that died before answering is left waiting,
        and its sentinel reports it."""
        try:
            self._replies[worker_index] = loads(self.pipes[worker_index].recv_bytes())
        except (EOFError, OSError):
            return
        waiting.discard(worker_index)

    # ----------------------------------------------------------------- results

    def _gather(self, replies: dict[int, Any], caller_records: InfoRecords) -> tuple[Any, ...]:
        """Turns the answers to RESET/STEP into batched observations, rewards, ..., infos."""
        buffers = self.buffers
        chunk_infos: list[tuple[int, dict[str, Any]]] = []  # (first env of the chunk, its infos)
        if self.caller_envs is not None:
            chunk_infos.append((self.caller_chunk.start, self.caller_envs.batch_infos(caller_records)))
        if self.shared is not None:  # the data is already in shared memory: only infos came
            chunk_infos.extend((self.chunks[w].start, infos) for w, infos in replies.items())
        elif len(replies) == len(self.chunks):  # everyone answered: batch it all at once
            parts = [(self.chunks[w], reply) for w, reply in replies.items()]
            if self.caller_envs is not None:
                caller = self.caller_envs
                caller_part = (caller.env_observations, caller.buffers.rewards, caller.buffers.terminations, caller.buffers.truncations, {})
                parts.append((self.caller_chunk, caller_part))
            parts.sort(key=lambda part: part[0].start)
            concatenate(self.single_observation_space, [obs for _, reply in parts for obs in reply[0]], buffers.observations)
            buffers.rewards[:] = [value for _, reply in parts for value in reply[1]]
            buffers.terminations[:] = [value for _, reply in parts for value in reply[2]]
            buffers.truncations[:] = [value for _, reply in parts for value in reply[3]]
            chunk_infos.extend((chunk.start, reply[4]) for chunk, reply in parts)
        else:  # a masked reset: only some workers were asked
            for worker_index, (env_observations, rewards, terminations, truncations, infos) in replies.items():
                chunk = self.chunks[worker_index]
                concatenate(self.single_observation_space, env_observations, tree_slice(buffers.observations, chunk.start, chunk.stop))
                buffers.rewards[chunk.start : chunk.stop] = rewards
                buffers.terminations[chunk.start : chunk.stop] = terminations
                buffers.truncations[chunk.start : chunk.stop] = truncations
                chunk_infos.append((chunk.start, infos))
        infos = merge_infos(sorted((part for part in chunk_infos if part[1]), key=lambda part: part[0]), self.num_envs)
        observations = tree_copy(buffers.observations) if self.copy else buffers.observations
        return observations, buffers.rewards.copy(), buffers.terminations.copy(), buffers.truncations.copy(), infos

    # ----------------------------------------------------------------- helpers

    def _close_after_failure(self) -> None:
        if not self._closing:
            self.close(terminate=True)

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(f"{type(self).__name__} is closed: make a new one to step again")

    def _envs_of(self, workers: Sequence[int]) -> list[int]:
        return [index for w in workers for index in self.chunks[w]]


class _Watcher:
    """Tells which workers answered and which died: one ``poll()`` over all their pipes and sentinels.

    ``multiprocess.connection.wait`` does the same, but builds a new selector on every call,
    which costs about a microsecond per file descriptor: with 128 one-env workers, more than
    the step itself. This registers every descriptor once. (Falls back to ``wait`` where the OS
    has no ``poll``, i.e. Windows.)
    """

    def __init__(self, pipes: list[Any], sentinels: list[int]):
        self.pipes, self.sentinels = pipes, sentinels
        self.owner: dict[int, tuple[int, bool]] = {}  # file descriptor -> (worker index, is it the sentinel)
        self.poller = select.poll() if hasattr(select, "poll") else None
        for worker_index, (pipe, sentinel) in enumerate(zip(pipes, sentinels)):
            self.owner[pipe.fileno()] = (worker_index, False)
            self.owner[sentinel] = (worker_index, True)
            if self.poller is not None:
                self.poller.register(pipe.fileno(), select.POLLIN)
                self.poller.register(sentinel, select.POLLIN)

    def wait(self, timeout: float) -> list[tuple[int, bool]]:
        """``(worker index, died)`` for every pipe with data and every sentinel that fired."""
        if self.poller is not None:
            events = self.poller.poll(math.ceil(timeout * 1000))
            return [self.owner[fd] for fd, _ in events]
        ready = multiprocess.connection.wait([*self.pipes, *self.sentinels], timeout)
        return [self.owner[item if isinstance(item, int) else item.fileno()] for item in ready]


def available_cpus() -> int:
    """The CPUs this process may run on (respects taskset/cgroups affinity where the OS tells)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _closed_after(crash: EnvCrashedError) -> EnvCrashedError:
    closed = EnvCrashedError(crash.env_index, crash.command, crash.error_type, crash.message, crash.remote_traceback)
    closed.args = (closed.args[0] + "\n\nThe vector env has been closed (its envs are out of step): make a new one.",)
    return closed


def _check_seconds(name: str, value: Any, zero_ok: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0 if zero_ok else value > 0):
        raise ValueError(f"{name} is {value!r}: expected a number of seconds {'>= 0' if zero_ok else '> 0'}")


def _spaces_of(env_fn: Callable[[], gym.Env]) -> tuple[gym.Space, gym.Space]:
    """Makes one env in this process to read its spaces, then closes it."""
    try:
        env = env_fn()
    except Exception as error:
        raise EnvCrashedError(0, "make", type(error).__name__, str(error), traceback.format_exc()) from error
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def _check_picklable(env_fns: list[Callable[[], gym.Env]], start_method: str) -> None:
    """Under spawn/forkserver the factories are pickled (with dill) to reach the workers: check now."""
    for index, env_fn in enumerate(env_fns):
        try:
            dill.dumps(env_fn)
        except Exception as error:
            raise TypeError(
                f"env_fns[{index}] ({env_fn!r:.80}) cannot be pickled, which start_method={start_method!r} "
                f"needs to send it to a worker process: {type(error).__name__}: {error}. Make the factory "
                f"capture only picklable things (an env id and kwargs; not a generator or a socket), "
                f"or use start_method='fork'."
            ) from error


class _sigint_ignored:
    """Ignores SIGINT while worker processes start, so they are born ignoring it.

    Only the main thread may change signal handlers; elsewhere (a dashboard's worker thread, say)
    this does nothing and the workers set it themselves as their first act.
    """

    def __enter__(self) -> None:
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc_info: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
