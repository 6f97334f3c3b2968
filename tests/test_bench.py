"""Tests of the measuring engine (vecenvs.bench) and of the ``python -m vecenvs bench`` command.

The machine running these is shared and noisy, so nothing here says how fast anything is:
only that the numbers exist, are positive, and land in the right fields.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import sys
import time

import psutil
import pytest
from conftest import describe, measurements_in, press_ctrl_c, wait_gone, wait_until

from vecenvs import cli
from vecenvs.bench import QUICK, BenchConfig, Measurement, compare, engine, measure
from vecenvs.bench.store import ResultsStore


def quick_config(**overrides) -> BenchConfig:
    return BenchConfig(**{"env_id": "CartPole-v1", "num_envs": 3, **QUICK, **overrides})


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m vecenvs ...`` in a fresh interpreter, as a student would."""
    return subprocess.run(
        [sys.executable, "-m", "vecenvs", *args], capture_output=True, text=True, timeout=90
    )


# --- measure() -----------------------------------------------------------------------------


@pytest.mark.parametrize("backend, in_process", [("gym-sync", True), ("gym-async", False)])
def test_measure_fills_every_field(backend, in_process):
    config = quick_config(backend=backend)

    result = measure(config)

    assert isinstance(result, Measurement)
    assert result.config is config
    assert len(result.throughputs) == len(result.window_steps) == len(result.window_seconds)
    assert len(result.throughputs) == config.repeats
    assert all(throughput > 0 for throughput in result.throughputs)
    assert all(isinstance(steps, int) and steps >= 1 for steps in result.window_steps)
    assert all(seconds > 0 for seconds in result.window_seconds)
    # Throughput counts individual env steps: num_envs per step() call.
    for throughput, steps, seconds in zip(
        result.throughputs, result.window_steps, result.window_seconds
    ):
        assert throughput == pytest.approx(config.num_envs * steps / seconds)
    assert result.mean > 0 and result.median > 0 and result.std >= 0
    assert result.startup_seconds >= 0
    assert result.parent_cpu_seconds >= 0 and result.children_cpu_seconds >= 0
    assert result.rss_bytes > 0
    assert result.ratio is None  # only compare() has a reference to divide by
    if in_process:
        assert result.child_processes == 0
        assert result.children_cpu_seconds == 0
        assert result.children_uss_bytes == 0
    else:
        assert result.child_processes >= config.num_envs  # one worker per env, maybe helpers
        assert result.children_uss_bytes is None or result.children_uss_bytes > 0
    assert result.processes == 1 + result.child_processes
    json.dumps(result.to_dict())  # plain values only, ready for a results file


def test_measure_leaves_no_worker_processes_behind():
    before = {process.pid for process in psutil.Process().children(recursive=True)}

    measure(quick_config(backend="gym-async"))

    left = [
        process
        for process in psutil.Process().children(recursive=True)
        if process.pid not in before and process.status() != psutil.STATUS_ZOMBIE
    ]
    assert left == []


def test_measure_closes_the_env_when_stepping_fails(monkeypatch):
    closed = []

    class FailingEnvs:
        """Wraps a real vector env; its third step raises, as a crashing env would."""

        def __init__(self, envs):
            self.envs, self.steps = envs, 0
            self.action_space = envs.action_space

        def reset(self, **kwargs):
            return self.envs.reset(**kwargs)

        def step(self, actions):
            self.steps += 1
            if self.steps == 3:
                raise RuntimeError("env exploded")
            return self.envs.step(actions)

        def close(self):
            closed.append(True)
            self.envs.close()

    real_make_vec = engine.make_vec
    monkeypatch.setattr(engine, "make_vec", lambda *a, **k: FailingEnvs(real_make_vec(*a, **k)))

    with pytest.raises(RuntimeError, match="env exploded"):
        measure(quick_config())
    assert closed == [True]


# --- compare() -----------------------------------------------------------------------------


