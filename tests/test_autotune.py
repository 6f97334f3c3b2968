"""Autotune: the candidates it picks, the deadline it keeps, and choices any machine agrees on.

Which backend wins is machine-dependent in general, so the choices tested here are ones that
hold on any number of cores: envs that *sleep* through their step run in parallel even on one
core, so the pool beats the loop; envs that cost nothing leave nothing to parallelise, so the
loop beats one process per env. No test asserts a time.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import gymnasium as gym
import pytest
from conftest import describe, measurements_in, press_ctrl_c, wait_gone, wait_until

import vecenvs.autotune
from vecenvs.autotune import AutotuneResult, Candidate, autotune, candidates, is_close_call
from vecenvs.bench.store import ResultsStore
from vecenvs.cli import main

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

SLEEPY = {"step_seconds": 2e-3, "cost_kind": "sleep"}
FREE = {"step_seconds": 0.0}


def test_envs_that_sleep_make_the_pool_win_on_any_number_of_cores():
    result = autotune(
        "vecenvs/Costly-v0",
        8,
        budget_seconds=4,
        env_kwargs=SLEEPY,
        candidates_to_try=[Candidate("multi"), Candidate("pool", {"num_workers": 4})],
    )
    assert [c.backend for c in result.skipped] == []
    assert result.best == Candidate("pool", {"num_workers": 4}), result.format_table()


def test_envs_that_cost_nothing_make_the_loop_win_against_a_process_per_env():
    result = autotune(
        "vecenvs/Costly-v0",
        4,
        budget_seconds=3,
        env_kwargs=FREE,
        candidates_to_try=[Candidate("subproc"), Candidate("multi")],
    )
    assert result.best == Candidate("multi"), result.format_table()


def test_the_result_has_a_table_a_text_form_and_plain_data():
    seen = []
    result = autotune(
        "vecenvs/Costly-v0",
        4,
        budget_seconds=3,
        env_kwargs=SLEEPY,
        on_result=seen.append,
        candidates_to_try=[
            Candidate("multi"),
            Candidate("pool-async", {"num_workers": 2, "batch_size": 2}),
        ],
    )
    assert [p.done for p in seen] == [1, 2] and all(p.total == 2 for p in seen)
    rows = result.table
    assert rows[0]["label"] == result.best.label
    assert {row["mode"] for row in rows} == {"sync", "async"}
    assert next(row for row in rows if row["backend"] == "multi")["vs_loop"] == 1.0
    text = result.format_table()
    assert f"* {result.best.label}" in text and f"best: {result.best.label}" in text
    data = json.loads(json.dumps(result.to_dict()))
    assert data["best"]["label"] == result.best.label and len(data["measurements"]) == 2


def test_the_budget_is_a_deadline_candidates_that_do_not_fit_are_skipped():
    planned = candidates(4)
    result = autotune("CartPole-v1", 4, budget_seconds=0.3, candidates_to_try=planned)
    assert result.skipped, "0.3 s cannot fit every candidate's windows and startups"
    measured = [Candidate(m.config.backend, m.config.backend_kwargs) for m in result.measurements]
    assert sorted(c.label for c in measured + result.skipped) == sorted(c.label for c in planned)


def test_cancel_stops_before_the_next_candidate():
    calls = []
    result = autotune(
        "CartPole-v1",
        2,
        budget_seconds=5,
        candidates_to_try=[Candidate("multi"), Candidate("pool", {"num_workers": 2})],
        cancel=lambda: calls.append(1) or len(calls) > 1,
    )
    assert result.cancelled and len(result.measurements) == 1
    assert [c.label for c in result.skipped] == ["pool (num_workers=2)"]
    with pytest.raises(ValueError, match="nothing was measured"):
        _ = AutotuneResult("x", 1, 1, 1.0, 0.0, [], []).best


def test_an_env_factory_works_too():
    result = autotune(
        lambda: gym.make("CartPole-v1"), 2, budget_seconds=2, candidates_to_try=[Candidate("multi")]
    )
    assert result.best == Candidate("multi") and result.env_label.startswith("<factory ")


def test_runs_are_saved_in_the_results_store(tmp_path):
    with ResultsStore(tmp_path / "results.sqlite") as store:
        result = autotune(
            "CartPole-v1",
            2,
            budget_seconds=2,
            candidates_to_try=[Candidate("multi")],
            store=store,
            label="mine",
        )
        run = store.run(result.run_id)
        assert run.kind == "autotune" and run.status == "done" and run.label == "mine"
        assert len(store.measurements([result.run_id])) == 1


@pytest.mark.parametrize(
    ("num_envs", "cpus", "expected"),
    [
        (1, 8, ["multi", "subproc"]),  # one env: nothing to split
        (4, 1, ["multi", "pool-async (num_workers=1, batch_size=2)", "subproc"]),
        (
            128,
            2,
            [
                "multi",
                "pool (num_workers=2)",
                "pool-async (num_workers=2, batch_size=64)",
                "pool (num_workers=2, shared_memory=False)",
            ],
        ),  # no 128 processes on 2 CPUs
        (
            16,
            8,
            [
                "multi",
                "pool (num_workers=8)",
                "pool-async (num_workers=8, batch_size=8)",
                "pool (num_workers=4)",
                "pool (num_workers=2)",
                "pool (num_workers=8, shared_memory=False)",
                "subproc",
            ],
        ),
        (
            6,
            12,
            [
                "multi",
                "pool (num_workers=6)",
                "pool-async (num_workers=6, batch_size=3)",
                "pool (num_workers=4)",
                "pool (num_workers=2)",
                "pool (num_workers=6, shared_memory=False)",
                "subproc",
            ],
        ),  # K never above N
    ],
)
def test_candidates_are_pruned_to_what_can_win(num_envs, cpus, expected):
    assert [c.label for c in candidates(num_envs, cpus=cpus)] == expected


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget_seconds": 0}, "budget_seconds is 0"),
        ({"budget_seconds": float("nan")}, "budget_seconds is nan"),
        ({"env": "Nope-v1"}, "unknown env id 'Nope-v1'"),
        ({"env_kwargs": {"bogus": 1}}, "bogus"),
        ({"candidates_to_try": [Candidate("pool", {"num_workers": 9})]}, "num_workers=9"),
        ({"candidates_to_try": [Candidate("turbo")]}, "unknown backend 'turbo'"),
        ({"candidates_to_try": []}, "candidates_to_try is empty"),
    ],
)
def test_bad_input_is_refused_before_anything_is_measured(kwargs, match):
    arguments = {"env": "vecenvs/Costly-v0", "num_envs": 4, "budget_seconds": 1.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        autotune(**arguments)


def test_the_command_line(tmp_path, capsys):
    path = tmp_path / "autotune.json"
    code = main(
        [
            "autotune",
            "--env",
            "vecenvs/Costly-v0",
            "--env-kwarg",
            "step_seconds=0",
            "--num-envs",
            "2",
            "--budget",
            "2",
            "--no-store",
            "--json",
            str(path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "best: " in out
    assert json.loads(path.read_text())["num_envs"] == 2


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--budget", "-1"], "'-1'"),
        (["--num-envs", "0"], "'0'"),
        (["--env", "Nope-v1"], "Nope-v1"),
        (["--env", "vecenvs/Costly-v0", "--env-kwarg", "obs_size=0"], "obs_size"),
    ],
)
def test_the_command_line_refuses_bad_input_in_one_line(argv, named, capsys):
    code = main(["autotune", "--no-store", "--budget", "1", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and named in err


def test_a_close_call_is_two_medians_within_a_quarter_of_each_other():
    assert is_close_call(100.0, 81.0) and is_close_call(100.0, 100.0)
    assert not is_close_call(100.0, 80.0) and not is_close_call(100.0, 50.0)


def test_a_close_call_is_measured_again_side_by_side_with_the_loop(monkeypatch):
    # Two names for the same pool over the same sleeping envs (the step timeout changes nothing
    # while no env hangs). Whether they come out within 1.25x of each other is the machine's
    # noise: twins measured one after the other came out 320 and 253 env steps/s in CI, beside
    # the rest of the suite. So every pair is a close call here (the rule is tested above), and
    # this test is of what follows one: the real head-to-head, interleaved with the loop.
    monkeypatch.setattr(vecenvs.autotune, "CLOSE_CALL", math.inf)
    twins = [
        Candidate("pool", {"num_workers": 2}),
        Candidate("pool", {"num_workers": 2, "timeout": 120.0}),
    ]
    # A budget with room to spare: the head-to-head is left out when its estimated cost would
    # run past the budget, and on a loaded machine (CI) the estimate grows. Sleeping envs (5 ms
    # a step): two workers beat the loop by about 2x however busy the machine is.
    result = autotune(
        "vecenvs/Costly-v0",
        4,
        budget_seconds=14,
        env_kwargs={**SLEEPY, "step_seconds": 5e-3},
        candidates_to_try=twins,
    )
    medians = [round(m.median) for m in result.measurements]
    assert len(result.head_to_head) == 3, (
        f"both finalists and the loop, interleaved (medians {medians}, "
        f"{result.elapsed_seconds:.1f} s of {result.budget_seconds} s)"
    )
    labels = {
        Candidate(m.config.backend, dict(m.config.backend_kwargs)).label
        for m in result.head_to_head
    }
    assert labels == {twin.label for twin in twins} | {"multi"}
    ratios = [m.ratio for m in result.head_to_head if m.config.backend == "pool"]
    assert all(ratio > 1 for ratio in ratios), "sleeping envs: both beat the loop"
    assert result.best in twins
    assert result.table[0]["label"] == result.best.label, "the winner comes first"
    assert result.table[0]["head_to_head_vs_loop"] == max(ratios)
    assert "close call" in result.format_table()
    assert [row["label"] for row in result.to_dict()["head_to_head"]]


def test_a_clear_call_is_not_measured_again():
    # 5 ms sleeps, as in the close call's test: with 2 ms, a late wake-up under the suite's own
    # load (two test files on two CPUs) brought the pool within 1.25x of the loop.
    result = autotune(
        "vecenvs/Costly-v0",
        8,
        budget_seconds=8,
        env_kwargs={"step_seconds": 5e-3, "cost_kind": "sleep"},
        candidates_to_try=[Candidate("multi"), Candidate("pool", {"num_workers": 2})],
    )
    assert result.best.backend == "pool"
    assert result.head_to_head == [], "2 workers sleeping in parallel: about 2x, not close"


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_says_interrupted_and_keeps_the_candidates_measured(tmp_path):
    """Ctrl-C in a terminal (SIGINT to the command's process group) mid-search: exit 130, the
    candidates measured so far in the store and in --json (with the best of them), no process
    left."""
    store, output = tmp_path / "results.sqlite", tmp_path / "autotune.json"
    options = ["--num-envs", "8", "--budget", "120", "--store", str(store), "--json", str(output)]
    command = subprocess.Popen(
        [sys.executable, "-m", "vecenvs", "autotune", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        wait_until(lambda: measurements_in(store) >= 2, 90, "two candidates measured")
        time.sleep(1.0)  # into the next candidate's timed windows
        processes = press_ctrl_c(command)
        _, errors = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
    assert command.returncode == 130, errors
    assert errors.strip().splitlines()[-1] == (
        f"vecenvs autotune: interrupted (what was measured so far is saved in {store} and {output})"
    )
    # (Python may print "Exception ignored" where the interrupt lands in a fork's hooks.)
    assert "measuring failed" not in errors and "BrokenPipeError" not in errors, errors
    saved = json.loads(output.read_text())
    assert saved["stopped"] == "interrupted" and saved["cancelled"] is True
    assert len(saved["measurements"]) >= 2 and saved["best"] is not None
    assert "make_vec(" in saved["use_code"]
    with ResultsStore(store) as results:
        [run] = results.runs()
        assert run.status == "cancelled"
        assert len(results.measurements()) == len(saved["measurements"])
    left = wait_gone(processes, timeout=10)
    assert left == [], f"still running after Ctrl-C: {describe(left)}"
