"""Tests of the results store (vecenvs.bench.store), of machine info (vecenvs.bench.machine), and
of the ``python -m vecenvs results`` command.

Every test uses real SQLite files under tmp_path (conftest points ``VECENVS_STORE`` there too,
so nothing touches the home directory). Nothing here depends on how fast anything runs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import multiprocessing
import os
import pickle
import queue
import re
import sqlite3
import subprocess
import sys
import threading
import traceback
from datetime import datetime, timezone

import numpy as np
import pytest

import vecenvs
from vecenvs import cli
from vecenvs.bench import QUICK, BenchConfig, measure
from vecenvs.bench.machine import format_machine, machine_info, package_versions
from vecenvs.bench.store import (
    SCHEMA_VERSION,
    ResultsStore,
    StoreError,
    default_store_path,
)

#: The concurrent-writers test: this many processes, each adding this many measurements.
WRITERS = 4
ROWS_PER_WRITER = 50


@pytest.fixture(scope="module")
def measurement():
    """One real, quick Measurement of gymnasium's SyncVectorEnv (measured once per module)."""
    return measure(BenchConfig("CartPole-v1", num_envs=2, backend="gym-sync", **QUICK))


def synthetic(env_id="CartPole-v1", num_envs=8, backend="pool", mean=1000.0, **extra) -> dict:
    """A dict shaped like ``Measurement.to_dict()``, with made-up numbers."""
    return {
        "config": {
            "env_id": env_id,
            "num_envs": num_envs,
            "backend": backend,
            "backend_kwargs": {},
            "env_kwargs": {},
            "seed": 0,
        },
        "throughputs": [mean * 0.9, mean * 1.1],
        "mean": mean,
        "median": mean,
        "std": mean * 0.1,
        "ratio": None,
        **extra,
    }


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m vecenvs ...`` in a fresh interpreter, as a student would."""
    return subprocess.run(
        [sys.executable, "-m", "vecenvs", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- Machine info ---------------------------------------------------------------------------


def test_machine_info_describes_this_machine_in_plain_json():
    info = machine_info()

    assert json.loads(json.dumps(info)) == info  # JSON-ready, nothing lost on the way
    assert info["logical_cpus"] == os.cpu_count()
    assert 1 <= info["usable_cpus"] <= info["logical_cpus"]
    assert info["memory_bytes"] > 0
    assert info["cpu_model"] and info["hostname"] and info["python"]
    assert info["packages"]["vecenvs"] == vecenvs.__version__
    assert info["packages"]["gymnasium"]
    assert package_versions(("surely-not-an-installed-package",)) == {
        "surely-not-an-installed-package": None
    }
    summary = format_machine(info)
    assert info["cpu_model"] in summary and f"vecenvs {vecenvs.__version__}" in summary
    assert "\n" not in summary
    format_machine({})  # what an older or foreign store holds may lack every key


def test_machine_info_imports_none_of_the_packages_it_reports():
    # In a fresh interpreter: this one may have imported torch for another test already.
    code = (
        "import sys; from vecenvs.bench.machine import machine_info, PACKAGES; "
        "before = set(sys.modules); machine_info(); "
        "print(sorted(set(sys.modules) - before))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    imported = completed.stdout.strip()
    for heavy in ("torch", "envpool", "mujoco", "stable_baselines3", "plotly"):
        assert f"'{heavy}'" not in imported, f"machine_info() imported {heavy}: {imported}"


# --- Where the store is ---------------------------------------------------------------------


def test_default_store_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("VECENVS_STORE", str(tmp_path / "chosen.sqlite"))
    assert default_store_path() == tmp_path / "chosen.sqlite"

    monkeypatch.delenv("VECENVS_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_store_path() == tmp_path / "xdg" / "vecenvs" / "results.sqlite"

    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / ".local" / "share" / "vecenvs" / "results.sqlite"
    assert default_store_path() == expected


def test_store_without_a_path_uses_the_default_and_creates_it(results_store_in_tmp):
    with ResultsStore() as store:
        assert store.path == results_store_in_tmp
        assert store.runs() == []
    assert results_store_in_tmp.is_file()


# --- Writing and reading back ---------------------------------------------------------------


def test_a_real_measurement_round_trips(tmp_path, measurement):
    path = tmp_path / "new" / "dirs" / "results.sqlite"  # the directories are created
    with ResultsStore(path) as store:
        run_id = store.start_run("bench", {"env_ids": ["CartPole-v1"]}, label="first try")
        measurement_id = store.add_measurement(run_id, measurement)
        store.finish_run(run_id, summary={"overhead_seconds": 1.5e-5})

    # A new object on the same file: what was written was really saved.
    with ResultsStore(path) as store:
        run = store.run(run_id)
        rows = store.measurements()

    assert (run.kind, run.status, run.label) == ("bench", "done", "first try")
    assert run.settings == {"env_ids": ["CartPole-v1"]}
    assert run.summary == {"overhead_seconds": 1.5e-5}
    assert run.error is None
    assert run.machine["hostname"] == machine_info()["hostname"]
    assert run.machine["packages"]["vecenvs"] == vecenvs.__version__
    assert run.measurement_count == 1
    assert (run.env_ids, run.num_envs, run.backends) == (["CartPole-v1"], [2], ["gym-sync"])
    started = datetime.fromisoformat(run.started_at)
    assert started.utcoffset() == timezone.utc.utcoffset(None)  # stored in UTC
    assert started <= datetime.fromisoformat(run.finished_at)
    assert run.duration_seconds >= 0

    [row] = rows
    config = measurement.config
    assert row["measurement_id"] == measurement_id
    assert (row["run_id"], row["run_kind"], row["run_label"]) == (run_id, "bench", "first try")
    assert (row["env_id"], row["num_envs"], row["backend"]) == ("CartPole-v1", 2, "gym-sync")
    assert row["env_kwargs"] == config.env_kwargs and row["backend_kwargs"] == config.backend_kwargs
    assert row["mean"] == pytest.approx(measurement.mean)
    assert row["median"] == pytest.approx(measurement.median)
    assert row["std"] == pytest.approx(measurement.std)
    assert row["ratio"] is None
    assert row["hostname"] == run.machine["hostname"]
    # The whole measurement is in `data`, whatever fields it has.
    assert set(row["data"]) == set(measurement.to_dict())
    assert row["data"]["throughputs"] == pytest.approx(measurement.throughputs)
    assert row["data"]["config"]["repeats"] == config.repeats


def test_values_json_cannot_hold_are_stored_as_plain_json(tmp_path):
    odd = synthetic(
        mean=math.nan,
        ratio=math.inf,
        startup_seconds=np.float32(0.5),
        child_processes=np.int64(3),
        window_steps=np.array([1, 2, 3]),
        window_seconds=(0.1, math.nan),
    )
    with ResultsStore(tmp_path / "results.sqlite") as store:
        run_id = store.start_run("bench", {"timeout": math.inf})
        store.add_measurement(run_id, odd)
        [row] = store.measurements([run_id])
        text = io.StringIO()
        store.export_json(text)

    assert row["mean"] is None and row["ratio"] is None
    data = row["data"]
    assert data["mean"] is None and data["ratio"] is None
    assert data["startup_seconds"] == 0.5 and data["child_processes"] == 3
    assert data["window_steps"] == [1, 2, 3]
    assert data["window_seconds"] == [0.1, None]
    assert store.run(run_id).settings == {"timeout": None}

    def refuse(constant):
        raise AssertionError(f"exported JSON contains {constant}, which is not JSON")

    json.loads(text.getvalue(), parse_constant=refuse)


def test_a_measurement_dict_without_its_config_is_refused(tmp_path):
    with ResultsStore(tmp_path / "results.sqlite") as store:
        run_id = store.start_run("bench", {})
        with pytest.raises(StoreError, match="config"):
            store.add_measurement(run_id, {"mean": 1.0})
        with pytest.raises(StoreError, match="num_envs"):
            store.add_measurement(run_id, {"config": {"env_id": "CartPole-v1", "backend": "x"}})
        assert store.measurements() == []


def test_runs_are_listed_newest_first_with_what_they_measured(tmp_path):
    with ResultsStore(tmp_path / "results.sqlite") as store:
        first = store.start_run("bench", {})
        second = store.start_run("sweep", {})
        for env_id, num_envs, backend in [
            ("Acrobot-v1", 128, "pool"),
            ("CartPole-v1", 8, "pool"),
            ("Acrobot-v1", 8, "gym-sync"),
        ]:
            store.add_measurement(second, synthetic(env_id, num_envs, backend))
        third = store.start_run("bench", {})
        store.add_measurement(third, synthetic())

        assert [run.id for run in store.runs()] == [third, second, first]
        assert [run.measurement_count for run in store.runs()] == [1, 3, 0]
        assert [run.id for run in store.runs(limit=2)] == [third, second]
        assert [run.id for run in store.runs(kind="bench")] == [third, first]
        assert [run.id for run in store.runs(kind="bench", limit=1)] == [third]
        assert store.runs(kind="profile") == []
        assert store.kinds() == ["bench", "sweep"]

        sweep = store.run(second)
        assert sweep.env_ids == ["Acrobot-v1", "CartPole-v1"]  # in the order first measured
        assert sweep.num_envs == [8, 128]  # smallest first
        assert sweep.backends == ["pool", "gym-sync"]
        empty = store.run(first)
        assert (empty.env_ids, empty.num_envs, empty.backends) == ([], [], [])
        assert empty.status == "running" and empty.finished_at is None
        assert empty.duration_seconds is None
        with pytest.raises(StoreError, match="limit"):
            store.runs(limit=0)


def test_finish_run_records_how_the_run_ended(tmp_path):
    with ResultsStore(tmp_path / "results.sqlite") as store:
        run_id = store.start_run("bench", {})
        with pytest.raises(StoreError, match="done, cancelled, failed"):
            store.finish_run(run_id, "finished")
        assert store.run(run_id).status == "running"

        store.finish_run(run_id, "failed", error="EnvCrashedError: env 3 raised at step 7")

        run = store.run(run_id)
        assert run.status == "failed"
        assert run.error == "EnvCrashedError: env 3 raised at step 7"
        assert run.summary is None and run.finished_at is not None


def test_unknown_run_ids_are_reported_with_the_ids_the_store_has(tmp_path):
    with ResultsStore(tmp_path / "results.sqlite") as store:
        with pytest.raises(StoreError, match="unknown run id 1; .* has no runs yet"):
            store.run(1)
        for _ in range(3):
            store.start_run("bench", {})
        expected = rf"unknown run id 7; the store {store.path} has runs 1-3$"

        for call in (
            lambda: store.run(7),
            lambda: store.add_measurement(7, synthetic()),
            lambda: store.finish_run(7),
            lambda: store.measurements([1, 7]),
            lambda: store.export_csv(io.StringIO(), run_ids=[7]),
            lambda: store.export_json(io.StringIO(), run_ids=[7]),
        ):
            with pytest.raises(StoreError, match=expected):
                call()
        assert isinstance(StoreError("x"), ValueError)  # callers may catch ValueError
        with pytest.raises(StoreError, match="whole number"):
            store.run("1")


# --- Exporting ------------------------------------------------------------------------------


@pytest.fixture
def two_runs(tmp_path, measurement):
    """A store with two finished runs: one real measurement and two synthetic ones."""
    store = ResultsStore(tmp_path / "exports.sqlite")
    first = store.start_run("bench", {"seed": 0}, label="first try")
    store.add_measurement(first, measurement)
    store.add_measurement(first, synthetic("Acrobot-v1", 16, "pool", mean=2500.0))
    store.finish_run(first, summary={"best": "pool"})
    second = store.start_run("sweep", {"seed": 1})
    store.add_measurement(second, synthetic("CartPole-v1", 8, "subproc", mean=750.0, ratio=0.5))
    store.finish_run(second)
    yield store
    store.close()


def test_export_csv_has_one_line_per_measurement_with_run_and_machine(two_runs, tmp_path):
    path = tmp_path / "out.csv"

    written = two_runs.export_csv(path)

    with open(path, newline="", encoding="utf-8") as file:
        lines = list(csv.DictReader(file))
    assert written == len(lines) == 3
    machine = machine_info()
    for column in (
        "run_id",
        "run_kind",
        "run_started_at",
        "run_label",
        "hostname",
        "cpu_model",
        "logical_cpus",
        "physical_cores",
        "python",
        "env_id",
        "env_kwargs",
        "num_envs",
        "backend",
        "backend_kwargs",
        "mean",
        "median",
        "std",
        "ratio",
        "throughputs",
        "config.seed",
    ):
        assert column in lines[0], f"no column {column!r} in {list(lines[0])}"
    assert [line["run_id"] for line in lines] == ["1", "1", "2"]
    assert [line["backend"] for line in lines] == ["gym-sync", "pool", "subproc"]
    assert lines[0]["run_label"] == "first try" and lines[2]["run_label"] == ""
    assert lines[0]["hostname"] == machine["hostname"]
    assert lines[0]["cpu_model"] == machine["cpu_model"]
    assert float(lines[1]["mean"]) == 2500.0 and float(lines[2]["ratio"]) == 0.5
    assert lines[1]["ratio"] == ""  # None is an empty cell
    assert json.loads(lines[1]["throughputs"]) == [2250.0, 2750.0]
    assert json.loads(lines[0]["backend_kwargs"]) == {}
    # A field only the real measurement has: empty in the synthetic ones' lines.
    assert float(lines[0]["startup_seconds"]) >= 0 and lines[1]["startup_seconds"] == ""

    only_second = io.StringIO()
    assert two_runs.export_csv(only_second, run_ids=[2]) == 1
    [line] = csv.DictReader(io.StringIO(only_second.getvalue()))
    assert (line["run_id"], line["backend"]) == ("2", "subproc")


def test_export_json_has_runs_with_machine_settings_summary_and_measurements(two_runs, tmp_path):
    path = tmp_path / "out.json"

    assert two_runs.export_json(path) == 2

    document = json.loads(path.read_text(encoding="utf-8"))
    assert [run["id"] for run in document] == [1, 2]  # oldest first, like a log
    first, second = document
    assert first["label"] == "first try" and first["summary"] == {"best": "pool"}
    assert first["settings"] == {"seed": 0}
    assert first["machine"]["hostname"] == machine_info()["hostname"]
    assert [m["backend"] for m in first["measurements"]] == ["gym-sync", "pool"]
    assert first["measurements"][1]["data"]["throughputs"] == [2250.0, 2750.0]
    assert [m["ratio"] for m in second["measurements"]] == [0.5]

    text = io.StringIO()
    assert two_runs.export_json(text, run_ids=[2, 2]) == 1
    assert [run["id"] for run in json.loads(text.getvalue())] == [2]


# --- Paths and files that can't be used -----------------------------------------------------


def _text_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 20)
    return path


def _newer_store(tmp_path):
    path = tmp_path / "newer.sqlite"
    ResultsStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    connection.close()
    return path


def _other_database(tmp_path):
    path = tmp_path / "other-app.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE contacts (name TEXT)")
    connection.close()
    return path


@pytest.mark.parametrize(
    "make_path, complaint",
    [
        (lambda tmp_path: tmp_path, "is a directory"),
        (lambda tmp_path: _text_file(tmp_path) / "results.sqlite", "is a file, not a directory"),
        (lambda tmp_path: _text_file(tmp_path) / "sub" / "results.sqlite", "is a file, not a dir"),
        (_text_file, "is not a SQLite database"),
        (_newer_store, "newer than this vecenvs understands"),
        (_other_database, "database of something else"),
    ],
    ids=[
        "directory",
        "under-a-file",
        "deep-under-a-file",
        "text-file",
        "newer-schema",
        "other-database",
    ],
)
def test_unusable_paths_are_refused_when_the_store_is_created(tmp_path, make_path, complaint):
    path = make_path(tmp_path)
    existing = path.read_bytes() if path.is_file() else None

    with pytest.raises(StoreError, match=complaint) as raised:
        ResultsStore(path)

    message = str(raised.value)
    assert str(path) in message and "\n" not in message
    if existing is not None:  # someone else's file is left exactly as it was
        assert path.read_bytes() == existing


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_directory_that_cannot_be_created_is_refused():
    # Tests may run as root, for whom permissions deny nothing; /proc refuses even root.
    with pytest.raises(StoreError, match="/proc/vecenvs-test"):
        ResultsStore("/proc/vecenvs-test/results.sqlite")


def test_an_empty_file_becomes_a_store(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.touch()  # e.g. made by `touch`: SQLite sees an empty database
    with ResultsStore(path) as store:
        assert store.runs() == []
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()


# --- Several processes and threads at once --------------------------------------------------


def _write_concurrently(path, writer, barrier, results):
    """One writer process: wait for all, then open the store and write as fast as possible."""
    try:
        barrier.wait(timeout=60)
        # Opened only now, at the same moment as the others: creating the file and its tables
        # is part of what must survive the race.
        store = ResultsStore(path)
        run_id = store.start_run("test", {"writer": writer})
        for index in range(ROWS_PER_WRITER):
            store.add_measurement(run_id, synthetic(num_envs=index + 1, writer=writer, index=index))
        store.finish_run(run_id)
        store.close()
        results.put((writer, True, run_id))
    except BaseException:
        results.put((writer, False, traceback.format_exc()))


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "shared.sqlite"
    # Separate processes, like a CLI run, the dashboard's benchmark process and a notebook
    # writing to the same file. fork starts them quickest; each opens the store itself.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    barrier = context.Barrier(WRITERS)
    results = context.Queue()
    processes = [
        context.Process(target=_write_concurrently, args=(str(path), writer, barrier, results))
        for writer in range(WRITERS)
    ]
    try:
        for process in processes:
            process.start()
        outcomes = []
        for _ in processes:
            try:
                outcomes.append(results.get(timeout=120))
            except queue.Empty:
                pytest.fail(f"a writer did not report within 120 s; got {outcomes}")
        failures = [detail for _, ok, detail in outcomes if not ok]
        assert not failures, "a writer failed:\n" + "\n".join(failures)
        for process in processes:
            process.join(timeout=30)
            assert process.exitcode == 0
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)

    with ResultsStore(path) as store:
        runs = store.runs()
        rows = store.measurements()
    run_of_writer = {writer: run_id for writer, _, run_id in outcomes}
    assert sorted(run.id for run in runs) == sorted(run_of_writer.values())
    assert all(run.status == "done" for run in runs)
    assert all(run.measurement_count == ROWS_PER_WRITER for run in runs)
    assert len(rows) == WRITERS * ROWS_PER_WRITER
    assert len({row["measurement_id"] for row in rows}) == len(rows)  # no id given twice
    written = {(row["data"]["writer"], row["data"]["index"]) for row in rows}
    assert written == {(w, i) for w in range(WRITERS) for i in range(ROWS_PER_WRITER)}
    for row in rows:  # each measurement is in its own writer's run, intact
        assert row["run_id"] == run_of_writer[row["data"]["writer"]]
        assert row["num_envs"] == row["data"]["index"] + 1


def test_threads_can_share_one_store(tmp_path):
    store = ResultsStore(tmp_path / "results.sqlite")
    run_id = store.start_run("test", {})
    errors = []

    def write(thread):
        try:
            for index in range(25):
                store.add_measurement(run_id, synthetic(thread=thread, index=index))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert store.run(run_id).measurement_count == 100
    store.close()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_store_can_be_pickled_and_used_after_fork(tmp_path):
    store = ResultsStore(tmp_path / "results.sqlite")
    run_id = store.start_run("test", {})

    copy = pickle.loads(pickle.dumps(store))
    assert copy.path == store.path
    copy.add_measurement(run_id, synthetic(backend="from-the-copy"))
    copy.close()

    # The forked child inherits `store` with its open connection, and must open its own.
    child = multiprocessing.get_context("fork").Process(
        target=store.add_measurement, args=(run_id, synthetic(backend="from-a-child"))
    )
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0

    store.add_measurement(run_id, synthetic(backend="from-the-parent"))
    assert store.run(run_id).backends == ["from-the-copy", "from-a-child", "from-the-parent"]
    store.close()
    store.close()  # twice is fine
    assert store.run(run_id).measurement_count == 3  # and using it again reopens it
    store.close()


# --- The command line -----------------------------------------------------------------------


def test_cli_list_show_and_export(two_runs, tmp_path):
    store = str(two_runs.path)

    listed = run_cli("results", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:4] == ["id", "started", "kind", "status"]
    assert lines[2].split()[0] == "2" and lines[3].split()[0] == "1"  # newest first
    assert "first try" in lines[3] and "CartPole-v1, Acrobot-v1" in lines[3]

    shown = run_cli("results", "show", "1", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "run 1: bench, done" in shown.stdout
    assert machine_info()["cpu_model"] in shown.stdout
    assert 'best: "pool"' in shown.stdout  # the summary
    table = shown.stdout[shown.stdout.index("measurements (2)") :]
    assert "gym-sync" in table and "Acrobot-v1" in table and "2,500 ± 250" in table

    exported = run_cli("results", "export", "--format", "json", "--run", "2", "--store", store)
    assert exported.returncode == 0, exported.stderr
    assert [run["id"] for run in json.loads(exported.stdout)] == [2]

    output = tmp_path / "all.csv"
    exported = run_cli("results", "export", "-o", str(output), "--store", store)
    assert exported.returncode == 0, exported.stderr
    assert "wrote 3 measurements" in exported.stdout
    with open(output, newline="", encoding="utf-8") as file:
        assert len(list(csv.DictReader(file))) == 3


def test_cli_list_without_a_store_says_so_and_creates_nothing(results_store_in_tmp):
    listed = run_cli("results", "list")  # VECENVS_STORE points at a file not made yet

    assert listed.returncode == 0, listed.stderr
    assert f"no results yet in {results_store_in_tmp}" in listed.stdout
    assert "python -m vecenvs bench" in listed.stdout
    assert not results_store_in_tmp.exists()


@pytest.mark.parametrize(
    "arguments, complaint",
    [
        (["show", "9", "--store", "{store}"], "unknown run id 9; the store .* has runs 1-2"),
        (
            ["export", "--format", "csv", "--run", "1", "9", "--store", "{store}"],
            "unknown run id 9",
        ),
        (["list", "--store", "{text_file}"], "is not a SQLite database"),
        (["list", "--store", "{tmp}"], "is a directory"),
        (["show", "1", "--store", "{tmp}/never-made.sqlite"], "no results yet"),
        (
            ["export", "--format", "csv", "-o", "{text_file}/out.csv", "--store", "{store}"],
            "does not exist",
        ),
        (["export", "--format", "csv", "-o", "{tmp}", "--store", "{store}"], "is a directory"),
        (["export", "-o", "{tmp}/out.txt", "--store", "{store}"], "--format csv or --format json"),
    ],
    ids=[
        "show-unknown-id",
        "export-unknown-id",
        "not-a-database",
        "store-is-a-directory",
        "no-store-yet",
        "output-under-a-file",
        "output-is-a-directory",
        "no-format",
    ],
)
def test_cli_bad_input_is_one_line_and_exit_code_2(two_runs, tmp_path, arguments, complaint):
    places = {"store": two_runs.path, "text_file": _text_file(tmp_path), "tmp": tmp_path}
    before = sorted(tmp_path.iterdir())

    completed = run_cli("results", *(argument.format(**places) for argument in arguments))

    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert "Traceback" not in completed.stderr
    [line] = completed.stderr.splitlines()
    assert line.startswith("vecenvs results ") and ": error: " in line
    assert re.search(complaint, line), line
    assert completed.stdout == ""
    assert sorted(tmp_path.iterdir()) == before  # no output file, no store created


def test_cli_help_tells_a_newcomer_where_the_store_is(capsys, results_store_in_tmp):
    assert cli.main(["results", "--help"]) == 0
    text = capsys.readouterr().out
    assert str(results_store_in_tmp) in text and "VECENVS_STORE" in text
    for action in ("list", "show", "export"):
        assert action in text
        assert cli.main(["results", action, "--help"]) == 0
        assert "--store PATH" in capsys.readouterr().out
    assert cli.main(["results"]) == 2  # an action is required
    assert "ACTION" in capsys.readouterr().err
