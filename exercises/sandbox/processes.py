"""Making sure that every process a student's code starts ends when we say so.

A process that calls ``setsid()`` leaves its process group, and one whose parent exits is
reparented, normally to init, where nobody would look for it. A Linux *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``) gets those orphans instead, so they stay its descendants and
:func:`kill_descendants` finds them. The grader, the checks' process and the runner are each a
subreaper; in the sandbox's PID namespace the kernel also kills every process when the first
one dies, and the subreaper is what still works where no namespace can be had.
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
    """The pids of this process's running descendants now."""
    return {process.pid for process in _running_descendants()}


def kill_descendants(spare: set[int] = frozenset()) -> int:
    """Kills (SIGKILL) and reaps every descendant of this process but the pids in ``spare``;
    returns how many. Repeats while new ones appear (one may fork while its siblings die)."""
    killed = 0
    for _ in range(20):
        found = [process for process in _running_descendants() if process.pid not in spare]
        if not found:
            break
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
                killed += 1
        _wait_gone(found, seconds=5.0)
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


def _running_descendants() -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process().children(recursive=True) if _running(p)]
    except psutil.Error:
        return []


def _running(process: psutil.Process) -> bool:
    # A zombie has ended; it only waits to be reaped.
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(processes: list[psutil.Process], seconds: float) -> None:
    """Waits until none of ``processes`` runs, reaping those that are (or became) our children:
    by pid, never ``waitpid(-1)``, which would take the status a ``subprocess.Popen`` waits for."""
    deadline = time.perf_counter() + seconds
    while True:
        for process in processes:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(process.pid, os.WNOHANG)
        if not any(_running(process) for process in processes) or time.perf_counter() > deadline:
            return
        time.sleep(0.01)


def reap_zombies(spare: set[int] = frozenset()) -> int:
    """Reaps this process's children that have ended (zombies) but the pids in ``spare``;
    returns how many. A subreaper adopts every orphan of the processes below it, and an orphan
    that ends by itself (a sandbox process that leaves when its parent does) is not running, so
    :func:`kill_descendants` passes it by: without this, each would stay a zombie until this
    process exits. ``spare``: children a ``subprocess.Popen`` still waits for (its status is
    its own)."""
    reaped = 0
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return 0
    for child in children:
        if child.pid in spare or _running(child):
            continue
        with contextlib.suppress(ChildProcessError, OSError):
            pid, _ = os.waitpid(child.pid, os.WNOHANG)
            reaped += pid == child.pid
    return reaped
