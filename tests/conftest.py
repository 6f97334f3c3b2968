"""Shared test helpers: the backends under test, child-process accounting, result comparison.

Every backend is a callable ``backend(env_fns, **kwargs) -> VectorEnv``, the shape the
conformance checker in :mod:`vecenvs.testing` takes. The process backends are run under each
start method; ``multi`` runs in this process and has none.

Child processes are counted with psutil. The multiprocess resource tracker and fork server are
started once and live as long as the test process; they are not a vector env's workers and are
never counted. Zombies (exited, not yet joined) are not counted either: they run nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
import pytest
from gymnasium.vector import SyncVectorEnv, VectorEnv

from vecenvs import AsyncPoolVecEnv, MultiEnv, PoolVecEnv, SubprocVecEnv
from vecenvs.cpus import available_cpus

#: The most pytest-xdist processes ``-n auto`` starts (``make test``): each test file may start
#: as many processes again (workers, kernels, Ray, a browser).
MOST_TEST_PROCESSES = 4


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: without xdist, never called
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """What ``pytest -n auto`` means here: the CPUs this process may use (affinity and cgroup
    quota, as the lab counts them; xdist's own count sees the host's), at most
    :data:`MOST_TEST_PROCESSES`."""
    return min(available_cpus(), MOST_TEST_PROCESSES)


@pytest.fixture(autouse=True)
def results_store_in_tmp(tmp_path, monkeypatch):
    """Every test (and every process it starts) saves results in its own tmp store, never
    in the real one under the home directory. Returns that store's path."""
    path = tmp_path / "default-results.sqlite"
    monkeypatch.setenv("VECENVS_STORE", str(path))
    return path


@pytest.fixture(autouse=True)
def machine_lock_in_tmp(tmp_path, monkeypatch):
    """Every test's queued benchmarks take turns on their own machine lock, so a test never
    waits for a dashboard someone is running on the same machine. Returns the lock's path."""
    path = tmp_path / "machine.lock"
    monkeypatch.setenv("VECENVS_MACHINE_LOCK", str(path))
    return path


# ------------------------------------------------------------------------------------------------
# Backends
# ------------------------------------------------------------------------------------------------

START_METHODS = ("fork", "forkserver", "spawn")

#: Backend name -> builder ``(env_fns, start_method=None, **kwargs) -> VectorEnv``.
BACKENDS: dict[str, Callable[..., VectorEnv]] = {
    "multi": lambda env_fns, start_method=None, **kw: MultiEnv(env_fns, **kw),
    "subproc": lambda env_fns, start_method=None, **kw: SubprocVecEnv(
        env_fns, start_method=start_method, **kw
    ),
    "pool": lambda env_fns, start_method=None, **kw: PoolVecEnv(
        env_fns, **{"num_workers": 2, "step_in_caller": False, **kw}, start_method=start_method
    ),
    "pool-caller": lambda env_fns, start_method=None, **kw: PoolVecEnv(
        env_fns, **{"num_workers": 2, "step_in_caller": True, **kw}, start_method=start_method
    ),
    "pool-pipes": lambda env_fns, start_method=None, **kw: PoolVecEnv(
        env_fns,
        **{"num_workers": 2, "shared_memory": False, "step_in_caller": False, **kw},
        start_method=start_method,
    ),
    # The async pool through the synchronous API (its own API: tests/test_async_pool.py).
    "async-pool": lambda env_fns, start_method=None, **kw: AsyncPoolVecEnv(
        env_fns, **{"num_workers": 2, **kw}, start_method=start_method
    ),
}
PROCESS_BACKENDS = ("subproc", "pool", "pool-caller", "pool-pipes")
ALL_BACKENDS = ("multi", *PROCESS_BACKENDS)


