"""Workers: who steps each chunk of envs, and how the parent talks to them.

A vector env of :mod:`vecenvs.core` hands each chunk of its envs to a *worker*. Every worker
holds a :class:`Chunk` (a :class:`~vecenvs.multi_env.MultiEnv` and the code that serves each
:class:`Command`); what differs is where it runs and how commands reach it:

- the caller's own chunk (a pool's first), a :class:`Chunk` the vector env steps itself in
  ``step_wait``, while the workers step theirs: no worker at all;
- :class:`ProcessWorker`: a child process running :func:`run_worker`, over *pipes*
  (SubprocVecEnv: every command and answer a pickled message, each side blocking in the kernel);
- :class:`SharedMemoryWorker`: the same process, told by *words* in shared memory (the pools:
  the parent bumps one *generation* word that every worker spins on and sees within a fraction
  of a microsecond; each worker answers by writing its *done* word, so that a step through
  shared memory needs no pickle and no system call). Payloads that do not fit in words (seeds,
  a ``call``'s arguments, infos that are not numbers, a traceback) still travel over the pipe,
  announced by the words;
- a Ray actor (see :mod:`vecenvs.ray_env`), holding the same :class:`Chunk`.

The vector env talks to its workers as one :class:`Crew`: a round gives some of them a command
each, then hears every answer. A :class:`Crew` does it worker by worker (pipes, Ray actors); the
pools' :class:`WordCrew` with one word for all and one look at all the done words, so that the
caller's work for a step does not grow with the number of workers.

The protocol is lock-step: a round is given once the previous one is heard. Every answer says
whether it succeeded (``(ok, payload)``); a failure carries a :class:`~vecenvs.errors.CrashReport`
with the env's index and traceback. Every wait has a deadline and watches the worker processes:
a hung env ends in :class:`~vecenvs.errors.WorkerTimeoutError`, a dead worker in
:class:`~vecenvs.errors.WorkerDiedError`, never in a hang. Below, taken on trust:
:mod:`vecenvs.shm` (the shared memory) and :mod:`vecenvs.doorbell` (spinning and sleeping). The
async pool (:mod:`vecenvs.async_pool`) has a worker loop of its own over the same words.
"""

from __future__ import annotations

import functools
import math
import operator
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Protocol

import dill
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import iterate
from multiprocess.connection import wait as first_ready
from multiprocess.reduction import recv_handle, send_handle

