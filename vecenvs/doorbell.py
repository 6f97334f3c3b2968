"""Waiting for another process: spin on a word for a moment, then sleep on a doorbell.

The low-level layer under the pool's protocol (:mod:`vecenvs.workers`); a reader may skip it
and take three promises on trust: a :class:`Waiter` watches a word in shared memory for a
moment, then sleeps on a :class:`Doorbell` until another process rings it; :func:`publish` and
:func:`observe` keep data and the word that announces it in order between processes, and
:func:`fence` keeps an "I am going to sleep" from crossing a "here is work" unseen.

Why both: a process spinning on a word sees it change within a fraction of a microsecond but
burns a CPU while it spins; a process asleep costs nothing but takes 50 µs to over 500 µs to
wake on a VM. So a side spins only where it has a CPU to itself (:func:`spin_limits`), for a
few times as long as its waits have lasted (:class:`Spin`), then sleeps. That policy is all in
this file.

The doorbell is Linux's *futex* where there is one. Elsewhere (macOS, or with :data:`FUTEX`
set to False, as the tests do to try that path on Linux) sleepers poll the word every
millisecond instead: slower to wake, the same answers.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "BARRIERS_FOUND",
    "DEFAULT_SPIN_SECONDS",
    "FUTEX",
    "FUTEX_FOUND",
    "SHARED_SPIN_SECONDS",
    "Doorbell",
    "Spin",
    "Waiter",
    "fence",
    "observe",
    "publish",
    "spin_limits",
]


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

#: Whether this machine has a futex system call we can reach.
FUTEX_FOUND = _SYSCALL is not None

#: Whether the doorbells of pools made from now on use the futex (default: where there is
#: one). Set it to False to make them poll, as they do on macOS; a pool's workers follow the
#: choice its parent made, whatever their start method.
FUTEX = FUTEX_FOUND


def _futex(address: int, operation: int, value: int, timeout: Any) -> int:
    """Linux's ``futex(address, operation, value, timeout)`` system call (see :class:`Doorbell`)."""
    syscall, number = _SYSCALL  # type: ignore[misc]  # (used only where it was found)
    address_, value_ = ctypes.c_void_p(address), ctypes.c_int(value)
    return syscall(ctypes.c_long(number), address_, operation, value_, timeout, None, 0)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Doorbell:
    """A 32-bit word in shared memory that processes sleep on until someone rings it.

    With ``futex`` (Linux's *futex*, the kernel's primitive under every lock and condition
    variable) ``sleep(seen)`` sleeps only if the word still holds ``seen`` (checked by the
    kernel, so a ring between reading the word and sleeping is never lost), and ``ring()``
    wakes every sleeper with one system call. Without, ``sleep`` is a 1 ms nap: the sleeper
    looks again after it.

    Args:
        words: the 32-bit words the bell is one of; ``index``: which; ``address``: its address
            in this process (for the kernel).
        futex: use the futex system call (only where :data:`FUTEX_FOUND`), else poll.
    """

    def __init__(self, words: memoryview, index: int, address: int, futex: bool):
        self.words, self.index, self.address = words, index, address
        self.futex = futex and FUTEX_FOUND

    def value(self) -> int:
        """The bell's count of rings: read it before checking for work, then ``sleep(value)``."""
        return self.words[self.index]

    def ring(self) -> None:
        """Wakes every process asleep on the bell."""
        self.words[self.index] = (self.words[self.index] + 1) & 0x7FFFFFFF
        if self.futex:
            _futex(self.address, _FUTEX_WAKE, 0x7FFFFFFF, None)  # wake them all

    def sleep(self, seen: int, seconds: float) -> None:
        """Sleeps until the bell rings after ``seen`` was read, for at most ``seconds``."""
        if not self.futex:
            time.sleep(min(seconds, 1e-3))
            return
        timeout = _Timespec(int(seconds), int(seconds % 1 * 1e9))
        _futex(self.address, _FUTEX_WAIT, seen, ctypes.byref(timeout))


# ----------------------------------------------------------------- memory ordering
#
# Python writes and reads a word of shared memory in one machine store or load, but a CPU may
# let another CPU see two stores in another order than they were made, or do two loads out of
# order. Where one process's writes must be seen before another's read, the writer calls
# publish() between its data and the word that announces it, the reader observe() between
# reading that word and reading the data, and fence() sits between a store and a later load
# (the sleep handshake). docs/memory-ordering.md lists every such place and why each is enough.

_X86 = ("x86_64", "amd64", "i386", "i686", "x86")


