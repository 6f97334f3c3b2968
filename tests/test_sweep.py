"""Tests of sweeps (vecenvs.bench.sweep): the grid, live results, cancelling, saving as it goes.

Nothing here says how fast anything is: only that every point of the grid is measured once,
in order, reported as it arrives, saved, and that stopping early stops and cleans up.
"""

from __future__ import annotations

import re

import pytest

from vecenvs.bench import QUICK, compare
from vecenvs.bench.store import ResultsStore
from vecenvs.bench.sweep import (
    Backend,
    BenchEnv,
    SweepConfig,
    env_grid,
    run_sweep,
    validate_sweep,
)

COSTLY = "vecenvs/Costly-v0"


def small_config(**overrides) -> SweepConfig:
    arguments = {
        "envs": ["CartPole-v1", *env_grid(COSTLY, step_seconds=[1e-5])],
        "num_envs": [3, 2],
        "backends": ["multi", Backend("pool", {"num_workers": 2})],
        **QUICK,
        **overrides,
    }
    return SweepConfig(**arguments)


def test_env_grid_is_every_combination_in_order():
    specs = env_grid(COSTLY, step_seconds=[1e-4, 1e-3], obs_size=[4, 64])

    assert [dict(spec.kwargs) for spec in specs] == [
        {"step_seconds": 1e-4, "obs_size": 4},
        {"step_seconds": 1e-4, "obs_size": 64},
        {"step_seconds": 1e-3, "obs_size": 4},
        {"step_seconds": 1e-3, "obs_size": 64},
    ]
    assert specs[0].label == "vecenvs/Costly-v0 (step_seconds=0.0001, obs_size=4)"
    assert env_grid("CartPole-v1") == [BenchEnv("CartPole-v1")]


pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def test_a_sweep_measures_every_point_once_and_reports_each_as_it_arrives():
    config = small_config()
    seen = []

    result = run_sweep(config, on_result=seen.append)

    # 2 envs x 2 N, env by env with N ascending; 3 backends each (the reference added last).
    expected_points = [("CartPole-v1", 2), ("CartPole-v1", 3), (COSTLY, 2), (COSTLY, 3)]
    assert [(p.point[0].env_id, p.point[1]) for p in seen] == expected_points
    assert [p.points_done for p in seen] == [1, 2, 3, 4]
    assert all(p.points_total == 4 for p in seen)
    assert [p.elapsed_seconds for p in seen] == sorted(p.elapsed_seconds for p in seen)
    assert not result.cancelled and result.cpus >= 1 and result.run_id is None
    assert len(result.measurements) == 4 * 3 == sum(len(p.measurements) for p in seen)
    for progress in seen:
        env, num_envs = progress.point
        labels = [m.config.backend_label for m in progress.measurements]
        assert labels == ["multi", "pool (num_workers=2)", "gym-sync"]
        for measurement in progress.measurements:
            assert measurement.config.env_id == env.env_id
            assert measurement.config.env_kwargs == dict(env.kwargs)
            assert measurement.config.num_envs == num_envs
            assert len(measurement.throughputs) == QUICK["repeats"]
            assert measurement.ratio > 0
        assert progress.measurements[-1].ratio == 1.0
        pool = progress.measurements[1]
        assert pool.workers == 2 and pool.child_processes == 1  # the caller steps envs too


def test_compare_measures_one_backend_several_ways():
    results = compare(
        "CartPole-v1", 4, [("pool", {"num_workers": 1}), ("pool", {"num_workers": 2})], **QUICK
    )

    assert [r.config.backend_label for r in results] == [
        "pool (num_workers=1)",
        "pool (num_workers=2)",
        "gym-sync",
    ]
    assert [r.workers for r in results] == [1, 2, 1]
    # Each ratio is its throughput (median window) over the reference's (vecenvs.bench.ratios);
    # the window-by-window ratios are kept as its spread.
    for result in results:
        assert len(result.paired_ratios) == QUICK["repeats"]
        assert result.ratio == result.throughput / results[-1].throughput


def test_cancelling_stops_between_windows_and_closes_everything():
    config = small_config()
    calls = []

    def cancel_after_the_first_point() -> bool:
        calls.append(True)
        return len(seen) >= 1

    seen = []
    result = run_sweep(config, on_result=seen.append, cancel=cancel_after_the_first_point)

    assert result.cancelled
    assert len(seen) == 1  # the first point finished; the second was stopped
    assert len(result.measurements) == 3
    assert calls, "cancel() was never asked"


