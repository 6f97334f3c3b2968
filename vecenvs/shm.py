"""The pool's shared memory: one block, laid out the same way in the parent and its workers.

The low-level layer under the pool's protocol (:mod:`vecenvs.workers`); a reader may skip it
and take :class:`SharedArea` as a bag of arrays that every process of a pool sees: each
worker's *control line* of 64-bit words, two doorbells, and (with ``data``) the observations,
rewards, flags and actions of every env, each worker writing only its own rows.

gymnasium's ``create_shared_memory`` lays out the observations and actions, so every space it
supports is supported the same way; it asks a ``multiprocessing`` context for its arrays, and
:class:`_Allocator` is just enough of one to hand out slices of our block instead.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from vecenvs.doorbell import Doorbell
from vecenvs.multi_env import tree_map

__all__ = ["LINE", "InfoLayout", "Layout", "SharedArea", "is_array_space"]

#: Words (64-bit) per control line: 64 bytes, one cache line, so that no two workers write the
#: same line. :mod:`vecenvs.workers` says what each word means.
LINE = 8


@dataclass(frozen=True)
class Layout:
    """What both sides need to lay the block out the same way (sent to each worker)."""

    num_workers: int  # one control line each, after the header line
    num_envs: int
    observation_space: gym.Space  # one env's
    action_space: gym.Space  # one env's
    data: bool  # observations, rewards, flags and actions too (else: control words only)
    futex: bool  # the doorbells use the futex (see vecenvs.doorbell.FUTEX)
    env_words: int = 0  # 64-bit words per env, for a protocol that answers env by env
    info_bytes: int = 0  # bytes per env kept for numeric infos (with data; see InfoLayout)


class SharedArea:
    """One block of shared memory with everything the parent and its workers share.

    The control lines (a header, then one line per worker), two doorbells (the one the workers
    sleep on, the one the parent sleeps on), ``layout.env_words`` arrays of a word per env (for
    the async pool: see :mod:`vecenvs.async_pool`) and, with ``layout.data``, the observations,
    rewards, flags and actions, and room for numeric infos (:meth:`info_arrays`).

    The block is a file with no name (``memfd_create``; elsewhere a temporary file removed at
    once), so nothing is left in ``/dev/shm`` whatever happens to the processes. The parent
    makes it (``fd`` None) and sends each worker its descriptor over the pipe; both sides lay it
    out the same way from ``layout``.
    """

    def __init__(self, layout: Layout, fd: int | None = None):
        self.layout = layout
        self.num_envs = layout.num_envs
        self.observation_space, self.action_space = layout.observation_space, layout.action_space
        self.has_data = layout.data
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
        num_envs = self.num_envs
        self.control = allocator.words("q", LINE * (1 + self.layout.num_workers))
        self.header = self.control[:LINE]
        bells_at = allocator.offset
        self.bells = allocator.words("i", 2 * 16)  # two 32-bit words, a cache line apart
        # Arrays of one word per env, for a protocol that needs them (the async pool's).
        self.env_words = [
            np.frombuffer(allocator.words("q", num_envs), dtype=np.int64)
            for _ in range(self.layout.env_words)
        ]
        # Gymnasium's shared-memory layout of the spaces (none without data).
        self.observations_memory: Any = None
        self.observations = self.actions = None
        self.array_observations = is_array_space(self.observation_space)
        if self.has_data:
            self.observations_memory = create_shared_memory(
                self.observation_space,
                n=num_envs,
                ctx=allocator,  # type: ignore[arg-type]  # a stand-in for multiprocessing
            )
            if self.array_observations:  # views: what the workers write shows at once
                self.observations = read_from_shared_memory(
                    self.observation_space, self.observations_memory, n=num_envs
                )
            self.rewards = np.frombuffer(allocator.words("d", num_envs), dtype=np.float64)
            self.terminations = np.frombuffer(allocator.words("b", num_envs), dtype=np.bool_)
            self.truncations = np.frombuffer(allocator.words("b", num_envs), dtype=np.bool_)
            self.infos_memory = allocator.Array("b", num_envs * self.layout.info_bytes).get_obj()
            if is_array_space(self.action_space):  # else the actions travel pickled
                memory = create_shared_memory(
                    self.action_space,
                    n=num_envs,
                    ctx=allocator,  # type: ignore[arg-type]  # a stand-in for multiprocessing
                )
                self.actions = read_from_shared_memory(self.action_space, memory, n=num_envs)
        if allocator.memory is not None:
            # A ctypes view of the block keeps it mapped for as long as we hand its address to futex.
            self._anchor = ctypes.c_char.from_buffer(allocator.memory)
            base = ctypes.addressof(self._anchor) + bells_at
            self.worker_bell = Doorbell(self.bells, 0, base, self.layout.futex)
            self.parent_bell = Doorbell(self.bells, 16, base + 64, self.layout.futex)

    def line(self, worker_index: int) -> memoryview:
        """The control line of a worker."""
        start = LINE * (1 + worker_index)
        return self.control[start : start + LINE]

    def column(self, word: int, first: int = 0) -> np.ndarray:
        """Word ``word`` of the lines of workers ``first``, ``first + 1``, ...: one strided numpy
        view, to read or write all of them in one operation."""
        return np.frombuffer(self.control, dtype=np.int64)[LINE * (1 + first) + word :: LINE]

    def words(self, word: int, first: int = 0) -> memoryview:
        """The same words as :meth:`column`, as a strided ``memoryview``: Python's own ``min``,
        ``any`` and ``sum`` read all of them in C, several times faster than numpy's for a few
        words (what a spin reads again and again)."""
        return self.control[LINE * (1 + first) + word :: LINE]

    def info_arrays(self, layout: InfoLayout) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The infos of ``layout`` in shared memory: ``{key: (values of every env, mask)}``,
        views of the room kept for them (``layout`` must :meth:`~InfoLayout.fit` it)."""
        arrays, offset, n = {}, 0, self.num_envs
        for key, dtype, shape in layout.keys:
            size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            values = np.frombuffer(
                self.infos_memory, dtype, n * size // np.dtype(dtype).itemsize, offset
            )
            offset += -(-n * size // 8) * 8
            mask = np.frombuffer(self.infos_memory, np.bool_, n, offset)
            offset += -(-n // 8) * 8
            arrays[key] = (values.reshape(n, *shape), mask)
        return arrays

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

    def observation_rows(self, rows: slice) -> Any:
        """Views of the observations of envs ``rows`` (array spaces only), to batch them into."""
        return tree_map(lambda leaf: leaf[rows], self.observations)

    def write_observations(self, rows: range, env_observations: Sequence[Any]) -> None:
        """Writes the observations of envs ``rows``, one per env (any space)."""
        for index, observation in zip(rows, env_observations):
            if self.array_observations:
                tree_map(
                    lambda target, source, index=index: np.copyto(target[index], source),
                    self.observations,
                    observation,
                )
            else:
                write_to_shared_memory(
                    self.observation_space, index, observation, self.observations_memory
                )


@dataclass(frozen=True)
class InfoLayout:
    """Which infos travel through shared memory: ``(key, dtype, shape of one env's value)``,
    learnt by the parent from the first steps' infos (:meth:`learn`)."""

    keys: tuple[tuple[str, str, tuple[int, ...]], ...]

    @classmethod
    def learn(cls, infos: dict[str, Any]) -> InfoLayout:
        """The keys of batched infos whose values are numbers or arrays of numbers (not nested
        dicts, strings or objects: those keep travelling pickled)."""
        return cls(tuple(
            (key, value.dtype.str, value.shape[1:])
            for key, value in infos.items()
            if not key.startswith("_") and isinstance(value, np.ndarray) and value.dtype.kind in "biuf"
        ))  # fmt: skip

    def fit(self, info_bytes: int) -> InfoLayout:
        """The first keys that fit in ``info_bytes`` per env (values, a mask byte, alignment)."""
        keys, used = [], 0
        for key, dtype, shape in self.keys:
            used += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize + 2 + 16
            if used > info_bytes:
                break
            keys.append((key, dtype, shape))
        return InfoLayout(tuple(keys))


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


def is_array_space(space: gym.Space) -> bool:
    """Whether shared memory holds this space as plain arrays (views, no decoding)."""
    if isinstance(space, spaces.Dict):
        return all(is_array_space(sub) for sub in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return all(is_array_space(sub) for sub in space.spaces)
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
