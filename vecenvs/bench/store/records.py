"""Rows in, records out: how a measurement becomes a row, and how runs and measurements are
read back (as :class:`RunRecord` and as flat rows), each run id checked on the way."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from vecenvs.bench.store.values import StoreError, from_json, plain, run_ids, to_json, whole_number

#: The measurement columns saying what was measured, and those saying how fast it went.
CONFIG_COLUMNS = ("env_id", "env_kwargs", "num_envs", "backend", "backend_kwargs")
NUMBER_COLUMNS = ("mean", "median", "std", "ratio")
#: The measurement columns, in the order they are listed and exported.
MEASUREMENT_COLUMNS = (*CONFIG_COLUMNS, *NUMBER_COLUMNS)
#: Facts about the run, and about its machine, copied into every flat measurement row.
RUN_COLUMNS = ("run_kind", "run_status", "run_started_at", "run_label")
MACHINE_COLUMNS = ("hostname", "cpu_model", "logical_cpus", "physical_cores", "python")


class Measurement(Protocol):
    """What the store needs of a measurement (:class:`vecenvs.bench.Measurement` is one): its
    JSON-ready form. The engine, which produces them, stands above the store, not below."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass
class RunRecord:
    """One run as the store knows it: what :meth:`ResultsStore.run` and ``runs`` return."""

    id: int  # as ``python -m vecenvs results show`` takes it
    kind: str  # what made the run: "bench", "sweep", "profile", ...
    status: str  # "running", "done", "cancelled" or "failed"
    started_at: str  # ISO-8601 in UTC
    finished_at: str | None  # ISO-8601 in UTC; None while running
    label: str | None  # the user's name for the run
    settings: Any  # what was asked for, as given to start_run (decoded JSON)
    machine: dict[str, Any]  # a machine_info() dict of the machine that ran it
    summary: Any  # the result of the whole run given to finish_run, or None
    error: str | None  # why the run failed
    measurement_count: int
    env_ids: list[str]  # the env ids measured, in the order first measured
    num_envs: list[int]  # the values of N measured, smallest first
    backends: list[str]  # the backends measured, in the order first measured
    pid: int | None = None  # the process that started it (None in schema version 1 runs)
    host: str | None = None  # the host name of that process

    @property
    def duration_seconds(self) -> float | None:
        """Seconds from start to finish; ``None`` while the run is not finished."""
        if self.finished_at is None:
            return None
        started = datetime.fromisoformat(self.started_at)
        return (datetime.fromisoformat(self.finished_at) - started).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def measurement_columns(measurement: Measurement | Mapping[str, Any]) -> dict[str, Any]:
    """The columns of a Measurement (or of its to_dict()): its key columns, and ``data``."""
    data = plain(measurement if isinstance(measurement, Mapping) else measurement.to_dict())
    config = data.get("config")
    if not isinstance(config, dict):
        raise StoreError(
            "a measurement dict needs a 'config' dict, as Measurement.to_dict() "
            f"gives; got keys {sorted(data)}"
        )
    missing = [key for key in ("env_id", "num_envs", "backend") if key not in config]
    if missing:
        raise StoreError(f"the measurement's config has no {', '.join(missing)}")
    return {
        "env_id": str(config["env_id"]),
        "env_kwargs": to_json(config.get("env_kwargs") or {}),
        "num_envs": whole_number("num_envs", config["num_envs"]),
        "backend": str(config["backend"]),
        "backend_kwargs": to_json(config.get("backend_kwargs") or {}),
        **{name: _number(data.get(name)) for name in NUMBER_COLUMNS},
        "data": to_json(data),
    }


