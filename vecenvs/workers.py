"""Workers: who steps each chunk of envs, and how the parent talks to them.

A vector env of :mod:`vecenvs.core` hands each chunk of its envs to a *worker*. Every worker
holds a :class:`Chunk` (a :class:`~vecenvs.multi_env.MultiEnv` and the code that serves each
:class:`Command`); what differs is where it runs and how commands reach it:

- :class:`InProcessWorker`: the caller's own chunk, stepped in this process when its answer is
  asked for, while the process workers step theirs.
- :class:`ProcessWorker`: a child process running :func:`run_worker`, over *pipes* (SubprocVecEnv:
  every command and answer a pickled message, each side blocking in the kernel) or *control
  words* in shared memory (the pools: the parent writes a command's code and bumps the worker's
  *generation* word; the worker, spinning on it, sees it within a fraction of a microsecond and
  answers by writing its *done* word, so that a step through shared memory needs no pickle and
  no system call). Payloads that do not fit in words (seeds, a ``call``'s arguments, infos, a
  traceback) still travel over the pipe, announced by the words.
- A Ray actor (see :mod:`vecenvs.ray_env`), holding the same :class:`Chunk`.

The protocol is lock-step: a worker is given a command once it has answered the previous one.
Every answer says whether it succeeded (``(ok, payload)``); a failure carries a
:class:`~vecenvs.errors.CrashReport` with the env's index and traceback. Every wait has a deadline
and watches the worker process: a hung env ends in :class:`~vecenvs.errors.WorkerTimeoutError`, a
dead worker in :class:`~vecenvs.errors.WorkerDiedError`, never in a hang. Below, taken on trust:
:mod:`vecenvs.shm` (the shared memory) and :mod:`vecenvs.doorbell` (spinning and sleeping). The
async pool (:mod:`vecenvs.async_pool`) has a protocol and a worker loop of its own.
"""

from __future__ import annotations

import math
import os
import pickle
import select
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from copy import deepcopy
from enum import Enum
from typing import Any

import dill
import gymnasium as gym
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import iterate
from multiprocess.reduction import recv_handle, send_handle

from vecenvs.doorbell import AdaptiveSpin, Doorbell, fence, spin_until
from vecenvs.errors import CrashReport, EnvCrashedError, WorkerDiedError, WorkerTimeoutError
from vecenvs.multi_env import MultiEnv
from vecenvs.shm import SharedArea

__all__ = [
    "START_METHODS",
    "Chunk",
    "Command",
    "CommandWait",
    "InProcessWorker",
    "ProcessWorker",
    "process_context",
    "run_worker",
]


class Command(Enum):
    """What the parent asks a worker to do."""

    SETUP = "setup"  # the shared area to use (or none); answered once, after the hello
    RESET = "reset"
    STEP = "step"
    CALL = "call"
    GET_ATTR = "get_attr"
    SET_ATTR = "set_attr"
    CLOSE = "close"


# The words of a worker's control line (see vecenvs.shm.SharedArea.line), all 64-bit integers.
# Written by the parent:
#   GENERATION  bumped whenever it gives the worker anything: the word a worker spins on;
#   MESSAGES    how many commands it has sent over the pipe;
#   STEPS       how many steps it has given whose actions are in shared memory.
# Written by the worker:
#   DONE        the last generation it has fully carried out;
#   REPLY       whether an answer to that waits in the pipe (MESSAGE) or not (NOTHING);
#   SLEEPING    1 while it sleeps on the workers' doorbell.
GENERATION, MESSAGES, STEPS, DONE, REPLY, SLEEPING = range(6)
PARENT_SLEEPING = 0  # the header line's one word: 1 while the parent sleeps on its doorbell
NOTHING, MESSAGE = 0, 1  # the values of REPLY

START_METHODS = ("fork", "forkserver", "spawn")


