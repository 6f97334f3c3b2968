"""Workers: who steps each chunk of envs, and how the parent talks to them.

A vector env of :mod:`vecenvs.core` hands each chunk of its envs to a *worker*. Every worker
holds a :class:`Chunk` (a :class:`~vecenvs.multi_env.MultiEnv` and the code that serves each
:class:`Command`); what differs is where it runs and how commands reach it:

- :class:`InProcessWorker`: the caller's own chunk, stepped in this process when its answer is
  asked for, while the process workers step theirs.
- :class:`ProcessWorker`: a child process running :func:`run_worker`, over *pipes* (SubprocVecEnv:
  every command and answer a pickled message, each side blocking in the kernel) or *shared
  control words* (the pools: the parent writes a command's code and bumps the worker's
  *generation* word; the worker, spinning on it, sees it within a fraction of a microsecond and
  answers by writing its *done* word, so that a step through shared memory needs no pickle and
  no system call). Payloads that do not fit in words (seeds, a ``call``'s arguments, infos, a
  traceback) still travel over the pipe, announced by the words. Spinning burns a CPU, so it is
  short and only done while it pays off (:class:`AdaptiveSpin`); then each side sleeps on a
  :class:`Doorbell`, rung with one system call whatever the number of sleepers.
- A Ray actor (see :mod:`vecenvs.ray_env`), holding the same :class:`Chunk`.

Every answer says whether it succeeded (``(ok, payload)``); a failure carries a
:class:`~vecenvs.errors.CrashReport` with the env's index and traceback. Every wait has a deadline
and watches the worker process: a hung env ends in :class:`~vecenvs.errors.WorkerTimeoutError`, a
dead worker in :class:`~vecenvs.errors.WorkerDiedError`, never in a hang.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import pickle
import platform
import select
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from copy import deepcopy
from enum import Enum
from typing import Any

import dill
import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import (
    create_shared_memory,
    iterate,
    read_from_shared_memory,
    write_to_shared_memory,
)
from multiprocess.reduction import recv_handle, send_handle

from vecenvs.errors import CrashReport, EnvCrashedError, WorkerDiedError, WorkerTimeoutError
from vecenvs.multi_env import MultiEnv, tree_map

__all__ = [
    "START_METHODS",
    "AdaptiveSpin",
    "Chunk",
    "Command",
    "Doorbell",
    "InProcessWorker",
    "ProcessWorker",
    "SharedArea",
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
    # The async pool's commands (see vecenvs.async_pool): the worker answers once per env.
    RESET_ENVS = "reset some envs"
    STEP_ENVS = "step some envs"


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

    def hello(self) -> tuple[Any, ...]:
        """What the parent needs to know: every env's spaces, the metadata and render mode."""
        envs = self.envs
        return (
            [env.observation_space for env in envs.envs],
            [env.action_space for env in envs.envs],
            envs.metadata,
            envs.render_mode,
        )

    def serve(self, command: Command, payload: Any) -> Any:
        """Carries out one command; returns the answer's payload (raises EnvCrashedError)."""
        envs = self.envs
        if command is Command.STEP:
            if payload is None:  # the actions are in shared memory
                assert self.area is not None
                actions = self.area.read_actions(slice(self.rows.start, self.rows.stop))
                payload = iterate(envs.action_space, actions)
            _, rewards, terminations, truncations, infos = envs.step_each(payload)
            return self._results(rewards, terminations, truncations, infos)
        if command is Command.RESET:
            seeds, options = payload
            _, infos = envs.reset(seed=seeds, options=options)
            return self._results(envs._rewards, envs._terminations, envs._truncations, infos)
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

    def serve_each(self, command: Command, payload: Any) -> Iterator[tuple[int, Any]]:
        """The async pool's per-env commands: yields ``(env index, answer)`` as each env is done."""
        # values: one seed (RESET_ENVS) or action (STEP_ENVS) per env; None: the actions are in
        # shared memory, read all at once.
        indices, values, options = payload
        if command is Command.STEP_ENVS and values is None:
            assert self.area is not None
            actions = self.area.read_actions(np.asarray(indices))
            values = list(iterate(self.envs.action_space, actions))
        for position, index in enumerate(indices):
            local = index - self.rows.start
            if command is Command.RESET_ENVS:
                infos = self.envs.reset_env(local, values[position], options)
            else:
                infos = self.envs.step_env(local, values[position])
            yield index, self._one_result(local, infos)

    def _results(
        self, rewards: np.ndarray, terminations: np.ndarray, truncations: np.ndarray, infos: dict
    ) -> Any:
        envs, area = self.envs, self.area
        if area is None or not area.has_data:
            return envs.env_observations, rewards, terminations, truncations, infos
        area.write_observations(self.rows, envs._observations, envs.env_observations)
        rows = slice(self.rows.start, self.rows.stop)
        area.rewards[rows] = rewards
        area.terminations[rows] = terminations
        area.truncations[rows] = truncations
        return infos or None

    def _one_result(self, local: int, infos: tuple[dict, ...]) -> Any:
        envs, area, index = self.envs, self.area, self.rows.start + local
        results = envs._rewards[local], envs._terminations[local], envs._truncations[local]
        if area is None or not area.has_data:
            return infos, envs.env_observations[local], *results
        area.write_observations(
            range(index, index + 1), None, envs.env_observations[local : local + 1]
        )
        area.rewards[index], area.terminations[index], area.truncations[index] = results
        return infos or None