@pytest.mark.parametrize("interleave", [True, False])
def test_compare_adds_the_reference_last_with_ratio_one(interleave):
    results = compare("CartPole-v1", 2, ["gym-async"], interleave=interleave, **QUICK)

    assert [result.config.backend for result in results] == ["gym-async", "gym-sync"]
    assert results[-1].ratio == 1.0
    # The speed-up is the ratio of the throughputs shown (median windows); the window-by-window
    # ratios are kept as its spread.
    assert results[0].ratio == results[0].throughput / results[1].throughput
    assert results[0].throughput == statistics.median(results[0].throughputs)
    assert results[0].paired_ratios == pytest.approx(
        [a / b for a, b in zip(results[0].throughputs, results[1].throughputs)]
    )
    for result in results:
        assert len(result.throughputs) == QUICK["repeats"]
        assert result.ratio > 0 and math.isfinite(result.ratio)


def test_compare_keeps_the_order_given_and_does_not_measure_the_reference_twice():
    results = compare("CartPole-v1", 2, ["gym-sync", "gym-async"], **QUICK)

    assert [result.config.backend for result in results] == ["gym-sync", "gym-async"]
    assert results[0].ratio == 1.0


def test_compare_passes_backend_kwargs_to_that_backend_only():
    results = compare(
        "CartPole-v1", 2, ["gym-async"], backend_kwargs={"gym-async": {"context": "fork"}}, **QUICK
    )

    assert results[0].config.backend_kwargs == {"context": "fork"}
    assert results[1].config.backend_kwargs == {}


# --- validation: before any env is built ---------------------------------------------------