@dataclass(frozen=True)
class Backend:
    """One backend under one start method, callable as ``backend(env_fns, **kwargs)``."""

    name: str
    start_method: str | None = None

    def __call__(self, env_fns: Any, **kwargs: Any) -> VectorEnv:
        return BACKENDS[self.name](env_fns, start_method=self.start_method, **kwargs)

    @property
    def in_processes(self) -> bool:
        return self.name != "multi"

    @property
    def id(self) -> str:
        return self.name if self.start_method is None else f"{self.name}-{self.start_method}"

    def __repr__(self) -> str:  # shows in assertion messages and in the checker's reports
        return f"Backend({self.id})"


def backend_params(
    names: Iterable[str] = ALL_BACKENDS, start_methods: Iterable[str] = ("fork",)
) -> list[Any]:
    """``pytest.param`` for each backend name x start method (``multi`` once, without one)."""
    start_methods = tuple(start_methods)
    params = []
    for name in names:
        if name == "multi":
            params.append(pytest.param(Backend("multi"), id="multi"))
            continue
        for start_method in start_methods:
            backend = Backend(name, start_method)
            params.append(pytest.param(backend, id=backend.id))
    return params


# ------------------------------------------------------------------------------------------------
# Child processes
# ------------------------------------------------------------------------------------------------

_HELPER_NAMES = ("resource_tracker", "semaphore_tracker", "forkserver")


def _is_multiprocess_helper(process: psutil.Process, my_pid: int) -> bool:
    """The resource tracker or fork server: a direct child whose command line names it.

    Processes forked *by* the fork server share its command line but are workers: only direct
    children are excused.
    """
    if process.ppid() != my_pid:
        return False
    command = " ".join(process.cmdline())
    return any(name in command for name in _HELPER_NAMES)


#: A crash, death or hang must be reported well within this (the vector envs' own timeouts are
#: 30-60 s, so this also shows the report does not come from a timeout).
REPORTED_WITHIN = 20.0


def second_step_raises(envs: VectorEnv, error: type[BaseException]) -> pytest.ExceptionInfo:
    """Resets ``envs`` (four envs, discrete actions), steps once, and checks that the second
    step raises ``error`` within :data:`REPORTED_WITHIN`; returns what was raised (the faulty
    envs of these tests fail ``at=2``)."""
    envs.reset(seed=0)
    envs.step(np.zeros(4, dtype=np.int64))
    start = time.monotonic()
    with pytest.raises(error) as info:
        envs.step(np.zeros(4, dtype=np.int64))
    assert time.monotonic() - start < REPORTED_WITHIN
    return info


def live_children() -> list[psutil.Process]:
    """This test process's live descendants, excluding multiprocess helpers and zombies."""
    me = psutil.Process()
    alive = []
    for child in me.children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE or _is_multiprocess_helper(child, me.pid):
                continue
        except psutil.Error:  # exited meanwhile
            continue
        alive.append(child)
    return alive


def count_children() -> int:
    """How many worker-like children this test process has right now."""
    return len(live_children())


def is_alive(process: psutil.Process) -> bool:
    """Running and not a zombie (``is_running`` also guards against pid reuse)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_gone(processes: Iterable[psutil.Process], timeout: float = 5.0) -> list[psutil.Process]:
    """Waits up to ``timeout`` s for the processes to end; returns those still alive."""
    processes = list(processes)
    deadline = time.monotonic() + timeout
    left = [p for p in processes if is_alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if is_alive(p)]
    return left


def kill_all(processes: Iterable[psutil.Process]) -> None:
    """SIGKILL the processes, by pid (never waitpid: their owners reap them)."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
    wait_gone(processes, timeout=2.0)


def new_children_left(before: set[int], timeout: float = 5.0) -> list[psutil.Process]:
    """Children not in ``before`` still alive after waiting up to ``timeout`` s for them to end."""
    return wait_gone([p for p in live_children() if p.pid not in before], timeout)


def describe(processes: Iterable[psutil.Process]) -> str:
    lines = []
    for process in processes:
        try:
            lines.append(f"pid {process.pid}: {' '.join(process.cmdline())[:150]}")
        except psutil.Error:
            lines.append(f"pid {process.pid}")
    return "\n".join(lines)