# ----------------------------------------------------------------- shared memory

# The words of a worker's control line, and of the header line (all 64-bit integers).
# Written by the parent:
#   GENERATION  bumped whenever it gives the worker anything: the word a worker spins on;
#   MESSAGES    how many commands it has sent over the pipe (the worker reads until it has them all);
#   STEPS       how many steps it has given whose actions are in shared memory.
# Written by the worker:
#   DONE        the last generation it has fully carried out;
#   REPLY       whether an answer to that waits in the pipe (MESSAGE) or not (NOTHING);
#   SLEEPING    1 while it sleeps on the workers' doorbell.
GENERATION, MESSAGES, STEPS, DONE, REPLY, SLEEPING = range(6)
PARENT_SLEEPING = 0  # the header's one word: 1 while the parent sleeps on its doorbell
LINE = 8  # words per line: 64 bytes, one cache line, so that no two workers write the same line
NOTHING, MESSAGE = 0, 1  # REPLY, and an env's reply word in the async pool


class SharedArea:
    """One block of shared memory with everything the parent and its workers share.

    The control lines (a header, then one line per worker), two doorbells (the workers', the
    parent's), the async pool's per-env words (commands finished, a message follows, when) and,
    with ``data``, the observations (laid out by gymnasium's ``create_shared_memory``, so every
    space it supports is supported the same way), rewards, flags and actions.

    The block is a file with no name (``memfd_create``; elsewhere a temporary file removed at
    once), so nothing is left in ``/dev/shm`` whatever happens to the processes. The parent
    makes it (``fd`` None) and sends each worker its descriptor over the pipe; both sides lay it
    out the same way from ``layout``: ``(num_workers, num_envs, single observation space,
    single action space, data)``.
    """

    def __init__(self, layout: tuple[Any, ...], fd: int | None = None):
        self.layout = layout
        (
            self.num_workers,
            self.num_envs,
            self.observation_space,
            self.action_space,
            self.has_data,
        ) = layout
        size = _Allocator.measure(self._allocate)
        self.fd: int | None = _anonymous_file(size) if fd is None else fd
        self.memory = mmap.mmap(self.fd, size)
        self._allocate(_Allocator(self.memory))
        if fd is not None:
            self.release_file()  # a worker's copy: the mapping is all it needs

    def release_file(self) -> None:
        """Closes the file descriptor (the mapping stays): once every worker has its copy."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _allocate(self, allocator: _Allocator) -> None:
        self.control = allocator.words("q", LINE * (1 + self.num_workers))
        self.header = self.control[:LINE]
        bells_at = allocator.offset
        self.bells = allocator.words("i", 2 * 16)  # two 32-bit words, a cache line apart
        self.env_done = allocator.words("q", self.num_envs)  # commands each env has carried out
        self.env_reply = allocator.words("q", self.num_envs)
        # Steps asked in shared memory (the async pool).
        self.env_requested = np.frombuffer(allocator.words("q", self.num_envs), dtype=np.int64)
        self.env_finished_at = np.frombuffer(allocator.words("d", self.num_envs), dtype=np.float64)
        # Gymnasium's shared-memory layout of the spaces (none without data: see has_data).
        self.observations_memory: Any = None
        self.observations = self.actions = None
        self.array_observations = _is_array_space(self.observation_space)
        if self.has_data:
            self.observations_memory = create_shared_memory(
                self.observation_space,
                n=self.num_envs,
                ctx=allocator,  # type: ignore[arg-type]  # a stand-in for multiprocessing
            )
            if self.array_observations:  # views: what the workers write shows at once
                self.observations = read_from_shared_memory(
                    self.observation_space, self.observations_memory, n=self.num_envs
                )
            self.rewards = np.frombuffer(allocator.words("d", self.num_envs), dtype=np.float64)
            self.terminations = np.frombuffer(allocator.words("b", self.num_envs), dtype=np.bool_)
            self.truncations = np.frombuffer(allocator.words("b", self.num_envs), dtype=np.bool_)
            if _is_array_space(self.action_space):  # else the actions travel pickled
                memory = create_shared_memory(
                    self.action_space,
                    n=self.num_envs,
                    ctx=allocator,  # type: ignore[arg-type]  # a stand-in for multiprocessing
                )
                self.actions = read_from_shared_memory(self.action_space, memory, n=self.num_envs)
        if allocator.memory is not None:
            # A ctypes view of the block keeps it mapped for as long as we hand its address to futex.
            self._anchor = ctypes.c_char.from_buffer(allocator.memory)
            base = ctypes.addressof(self._anchor) + bells_at
            self.worker_bell = Doorbell(self.bells, 0, base)
            self.parent_bell = Doorbell(self.bells, 16, base + 64)

    def line(self, worker_index: int) -> memoryview:
        """The control line of a worker."""
        start = LINE * (1 + worker_index)
        return self.control[start : start + LINE]

    def write_actions(self, actions: Any, rows: Any = slice(None)) -> None:
        """Copies a batch of actions (arrays of the action space's dtypes) into envs ``rows``."""
        tree_map(lambda target, given: target.__setitem__(rows, given), self.actions, actions)

    def read_actions(self, rows: Any) -> Any:
        """A copy of the actions of envs ``rows`` (a copy: an env may keep its action)."""
        return tree_map(lambda leaf: leaf[rows].copy(), self.actions)

    def read_observations(self) -> Any:
        """The observations of all envs: views of the shared memory where the space allows it."""
        if self.array_observations:
            return self.observations
        return read_from_shared_memory(
            self.observation_space, self.observations_memory, n=self.num_envs
        )

    def write_observations(self, rows: range, batch: Any, env_observations: Sequence[Any]) -> None:
        """Writes the observations of envs ``rows``, batched (arrays) or one per env (any space)."""
        if self.array_observations and batch is not None:
            tree_map(
                lambda target, source: np.copyto(target[rows.start : rows.stop], source),
                self.observations,
                batch,
            )
        elif self.array_observations:
            for index, observation in zip(rows, env_observations):
                tree_map(
                    lambda target, source, index=index: np.copyto(target[index], source),
                    self.observations,
                    observation,
                )
        else:
            for index, observation in zip(rows, env_observations):
                write_to_shared_memory(
                    self.observation_space, index, observation, self.observations_memory
                )


class _Allocator:
    """Just enough of a ``multiprocessing`` context for gymnasium's ``create_shared_memory``.

    Its ``Array(typecode, size)`` hands out the next slice of one memory block (64-byte
    aligned), wrapped so that gymnasium's ``.get_obj()`` finds it. Measuring first (no memory)
    and allocating second, in the same order, gives the parent and every worker the same layout.
    """

    def __init__(self, memory: mmap.mmap | None):
        self.memory, self.offset = memory, 0

    @staticmethod
    def measure(allocate: Callable[[_Allocator], None]) -> int:
        allocator = _Allocator(None)
        allocate(allocator)
        return max(allocator.offset, mmap.PAGESIZE)

    def Array(self, typecode: Any, size: int, lock: bool = False) -> _Block:
        nbytes = size * (
            np.dtype(typecode).itemsize if isinstance(typecode, str) else ctypes.sizeof(typecode)
        )
        start, self.offset = self.offset, self.offset + max(64, -(-nbytes // 64) * 64)
        if self.memory is None:
            return _Block(memoryview(bytearray(nbytes)))
        return _Block(memoryview(self.memory)[start : start + nbytes])

    def words(self, typecode: str, size: int) -> memoryview:
        """The next slice, as a memoryview of ``typecode`` items (the fastest to index from Python)."""
        return self.Array(typecode, size).get_obj().cast(typecode)  # type: ignore[call-overload]


class _Block:
    """A slice of the block, as gymnasium's shared-memory helpers expect it (``.get_obj()``)."""

    def __init__(self, view: memoryview):
        self.view = view

    def get_obj(self) -> memoryview:
        return self.view


def _is_array_space(space: gym.Space) -> bool:
    """Whether shared memory holds this space as plain arrays (views, no decoding)."""
    if isinstance(space, spaces.Dict):
        return all(_is_array_space(sub) for sub in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return all(_is_array_space(sub) for sub in space.spaces)
    return isinstance(
        space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
    )


def _anonymous_file(size: int) -> int:
    """A file descriptor of ``size`` bytes of memory that no path leads to."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("vecenvs-shared", 0)
    else:
        fd, path = tempfile.mkstemp(
            prefix="vecenvs-shared-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
        )
        os.unlink(path)
    os.ftruncate(fd, size)
    return fd


# ----------------------------------------------------------------- waiting: spin, then sleep


def _load_syscall() -> tuple[Any, int] | None:
    """libc's ``syscall`` function and the number of ``futex`` on this CPU (Linux); None elsewhere."""
    number = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}.get(
        platform.machine().lower()
    )
    if not sys.platform.startswith("linux") or number is None:
        return None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    return syscall, number


_SYSCALL = _load_syscall()
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1


def _futex(address: int, operation: int, value: int, timeout: Any) -> int:
    """Linux's ``futex(address, operation, value, timeout)`` system call (see :class:`Doorbell`)."""
    assert _SYSCALL is not None, "futex is used only where it was found"
    syscall, number = _SYSCALL
    return syscall(
        ctypes.c_long(number),
        ctypes.c_void_p(address),
        operation,
        ctypes.c_int(value),
        timeout,
        None,
        0,
    )


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Doorbell:
    """A 32-bit word in shared memory that processes sleep on until someone rings it.

    On Linux this is a *futex*, the kernel's primitive under every lock and condition variable:
    ``sleep(seen)`` sleeps only if the word still holds ``seen`` (checked by the kernel, so a
    ring between reading the word and sleeping is never lost), and ``ring()`` wakes every
    sleeper with one system call. Elsewhere, sleepers poll the word every millisecond.
    """

    def __init__(self, words: memoryview, index: int, address: int):
        self.words, self.index, self.address = words, index, address

    def value(self) -> int:
        return self.words[self.index]

    def ring(self) -> None:
        self.words[self.index] = (self.words[self.index] + 1) & 0x7FFFFFFF
        if _SYSCALL is not None:
            _futex(self.address, _FUTEX_WAKE, 0x7FFFFFFF, None)  # wake them all

    def sleep(self, seen: int, seconds: float) -> None:
        """Sleeps until the bell rings after ``seen`` was read, for at most ``seconds``."""
        if _SYSCALL is None:
            time.sleep(min(seconds, 1e-3))
            return
        timeout = _Timespec(int(seconds), int(seconds % 1 * 1e9))
        _futex(self.address, _FUTEX_WAIT, seen, ctypes.byref(timeout))


_FENCE = threading.Lock()


def fence() -> None:
    """A full memory barrier: stores before it are seen by other CPUs before loads after it.

    Needed where one side writes "I am going to sleep" and then reads "is there work?" while
    the other writes "here is work" and then reads "is anyone asleep?": without a barrier both
    reads may miss the other's write. Python has no barrier of its own; taking and releasing a
    lock is an atomic read-modify-write, which is one on x86. (The sleeps above also have a
    timeout, so even a missed ring costs at most that long.)
    """
    _FENCE.acquire()
    _FENCE.release()


class AdaptiveSpin:
    """Spin before sleeping only while spinning pays off.

    A spin that ends with the answer there saved a sleep and a wake-up (50 µs to over 500 µs on
    a VM). A spin that runs out did nothing but burn a CPU, and on a machine with no CPU to
    spare (another program, a browser drawing the dashboard) it burns the very CPU the process
    we wait for needs. So after a spin that runs out, the next wait does without, after two in
    a row the next two, then four, ... up to :attr:`MAX_SKIPPED`; a spin that succeeds starts
    over. (The adaptive spin locks of operating systems and databases do the same.)

    Measured on our 2-core VM, the pool (K=2) on CartPole, speed-up over the sequential loop,
    always spinning / adaptive / never spinning: quiet machine, N=4 0.59-0.62x / 0.53-0.69x /
    0.24x and N=64 1.38-1.47x / 1.29-1.52x / ~1.0x; with one busy-looping program beside it,
    N=4 0.08x / 0.21x / 0.32x and N=64 0.26x / 0.68x / 0.81x. (``seconds``: one spin; 0 never.)
    """

    #: The most waits skipped in a row after spins that ran out.
    MAX_SKIPPED = 64

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._skip = 0  # waits still to do without a spin
        self._penalty = 1  # how many to skip after the next spin that runs out

    def budget(self) -> float:
        """How long to spin this time: :attr:`seconds`, or 0 while backing off."""
        if self._skip:
            self._skip -= 1
            return 0.0
        return self.seconds

    def record(self, success: bool) -> None:
        """Tells how the spin ended: with the answer there, or ran out."""
        if success:
            self._penalty = 1
        else:
            self._skip = self._penalty
            self._penalty = min(2 * self._penalty, self.MAX_SKIPPED)


def _spin_until(words: memoryview, index: int, target: int, spin: AdaptiveSpin) -> bool:
    """Spins until ``words[index] >= target``, for at most the spin's budget; True if it got there."""
    seconds = spin.budget()
    if not seconds:
        return False
    end = time.perf_counter() + seconds
    while words[index] < target:
        if time.perf_counter() > end:
            spin.record(False)
            return False
    spin.record(True)
    return True


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
        self.chunk.area = area
        self.pending.append((Command.SETUP, None))

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
        return None if command is Command.SETUP else self.chunk.serve(command, payload)

    def stop(self, deadline: float, terminate: bool) -> None:
        self.pending = []
        self.chunk.envs.close()


class ProcessWorker:
    """A worker process and the parent's end of its pipe (and, once set up, its control line).

    It runs envs ``rows``, made by ``env_fns``, in a process of ``context`` (``multiprocess``'s,
    for a start method); each side spins ``spin_seconds`` before sleeping (0: never).
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
    ):
        self.index, self.rows = index, rows
        self.line: memoryview | None = None  # None: every command and answer goes over the pipe
        self.generation = 0  # of the last command given
        self.spin = AdaptiveSpin(spin_seconds)
        parent_pipe, child_pipe = context.Pipe()  # a socket pair: it can carry a file descriptor
        chunk = (env_fns, rows.start, autoreset_mode, observation_mode)
        self.process = context.Process(
            target=run_worker,
            args=(index, *chunk, child_pipe, os.getpid(), spin_seconds),
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

    def post(self, command: Command, payload: Any, answered: bool = True) -> None:
        """Gives a command whose payload travels over the pipe (``answered=False``: the async
        pool's per-env commands, answered per env, not per command)."""
        if self.line is not None:
            self.line[MESSAGES] += 1  # announced before it is sent: a big one may block until read
            self._announce()
        self._send((command, payload), command.value)
        if answered:
            self.awaiting.append(self.generation)

    def post_step(self) -> None:
        """Gives a STEP whose actions are in shared memory: two words, no system call. The
        caller rings the workers' doorbell once for all (see :meth:`asleep`)."""
        line = self.line
        assert line is not None, "only in control mode"
        line[STEPS] += 1
        self.generation += 1
        line[GENERATION] = self.generation
        self.awaiting.append(self.generation)

    def post_requests(self) -> None:
        """Tells the worker that some of its envs have steps asked in shared memory (the async
        pool's ``env_requested``): one word. Their results are flagged per env, not answered."""
        assert self.line is not None, "only in control mode"
        self.generation += 1
        self.line[GENERATION] = self.generation

    @property
    def due(self) -> int:
        """How many answers are still to be received."""
        return len(self.awaiting)

    def asleep(self) -> bool:
        """Whether the worker sleeps on the doorbell (ring it after giving commands)."""
        return self.line is not None and bool(self.line[SLEEPING])

    def _announce(self) -> None:
        assert self.line is not None and self.area is not None, "only in control mode"
        self.generation += 1
        self.line[GENERATION] = self.generation
        fence()
        if self.line[SLEEPING]:
            self.area.worker_bell.ring()

    def _send(self, message: Any, doing: str) -> None:
        try:
            self.pipe.send_bytes(dumps(message))
        except OSError:  # BrokenPipeError: the worker is gone
            raise self._died(doing) from None

    # ----------------------------------------------------------------- answers

    def receive(self, deadline: float, doing: str) -> Any:
        """Waits for the answer to the oldest command still due; returns its payload.

        Raises:
            EnvCrashedError: the command failed in an env (the report becomes the error).
            WorkerDiedError, WorkerTimeoutError: the worker died, or did not answer in time.
        """
        if self.line is None:
            ok, payload = self._message(deadline, doing)[1:]
            if ok and self.area is not None and doing == "setup":
                self.line = self.area.line(self.index)  # from now on, commands go through the words
        else:
            self._wait_done(self.line, self.awaiting[0], deadline, doing)
            if self.line[REPLY] == NOTHING:
                ok, payload = True, None
            else:
                ok, payload = self._message(deadline, doing)[1:]
        self.awaiting.popleft()
        if not ok:
            raise payload.to_error()
        return payload

    def _wait_done(self, line: memoryview, generation: int, deadline: float, doing: str) -> None:
        """Waits until the worker's *done* word reaches ``generation``: spin, then sleep."""
        if line[DONE] >= generation or _spin_until(line, DONE, generation, self.spin):
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
                    raise self._died(doing)
        finally:
            header[PARENT_SLEEPING] = 0

    def _message(self, deadline: float, doing: str) -> tuple[Any, ...]:
        """Reads the next message from the worker: ``(env index or None, ok, payload)``."""
        while True:
            remaining = deadline - time.perf_counter()
            events = dict(self.poller.poll(max(0, math.ceil(remaining * 1000))))
            if self.pipe.fileno() in events:
                try:
                    return loads(self.pipe.recv_bytes())
                except (EOFError, OSError):
                    raise self._died(doing) from None
            if self.process.sentinel in events:
                raise self._died(doing)
            if remaining <= 0:
                raise WorkerTimeoutError([self.index], list(self.rows), 0, doing)

    def _died(self, doing: str) -> WorkerDiedError:
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
) -> None:
    """The main function of a worker process: make the envs, say hello, then serve commands.

    Every answer is ``(env index or None, ok, payload)``: ``ok`` False carries a CrashReport.
    """
    # Without this the worker would inherit the notebook's SIGINT handler, and a Ctrl-C meant to
    # interrupt the parent would kill every worker mid-step. The parent decides what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_when_orphaned(parent_pid)

    def send(message: tuple[Any, ...]) -> None:
        pipe.send_bytes(dumps(message))

    chunk: Chunk | None = None
    try:
        try:
            chunk = Chunk(env_fns, first_index, autoreset_mode, observation_mode)
        except EnvCrashedError as crash:
            send((None, False, crash.report()))
            return
        except Exception as error:  # e.g. spaces that differ between the chunk's envs
            send((None, False, CrashReport.of(first_index, "make", error)))
            return
        send((None, True, chunk.hello()))
        _command, layout = loads(pipe.recv_bytes())  # SETUP
        if layout is not None:
            area = SharedArea(layout, fd=recv_handle(pipe))
            chunk.area = area
        send((None, True, None))
        if layout is None:
            _serve_over_pipe(chunk, pipe, send)
        else:
            _serve_with_control(chunk, area, area.line(worker_index), pipe, send, spin_seconds)
    except (EOFError, OSError):
        pass  # the parent closed its end or died: there is nobody left to answer
    finally:
        if chunk is not None and not chunk.envs.closed:
            try:
                chunk.envs.close()
            except Exception:
                pass  # closing after a failure: the failure is what the parent reports


def _serve_over_pipe(chunk: Chunk, pipe: Any, send: Callable[[tuple[Any, ...]], None]) -> None:
    """The classic loop: block on the pipe for a command, answer over the pipe."""
    while True:
        command, payload = loads(pipe.recv_bytes())
        ok, result = _serve(chunk, command, payload)
        send((None, ok, result))
        if command is Command.CLOSE:
            return


def _serve_with_control(
    chunk: Chunk,
    area: SharedArea,
    line: memoryview,
    pipe: Any,
    send: Callable[[tuple[Any, ...]], None],
    spin_seconds: float,
) -> None:
    """The pools' loop: wait for the generation word to move; carry out what came; write DONE.

    What can come in one round, in this order: commands over the pipe (``MESSAGES`` says how
    many), a step whose actions are in shared memory (``STEPS``), and the async pool's steps
    asked env by env in shared memory (``env_requested``). A lock-step command (reset, step,
    call...) is given only when the previous one is answered, so a round answers at most one.
    """
    seen = messages = steps = 0
    # Our envs' shared-memory steps carried out (the async pool's requests).
    requests_served = np.zeros(len(chunk.rows), dtype=np.int64)
    spin = AdaptiveSpin(spin_seconds)
    last_wait = 0.0  # how long the previous command took to come after our answer
    while True:
        answered = time.perf_counter()
        # Spin only while commands come quickly (a benchmark, a fast policy): when the parent
        # thinks for much longer between steps, a spin would only burn a core it may need.
        if line[GENERATION] == seen and not (
            last_wait < 4 * spin_seconds and _spin_until(line, GENERATION, seen + 1, spin)
        ):
            _sleep_until_given(line, seen, area.worker_bell)
        last_wait = time.perf_counter() - answered
        seen = line[GENERATION]
        reply = command = None
        while messages < line[MESSAGES]:
            messages += 1
            command, payload = loads(pipe.recv_bytes())
            if command in (Command.RESET_ENVS, Command.STEP_ENVS):
                _serve_each(chunk, area, command, payload, send)
            else:
                reply = _serve(chunk, command, payload)
        if steps < line[STEPS]:
            steps += 1
            reply = _serve(chunk, Command.STEP, None)
        asked = area.env_requested[chunk.rows.start : chunk.rows.stop]
        if (asked > requests_served).any():
            waiting = np.flatnonzero(asked > requests_served)
            requests_served[waiting] = asked[waiting]
            envs = ((waiting + chunk.rows.start).tolist(), None, None)
            _serve_each(chunk, area, Command.STEP_ENVS, envs, send)
        if reply is not None:
            ok, result = reply
            line[REPLY] = NOTHING if ok and result is None else MESSAGE
        # The parent counts a command and moves GENERATION before sending it, so this round may
        # have served one given after it began (the async pool gives the next command as soon
        # as its envs are flagged). If nothing given is left, say the newest generation is done:
        # a CLOSE served so must, or the parent takes this process's exit for a death.
        latest = line[GENERATION]
        if latest != seen:
            fence()
            if (
                messages == line[MESSAGES]
                and steps == line[STEPS]
                and not (asked > requests_served).any()
            ):
                seen = latest
        line[DONE] = seen
        _wake_parent(area)
        if reply is not None and line[REPLY] == MESSAGE:
            send((None, *reply))
        if command is Command.CLOSE:
            return


#: How often the async pool's workers flag the envs they have stepped: an env slower than this
#: is flagged alone, the moment it is done (that is what hides stragglers); quicker ones in
#: groups (flagging costs about as much as stepping CartPole).
FLAG_SECONDS = 100e-6


def _serve_each(
    chunk: Chunk,
    area: SharedArea,
    command: Command,
    payload: Any,
    send: Callable[[tuple[Any, ...]], None],
) -> None:
    """The async pool's per-env commands: envs are flagged as done as soon as they are, in groups
    of what was done within :data:`FLAG_SECONDS`."""
    done: list[tuple[int, bool, Any]] = []  # (env, ok, its message or None), not yet flagged
    flagged_at = time.perf_counter()
    try:
        for index, result in chunk.serve_each(command, payload):
            done.append((index, True, result))
            if time.perf_counter() - flagged_at >= FLAG_SECONDS:
                _flag(area, done, send)
                done, flagged_at = [], time.perf_counter()
    except EnvCrashedError as crash:
        done.append((crash.env_index, False, crash.report()))
    _flag(area, done, send)


def _flag(
    area: SharedArea, done: list[tuple[int, bool, Any]], send: Callable[[tuple[Any, ...]], None]
) -> None:
    """Flags envs as done: their rows of results are written already; messages follow."""
    if not done:
        return
    now = time.perf_counter()
    for index, ok, message in done:
        area.env_reply[index] = NOTHING if ok and message is None else MESSAGE
        area.env_finished_at[index] = now
        area.env_done[index] += 1
    _wake_parent(area)
    for index, ok, message in done:
        if not ok or message is not None:
            send((index, ok, message))


def _serve(chunk: Chunk, command: Command, payload: Any) -> tuple[bool, Any]:
    try:
        return True, chunk.serve(command, payload)
    except EnvCrashedError as crash:
        return False, crash.report()
    except Exception as error:  # not an env's fault: a bad argument, or a bug here
        return False, CrashReport.of(chunk.rows.start, command.value, error)


def _sleep_until_given(line: memoryview, seen: int, bell: Doorbell) -> None:
    """Sleeps on the workers' doorbell until the generation word moves past ``seen``."""
    line[SLEEPING] = 1
    fence()
    while line[GENERATION] == seen:
        ringing = bell.value()
        if line[GENERATION] != seen:
            break
        bell.sleep(ringing, 0.1)
    line[SLEEPING] = 0


def _wake_parent(area: SharedArea) -> None:
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