def _number(value: Any) -> float | None:
    """``None`` for a missing, non-numeric or non-finite value."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return plain(float(value))
    except (TypeError, ValueError):
        return None


#: ``column`` is one of the run ids in the JSON list ``:ids``, or ``:ids`` is NULL (all runs).
_IN_IDS = "(:ids IS NULL OR {column} IN (SELECT value FROM json_each(:ids)))"


def _ids_json(ids: list[int] | None) -> str | None:
    return None if ids is None else to_json(ids)


def require_runs(connection: sqlite3.Connection, path: Path, ids: Iterable[Any]) -> list[int]:
    """The run ids, each once and checked; StoreError (saying which ids the store has) for one
    that is not a whole number or not in the store."""
    checked = run_ids(ids)
    for run_id in checked:
        if connection.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            low, high, count = connection.execute(
                "SELECT min(id), max(id), count(*) FROM runs"
            ).fetchone()
            if count == 0:
                has = "has no runs yet"
            else:
                has = f"has only run {low}" if low == high else f"has runs {low}-{high}"
            raise StoreError(f"unknown run id {run_id}; the store {path} {has}")
    return checked


def select_runs(
    connection: sqlite3.Connection,
    *,
    ids: list[int] | None = None,
    kind: str | None = None,
    newest_first: bool = True,
    limit: int | None = None,
) -> list[RunRecord]:
    """The runs with these ids (``None``: all) of this kind (``None``: any), as RunRecords."""
    order = "DESC" if newest_first else "ASC"
    selected = (
        f"SELECT id FROM runs WHERE {_IN_IDS.format(column='id')} "
        f"AND (:kind IS NULL OR kind = :kind) ORDER BY id {order} LIMIT :limit"
    )
    parameters = {"ids": _ids_json(ids), "kind": kind, "limit": -1 if limit is None else limit}
    records = connection.execute(
        "SELECT runs.*, (SELECT count(*) FROM measurements WHERE run_id = runs.id) AS count "
        f"FROM runs WHERE id IN ({selected}) ORDER BY id {order}",
        parameters,
    ).fetchall()
    # What each run measured: every distinct (env, N, backend), in the order first measured.
    measured: dict[int, list[sqlite3.Row]] = {record["id"]: [] for record in records}
    for row in connection.execute(
        "SELECT run_id, env_id, num_envs, backend, min(id) AS first FROM measurements "
        f"WHERE run_id IN ({selected}) GROUP BY run_id, env_id, num_envs, backend ORDER BY first",
        parameters,
    ):
        measured[row["run_id"]].append(row)
    plain_columns = ("id", "kind", "status", "started_at", "finished_at", "label", "error")
    return [
        RunRecord(
            **{name: record[name] for name in (*plain_columns, "pid", "host")},
            settings=from_json(record["settings"]),
            machine=from_json(record["machine"]) or {},
            summary=from_json(record["summary"]),
            measurement_count=record["count"],
            env_ids=list(dict.fromkeys(row["env_id"] for row in measured[record["id"]])),
            num_envs=sorted({row["num_envs"] for row in measured[record["id"]]}),
            backends=list(dict.fromkeys(row["backend"] for row in measured[record["id"]])),
        )
        for record in records
    ]


def measurement_rows(connection: sqlite3.Connection, ids: list[int] | None) -> list[dict[str, Any]]:
    """Flat measurement rows (see :meth:`ResultsStore.measurements`) of the runs ``ids``, which
    the caller has checked (``None``: all runs), by run, then in the order added."""
    query = (
        "SELECT m.*, r.kind AS run_kind, r.status AS run_status, "
        "r.started_at AS run_started_at, r.label AS run_label, r.machine AS run_machine "
        "FROM measurements AS m JOIN runs AS r ON r.id = m.run_id"
    )
    query += f" WHERE {_IN_IDS.format(column='m.run_id')} ORDER BY m.run_id, m.id"
    machines: dict[int, dict[str, Any]] = {}  # decode each run's machine once
    rows = []
    for record in connection.execute(query, {"ids": _ids_json(ids)}):
        run_id = record["run_id"]
        if run_id not in machines:
            machines[run_id] = from_json(record["run_machine"]) or {}
        rows.append(
            {
                "run_id": run_id,
                **{name: record[name] for name in RUN_COLUMNS},
                **{name: machines[run_id].get(name) for name in MACHINE_COLUMNS},
                "measurement_id": record["id"],
                "recorded_at": record["recorded_at"],
                **{name: record[name] for name in MEASUREMENT_COLUMNS},
                "env_kwargs": from_json(record["env_kwargs"]),
                "backend_kwargs": from_json(record["backend_kwargs"]),
                "data": from_json(record["data"]),
            }
        )
    return rows