def process_context(start_method: str | None, env_fns: list[Callable[[], gym.Env]]) -> Any:
    """The ``multiprocess`` context for ``start_method``, once the env factories can reach it.

    Under spawn and forkserver the factories are pickled (with dill): checked here, before any
    process starts, so that an unpicklable one fails with a message naming it.
    """
    import multiprocess

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


class Chunk:
    """One worker's envs (the first is env ``first_index`` of the vector env), serving commands.

    Results of RESET and STEP go into the chunk's rows of the shared area when there is one
    (the answer is then only the chunk's infos, or None), else into the answer itself.
    """

    def __init__(
        self,
        env_fns: list[Callable[[], gym.Env]],
        first_index: int,
        autoreset_mode: AutoresetMode,
        observation_mode: Any,
    ):
        options = {"autoreset_mode": autoreset_mode, "observation_mode": observation_mode}
        self.envs = MultiEnv(env_fns, copy=False, first_index=first_index, **options)
        self.rows = range(first_index, first_index + len(env_fns))
        self.area: SharedArea | None = None

    def share(self, area: SharedArea | None) -> None:
        """Results go into ``area`` from now on (None: into the answers)."""
        self.area = area
        if area is not None and area.has_data:
            rows = slice(self.rows.start, self.rows.stop)
            flags = area.rewards[rows], area.terminations[rows], area.truncations[rows]
            self.envs.keep_results_in(*flags)
            if area.array_observations:
                self._observation_rows = area.observation_rows(rows)

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
        """Carries out one command; returns the answer's payload (raises EnvCrashedError)."""
        envs = self.envs
        if command is Command.STEP:
            if payload is None:  # the actions are in shared memory
                assert self.area is not None
                actions = self.area.read_actions(slice(self.rows.start, self.rows.stop))
                payload = iterate(envs.action_space, actions)
            return self._results(envs.step_envs(payload))
        if command is Command.RESET:
            seeds, options = payload
            return self._results(envs.reset(seed=seeds, options=options)[1])
        if command is Command.CALL:
            indices, name, args, kwargs = payload
            return envs.call_at(indices, name, *args, **kwargs)
        if command is Command.GET_ATTR:
            return envs.get_attr_at(*payload)
        if command is Command.SET_ATTR:
            return envs.set_attr_at(*payload)
        if command is Command.CLOSE:
            return envs.close()
        raise ValueError(f"unknown command {command!r}")

    def _results(self, infos: dict[str, Any]) -> Any:
        """The answer to RESET or STEP. With shared memory, the results are in the chunk's rows
        already (rewards and flags: see :meth:`share`) once the observations are batched there;
        the answer is only the infos, or None. Without, everything goes into the answer."""
        envs, area = self.envs, self.area
        if area is None or not area.has_data:
            envs.batch_into()  # an observation that does not fit is an error here, naming its env
            return envs.env_observations, *envs.latest_results(), infos
        if area.array_observations:
            envs.batch_into(self._observation_rows)
        else:  # (batched first all the same, for the error naming an env that does not fit)
            envs.batch_into()
            area.write_observations(self.rows, envs.env_observations)
        return infos or None


# ----------------------------------------------------------------- workers, as the parent sees them


class InProcessWorker:
    """The caller's own chunk: a command runs in this process, in :meth:`receive`, when its
    answer is asked for (so while the process workers carry out theirs)."""

    in_caller = True

    def __init__(
        self,
        index: int,
        rows: range,
        env_fns: list[Callable[[], gym.Env]],
        autoreset_mode: AutoresetMode,
        observation_mode: Any,
    ):
        self.index, self.rows = index, rows
        self.chunk = Chunk(env_fns, rows.start, autoreset_mode, observation_mode)
        self.pending: list[tuple[Command, Any]] = []

    @property
    def due(self) -> int:
        return len(self.pending)

    def hello(self, deadline: float) -> tuple[Any, ...]:
        return self.chunk.hello()

    def setup(self, area: SharedArea | None) -> None:
        self.chunk.share(area)

    def finish_setup(self, deadline: float) -> None:
        pass  # nothing to wait for: the chunk has the area already

    def post(self, command: Command, payload: Any) -> None:
        # A copy, as a pipe would give: actions changed by the caller before step_wait() must
        # not reach the envs.
        self.pending.append((command, deepcopy(payload) if command is Command.STEP else payload))

    def post_step(self) -> None:
        self.pending.append((Command.STEP, None))

    def asleep(self) -> bool:
        return False

    def receive(self, deadline: float, doing: str) -> Any:
        """Carries out the oldest pending command now; returns its answer (raises EnvCrashedError)."""
        command, payload = self.pending.pop(0)
        return self.chunk.serve(command, payload)

    def stop(self, deadline: float, terminate: bool) -> None:
        self.pending = []
        self.chunk.envs.close()


