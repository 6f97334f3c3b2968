"""Running a backend under the checker: building it, timing out, and counting the child processes it leaves."""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import psutil
from gymnasium.vector import AutoresetMode, VectorEnv

from vecenvs.testing.report import CheckRun

#: A backend: builds a vector env from env factories and an autoreset mode.
MakeVectorEnv = Callable[..., VectorEnv]
#: How long the children of a closed vector env get to exit, by default.
CHILD_EXIT_SECONDS = 5.0
#: How long a close() may take before the checker stops waiting for it.
CLOSE_SECONDS = 10.0
#: What ``reset`` and ``step`` return, field by field.
RESET_RETURNS = ("observations", "infos")
STEP_RETURNS = ("observations", "rewards", "terminations", "truncations", "infos")


def build(run: CheckRun, make_vector_env: MakeVectorEnv, env_fns: list, mode: AutoresetMode) -> Any:
    return run.attempt(
        f"make_vector_env(env_fns, autoreset_mode={mode})",
        lambda: make_vector_env(env_fns, autoreset_mode=mode),
        "a vector env",
        "the backend must accept a list of env factories and the keyword autoreset_mode "
        "(a gymnasium.vector.AutoresetMode); see the traceback for where it failed",
    )


def seeded_action_space(venv: Any) -> gym.Space:
    """A copy of ``venv``'s action space seeded with 0: the same actions every run."""
    action_space = copy.deepcopy(venv.action_space)
    action_space.seed(0)
    return action_space


def in_thread(action: Callable[[], Any], timeout: float) -> tuple[bool, Any, BaseException | None]:
    """``(finished, result, error)`` of ``action`` run in a thread for at most ``timeout`` s.

    A hung backend then fails the check instead of hanging it; the thread is a daemon, so one
    that never returns does not keep the interpreter alive at exit.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = action()
        except BaseException as err:
            outcome["error"] = err

    thread = threading.Thread(target=target, name="vecenvs-conformance-check", daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive(), outcome.get("result"), outcome.get("error")


def close_quietly(venv: Any) -> None:
    """Close a vector env, ignoring errors and giving up after a while (used in clean-up)."""
    if venv is not None:
        # venv.close is looked up inside the thread: a broken backend may not even have one.
        in_thread(lambda: venv.close(), CLOSE_SECONDS)


def child_pids() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _is_multiprocessing_helper(process: psutil.Process) -> bool:
    """The resource tracker and fork server: started once, meant to live as long as we do.

    Only our direct children count: processes forked *by* the fork server share its command
    line but are the vector env's workers, and must not be excused.
    """
    if process.ppid() != psutil.Process().pid:
        return False
    command = " ".join(process.cmdline())
    return any(name in command for name in ("resource_tracker", "semaphore_tracker", "forkserver"))


def _live_new_children(before: set[int]) -> list[psutil.Process]:
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if not (
                child.pid in before
                or child.status() == psutil.STATUS_ZOMBIE
                or _is_multiprocessing_helper(child)
            ):
                alive.append(child)
        except psutil.Error:  # it exited meanwhile, or we may not look at it: not ours to judge
            pass
    return alive


def check_no_children_left(run: CheckRun, before: set[int], after: str, wait: float) -> None:
    """Wait up to a few seconds for new children to exit; report and terminate any left over.

    The leftovers are terminated so that a leaking backend does not make the rest of a test
    session hang at exit (multiprocessing joins its non-daemon children then).
    """
    deadline = time.monotonic() + wait
    left = _live_new_children(before)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _live_new_children(before)
    if not left:
        return
    described = []
    for child in left:
        try:
            described.append(f"pid {child.pid} ({' '.join(child.cmdline())[:120]})")
        except psutil.Error:
            described.append(f"pid {child.pid}")
    _terminate(left)
    run.problem(
        f"no child process may still be running {wait:g} s {after}",
        "no new child processes",
        f"{len(left)} still running (the checker has now terminated them):\n"
        + "\n".join(described),
        "close() must stop every worker: send each a close command (or terminate it if it does "
        "not answer), then join() it. When construction or a call fails, close the workers "
        "that were already started before raising.",
    )


def _terminate(processes: list[psutil.Process]) -> None:
    """Terminate, then kill, the processes; never waitpid() them (psutil's wait would).

    Reaping them here would take the exit status away from the multiprocessing objects that
    own them, so we only wait until they are gone or zombies.
    """
    for signal_them in ("terminate", "kill"):
        for process in processes:
            with contextlib.suppress(psutil.Error):
                getattr(process, signal_them)()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if not any(_is_running(process) for process in processes):
                return
            time.sleep(0.05)


def _is_running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
