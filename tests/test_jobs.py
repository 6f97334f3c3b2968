"""The job queue (vecenvs.bench.jobs): real runner processes, a real SQLite store, real locks.

What the dashboard promises rests on these: jobs run one at a time and in order, results are
in the store as they arrive, a queued or running job can be cancelled, a dead runner is
noticed, and a bad configuration is refused before it is queued.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import psutil
import pytest
from conftest import describe, wait_gone

from vecenvs.bench import QUICK, BenchEnv, ResultsStore, SweepConfig
from vecenvs.bench.jobs import Progress, machine_lock_path, try_lock
from vecenvs.bench.store import SCHEMA_VERSION, StoreError
from vecenvs.bench.store.schema import MIGRATIONS
from vecenvs.lab import LabQueue
from vecenvs.profile import ProfileConfig

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

TINY = {"warmup_seconds": 0.0, "measure_seconds": 0.05, "repeats": 1}


def tiny_sweep(backends=("multi",), num_envs=(2,), **timing) -> SweepConfig:
    return SweepConfig(["CartPole-v1"], list(num_envs), list(backends), **{**TINY, **timing})


def slow_sweep(windows: int = 40) -> SweepConfig:
    """A sweep that runs for a few seconds, for tests that act while it is running."""
    return SweepConfig(
        ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.1, repeats=windows
    )


@pytest.fixture
def queue(tmp_path):
    jobs = LabQueue(ResultsStore(tmp_path / "results.sqlite"))
    yield jobs
    for job in jobs.jobs(unfinished=True):
        jobs.cancel(job.id)
    deadline = time.monotonic() + 30
    while jobs.runner_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    jobs.store.close()


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_a_job_runs_in_a_runner_process_and_saves_every_measurement(queue):
    job_id = queue.submit_sweep(tiny_sweep(["multi", "pool"], [2, 4]), label="first")
    job = queue.wait(job_id, timeout=90)
    assert job.status == "done", job
    assert job.run.label == "first" and job.run.kind == "sweep"
    # 2 N x (multi, pool, gym-sync)
    assert job.run.measurement_count == 6
    assert job.run.pid != os.getpid(), "the sweep must run in the runner, not in this process"
    assert job.progress["done"] == job.progress["total"] == 6
    assert job.fraction_done == 1.0
    assert job.run.summary["overhead_model"], "the fitted model is saved with the run"


def test_the_last_count_is_written_at_once_whatever_the_time_since_the_last_write(
    queue, monkeypatch
):
    """A sweep's run is marked done as the sweep returns, before the job's last words: its
    final count must not wait for the next write (CI once saw a finished sweep at 3 of 6)."""
    monkeypatch.setattr("vecenvs.bench.jobs.PROGRESS_SECONDS", 3600.0)
    job_id = queue.submit_sweep(tiny_sweep(), label="not run", start_runner=False)
    progress = Progress(queue, job_id)
    progress.update(1, 3, "one", force=True)
    progress.update(2, 3, "two")  # within PROGRESS_SECONDS of the last write: held back
    assert queue.get(job_id).progress["done"] == 1
    progress.update(3, 3, "three")
    assert queue.get(job_id).progress == {"done": 3, "total": 3, "message": "three"}


def test_two_submissions_run_one_after_the_other_in_order(queue):
    first = queue.submit_sweep(slow_sweep(20))
    second = queue.submit_sweep(tiny_sweep())
    wait_until(lambda: queue.get(first).status == "running", 30, "the first job to start")
    assert queue.get(second).status == "queued"
    assert queue.position(second) == 1
    assert queue.position(first) == 0
    one, two = queue.wait(first, 90), queue.wait(second, 90)
    assert one.status == two.status == "done"
    assert two.run.started_at >= one.run.finished_at, "the second must wait for the first"
    assert one.run.pid == two.run.pid, "one runner serves the whole queue"


def test_runners_of_different_stores_take_turns_on_the_machine_lock(tmp_path, queue):
    other = LabQueue(ResultsStore(tmp_path / "other.sqlite"))
    first = queue.submit_sweep(slow_sweep(20))
    wait_until(lambda: queue.get(first).status == "running", 30, "the first job to start")
    second = other.submit_sweep(tiny_sweep())
    # Its runner says "starting" first (a busy machine may show it for a while), then waits.
    waiting = "waiting for another benchmark on this machine"
    wait_until(
        lambda: waiting in (other.get(second).progress.get("message") or ""),
        30,
        "the second store's job to say it is waiting",
    )
    assert other.get(second).status == "queued"
    one, two = queue.wait(first, 90), other.wait(second, 90)
    assert two.run.started_at >= one.run.finished_at
    other.store.close()


def test_cancelling_a_queued_job_drops_it_and_a_running_one_keeps_what_it_measured(queue):
    running = queue.submit_sweep(
        SweepConfig(
            ["CartPole-v1"],
            [1, 2, 4],
            ["multi"],
            warmup_seconds=0.0,
            measure_seconds=0.1,
            repeats=15,
        )
    )
    waiting = queue.submit_sweep(tiny_sweep())
    assert queue.cancel(waiting) == "dropped"
    assert queue.get(waiting).status == "cancelled"
    wait_until(
        lambda: queue.get(running).run and queue.get(running).run.measurement_count,
        60,
        "the first point to be saved",
    )
    assert queue.cancel(running) == "requested"
    job = queue.wait(running, 30)
    assert job.status == "cancelled"
    assert 0 < job.run.measurement_count < 6, "kept the points measured before cancelling"
    assert queue.get(waiting).run_id is None, "a dropped job never runs"
    assert queue.cancel(running) == "finished"


def test_a_bad_config_is_refused_before_it_is_queued(queue):
    with pytest.raises(ValueError, match="num_envs"):
        queue.submit_sweep(SweepConfig(["CartPole-v1"], [0], ["multi"], **QUICK))
    with pytest.raises(ValueError, match="step_secnds"):
        queue.submit_sweep(
            SweepConfig(
                [BenchEnv("vecenvs/Costly-v0", {"step_secnds": 1})], [2], ["multi"], **QUICK
            )
        )
    with pytest.raises(ValueError, match="backend"):
        queue.submit_profile(ProfileConfig(backend="warp-drive"))
    with pytest.raises(ValueError, match="num_envs is 0"):
        queue.submit_autotune("CartPole-v1", 0, 5)
    with pytest.raises(ValueError, match="budget_seconds is -1"):
        queue.submit_autotune("CartPole-v1", 4, -1)
    with pytest.raises(ValueError, match="step_secnds"):
        queue.submit_autotune("vecenvs/Costly-v0", 4, 5, env_kwargs={"step_secnds": 1})
    with pytest.raises(ValueError, match="'pool-async' can't be trained on"):
        queue.submit_training("CartPole-v1", 4, ["pool-async"])
    with pytest.raises(ValueError, match="timesteps is 0"):
        queue.submit_training("CartPole-v1", 4, ["multi"], timesteps=0)
    with pytest.raises(ValueError, match="backends is empty"):
        queue.submit_training("CartPole-v1", 4, [])
    assert queue.jobs() == [], "nothing may be queued"
    assert not queue.runner_alive()


def test_a_crashing_env_fails_its_job_with_the_env_index_and_the_queue_goes_on(queue):
    # subproc is its own reference: with gym-sync beside it, whichever reached step 40 first
    # would crash, and on a busy machine that can be gymnasium's loop, with its own error.
    # Step 40: past the few steps the env is checked with before it is queued, so that it is
    # the worker that crashes.
    crashing = SweepConfig(
        [BenchEnv("vecenvs/Faulty-v0", {"fail_on": "step", "at": 40})],
        [2],
        ["subproc"],
        reference="subproc",
        **{**TINY, "measure_seconds": 10.0},  # long enough to reach step 40 on a busy machine
    )
    bad = queue.submit_sweep(crashing)
    good = queue.submit_sweep(tiny_sweep())
    job = queue.wait(bad, 60)
    assert job.status == "failed"
    # Both envs reach step 40 in the same step(): whichever worker answers first is named.
    assert re.search(r"EnvCrashedError: env [01] raised RuntimeError during step", job.run.error)
    assert "Traceback from the env" in job.run.error, "the env's own traceback reaches the user"
    assert queue.wait(good, 60).status == "done", "one failed job must not stop the queue"


def test_a_killed_runner_is_noticed_and_its_queue_taken_over(queue):
    running = queue.submit_sweep(slow_sweep(200))
    waiting = queue.submit_sweep(tiny_sweep())
    job = wait_until(lambda: queue.get(running).run and queue.get(running), 30, "it to start")
    runner = psutil.Process(job.run.pid)
    children = runner.children(recursive=True)
    runner.kill()  # kill -9: no chance to clean up or mark anything
    runner.wait(10)
    # Its children (here the child checking the env) notice their parent is gone and exit on
    # their own. (Not psutil.Process(pid).wait(): for a process that is not ours it returns
    # None once the process ends, and only a process already gone raises NoSuchProcess.)
    alive = wait_gone(children, timeout=30)
    assert alive == [], f"orphans left behind: {describe(alive)}"
    assert queue.store.fail_abandoned_runs() == [job.run_id]
    dead = queue.get(running)
    assert dead.status == "failed" and "ended without finishing" in dead.run.error
    assert queue.get(waiting).status == "queued"
    assert queue.wait(waiting, 60).status == "done", "wait() starts a new runner for it"


def test_sigterm_to_the_runner_cancels_its_run_cleanly(queue):
    running = queue.submit_sweep(slow_sweep(200))
    job = wait_until(lambda: queue.get(running).run and queue.get(running), 30, "it to start")
    os.kill(job.run.pid, signal.SIGTERM)
    job = queue.wait(running, 30)
    assert job.status == "cancelled"


def test_a_second_runner_for_the_same_store_exits_at_once(queue):
    with try_lock(queue.runner_lock_path) as held:
        assert held
        assert queue.runner_alive()
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "vecenvs.lab", "--store", str(queue.store.path)],
            capture_output=True,
            timeout=60,
        )
        assert result.returncode == 0
        assert time.monotonic() - started < 60
    assert not queue.runner_alive()


def test_a_profile_job_saves_its_breakdown_and_files(queue):
    job_id = queue.submit_profile(
        ProfileConfig(num_envs=2, backend="subproc", seconds=1, warmup_seconds=0.1)
    )
    job = queue.wait(job_id, 120)
    assert job.status == "done", job.run.error if job.run else job
    summary = job.run.summary
    assert summary["breakdown"]["rows"], summary
    svg = summary["files"]["svg"]
    assert os.path.isfile(svg) and svg.startswith(str(queue.profiles_dir))
    assert job.progress["message"] == "done"


def test_machine_lock_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("VECENVS_MACHINE_LOCK", str(tmp_path / "x.lock"))
    assert machine_lock_path() == tmp_path / "x.lock"
    monkeypatch.delenv("VECENVS_MACHINE_LOCK")
    assert machine_lock_path().name == "vecenvs-bench.lock"


def test_a_version_1_store_is_upgraded_keeping_its_runs(tmp_path):
    path = tmp_path / "old.sqlite"
    connection = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        connection.execute(statement)
    connection.execute(
        "INSERT INTO runs (kind, status, started_at, settings, machine) "
        "VALUES ('bench', 'running', '2026-01-01T00:00:00+00:00', '{}', '{}')"
    )
    connection.execute(
        "INSERT INTO measurements (run_id, recorded_at, env_id, env_kwargs, "
        "num_envs, backend, backend_kwargs, data) VALUES (1, 'x', 'CartPole-v1', "
        "'{}', 4, 'multi', '{}', '{\"config\": {}}')"
    )
    connection.execute("PRAGMA user_version = 1")
    connection.commit()
    connection.close()
    with ResultsStore(path) as store:
        (run,) = store.runs()
        assert run.measurement_count == 1 and run.pid is None and run.host is None
        assert store.fail_abandoned_runs() == [], "a v1 run has no pid to check"
        assert LabQueue(store).jobs() == []
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    connection.close()


def test_fail_abandoned_runs_leaves_live_and_finished_runs_alone(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        mine = store.start_run("bench", {})
        finished = store.start_run("bench", {})
        store.finish_run(finished)
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        with store.transaction(write=True) as connection:
            gone = connection.execute(
                "INSERT INTO runs (kind, status, started_at, settings, machine, pid, host) "
                "SELECT kind, status, started_at, settings, machine, ?, host FROM runs "
                "WHERE id = ?",
                (dead.pid, mine),
            ).lastrowid
        assert store.fail_abandoned_runs() == [gone]
        assert store.run(mine).status == "running"
        assert store.run(finished).status == "done"
        assert store.run(gone).status == "failed"


def test_the_bench_command_waits_for_the_machine_lock_and_says_so(machine_lock_in_tmp):
    with try_lock(machine_lock_path()) as held:
        assert held
        bench = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vecenvs",
                "bench",
                "--quick",
                "--num-envs",
                "2",
                "--backend",
                "multi",
                "--no-store",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            said = ""
            deadline = time.monotonic() + 60
            while "another benchmark is running on this machine" not in said:
                line = bench.stderr.readline()
                assert line and time.monotonic() < deadline, f"never said it waits: {said!r}"
                said += line
            assert f"(pid {os.getpid()})" in said, said
            assert bench.poll() is None, "it must wait while the lock is held"
        except BaseException:
            bench.kill()
            bench.wait()
            raise
    assert bench.wait(60) == 0, bench.stderr.read()


def test_the_same_job_submitted_twice_in_a_moment_is_queued_once(queue):
    first = queue.submit_sweep(slow_sweep(20), label="double-click", start_runner=False)

    assert queue.submit_sweep(slow_sweep(20), label="double-click", start_runner=False) == first
    # Other settings, or another label, are another job.
    assert queue.submit_sweep(slow_sweep(21), label="double-click", start_runner=False) != first
    assert queue.submit_sweep(slow_sweep(20), label="again", start_runner=False) != first
    assert len(queue.jobs()) == 3
    queue.cancel(first)  # once it has finished, the same job may be queued again
    assert queue.submit_sweep(slow_sweep(20), label="double-click", start_runner=False) != first


def test_a_job_keeps_its_notes_for_whoever_opens_it_later(queue):
    job = queue.submit_sweep(slow_sweep(20), start_runner=False)
    assert queue.get(job).notes == {}

    queue.add_notes(job, {"busy": {"others_share": 0.73, "cpus": 2}})
    queue.add_notes(job, {"seen": True})

    again = LabQueue(ResultsStore(queue.store.path))  # another page, another process
    assert again.get(job).notes == {"busy": {"others_share": 0.73, "cpus": 2}, "seen": True}
    with pytest.raises(StoreError, match="unknown job id 999"):
        queue.add_notes(999, {"busy": None})
    again.store.close()


def test_a_runner_told_to_stop_cancels_its_job_and_takes_no_other(queue, monkeypatch):
    """SIGTERM raises KeyboardInterrupt in the runner, and also sets ``lab.STOPPING``: where the
    interrupt is lost (Python drops one that lands in a fork's hooks), the running job's cancel
    check still sees the stop, and no queued job is taken after it."""
    import threading

    from vecenvs import lab

    monkeypatch.setattr(lab, "STOPPING", threading.Event())
    waiting = queue.submit_sweep(slow_sweep(), start_runner=False)
    job = queue.get(waiting)
    assert queue._next_queued() == waiting and not queue._cancelled(job)
    lab.STOPPING.set()
    assert queue._next_queued() is None and queue._cancelled(job)
    queue.cancel(waiting)