def test_a_sweep_saves_each_point_in_the_store_and_marks_the_run(tmp_path):
    path = tmp_path / "results.sqlite"
    with ResultsStore(path) as store:
        done = run_sweep(small_config(envs=["CartPole-v1"]), store=store, label="smoke")
        seen = []
        cancelled = run_sweep(
            small_config(envs=["CartPole-v1"]),
            store=store,
            on_result=seen.append,
            cancel=lambda: len(seen) >= 1,
        )

    with ResultsStore(path) as store:
        runs = {run.id: run for run in store.runs()}
        assert runs[done.run_id].status == "done" and runs[done.run_id].label == "smoke"
        assert runs[cancelled.run_id].status == "cancelled"
        rows = store.measurements([done.run_id])
        assert len(rows) == len(done.measurements) == 6
        assert sorted(row["num_envs"] for row in rows) == [2, 2, 2, 3, 3, 3]
        assert len(store.measurements([cancelled.run_id])) == 3  # kept what it measured


def test_ctrl_c_in_a_sweep_marks_the_run_cancelled_and_reaches_the_caller(tmp_path):
    def interrupt(progress):
        raise KeyboardInterrupt

    with ResultsStore(tmp_path / "results.sqlite") as store:
        with pytest.raises(KeyboardInterrupt):
            run_sweep(small_config(envs=["CartPole-v1"]), store=store, on_result=interrupt)
        (run,) = store.runs()
        assert run.status == "cancelled"
        assert len(store.measurements([run.id])) == 3


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"envs": []}, "envs is empty"),
        ({"num_envs": []}, "num_envs is empty"),
        ({"backends": ["multi", "multi"]}, "more than once: multi"),
        ({"backends": ["warp-drive"]}, "unknown backend 'warp-drive'"),
        ({"num_envs": [2, 0]}, "num_envs is 0: expected a whole number >= 1"),
        ({"envs": ["CartPole-v1", "Nope-v0"]}, "unknown env id 'Nope-v0'"),
        (
            {"measure_seconds": -1.0},
            "measure_seconds is -1.0: expected a finite number of seconds > 0",
        ),
        ({"envs": env_grid(COSTLY, step_secnds=[1e-3])}, "step_secnds"),
        ({"envs": env_grid(COSTLY, step_seconds=[-1.0])}, "step_seconds"),
    ],
)
def test_bad_sweeps_are_refused_before_anything_is_measured(overrides, message):
    config = small_config(**overrides)

    with pytest.raises(ValueError, match=re.escape(message)):
        validate_sweep(config)
    with pytest.raises(ValueError, match=re.escape(message)):
        run_sweep(config, on_result=lambda progress: pytest.fail("something was measured"))


def test_the_settings_are_recorded_as_plain_data():
    settings = small_config().to_dict()

    assert settings["num_envs"] == [2, 3]
    assert settings["envs"][1] == {"env_id": COSTLY, "kwargs": {"step_seconds": 1e-5}}
    assert settings["backends"][-1] == {"name": "gym-sync", "kwargs": {}}
    assert settings["repeats"] == QUICK["repeats"] and settings["interleave"] is True


def test_a_sweep_says_what_it_is_doing_between_windows():
    stages = []
    config = SweepConfig(
        ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.02, repeats=1
    )

    run_sweep(config, on_stage=stages.append)

    assert stages == [
        "CartPole-v1, N=2: starting multi (1 of 2)",
        "CartPole-v1, N=2: starting gym-sync (2 of 2)",
        "CartPole-v1, N=2: warming up multi",
        "CartPole-v1, N=2: warming up gym-sync",
        "CartPole-v1, N=2: timing",
    ]


def test_processes_at_once_counts_what_a_sweep_will_start():
    config = SweepConfig(
        ["CartPole-v1"],
        [2, 512],
        ["multi", "subproc", "pool", Backend("pool", {"num_workers": 4}), "ceiling"],
    )

    # At N=512, interleaved: 512 (one per env) + 2 + 4 (pools) + 2 (ceiling) at once.
    assert config.processes_at_once(cpus=2) == 520
    config.interleave = False  # one backend at a time: the largest alone
    assert config.processes_at_once(cpus=2) == 512