@pytest.fixture
def no_env_may_be_built(monkeypatch):
    """Fail the test if validation lets anything through to make_vec."""

    def forbidden(*args, **kwargs):
        raise AssertionError("make_vec was called before the configuration was validated")

    monkeypatch.setattr(engine, "make_vec", forbidden)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"backend": "turbo"}, "unknown backend 'turbo'"),
        ({"env_id": "Cartpole-v1"}, "unknown env id 'Cartpole-v1'"),
        ({"env_id": "NoSuchEnv-v0"}, "unknown env id 'NoSuchEnv-v0'"),
        ({"num_envs": 0}, "num_envs is 0: expected a whole number >= 1"),
        ({"num_envs": 2.5}, "num_envs is 2.5 (float): expected a whole number >= 1"),
        ({"repeats": 0}, "repeats is 0: expected a whole number >= 1"),
        ({"measure_seconds": 0}, "measure_seconds is 0: expected a finite number of seconds > 0"),
        (
            {"measure_seconds": -1.0},
            "measure_seconds is -1.0: expected a finite number of seconds > 0",
        ),
        (
            {"measure_seconds": float("nan")},
            "measure_seconds is nan: expected a finite number of seconds > 0",
        ),
        (
            {"warmup_seconds": -0.5},
            "warmup_seconds is -0.5: expected a finite number of seconds >= 0",
        ),
        ({"backend_kwargs": [("num_workers", 2)]}, "backend_kwargs must be a dict"),
        (
            {"backend": "pool", "num_envs": 1, "backend_kwargs": {"num_workers": 2}},
            "pool with num_workers=2 cannot step N=1 env(s)",
        ),
    ],
)
def test_measure_rejects_bad_configs_before_building_anything(
    no_env_may_be_built, overrides, message
):
    with pytest.raises(ValueError, match=re.escape(message)):
        measure(quick_config(**overrides))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"backends": []}, "backends is empty"),
        ({"backends": ["gym-async", "gym-async"]}, "more than once: gym-async"),
        ({"backends": ["gym-async"], "reference": "nope"}, "unknown reference backend 'nope'"),
        ({"backends": ["gym-async"], "backend_kwargs": {"pool": {}}}, "not being measured"),
        ({"backends": ["nope"]}, "unknown backend 'nope'"),
        (
            {"backends": ["gym-async"], "num_envs": -4},
            "num_envs is -4: expected a whole number >= 1",
        ),
        ({"backends": ["gym-async"], "env_id": "Nope-v9"}, "unknown env id 'Nope-v9'"),
        ({"backends": ["gym-async"], "repeats": 0}, "repeats is 0: expected a whole number >= 1"),
    ],
)
def test_compare_rejects_bad_arguments_before_building_anything(
    no_env_may_be_built, kwargs, message
):
    arguments = {"env_id": "CartPole-v1", "num_envs": 2, **QUICK, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        compare(**arguments)


# --- the command line ----------------------------------------------------------------------


def test_cli_bench_prints_a_table_and_writes_json(tmp_path):
    out = tmp_path / "results.json"

    done = run_cli(
        "bench",
        "--quick",
        "--env",
        "CartPole-v1",
        "--num-envs",
        "2",
        "--backend",
        "gym-async",
        "--backend",
        "gym-async-shm",
        "--json",
        str(out),
    )

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    table = done.stdout.split("How to read")[0]  # the per-point table, before the summaries
    assert "CartPole-v1, N=2" in table
    for column in ("backend", "steps/s", "x gym-sync", "startup s", "procs", "RSS MB", "CPU s"):
        assert column in table
    rows = {line.split()[0]: line for line in table.splitlines() if line[:4] == "gym-"}
    assert set(rows) == {"gym-async", "gym-async-shm", "gym-sync"}
    assert " 1.00 " in rows["gym-sync"]  # the reference's own ratio
    document = json.loads(out.read_text())
    assert document["cpu_count"] >= 1
    # How the file was made, which a results page shows beside its numbers (docs/gen_results.py).
    run = document["run"]
    assert run["command"].startswith("vecenvs bench --quick --env CartPole-v1"), run
    assert run["started"] < run["finished"] and run["elapsed_seconds"] > 0, run
    assert re.fullmatch(r"[0-9a-f]{40}\+?", run["commit"]), run  # this checkout's commit
    assert run["load_before"] is None or run["load_before"] >= 0, run
    backends = [result["config"]["backend"] for result in document["results"]]
    assert backends == ["gym-async", "gym-async-shm", "gym-sync"]
    assert document["results"][-1]["ratio"] == 1.0
    assert str(out) in run["command"], run
    assert run["load_after"] is None or run["load_after"] >= 0, run
    # After the tables: the speed-ups, the verdict, and where the run was saved. One N fits
    # every backend's two numbers exactly: no model table, no fit quality per backend (R^2
    # -12.6, "med. error 313.5%"), one line saying why and what would show it.
    assert "speed-up over gym-sync" in done.stdout
    assert done.stdout.count("Overhead model") == 1
    assert (
        "Overhead model: too few points to judge it: 1 point(s) of env and N for 2 numbers "
        "(t_env per env and t_os); measure at 3 or more values of N to see it."
    ) in done.stdout
    assert "R^2" not in done.stdout and "med. error" not in done.stdout
    assert re.search(r"saved as run \d+", done.stdout)


@pytest.mark.parametrize(
    "args, message",
    [
        (["bench", "--num-envs", "0"], "--num-envs"),
        (["bench", "--num-envs", "many"], "--num-envs"),
        (["bench", "--backend", "turbo"], "turbo"),
        (["bench", "--env", "Cartpole-v1"], "unknown env id 'Cartpole-v1'"),
        (["bench", "--seconds", "-1"], "--seconds"),
        (["bench", "--env-kwarg", "no-equals-sign"], "KEY=VALUE"),
        (["bench", "--json", "/no/such/directory/out.json"], "does not exist"),
        (["bench", "--html", "/no/such/directory/out.html"], "does not exist"),
        (["bench", "--warmup", "-0.5"], "--warmup"),
        ([], "command"),
    ],
)
def test_cli_bad_input_exits_2_with_a_one_line_message(args, message):
    done = run_cli(*args)

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    error_lines = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and message in error_lines[0], done.stderr
    assert done.stdout == ""  # nothing was measured


def test_cli_reports_a_failing_backend_without_a_traceback(capsys, tmp_path):
    # The env raises on its 50th step, during the measuring, not while being checked.
    code = cli.main(
        [
            "bench",
            "--quick",
            "--num-envs",
            "2",
            "--backend",
            "multi",
            "--env",
            "vecenvs/Faulty-v0",
            "--env-kwarg",
            "fail_on='step'",
            "--env-kwarg",
            "at=50",
            "--store",
            str(tmp_path / "r.sqlite"),
        ]
    )

    captured = capsys.readouterr()
    assert code == 1
    assert "error:" in captured.err and "deliberate failure in step" in captured.err
    # The env's own traceback is the useful one (which env, which line); ours is not shown.
    assert "env 1 raised RuntimeError during step" in captured.err
    assert "Traceback from the env" in captured.err
    assert "vecenvs/cli" not in captured.err


def test_cli_rejects_an_argument_the_env_does_not_take_before_measuring():
    # CartPole has no `bogus` argument: the env is built once while checking the input.
    done = run_cli(
        "bench", "--quick", "--num-envs", "2", "--backend", "gym-sync", "--env-kwarg", "bogus=1"
    )

    assert done.returncode == 2
    assert "cannot make CartPole-v1 (bogus=1)" in done.stderr and "bogus" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_cli_main_returns_instead_of_exiting(capsys):
    assert cli.main(["bench", "--help"]) == 0
    assert "--num-envs" in capsys.readouterr().out
    assert cli.main(["bench", "--repeats", "0"]) == 2


def test_compare_accepts_arguments_for_the_reference_backend():
    # e.g. the async pool against the sync pool with the same K: the reference has kwargs.
    results = compare(
        "CartPole-v1",
        4,
        [("pool", {"shared_memory": False})],
        reference="pool",
        backend_kwargs={"pool": {"num_workers": 2}},
        warmup_seconds=0.0,
        measure_seconds=0.05,
        repeats=2,
    )
    reference = results[-1]
    assert reference.config.backend_kwargs == {"num_workers": 2}
    assert reference.ratio == 1.0
    assert results[0].config.backend_kwargs == {"num_workers": 2, "shared_memory": False}
    assert results[0].paired_ratios == [
        a / b for a, b in zip(results[0].throughputs, reference.throughputs)
    ]


# --- the ceiling ---------------------------------------------------------------------------


def test_the_ceiling_is_measured_side_by_side_and_gives_every_row_its_efficiency():
    before = {child.pid for child in psutil.Process().children(recursive=True)}

    results = compare("CartPole-v1", 4, ["multi", ("ceiling", {"num_workers": 8})], **QUICK)

    multi, ceiling, reference = results
    assert ceiling.config.backend_label == "ceiling (num_workers=8)"
    # min(K, N) processes, each stepping its share; the caller only starts and stops them.
    assert ceiling.workers == ceiling.child_processes == 4
    assert ceiling.mean > 0 and len(ceiling.throughputs) == QUICK["repeats"]
    assert ceiling.efficiency == 1.0
    for result in (multi, reference):
        assert result.efficiency == result.throughput / ceiling.throughput
    assert (
        psutil.wait_procs(
            [p for p in psutil.Process().children(recursive=True) if p.pid not in before], timeout=5
        )[1]
        == []
    )


def test_without_a_ceiling_there_is_no_efficiency():
    results = compare("CartPole-v1", 2, ["multi"], **QUICK)
    assert [result.efficiency for result in results] == [None, None]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_workers": 0}, "the ceiling's num_workers is 0: expected a whole number >= 1"),
        ({"shared_memory": True}, "the ceiling takes only num_workers, start_method, timeout"),
    ],
)
def test_bad_ceiling_arguments_are_refused_before_anything_starts(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        measure(quick_config(backend="ceiling", backend_kwargs=kwargs))


def test_a_crash_in_a_ceiling_process_arrives_with_its_traceback_and_leaves_nothing():
    config = quick_config(
        env_id="vecenvs/Faulty-v0",
        num_envs=2,
        backend="ceiling",
        env_kwargs={"fail_on": "step", "at": 5},
    )
    before = {child.pid for child in psutil.Process().children(recursive=True)}

    # Every env fails at its 5th step, so either process may be the first to report.
    with pytest.raises(RuntimeError, match="ceiling process [01] failed while stepping") as error:
        measure(config)

    assert "deliberate failure in step" in str(error.value)
    assert (
        psutil.wait_procs(
            [p for p in psutil.Process().children(recursive=True) if p.pid not in before], timeout=5
        )[1]
        == []
    )


def test_cli_bench_measures_the_ceiling_prints_the_verdict_and_stores_efficiency(tmp_path, capsys):
    store = tmp_path / "r.sqlite"

    code = cli.main(
        [
            "bench",
            "--quick",
            *("--num-envs", "2", "--num-envs", "4", "--num-envs", "8"),  # a model to judge
            "--backend",
            "multi",
            "--backend",
            "ceiling",
            "--store",
            str(store),
        ]
    )

    out = capsys.readouterr().out
    assert code == 0
    table = out.split("How to read")[0]
    assert "of ceiling" in table
    rows = {
        line.split()[0]: line
        for line in table.splitlines()
        if line.split() and line.split()[0] in ("multi", "ceiling", "gym-sync")
    }
    assert set(rows) == {"multi", "ceiling", "gym-sync"}
    assert " 100% " in rows["ceiling"]
    verdict = out.split("Verdict (what to use at each point")[1].splitlines()
    assert verdict[1].split()[:3] == ["env", "N", "use"]
    assert verdict[2].startswith("CartPole-v1  2  ")
    assert "ceiling (steps/s)" in out and "~" not in out.split("ceiling (steps/s)")[1][:200]
    code = cli.main(["results", "show", "1", "--store", str(store)])
    shown = capsys.readouterr().out
    assert code == 0 and "of ceiling" in shown and "100%" in shown


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_during_a_sweep_says_interrupted_keeps_what_was_measured_and_leaves_nothing(
    tmp_path,
):
    """Ctrl-C in a terminal reaches every process of the command: gymnasium's workers die of
    it and closing them then broke a pipe, so the command said "measuring failed:
    BrokenPipeError". It is an interruption: exit 130, what was measured is in the store and
    in --json, and no process is left."""
    store, output = tmp_path / "results.sqlite", tmp_path / "results.json"
    grid = ["--num-envs", "2", "--num-envs", "4", "--num-envs", "8", "--num-envs", "16"]
    backends = ["--backend", "pool", "--backend", "gym-async", "--backend", "ceiling"]
    options = ["--quick", "--repeats", "10", "--store", str(store), "--json", str(output)]
    command = subprocess.Popen(
        [sys.executable, "-m", "vecenvs", "bench", *grid, *backends, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        wait_until(lambda: measurements_in(store) > 0, 90, "a first point measured")
        time.sleep(2.0)  # into the timed windows of the next: gymnasium's workers idle between
        processes = press_ctrl_c(command)
        _, errors = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
    assert command.returncode == 130, errors
    assert errors.strip().splitlines()[-1] == (
        f"vecenvs bench: interrupted (what was measured so far is saved in {store} and {output})"
    )
    # (Python may print "Exception ignored" where the interrupt lands in a fork's hooks.)
    assert "measuring failed" not in errors and "BrokenPipeError" not in errors, errors
    with ResultsStore(store) as results:
        [run] = results.runs()
        rows = results.measurements()
    assert run.status == "cancelled" and len(rows) >= 4, (run.status, len(rows))
    saved = json.loads(output.read_text())
    assert saved["run"]["stopped"] == "interrupted"
    assert len(saved["results"]) == len(rows)  # the same points, whole
    left = wait_gone(processes, timeout=10)
    assert left == [], f"still running after Ctrl-C: {describe(left)}"