class ProcessWorker:
    """A worker process and the parent's end of its pipe (and, once set up, its control line).

    It runs envs ``rows``, made by ``env_fns``, in a process of ``context`` (``multiprocess``'s,
    for a start method); each side spins ``spin_seconds`` before sleeping (0: never). With a
    shared area the process serves commands with ``loop`` (default: the lock-step pool's,
    ``serve_with_control``), called as ``loop(chunk, area, line, pipe, spin_seconds)``.
    """

    in_caller = False

    def __init__(
        self,
        index: int,
        rows: range,
        env_fns: list[Callable[[], gym.Env]],
        context: Any,
        autoreset_mode: AutoresetMode,
        observation_mode: Any,
        spin_seconds: float,
        loop: Callable[..., None] | None = None,
    ):
        self.index, self.rows = index, rows
        self.line: memoryview | None = None  # None: every command and answer goes over the pipe
        self.generation = 0  # of the last command given
        self.posted_at = 0.0  # when the last command was given
        self.spin = AdaptiveSpin(spin_seconds)
        parent_pipe, child_pipe = context.Pipe()  # a socket pair: it can carry a file descriptor
        chunk = (env_fns, rows.start, autoreset_mode, observation_mode)
        self.process = context.Process(
            target=run_worker,
            args=(index, *chunk, child_pipe, os.getpid(), spin_seconds, loop or serve_with_control),
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
        self.area: SharedArea | None = None
        self.awaiting: deque[int] = deque([0])  # the generations whose answer is due: the hello

    # ----------------------------------------------------------------- giving commands

    def hello(self, deadline: float) -> tuple[Any, ...]:
        return self.receive(deadline, "start-up (making the envs)")

    def setup(self, area: SharedArea | None) -> None:
        """Hands the worker the shared area (its file descriptor goes over the pipe)."""
        self.post(Command.SETUP, None if area is None else area.layout)
        if area is not None:
            send_handle(self.pipe, area.fd, self.process.pid)
        self.area = area

    def finish_setup(self, deadline: float) -> None:
        """Waits until the worker has its shared area; from then on, commands go through the words."""
        self.receive(deadline, "setup")
        if self.area is not None:
            self.line = self.area.line(self.index)

    def post(self, command: Enum, payload: Any, answered: bool = True) -> None:
        """Gives a command whose payload travels over the pipe (``answered=False``: the async
        pool's per-env commands, answered per env, not per command)."""
        if self.line is not None:
            self.line[MESSAGES] += 1  # announced before it is sent: a big one may block until read
            self.announce()
        self._send((command, payload), command.value)
        if answered:
            self.awaiting.append(self.generation)
        self.posted_at = time.perf_counter()

    def post_step(self) -> None:
        """Gives a STEP whose actions are in shared memory: two words, no system call. The
        caller rings the workers' doorbell once for all (see :meth:`asleep`)."""
        line = self.line
        assert line is not None, "only in control mode"
        line[STEPS] += 1
        self.generation += 1
        line[GENERATION] = self.generation
        self.awaiting.append(self.generation)
        self.posted_at = time.perf_counter()

    def announce(self, ring: bool = True) -> None:
        """Bumps the generation word: the worker looks at what it was given (``ring``: and is
        woken if it sleeps; else the caller rings once for several workers)."""
        assert self.line is not None and self.area is not None, "only in control mode"
        self.generation += 1
        self.line[GENERATION] = self.generation
        if ring:
            fence()
            if self.line[SLEEPING]:
                self.area.worker_bell.ring()

    @property
    def due(self) -> int:
        """How many answers are still to be received."""
        return len(self.awaiting)

    def asleep(self) -> bool:
        """Whether the worker sleeps on the doorbell (ring it after giving commands)."""
        return self.line is not None and bool(self.line[SLEEPING])

    def _send(self, message: Any, doing: str) -> None:
        try:
            self.pipe.send_bytes(dumps(message))
        except OSError:  # BrokenPipeError: the worker is gone
            raise self.died(doing) from None

    # ----------------------------------------------------------------- answers

    def receive(self, deadline: float, doing: str) -> Any:
        """Waits for the answer to the oldest command still due; returns its payload.

        Raises:
            EnvCrashedError: the command failed in an env (the report becomes the error).
            WorkerDiedError, WorkerTimeoutError: the worker died, or did not answer in time.
        """
        if self.line is None:
            ok, payload = self.read_message(deadline, doing)[1:]
        else:
            self._wait_done(self.line, self.awaiting[0], deadline, doing)
            if self.line[REPLY] == NOTHING:
                ok, payload = True, None
            else:
                ok, payload = self.read_message(deadline, doing)[1:]
        self.awaiting.popleft()
        if not ok:
            raise payload.to_error()
        return payload

    def _wait_done(self, line: memoryview, generation: int, deadline: float, doing: str) -> None:
        """Waits until the worker's *done* word reaches ``generation``: spin, then sleep.

        A step may spin for as long as it has run already: the caller, back from stepping its
        own chunk, expects the worker to be about as far; waiting longer than that is more than
        the jitter of a step.
        """
        if line[DONE] >= generation:
            return
        running = time.perf_counter() - self.posted_at
        if spin_until(line, DONE, generation, self.spin, at_least=running):
            return
        assert self.area is not None
        header, bell = self.area.header, self.area.parent_bell
        header[PARENT_SLEEPING] = 1
        try:
            fence()
            while line[DONE] < generation:
                seen = bell.value()
                if line[DONE] >= generation:
                    break
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    raise WorkerTimeoutError([self.index], list(self.rows), 0, doing)
                bell.sleep(seen, min(remaining, 0.05))
                if not self.process.is_alive() and line[DONE] < generation:
                    raise self.died(doing)
        finally:
            header[PARENT_SLEEPING] = 0

    def read_message(self, deadline: float, doing: str) -> tuple[Any, ...]:
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
                    raise self.died(doing) from None
            if self.process.sentinel in events:
                raise self.died(doing)
            if remaining <= 0:
                raise WorkerTimeoutError([self.index], list(self.rows), 0, doing)

    def died(self, doing: str) -> WorkerDiedError:
        """The error to raise for this worker's death during ``doing`` (with its exit code)."""
        self.process.join(1.0)  # so that its exit code is known
        return WorkerDiedError(self.index, list(self.rows), self.process.exitcode, doing)

    # ----------------------------------------------------------------- stopping

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
    env_fns: list[Callable[[], gym.Env]],
    first_index: int,
    autoreset_mode: AutoresetMode,
    observation_mode: Any,
    pipe: Any,
    parent_pid: int,
    spin_seconds: float,
    loop: Callable[..., None],
) -> None:
    """The main function of a worker process: make the envs, say hello, then serve commands.

    Every answer is ``(env index or None, ok, payload)``: ``ok`` False carries a CrashReport.
    With a shared area, ``loop`` serves the commands (see :class:`ProcessWorker`).
    """
    # Without this the worker would inherit the notebook's SIGINT handler, and a Ctrl-C meant to
    # interrupt the parent would kill every worker mid-step. The parent decides what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_when_orphaned(parent_pid)
    chunk: Chunk | None = None
    try:
        try:
            chunk = Chunk(env_fns, first_index, autoreset_mode, observation_mode)
        except EnvCrashedError as crash:
            send(pipe, (None, False, crash.report()))
            return
        except Exception as error:  # e.g. spaces that differ between the chunk's envs
            send(pipe, (None, False, CrashReport.of(first_index, "make", error)))
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
    """The pool's loop: wait for the generation word to move; serve the command; write DONE.

    A command is given only once the previous one is answered, so each round serves one: a
    message over the pipe (``MESSAGES`` moved) or a STEP whose actions are in shared memory.
    """
    seen = messages = 0
    waiting = CommandWait(line, area.worker_bell, spin_seconds)
    while True:
        seen = waiting.after(seen)
        if messages < line[MESSAGES]:
            messages += 1
            command, payload = loads(pipe.recv_bytes())
        else:
            command, payload = Command.STEP, None
        ok, result = chunk.answer(command, payload)
        message = None if ok and result is None else dumps((None, ok, result))
        line[REPLY] = NOTHING if message is None else MESSAGE
        if message is not None and len(message) <= SMALL_MESSAGE:
            pipe.send_bytes(message)  # there before DONE: the parent finds it without waiting
            message = None
        line[DONE] = seen
        wake_parent(area)
        if message is not None:
            pipe.send_bytes(message)  # after DONE: a big one may block until the parent reads
        if command is Command.CLOSE:
            return


