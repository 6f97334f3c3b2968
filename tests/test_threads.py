"""Threads in workers (:mod:`vecenvs.threads`): each worker sets its envs' BLAS, OpenMP and torch
threads, to one by default.

The limits are read where the envs run: the teaching env ``vecenvs/Costly-v0`` answers
``thread_limits()`` through ``call``, from inside each worker. Under fork a worker starts with a
copy of this process's settings, so the tests set this process's BLAS to :data:`INHERITED`
threads first (restored after): a worker left alone then says 3, one limited says 1 or 2. This
process's own settings are never changed by a vector env, and that is checked too.
"""

from __future__ import annotations

import importlib

import pytest
from conftest import live_children
from threadpoolctl import threadpool_info, threadpool_limits

import vecenvs
from vecenvs import AsyncPoolVecEnv, PoolVecEnv, SubprocVecEnv
from vecenvs.bench import ceiling
from vecenvs.factory import env_fns_for
from vecenvs.threads import CappedEnvFactory, cap_env_fns, check_worker_threads

INHERITED = 3  # this process's BLAS threads during a test: what a forked worker starts with


def blas_threads() -> int:
    """This process's BLAS threads (numpy's OpenBLAS, and any other BLAS loaded)."""
    return max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")


@pytest.fixture
def three_blas_threads():
    """This process's BLAS at :data:`INHERITED` threads for the test, as it was afterwards."""
    with threadpool_limits(limits=INHERITED, user_api="blas"):
        assert blas_threads() == INHERITED
        yield
        assert blas_threads() == INHERITED, "a vector env changed this process's threads"


def costly_fns(num_envs: int) -> list:
    return env_fns_for("vecenvs/Costly-v0", num_envs, step_seconds=0, matmul_size=8)


def blas_of_each_env(envs) -> list[int]:
    envs.reset(seed=0)
    return [limits["blas"] for limits in envs.call("thread_limits")]


# ------------------------------------------------------------------------------------------------
# In effect inside the workers
# ------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("three_blas_threads", "no_leftover_processes")
@pytest.mark.parametrize(
    ("worker_threads", "in_workers"),
    [("default", 1), (2, 2), (None, INHERITED)],
    ids=["default-one", "two", "none-left-alone"],
)
def test_the_pool_sets_its_workers_threads_and_leaves_the_callers_chunk_alone(
    worker_threads, in_workers
):
    kwargs = {} if worker_threads == "default" else {"worker_threads": worker_threads}
    with PoolVecEnv(costly_fns(4), num_workers=2, start_method="fork", **kwargs) as envs:
        assert envs.chunks[0] == range(2)  # the caller's own chunk: this process's threads
        assert blas_of_each_env(envs) == [INHERITED, INHERITED, in_workers, in_workers]
        envs.step(envs.action_space.sample())


@pytest.mark.usefixtures("three_blas_threads", "no_leftover_processes")
@pytest.mark.parametrize(
    ("backend", "start_method"),
    [("subproc", "fork"), ("pool-async", "fork"), ("pool", "fork"), ("subproc", "spawn")],
)
def test_every_process_backend_limits_every_worker_through_make_vec(backend, start_method):
    # Forked workers start with our three BLAS threads; spawned ones fresh, with OpenBLAS's own
    # choice (one per CPU), the limit reaching them through a pickled CappedEnvFactory.
    extra = {"step_in_caller": False} if backend == "pool" else {}
    settings = [(1, 1), (2, 2)]
    if start_method == "fork":  # (spawned, None would show only OpenBLAS's own choice)
        settings.append((None, INHERITED))
    for worker_threads, expected in settings:
        with vecenvs.make_vec(
            "vecenvs/Costly-v0",
            2,
            backend,
            env_kwargs={"step_seconds": 0},
            start_method=start_method,
            worker_threads=worker_threads,
            **extra,
        ) as envs:
            seen = blas_of_each_env(envs)
        assert seen == [expected] * 2, (worker_threads, seen)


@pytest.mark.usefixtures("no_leftover_processes")
def test_torch_imported_by_an_env_is_limited_too():
    pytest.importorskip("torch", reason="torch is not installed: pip install 'vecenvs[sb3]'")

    def env_that_imports_torch():  # after the worker's first limit: the second one catches it
        importlib.import_module("torch")
        return env_fns_for("vecenvs/Costly-v0", 1)[0]()

    with SubprocVecEnv([env_that_imports_torch], start_method="spawn", worker_threads=1) as envs:
        envs.reset(seed=0)
        (limits,) = envs.call("thread_limits")
    assert limits["torch"] == 1 and limits["blas"] == 1, limits
    if "openmp" in limits:  # torch's libgomp, on Linux builds
        assert limits["openmp"] == 1, limits


# ------------------------------------------------------------------------------------------------
# Bad values, refused before anything starts
# ------------------------------------------------------------------------------------------------

BAD_VALUES = [(0, ValueError, "worker_threads is 0"), (-2, ValueError, "worker_threads is -2")]
BAD_VALUES += [(1.5, TypeError, "worker_threads is 1.5"), (True, TypeError, "is True")]
BAD_VALUES += [("2", TypeError, "worker_threads is '2'")]


@pytest.mark.parametrize(("bad", "error", "message"), BAD_VALUES)
def test_bad_worker_threads_are_refused_with_a_message_before_any_process_starts(
    bad, error, message, children_before
):
    for build in (
        lambda: PoolVecEnv(costly_fns(2), worker_threads=bad),
        lambda: AsyncPoolVecEnv(costly_fns(2), worker_threads=bad),
        lambda: SubprocVecEnv(costly_fns(2), worker_threads=bad),
        lambda: vecenvs.make_vec("CartPole-v1", 2, "pool", worker_threads=bad),
        lambda: ceiling.check_kwargs({"worker_threads": bad}, 2),
    ):
        with pytest.raises(error, match=message) as info:
            build()
        assert "or None to leave the workers' threads alone" in str(info.value)
    assert not [p for p in live_children() if p.pid not in children_before], "a process started"


def test_none_leaves_the_factories_as_they_are_and_a_limit_wraps_them():
    fns = costly_fns(2)
    assert cap_env_fns(fns, None) == fns
    capped = cap_env_fns(fns, 2)
    assert all(
        isinstance(fn, CappedEnvFactory) and fn.env_fn is original
        for fn, original in zip(capped, fns)
    )
    assert repr(capped[0]).endswith("with 2 thread(s)")
    assert check_worker_threads(None) is None and check_worker_threads(4) == 4


# ------------------------------------------------------------------------------------------------
# The benchmark measures with and without it
# ------------------------------------------------------------------------------------------------


def test_bench_measures_each_worker_threads_side_by_side():
    import argparse

    from vecenvs.cli import bench as bench_cli

    parser = argparse.ArgumentParser()
    bench_cli.add_parser(parser.add_subparsers())
    backends = ["--backend", "pool", "--backend", "multi", "--backend", "ceiling"]
    threads = ["--workers", "2", "--worker-threads", "1", "--worker-threads", "none"]
    args = parser.parse_args(["bench", *backends, *threads])
    config, _notes = bench_cli._sweep_config(args)
    labels = [backend.label for backend in config.backend_specs()]
    assert labels == [
        "pool (num_workers=2, worker_threads=1)",
        "pool (num_workers=2, worker_threads=None)",
        "multi",  # in this process: not limited, measured once
        "ceiling (worker_threads=1)",
        "ceiling (worker_threads=None)",
        "gym-sync",
    ]
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--worker-threads", "0"])
    assert bench_cli.worker_threads("NONE") is None and bench_cli.worker_threads("4") == 4