def _compiled_fence() -> Any:
    """libatomic's ``atomic_thread_fence`` (a C11 fence, compiled: ``dmb ish`` on arm64), or None."""
    import ctypes.util

    name = ctypes.util.find_library("atomic")
    try:
        function = ctypes.CDLL(name).atomic_thread_fence if name else None
    except (OSError, AttributeError):
        return None
    if function is None:
        return None
    function.argtypes, function.restype = [ctypes.c_int], None
    return function


def _no_barrier() -> None:
    """x86-64 needs no instruction here: its CPUs keep stores in order and loads in order."""


_LOCK = threading.Lock()


def _locked_instruction() -> None:
    """A lock taken and released: on x86 an atomic read-modify-write (a LOCK-prefixed
    instruction), which no load or store crosses. Not a full fence on other CPUs."""
    _LOCK.acquire()
    _LOCK.release()


_SEQ_CST = 5  # C11's memory_order_seq_cst, as GCC numbers it


def _choose_barriers() -> tuple[Callable[[], None], Callable[[], None]] | None:
    """``(store->store and load->load barrier, full barrier)`` for this CPU, or None if there is
    no barrier we trust here."""
    if platform.machine().lower() in _X86:
        return _no_barrier, _locked_instruction
    fence_of_c11 = _compiled_fence()
    if fence_of_c11 is not None:
        full = functools.partial(fence_of_c11, _SEQ_CST)
        return full, full
    apple = _apple_barrier() if sys.platform == "darwin" else None
    return None if apple is None else (apple, apple)


#: Where macOS keeps its C library, and OSMemoryBarrier with it.
LIBSYSTEM = "/usr/lib/libSystem.B.dylib"


def _apple_barrier() -> Callable[[], None] | None:
    """macOS's ``OSMemoryBarrier`` (``libkern/OSAtomic.h``: every memory access before it
    completes before any after it; ``dmb ish`` on Apple Silicon), or None where it is missing.
    macOS has no libatomic. Not tried on a Mac: none was at hand (docs/memory-ordering.md)."""
    try:
        function = ctypes.CDLL(LIBSYSTEM).OSMemoryBarrier
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [], None
    return function


_BARRIERS = _choose_barriers()
#: Whether this machine has the barriers shared-memory spinning needs (x86-64; elsewhere a C11
#: fence from libatomic). Without them the pools talk over pipes, which the kernel orders.
BARRIERS_FOUND = _BARRIERS is not None
_ORDER, _FULL = _BARRIERS if _BARRIERS is not None else (_no_barrier, _locked_instruction)
# What publish() and observe() run: the same barrier, under two names, so that a test can tell
# them apart (tests/ordering.py records which was called where).
_RELEASE = _ACQUIRE = _ORDER


def publish() -> None:
    """Call after writing (or reading) data and before writing the word that announces it (a
    done word, the generation word): a reader that sees the word sees the data, and our reads
    of the data are over before the other side may write it again. (A release: loads and
    stores before it, before the stores after it.)"""
    _RELEASE()


def observe() -> None:
    """Call after reading a word that announces data and before touching the data: the reads
    after it see what was written before the word. (An acquire: the load before it, before the
    loads and stores after it.)"""
    _ACQUIRE()


def fence() -> None:
    """A full barrier: our stores before it are seen before our loads after it. Where one side
    writes "I am going to sleep", then reads "is there work?", and the other writes "here is
    work", then reads "is anyone asleep?": without it both may miss the other's write."""
    _FULL()


def refuse_spinning_why() -> str | None:
    """Why shared-memory words cannot be trusted on this machine (None: they can)."""
    if BARRIERS_FOUND:
        return None
    return (
        f"no memory barrier found for this CPU ({platform.machine()}: libatomic's "
        "atomic_thread_fence is missing), so words in shared memory could be seen out of order; "
        "the pool talks to its workers over pipes instead (see docs/memory-ordering.md)"
    )


# ----------------------------------------------------------------- the spin policy
#
# All of it is here: how long each side may spin (spin_limits), for how long it does (Spin), and
# what a wait does (Waiter).

#: The longest spin, by default: a spin that would last longer is not made; the side sleeps at
#: once. Waking a sleeping process cost 50 µs to over 500 µs on our 2-core VM: a spin of this
#: length covers the gap between two steps of a tight loop and the usual skew between workers,
#: while a policy that thinks for longer between steps lets the workers sleep.
DEFAULT_SPIN_SECONDS = 1e-3
#: The longest spin of workers that share the CPUs with a caller that only waits (one process
#: more than CPUs): long enough to catch work that follows at once, short enough to leave the
#: caller the CPU it needs between its waits (``tests/spin_policy.py``; the runs that chose it
#: are on the core2 results page).
SHARED_SPIN_SECONDS = 100e-6