from vecenvs import main_guard
from vecenvs.doorbell import Spin, Waiter, fence, publish
from vecenvs.errors import (
    CrashReport,
    EnvCrashedError,
    VecEnvError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.multi_env import MultiEnv, tree_map
from vecenvs.shm import InfoLayout, SharedArea

__all__ = [
    "START_METHODS",
    "Chunk",
    "ChunkSpec",
    "Command",
    "Crew",
    "ProcessWorker",
    "SharedMemoryWorker",
    "WordCrew",
    "Worker",
    "process_context",
    "run_worker",
]


class Command(Enum):
    """What the parent asks a worker to do (the value names it in error messages)."""

    HELLO = "start-up (making the envs)"  # not sent: the answer a new worker gives unasked
    SETUP = "setup"  # the shared area to use (or none); answered once, after the hello
    RESET = "reset"
    STEP = "step"
    CALL = "call"
    GET_ATTR = "get_attr"
    SET_ATTR = "set_attr"
    SHARE_INFOS = "sharing the infos' layout"  # which infos to write into shared memory
    CLOSE = "close"


# The control words (see vecenvs.shm.SharedArea), all 64-bit integers. The header line's:
#   GENERATION       bumped by the parent once per round it gives: the word every worker spins on;
#   STEPS            how many steps the parent has given whose actions are in shared memory;
#   PARENT_SLEEPING  1 while the parent sleeps on its doorbell.
GENERATION, STEPS, PARENT_SLEEPING = range(3)
# Each worker's line. Written by the parent:
#   MESSAGES    how many commands it has sent the worker over its pipe.
# Written by the worker:
#   DONE        the last generation it has fully carried out;
#   REPLIES     how many answers it has sent back over its pipe (the others are in shared memory);
#   SLEEPING    1 while it sleeps on the workers' doorbell.
MESSAGES, DONE, REPLIES, SLEEPING = range(4)
NOTHING, MESSAGE = 0, 1  # whether a message follows (the async pool's word per env)

START_METHODS = ("fork", "forkserver", "spawn")


def process_context(start_method: str | None, env_fns: list[Callable[[], gym.Env]]) -> Any:
    """The ``multiprocess`` context for ``start_method``, once the env factories can reach it.

    Under spawn and forkserver the factories are pickled (with dill): checked here, before any
    process starts, so that an unpicklable one fails with a message naming it.
    """
    import multiprocess

    main_guard.exit_if_bootstrapping()  # a worker importing a script that lacks the guard
    if start_method is not None and start_method not in START_METHODS:
        raise ValueError(  # (with multiprocessing's words too: code written for it matches on them)
            f"start_method is {start_method!r}: cannot find context for {start_method!r}; expected one of {START_METHODS} or None"
        )
    context = multiprocess.get_context(start_method)
    if context.get_start_method() != "fork":
        for index, env_fn in enumerate(env_fns):
            try:
                dill.dumps(env_fn)
            except Exception as error:
                raise TypeError(
                    f"env_fns[{index}] ({env_fn!r:.80}) cannot be pickled, which start_method="
                    f"{context.get_start_method()!r} needs to send it to a worker process: {type(error).__name__}: "
                    f"{error}. Make the factory capture only picklable things (an env id and kwargs; not a "
                    f"generator or a socket), or use start_method='fork'."
                ) from error
    return context


@dataclass(frozen=True)
class ChunkSpec:
    """What a worker needs to make its chunk of envs."""

    #: One factory per env of the chunk.
    env_fns: list[Callable[[], gym.Env]]
    #: The chunk's envs, as indices of the vector env.
    rows: range
    autoreset_mode: AutoresetMode
    observation_mode: Any


class Chunk:
    """One worker's envs, serving commands: a :class:`~vecenvs.multi_env.MultiEnv`.

    Results of RESET and STEP are copied into the chunk's rows of the shared area when there is
    one (see :meth:`share`; the answer is then only the chunk's infos, or None), else they are
    the answer.
    """

    def __init__(self, spec: ChunkSpec):
        self.spec, self.rows = spec, spec.rows
        self.envs = MultiEnv(
            spec.env_fns,
            copy=False,
            first_index=spec.rows.start,
            autoreset_mode=spec.autoreset_mode,
            observation_mode=spec.observation_mode,
        )
        self.envs.keep_infos_in({})  # a part of the vector env's infos (no shared rows yet)
        self.area: SharedArea | None = None

    def share(self, area: SharedArea | None) -> None:
        """Results go into ``area`` from now on (None: into the answers): the rows of the shared
        arrays this chunk writes and reads, bound once here."""
        self.area = area
        if area is None or not area.has_data:
            return
        rows = slice(self.rows.start, self.rows.stop)
        self.envs.keep_results_in(
            area.rewards[rows], area.terminations[rows], area.truncations[rows]
        )
        if area.array_observations:
            self.observations_out = area.observation_rows(rows)
        if area.actions is not None:
            self.actions_in = tree_map(lambda leaf: leaf[rows], area.actions)

    def share_infos(self, layout: InfoLayout) -> None:
        """The infos of ``layout`` go into the chunk's rows of shared memory from now on, each
        env's written there as it steps (:meth:`~vecenvs.multi_env.MultiEnv.keep_infos_in`)."""
        assert self.area is not None, "infos are shared only with a shared area"
        rows = slice(self.rows.start, self.rows.stop)
        arrays = self.area.info_arrays(layout).items()
        self.envs.keep_infos_in({key: (values[rows], mask[rows]) for key, (values, mask) in arrays})

    def hello(self) -> tuple[Any, ...]:
        """What the parent needs to know: every env's spaces, the metadata and render mode."""
        envs = self.envs
        return (
            [env.observation_space for env in envs.envs],
            [env.action_space for env in envs.envs],
            envs.metadata,
            envs.render_mode,
        )

    def answer(self, command: Command, payload: Any) -> tuple[bool, Any]:
        """:meth:`serve`, as an answer: ``(True, its result)`` or ``(False, a CrashReport)``."""
        try:
            return True, self.serve(command, payload)
        except EnvCrashedError as crash:
            return False, crash.report()
        except Exception as error:  # not an env's fault: a bad argument, or a bug here
            return False, CrashReport.of(self.rows.start, command.value, error)

    def serve(self, command: Command, payload: Any) -> Any:
        """Carries out one command; returns the answer's payload (raises EnvCrashedError).

        A STEP's payload is its envs' actions, or None when they are in shared memory; the
        other commands are in :data:`_SERVE`.
        """
        if command is Command.STEP:
            if payload is None:  # in shared memory, which the next step overwrites
                payload = self.actions_in
                if not isinstance(payload, np.ndarray) or payload.ndim > 1:
                    # A copy, as an env may keep its action (a 1-D array's are numbers of their own).
                    payload = tree_map(np.ndarray.copy, payload)
                if not isinstance(payload, np.ndarray):  # (an array's rows are its envs' actions)
                    payload = iterate(self.envs.action_space, payload)
            return self._reply(self.envs.step_envs(payload))
        return _SERVE[command](self, payload)

    def _reset(self, payload: Any) -> Any:
        seeds, options = payload
        return self._reply(self.envs.reset(seed=seeds, options=options)[1])

    def _call(self, payload: Any) -> Any:
        indices, name, args, kwargs = payload
        return self.envs.call_at(indices, name, *args, **kwargs)

    def _reply(self, infos: dict[str, Any]) -> Any:
        """The answer to RESET or STEP: with shared memory, the observations copied into the
        chunk's rows (the envs wrote their rewards, flags and a step's numeric infos there
        already: see :meth:`share_infos`), and only the other infos and the strays (see
        :class:`~vecenvs.multi_env.ChunkInfos`), or None; without, everything answered. (A
        reset's infos are all answered: not every chunk resets.)"""
        envs, area = self.envs, self.area
        if area is None or not area.has_data:
            envs.batch_into()  # an observation that does not fit is an error here, naming its env
            return envs.env_observations, *envs.latest_results(), infos, envs.strays
        if area.array_observations:
            envs.batch_into(self.observations_out)
        else:  # (batched first all the same, for the error naming an env that does not fit)
            envs.batch_into()
            area.write_observations(self.rows, envs.env_observations)
        strays = envs.strays
        return (infos, strays) if infos or strays else None


#: How a chunk serves each command but STEP: ``function(chunk, payload)``.
_SERVE: dict[Command, Callable[[Chunk, Any], Any]] = {
    Command.RESET: Chunk._reset,
    Command.CALL: Chunk._call,
    Command.GET_ATTR: lambda chunk, payload: chunk.envs.get_attr_at(*payload),
    Command.SET_ATTR: lambda chunk, payload: chunk.envs.set_attr_at(*payload),
    Command.SHARE_INFOS: Chunk.share_infos,
    Command.CLOSE: lambda chunk, payload: chunk.envs.close(),
}


# ----------------------------------------------------------------- workers, as the parent sees them


class Worker(Protocol):
    """What the vector env of :mod:`vecenvs.core` needs of a worker: commands in, answers out,
    one at a time, in order."""

    #: The worker's chunk: its position in the vector env's chunks, and its envs.
    index: int
    rows: range

    @property
    def due(self) -> int:
        """How many answers are still to be received."""

    def hello(self, deadline: float, patience: float) -> tuple[Any, ...]:
        """Waits for the envs to be made: their spaces, metadata and render mode. ``deadline``
        moves on by ``patience`` seconds with each env made, where the worker says so."""

    def setup(self, area: SharedArea | None) -> None:
        """Hands the worker the shared area (None: there is none)."""

    def finish_setup(self, deadline: float) -> None:
        """Waits until the worker has the area."""

    def post(self, command: Command, payload: Any) -> None:
        """Gives a command whose payload travels with it (pickled)."""

    def receive(self, deadline: float, command: Command) -> Any:
        """The answer to the oldest command due: its payload, or EnvCrashedError,
        WorkerDiedError, WorkerTimeoutError."""

    def stop(self, deadline: float, terminate: bool) -> None:
        """Ends the worker: it was asked to close (or must not be); by force if need be."""


class ProcessWorker:
    """A worker process and the parent's end of its pipe: every command and answer a message.

    It makes its chunk (``spec``) in a process of ``context`` (``multiprocess``'s, for a start
    method), then serves commands; with a shared area it serves them with ``loop`` (default:
    the lock-step pool's :func:`serve_with_control`), called as
    ``loop(chunk, area, line, pipe, spin_seconds)`` (``spin_seconds``: how long each side spins
    before sleeping; 0 never).
    """

    def __init__(
        self,
        index: int,
        spec: ChunkSpec,
        context: Any,
        spin_seconds: float = 0.0,
        loop: Callable[..., None] | None = None,
    ):
        self.index, self.rows = index, spec.rows
        parent_pipe, child_pipe = context.Pipe()  # a socket pair: it can carry a file descriptor
        self.process = context.Process(
            target=run_worker,
            args=(index, spec, child_pipe, os.getpid(), spin_seconds, loop or serve_with_control),
            name=f"vecenvs-worker-{index}",
            # daemon: if the parent exits without close(), multiprocess terminates the worker at
            # exit instead of waiting for it forever.
            daemon=True,
        )
        self.process.start()
        child_pipe.close()  # the parent's copy: now the pipe hits EOF when the worker dies
        self.pipe = parent_pipe
        self.poller = select.poll()  # watches the pipe and the process (its sentinel)
        for file_descriptor in (parent_pipe.fileno(), self.process.sentinel):
            self.poller.register(file_descriptor, select.POLLIN)
        self.messages_due = 1  # answers still to come over the pipe: the hello

    @property
    def due(self) -> int:
        """How many answers are still to be received."""
        return self.messages_due

    def hello(self, deadline: float, patience: float) -> tuple[Any, ...]:
        """Waits for the hello. The worker says each env it has made (``(index, None, None)``),
        and each gives the next ``patience`` seconds more: an env slow to make is waited for,
        one whose constructor hangs is not."""
        while True:
            ok, payload = self.read_message(deadline, Command.HELLO)[1:]
            if ok is not None:
                break
            deadline = max(deadline, time.perf_counter() + patience)
        self.messages_due -= 1
        if not ok:
            raise payload.to_error()
        return payload

    def setup(self, area: SharedArea | None) -> None:
        """Tells the worker there is no shared area: everything goes over the pipe."""
        ProcessWorker.post(self, Command.SETUP, None)

    def finish_setup(self, deadline: float) -> None:
        ProcessWorker.receive(self, deadline, Command.SETUP)

    def post(self, command: Command, payload: Any) -> None:
        self.send_message((command, payload), command)
        self.messages_due += 1

    def receive(self, deadline: float, command: Command) -> Any:
        """Waits for the answer to the oldest command still due; returns its payload.

        Raises:
            EnvCrashedError: the command failed in an env (the report becomes the error).
            WorkerDiedError, WorkerTimeoutError: the worker died, or did not answer in time.
        """
        ok, payload = self.read_message(deadline, command)[1:]
        self.messages_due -= 1
        if not ok:
            raise payload.to_error()
        return payload

    def send_message(self, message: Any, command: Enum) -> None:
        """Pickles ``message`` into the pipe (WorkerDiedError if the worker is gone)."""
        try:
            self.pipe.send_bytes(dumps(message))
        except OSError:  # BrokenPipeError: the worker is gone
            raise self.died(command) from None

    def read_message(self, deadline: float, command: Enum) -> tuple[Any, ...]:
        """Reads the next message from the worker: ``(env index or None, ok, payload)``.

        Waits in ``poll`` on the pipe and the process's sentinel at once, with the deadline.
        """
        while True:
            remaining = deadline - time.perf_counter()
            events = dict(self.poller.poll(max(0, math.ceil(remaining * 1000))))
            if self.pipe.fileno() in events:
                try:
                    return loads(self.pipe.recv_bytes())
                except (EOFError, OSError):
                    raise self.died(command) from None
            if self.process.sentinel in events:
                raise self.died(command)
            if remaining <= 0:
                raise WorkerTimeoutError([self.index], list(self.rows), 0, command.value)

    def died(self, command: Enum) -> WorkerDiedError:
        """The error to raise for this worker's death during ``command`` (with its exit code)."""
        self.process.join(1.0)  # so that its exit code is known
        return WorkerDiedError(self.index, list(self.rows), self.process.exitcode, command.value)

    def stop(self, deadline: float, terminate: bool) -> None:
        """Ends the process: by now it was asked to close (or must not be); join, then force."""
        if not terminate:
            self.process.join(max(0.0, deadline - time.perf_counter()))
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(1.0)
        if self.process.is_alive():  # ignored SIGTERM, e.g. stuck in C code
            self.process.kill()
            self.process.join(1.0)
        self.pipe.close()


class SharedMemoryWorker(ProcessWorker):
    """A worker process that, once set up, is told what to do by words in shared memory: one
    of a :class:`WordCrew`. Start-up and setup go over the pipe, as for :class:`ProcessWorker`;
    from then on the crew speaks for it."""

    def setup(self, area: SharedArea | None) -> None:
        """Hands the worker the shared area (its file descriptor goes over the pipe)."""
        assert area is not None, "a shared-memory worker needs the area"
        ProcessWorker.post(self, Command.SETUP, area.layout)
        send_handle(self.pipe, area.fd, self.process.pid)


# ----------------------------------------------------------------- the workers, as one


class Crew:
    """A vector env's workers as one: a round gives some of them a command each (:meth:`give`),
    then hears every answer due (:meth:`hear`). This one talks to each :class:`Worker` in turn,
    over its pipe or Ray; the pools' :class:`WordCrew` to all of them at once."""

    def __init__(self, workers: list[Any]):
        self.workers = workers

    @property
    def first(self) -> int:
        """The chunk of the first worker (the caller's own chunk, if any, comes before it)."""
        return self.workers[0].index if self.workers else 0

    @property
    def due(self) -> bool:
        """Whether answers are still to be heard."""
        return any(worker.due for worker in self.workers)

    def late(self) -> list[int]:
        """The chunks of the workers whose answers are still to be heard."""
        return [worker.index for worker in self.workers if worker.due]

    def give(self, orders: dict[int, tuple[Any, Any]]) -> None:
        """Gives each chunk in ``orders``, ``{chunk: (command, payload)}``, its command."""
        for chunk, (command, payload) in orders.items():
            self.workers[chunk - self.first].post(command, payload)

    def give_step(self) -> None:
        """A STEP whose actions are in shared memory: only a :class:`WordCrew` can be given one."""
        assert not self.workers, "pipes and actors take their actions with the command"

    def hear(self, deadline: float, command: Any) -> tuple[dict[int, Any], list[EnvCrashedError]]:
        """Every answer due: ``{chunk: payload}``, and the envs' crashes. Raises
        WorkerDiedError or WorkerTimeoutError for a worker that died or missed the deadline."""
        answers, crashes = {}, []
        for worker in self.workers:
            while worker.due:
                try:
                    answers[worker.index] = worker.receive(deadline, command)
                except EnvCrashedError as crash:
                    crashes.append(crash)
        return answers, crashes


class WordCrew(Crew):
    """The pools' workers as one: one generation word tells them all, one look at their done
    words hears them all, whatever their number. Only a worker with something to say (an env's
    crash, infos that are not numbers, the answer to a command other than a step) is read from
    its pipe; a command other than a step goes over the pipes of the workers it is for.

    Args:
        workers: :class:`SharedMemoryWorker` s, set up with ``area``, in chunk order.
        spin_seconds: the longest the parent spins before it sleeps (see
            :class:`~vecenvs.doorbell.Spin`).
    """

    def __init__(self, workers: list[Any], area: SharedArea, spin_seconds: float):
        super().__init__(workers)
        self.header, self.workers_bell = area.header, area.worker_bell
        # Every worker's word, read in one C call each (Python's min, any, sum over a strided
        # memoryview), and as numpy views for the rarer work on several at once.
        self.done, self.replies, self.sleeping = (
            area.words(word, self.first) for word in (DONE, REPLIES, SLEEPING)
        )
        self.messages = area.column(MESSAGES, self.first)
        self.given = self.heard = 0  # the generation last given, and the last heard
        self.read = [0] * len(workers)  # each worker's replies read so far
        self.to_read: list[int] = []  # the workers whose answers wait in their pipes
        self.sentinels = [worker.process.sentinel for worker in workers]
        self.waiter = Waiter(
            bell=area.parent_bell,
            sleeping=area.header[PARENT_SLEEPING : PARENT_SLEEPING + 1],
            spin=Spin(spin_seconds),
            alive=self._alive,
        )
        self.all_done = functools.partial(min, self.done)  # the oldest generation done

    @property
    def due(self) -> bool:
        return self.heard < self.given or bool(self.to_read)

    def late(self) -> list[int]:
        late = [done < self.given or p in self.to_read for p, done in enumerate(self.done)]
        return [worker.index for worker, is_late in zip(self.workers, late) if is_late]

    def give_step(self) -> None:
        """A STEP to every worker, its actions already in shared memory: no pickle, no pipe."""
        self.header[STEPS] += 1
        self.announce()

    def give(self, orders: dict[int, tuple[Any, Any]], heard: bool = True) -> None:
        """Commands over the pipes, announced first: a big one blocks until its worker reads it.
        ``heard`` False: answered otherwise (the async pool's, env by env), not by :meth:`hear`."""
        self.messages[[chunk - self.first for chunk in orders]] += 1
        if heard:
            self.announce()
        else:
            self.announce_for_envs()
        for chunk, (command, payload) in orders.items():
            self.workers[chunk - self.first].send_message((command, payload, self.given), command)

    def announce_for_envs(self) -> None:
        """Announces what the async pool's envs answer by their own words: no round to hear."""
        self.announce()
        self.heard = self.given

    def announce(self) -> None:
        """Moves the generation word, after what it announces; wakes the workers that sleep."""
        self.given += 1
        publish()  # what we wrote (and read) before the word that says it is there
        self.header[GENERATION] = self.given
        fence()  # the word is seen before we look who sleeps (they look after saying so)
        if any(self.sleeping):
            self.workers_bell.ring()  # one system call wakes every sleeping worker

    def hear(self, deadline: float, command: Any) -> tuple[dict[int, Any], list[EnvCrashedError]]:
        if self.heard < self.given:
            if self.waiter.wait(read=self.all_done, target=self.given, deadline=deadline) is None:
                raise self._failure(command)
            self.heard = self.given
            if sum(self.replies) > sum(self.read):  # (rare: someone has something to say)
                self.to_read = [p for p, (n, r) in enumerate(zip(self.replies, self.read)) if n > r]
        answers, crashes = {}, []
        while self.to_read:
            position = self.to_read.pop(0)
            self.read[position] += 1
            worker = self.workers[position]
            ok, payload = worker.read_message(deadline, command)[1:]
            if ok:
                answers[worker.index] = payload
            else:
                crashes.append(payload.to_error())
        return answers, crashes

    def _alive(self) -> bool:
        """Whether every worker that still owes an answer lives (one that answered a CLOSE may
        be gone). One system call for all: a dead worker's sentinel is ready."""
        dead = first_ready(self.sentinels, timeout=0)
        return all(self.done[self.sentinels.index(sentinel)] >= self.given for sentinel in dead)

    def _failure(self, command: Any) -> VecEnvError:
        """A worker died, or the deadline passed: the error naming them."""
        for worker, done in zip(self.workers, self.done):
            if done < self.given and not worker.process.is_alive():
                return worker.died(command)
        late = self.late()
        return WorkerTimeoutError(
            late, [i for w in late for i in self.workers[w - self.first].rows], 0, command.value
        )


def dumps(message: Any) -> bytes:
    """Pickles a message: the fast C pickle, or dill for what it cannot handle (lambdas...)."""
    try:
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return dill.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> Any:
    """Unpickles a message from :func:`dumps` (dill's output loads with plain pickle)."""
    return pickle.loads(data)


# ----------------------------------------------------------------- the worker process


def run_worker(
    worker_index: int,
    spec: ChunkSpec,
    pipe: Any,
    parent_pid: int,
    spin_seconds: float,
    loop: Callable[..., None],
) -> None:
    """The main function of a worker process: make the envs, say hello, then serve commands.

    Every answer is ``(env index or None, ok, payload)``: ``ok`` False carries a CrashReport.
    With a shared area, ``loop`` serves the commands (see :class:`ProcessWorker`), else
    :func:`_serve_over_pipe`.
    """
    # Without this the worker would inherit the notebook's SIGINT handler, and a Ctrl-C meant to
    # interrupt the parent would kill every worker mid-step. The parent decides what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_when_orphaned(parent_pid)
    chunk: Chunk | None = None
    try:
        try:
            made = [
                _saying_made(env_fn, index, pipe) for index, env_fn in zip(spec.rows, spec.env_fns)
            ]
            chunk = Chunk(replace(spec, env_fns=made))
        except EnvCrashedError as crash:
            send(pipe, (None, False, crash.report()))
            return
        except Exception as error:  # e.g. spaces that differ between the chunk's envs
            send(pipe, (None, False, CrashReport.of(spec.rows.start, "make", error)))
            return
        send(pipe, (None, True, chunk.hello()))
        _command, layout = loads(pipe.recv_bytes())  # SETUP
        if layout is not None:
            chunk.share(SharedArea(layout, fd=recv_handle(pipe)))
        send(pipe, (None, True, None))
        if chunk.area is None:
            _serve_over_pipe(chunk, pipe)
        else:
            loop(chunk, chunk.area, chunk.area.line(worker_index), pipe, spin_seconds)
    except (EOFError, OSError):
        pass  # the parent closed its end or died: there is nobody left to answer
    finally:
        if chunk is not None and not chunk.envs.closed:
            try:
                chunk.envs.close()
            except Exception:
                pass  # closing after a failure: the failure is what the parent reports


def _saying_made(env_fn: Callable[[], gym.Env], index: int, pipe: Any) -> Callable[[], gym.Env]:
    """``env_fn``, telling the parent once it has made env ``index``: ``(index, None, None)``
    (the parent's start-up deadline then moves on: see :meth:`ProcessWorker.hello`)."""

    def make() -> gym.Env:
        env = env_fn()
        send(pipe, (index, None, None))
        return env

    return make


def send(pipe: Any, message: tuple[Any, ...]) -> None:
    """Sends a worker's message to the parent: ``(env index or None, ok, payload)``."""
    pipe.send_bytes(dumps(message))


def _serve_over_pipe(chunk: Chunk, pipe: Any) -> None:
    """The classic loop: block on the pipe for a command, answer over the pipe."""
    while True:
        command, payload = loads(pipe.recv_bytes())
        send(pipe, (None, *chunk.answer(command, payload)))
        if command is Command.CLOSE:
            return


#: Bytes: an answer this small fits in any socket's buffer (macOS's hold 8 kB), so sending it
#: cannot block, and the worker sends it before saying it is done.
SMALL_MESSAGE = 4096


def serve_with_control(
    chunk: Chunk, area: SharedArea, line: memoryview, pipe: Any, spin_seconds: float
) -> None:
    """The pool's loop: wait for the generation word to move; serve what it announces; write
    DONE. One round, one command (the parent gives the next once every worker is done): a STEP
    whose actions are in shared memory (``STEPS`` moved), a message over the pipe (``MESSAGES``
    moved), or nothing for this worker (the round was for others)."""
    steps = messages = seen = 0
    waiter, generation = command_waiter(area, line, spin_seconds)
    while True:
        seen = waiter.wait(read=generation, target=seen + 1, deadline=math.inf)
        command, payload = None, None
        if steps < area.header[STEPS]:
            steps, command = steps + 1, Command.STEP
        elif messages < line[MESSAGES]:
            messages += 1
            command, payload, _ = loads(pipe.recv_bytes())
        ok, result = (True, None) if command is None else chunk.answer(command, payload)
        message = None if ok and result is None else dumps((None, ok, result))
        if message is not None:
            line[REPLIES] += 1
        if message is not None and len(message) <= SMALL_MESSAGE:
            pipe.send_bytes(message)  # there before DONE: the parent finds it without waiting
            message = None
        publish()  # the results and REPLIES (and our reads of the actions) before DONE
        line[DONE] = seen
        wake_parent(area)
        if message is not None:
            pipe.send_bytes(message)  # after DONE: a big one may block until the parent reads
        if command is Command.CLOSE:
            return


def command_waiter(
    area: SharedArea, line: memoryview, spin_seconds: float
) -> tuple[Waiter, Callable[[], Any]]:
    """How a worker waits for its next round, and how it reads the generation word. It spins
    while rounds come quickly (a benchmark, a fast policy) and sleeps on the workers' doorbell
    when the parent thinks for longer between steps (see :class:`~vecenvs.doorbell.Spin`)."""
    sleeping = line[SLEEPING : SLEEPING + 1]
    waiter = Waiter(bell=area.worker_bell, sleeping=sleeping, spin=Spin(spin_seconds))
    return waiter, functools.partial(operator.getitem, area.header, GENERATION)


def wake_parent(area: SharedArea) -> None:
    """Rings the parent's doorbell if it sleeps (after a DONE word, or an env flagged done)."""
    fence()  # our DONE is seen before we look whether the parent sleeps (it looks after)
    if area.header[PARENT_SLEEPING]:
        area.parent_bell.ring()


def exit_when_orphaned(parent_pid: int, check_seconds: float = 0.5) -> None:
    """Exits this process if its parent dies, even while an env is stuck in a long step.

    Every process vecenvs starts calls it first: the workers, and the child that checks an env
    (:func:`vecenvs.envspec.check_env`). A worker blocked on its pipe notices a dead parent by
    itself (EOF); one inside a hung env would not, and would live on as an orphan, holding the
    pipes of multiprocess's resource tracker and fork server open so that they live on too. A
    daemon thread watches the parent instead. (Not ``os.getppid()``: under forkserver the parent process is the fork server.)
    """
    import psutil

    try:
        parent = psutil.Process(parent_pid)
    except psutil.Error:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(check_seconds)
            try:
                alive = parent.is_running() and parent.status() != psutil.STATUS_ZOMBIE
            except psutil.Error:
                alive = False
            if not alive:
                os._exit(1)

    threading.Thread(target=watch, name="vecenvs-orphan-watch", daemon=True).start()