class CommandWait:
    """How a worker waits for its next command: spin on its generation word while commands
    come quickly (a benchmark, a fast policy), else sleep on the workers' doorbell: when the
    parent thinks for much longer between steps, a spin would only burn a core it may need.
    A spin may last as long as serving the last command took (at least ``spin_seconds``): the
    caller, stepping its own chunk meanwhile, comes back after about as long."""

    def __init__(self, line: memoryview, bell: Doorbell, spin_seconds: float):
        self.line, self.bell = line, bell
        self.spin = AdaptiveSpin(spin_seconds)
        self.last_wait = 0.0  # how long the previous command took to come
        self.given_at = time.perf_counter()  # when it came

    def after(self, seen: int) -> int:
        """Waits until the generation word moves past ``seen``; returns its new value."""
        line, started = self.line, time.perf_counter()
        served = started - self.given_at  # how long the last command took
        if line[GENERATION] == seen and not (
            self.last_wait < 4 * max(self.spin.seconds, served)
            and spin_until(line, GENERATION, seen + 1, self.spin, at_least=served)
        ):
            self._sleep(seen)
        self.given_at = time.perf_counter()
        self.last_wait = self.given_at - started
        return line[GENERATION]

    def _sleep(self, seen: int) -> None:
        line = self.line
        line[SLEEPING] = 1
        fence()  # (see fence(): the parent must see SLEEPING, or we must see its command)
        while line[GENERATION] == seen:
            ringing = self.bell.value()
            if line[GENERATION] != seen:
                break
            self.bell.sleep(ringing, 0.1)
        line[SLEEPING] = 0


def wake_parent(area: SharedArea) -> None:
    """Rings the parent's doorbell if it sleeps (after a DONE word, or an env flagged done)."""
    fence()
    if area.header[PARENT_SLEEPING]:
        area.parent_bell.ring()


def _exit_when_orphaned(parent_pid: int, check_seconds: float = 0.5) -> None:
    """Exits this process if its parent dies, even while an env is stuck in a long step.

    A worker blocked on its pipe notices a dead parent by itself (EOF); one inside a hung env
    would not, and would live on as an orphan, holding the pipes of multiprocess's resource
    tracker and fork server open so that they live on too. A daemon thread watches the parent
    instead. (Not ``os.getppid()``: under forkserver the parent process is the fork server.)
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