def assert_no_new_children(before: set[int], timeout: float = 5.0, when: str = "") -> None:
    """Fails (after killing them, so later tests are not affected) if new children are left."""
    left = new_children_left(before, timeout)
    if left:
        text = describe(left)
        kill_all(left)
        pytest.fail(
            f"{len(left)} child process(es) still running {timeout:g} s {when}(now killed):\n{text}"
        )


@pytest.fixture
def no_leftover_processes():
    """After the test, no child process it started may still be running (polled up to 5 s)."""
    before = {p.pid for p in live_children()}
    yield
    assert_no_new_children(before, 5.0, "after the test ")


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt in this process, as at an interactive terminal, for the
    length of a test that presses Ctrl-C; the handler it found is put back afterwards.

    A runner started in the background (``nohup make test &``, a CI job) starts with SIGINT
    ignored, and so would every process it starts: without this, Ctrl-C would do nothing and the
    test could not tell a worker that ignores SIGINT on purpose from one that never got it.
    Processes started after it inherit the handler (fork), or, through exec (spawn, a
    subprocess), the default action, which Python again turns into KeyboardInterrupt.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def press_ctrl_c(command: subprocess.Popen) -> list[psutil.Process]:
    """Ctrl-C as a terminal presses it: SIGINT to the whole foreground process group, the
    command and every process it started there (start it with ``start_new_session=True``, so
    that the group is its own). Returns the command and all its descendants as they were a
    moment before, to check afterwards that none is left running. Use with ``ctrl_c_raises``."""
    command_process = psutil.Process(command.pid)
    processes = [command_process, *command_process.children(recursive=True)]
    os.killpg(command.pid, signal.SIGINT)
    return processes


def measurements_in(store: Any) -> int:
    """How many measurements the results store at path ``store`` holds so far (another process
    may be writing it; 0 before it exists)."""
    from vecenvs.bench.store import ResultsStore, StoreError

    if not os.path.exists(store):
        return 0
    try:
        with ResultsStore(store) as results:
            return len(results.measurements())
    except StoreError:  # being created
        return 0


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    """Poll ``condition()`` every 0.1 s until it is true; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:g} s")
        time.sleep(0.1)


@pytest.fixture
def children_before() -> set[int]:
    """The pids of the live children when the test starts."""
    return {p.pid for p in live_children()}


# ------------------------------------------------------------------------------------------------
# Comparing results
# ------------------------------------------------------------------------------------------------


def assert_same(got: Any, expected: Any, path: str = "result") -> None:
    """Exactly equal, recursively through dicts/tuples/lists, dtypes and shapes included."""
    if isinstance(expected, dict):
        assert isinstance(got, dict), f"{path}: expected a dict, got {type(got).__name__}"
        assert set(got) == set(expected), (
            f"{path}: keys {sorted(got)} != expected {sorted(expected)}"
        )
        for key in expected:
            assert_same(got[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected), (
            f"{path}: {got!r} != {expected!r}"
        )
        for index, (a, b) in enumerate(zip(got, expected)):
            assert_same(a, b, f"{path}[{index}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray), f"{path}: expected an array, got {type(got).__name__}"
        assert got.shape == expected.shape, (
            f"{path}: shape {got.shape} != expected {expected.shape}"
        )
        assert got.dtype == expected.dtype, (
            f"{path}: dtype {got.dtype} != expected {expected.dtype}"
        )
        if expected.dtype == object:
            for index in np.ndindex(expected.shape):
                assert_same(got[index], expected[index], f"{path}[{index}]")
        else:
            np.testing.assert_array_equal(got, expected, err_msg=path)
    else:
        assert got == expected, f"{path}: {got!r} != expected {expected!r}"


def sync_reference(env_fns: list) -> SyncVectorEnv:
    """gymnasium's SyncVectorEnv over the same factories: the reference for "right"."""
    return SyncVectorEnv(env_fns)
