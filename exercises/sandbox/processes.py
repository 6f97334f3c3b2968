"""Making sure that every process a student's code starts ends when we say so.

A process that calls ``setsid()`` leaves its process group, and one whose parent exits is handed
to another process ("reparented"), normally init, where nobody would ever look for it. Linux
lets a process declare itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): orphans
among its descendants are then handed to it instead of init, so they stay its descendants, and
:func:`kill_descendants` finds and kills them, however they detached themselves.

The grader, the checks' process and the runner are each a subreaper. In a PID namespace (the
sandbox's own) the kernel does more: when the namespace's first process dies, every process in
the namespace is killed. The subreaper is what still works where no namespace can be had.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time

import psutil

#: From <linux/prctl.h>.
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Makes this process the subreaper of its descendants; False where the OS has no such thing."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants() -> set[int]:
    """The pids of this process's descendants now."""
    try:
        return {process.pid for process in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def kill_descendants(rounds: int = 20, seconds: float = 5.0, spare: set[int] = frozenset()) -> int:
    """Kills every descendant of this process (SIGKILL: nothing to negotiate) and reaps them.

    Repeats while new ones appear (a process may fork while its siblings are being killed), at
    most ``rounds`` times. ``spare``: pids to leave alone (processes that were there before).
    Returns how many were killed.
    """
    me = psutil.Process()
    killed = 0
    for _ in range(rounds):
        try:
            found = [
                process
                for process in me.children(recursive=True)
                if process.pid not in spare and _running(process)
            ]
        except psutil.Error:
            break
        if not found:
            break
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
                killed += 1
        _wait_gone(found, seconds)
    return killed


def end_group(process: subprocess.Popen | None, spare: set[int] = frozenset()) -> None:
    """Kills ``process``'s process group (it was started in a session of its own), waits for it,
    then kills every other descendant but ``spare``: what left the group (``setsid``) came to
    this process, a subreaper."""
    if process is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    kill_descendants(spare=spare)


def _running(process: psutil.Process) -> bool:
    """Alive and not a zombie (a zombie has ended; it only waits to be reaped)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(processes: list[psutil.Process], seconds: float) -> None:
    """Waits until none of ``processes`` runs, reaping those that are (or became) our children.

    Reaping by pid, never ``waitpid(-1)``: that would take the exit status of a child some
    ``subprocess.Popen`` here is waiting for.
    """
    deadline = time.perf_counter() + seconds
    while True:
        for process in processes:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(process.pid, os.WNOHANG)
        if not any(_running(process) for process in processes) or time.perf_counter() > deadline:
            return
        time.sleep(0.01)
