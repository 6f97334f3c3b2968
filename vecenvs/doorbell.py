"""Waiting for another process: spin on a word for a moment, then sleep on a doorbell.

The low-level layer under the pool's protocol (:mod:`vecenvs.workers`); a reader may skip it
and take three promises on trust: :func:`spin_until` watches a word in shared memory for a
moment, :class:`Doorbell` lets processes sleep until another rings it, and :func:`fence` keeps
an "I am going to sleep" from crossing a "here is work" unseen.

Why both: a process spinning on a word sees it change within a fraction of a microsecond but
burns a CPU while it spins; a process asleep costs nothing but takes 50 µs to over 500 µs to
wake on a VM. So each side spins only while spinning pays off (:class:`AdaptiveSpin`), then
sleeps.

The doorbell is Linux's *futex* where there is one. Elsewhere (macOS, or with :data:`FUTEX`
set to False, as the tests do to try that path on Linux) sleepers poll the word every
millisecond instead: slower to wake, the same answers.
"""

from __future__ import annotations

import ctypes
import platform
import sys
import threading
import time
from typing import Any

__all__ = ["FUTEX", "FUTEX_FOUND", "AdaptiveSpin", "Doorbell", "fence", "spin_until"]


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


_FENCE = threading.Lock()


def fence() -> None:
    """A full memory barrier: stores before it are seen by other CPUs before loads after it.

    Needed where one side writes "I am going to sleep" and then reads "is there work?" while
    the other writes "here is work" and then reads "is anyone asleep?": without a barrier both
    reads may miss the other's write. Python has no barrier of its own; taking and releasing a
    lock is an atomic read-modify-write, which is one on x86. (Every sleep also has a timeout,
    so even a missed ring costs at most that long.)
    """
    _FENCE.acquire()
    _FENCE.release()


class AdaptiveSpin:
    """Spin before sleeping only while spinning pays off.

    A spin that ends with the answer there saved a sleep and a wake-up. A spin that runs out
    did nothing but burn a CPU, and on a machine with no CPU to spare (another program, a
    browser drawing the dashboard) it burns the very CPU the process we wait for needs. So
    after a spin that runs out, the next wait does without, after two in a row the next two,
    then four, ... up to :attr:`MAX_SKIPPED`; a spin that succeeds starts over. (The adaptive
    spin locks of operating systems and databases do the same.) ``seconds``: one spin; 0 never.

    Notebook 4 measures what a sleeping worker costs a step on your machine.
    """

    #: The most waits skipped in a row after spins that ran out.
    MAX_SKIPPED = 64
    #: A spin lasts at most this many times :attr:`seconds`, whatever ``at_least`` asks.
    MAX_STRETCH = 20

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._skip = 0  # waits still to do without a spin
        self._penalty = 1  # how many to skip after the next spin that runs out

    def budget(self, at_least: float = 0.0) -> float:
        """How long to spin this time: :attr:`seconds`, or ``at_least`` if longer (up to
        :attr:`MAX_STRETCH` times :attr:`seconds`); 0 while backing off, or if spinning is off."""
        if self._skip:
            self._skip -= 1
            return 0.0
        return min(max(self.seconds, at_least), self.MAX_STRETCH * self.seconds)

    def record(self, success: bool) -> None:
        """Tells how the spin ended: with the answer there, or ran out."""
        if success:
            self._penalty = 1
        else:
            self._skip = self._penalty
            self._penalty = min(2 * self._penalty, self.MAX_SKIPPED)


def spin_until(
    words: memoryview, index: int, target: int, spin: AdaptiveSpin, at_least: float = 0.0
) -> bool:
    """Spins until ``words[index] >= target``, for at most the spin's budget (see
    :meth:`AdaptiveSpin.budget`); True if it got there."""
    seconds = spin.budget(at_least)
    if not seconds:
        return False
    end = time.perf_counter() + seconds
    while words[index] < target:
        if time.perf_counter() > end:
            spin.record(False)
            return False
    spin.record(True)
    return True