def spin_limits(
    workers: int, caller_steps: bool, cpus: int, longest: float = DEFAULT_SPIN_SECONDS
) -> tuple[float, float]:
    """``(the caller's longest spin, the workers')``, in seconds, for ``workers`` worker
    processes on ``cpus`` CPUs. Spin only where the process waited for has a CPU of its own: a
    spinner on a CPU another process needs holds up the very process it waits for.

    With a CPU for every process, all may spin ``longest``. One process too many, when the
    caller only waits (``caller_steps`` False: the async pool, or ``step_in_caller=False``), the
    caller sleeps, and the workers spin for at most :data:`SHARED_SPIN_SECONDS`: the caller is
    not idle between its waits (it hands out batches, runs the policy), and a long spin would
    take its CPU. More processes than that, nobody spins.

    >>> spin_limits(15, caller_steps=True, cpus=16), spin_limits(16, caller_steps=False, cpus=16)
    ((0.001, 0.001), (0.0, 0.0001))
    """
    if workers + 1 <= cpus:
        return longest, longest
    if workers == cpus and not caller_steps:
        return 0.0, min(longest, SHARED_SPIN_SECONDS)
    return 0.0, 0.0


class Spin:
    """How long one side spins before it sleeps, sized from the waits it measured.

    A spin covers :attr:`MARGIN` times the typical wait (a running average of the last few), at
    least :attr:`SHORTEST` and at most ``longest``: generous, since a process spins only on a
    CPU of its own, where a spin too long costs nothing but a spin too short costs a wake-up. When the typical wait is longer than
    ``longest`` (the other side thinks for long between steps) the side sleeps at once: a spin
    would only burn a CPU. ``longest`` 0: never spin.
    """

    MARGIN = 4.0
    SHORTEST = 20e-6

    def __init__(self, longest: float):
        self.longest = longest
        self.typical = 0.0  # seconds: a running average of the waits measured

    def budget(self) -> float:
        """How long to spin this time (0: sleep at once)."""
        if self.typical > self.longest:
            return 0.0
        return min(self.longest, max(self.SHORTEST, self.MARGIN * self.typical))

    def record(self, waited: float) -> None:
        """Tells how long the wait took, spinning and sleeping."""
        self.typical += (waited - self.typical) / 4


#: The longest nap between two looks at the word while asleep (a lost ring costs at most this).
NAP_SECONDS = 0.05


class Waiter:
    """How one side waits for another process: spin, then sleep on the bell it sleeps on.

    Args:
        bell: the :class:`Doorbell` this side sleeps on (the other side rings it).
        sleeping: a one-word view this side sets to 1 while asleep (the other side reads it
            before ringing).
        spin: how long to spin (:class:`Spin`).
        alive: says whether the processes we wait for live (None: not watched).
    """

    def __init__(
        self,
        bell: Doorbell,
        sleeping: memoryview,
        spin: Spin,
        alive: Callable[[], bool] | None = None,
    ):
        self.bell, self.sleeping, self.spin, self.alive = bell, sleeping, spin, alive

    def wait(self, read: Callable[[], Any], target: Any, deadline: float) -> Any:
        """Waits until ``read()`` (a word, or words reduced to one: a C function, called in the
        spin) gives ``target`` or more; returns the value read, after :func:`observe`, so that
        what the word announces may be read. None at the ``deadline``, or when ``alive()`` says
        a process we wait for is gone."""
        started = time.perf_counter()
        value = read()
        if value < target and (budget := self.spin.budget()):
            end = started + budget
            while (value := read()) < target and time.perf_counter() < end:
                pass
        if value < target:
            value = self._sleep(read, target, deadline)
        self.spin.record(time.perf_counter() - started)
        if value is not None:
            observe()
        return value

    def _sleep(self, read: Callable[[], Any], target: Any, deadline: float) -> Any:
        self.sleeping[0] = 1
        try:
            fence()  # our "asleep" is seen before we look again (the other side rings after)
            while True:
                seen = self.bell.value()
                observe()  # the bell's count before the word: a ring after it is not lost
                if (value := read()) >= target:
                    return value
                remaining = deadline - time.perf_counter()
                if remaining <= 0 or (self.alive is not None and not self.alive()):
                    return None
                self.bell.sleep(seen, min(remaining, NAP_SECONDS))
        finally:
            self.sleeping[0] = 0
