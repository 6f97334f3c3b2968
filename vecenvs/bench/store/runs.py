"""The run lifecycle: a run starts ``running``, gathers measurements, and ends ``done``,
``cancelled`` or ``failed``; :func:`recording` is the one way code lives one, and
:class:`ResultsStore` starts, fills, ends, finds abandoned, reads back and exports runs."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from vecenvs.bench.machine import machine_info
from vecenvs.bench.store import export
from vecenvs.bench.store.records import (
    Measurement,
    RunRecord,
    measurement_columns,
    measurement_rows,
    require_runs,
    select_runs,
)
from vecenvs.bench.store.sqlite import SQLiteFile
from vecenvs.bench.store.values import StoreError, to_json, utc_now, whole_number

#: The statuses :meth:`ResultsStore.finish_run` accepts, and every status a run can have.
FINAL_STATUSES = ("done", "cancelled", "failed")
RUN_STATUSES = ("running", *FINAL_STATUSES)


class RunCancelled(Exception):
    """A run stopped because someone asked it to (the dashboard's Cancel, a job's deadline)."""


class Run:
    """A run being recorded: what the body of ``with recording(...) as run:`` fills in."""

    def __init__(self, store: ResultsStore | None, run_id: int | None):
        self.store, self.id = store, run_id  # id: None when there is no store
        self.summary: Any = None  # a JSON-ready result of the whole run, saved at its end
        self.cancelled = False  # set it when the body stopped early on request, not raising

    def add(self, measurement: Measurement | Mapping[str, Any]) -> None:
        """Save one measurement in the run (nothing without a store)."""
        if self.store is not None and self.id is not None:
            self.store.add_measurement(self.id, measurement)


@contextlib.contextmanager
def recording(
    store: ResultsStore | None,
    kind: str,
    settings: Mapping[str, Any],
    *,
    label: str | None = None,
    run_id: int | None = None,
) -> Iterator[Run]:
    """The one lifecycle of a run: ``with recording(store, "sweep", settings) as run:``.

    The run starts here (or is the caller's ``run_id``, already started) and ends with the
    block: *done* (*cancelled* if the body set ``run.cancelled``), *cancelled* on
    :class:`RunCancelled` or Ctrl-C, *failed* with the error's text on any other exception,
    which goes on up. A run already ended is left as it is, so blocks may nest. Without a store
    (``None``), nothing is saved and ``run.id`` is None.
    """
    if store is None:
        if run_id is not None:
            raise ValueError(f"run_id={run_id!r} needs the store it belongs to; got store=None")
        yield Run(None, None)
        return
    if run_id is None:
        run_id = store.start_run(kind, settings, label=label)
    run = Run(store, run_id)
    status, error = "done", None
    try:
        yield run
        if run.cancelled:
            status = "cancelled"
    except (RunCancelled, KeyboardInterrupt):
        status = "cancelled"
        raise
    except BaseException as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        store.finish_run(run_id, status, summary=run.summary, error=error, if_running=True)


class ResultsStore(SQLiteFile):
    """A results store in one SQLite file: runs, their measurements, their machines.
    ``ResultsStore(path)`` opens and checks the file at once (see
    :class:`~vecenvs.bench.store.sqlite.SQLiteFile`; ``None``: :func:`default_store_path`)."""

    def start_run(
        self,
        kind: str,
        settings: Any,
        *,
        machine: Mapping[str, Any] | None = None,
        label: str | None = None,
    ) -> int:
        """Record that a run of ``kind`` (``"bench"``, ``"sweep"``, ...) has started, with
        its JSON-ready ``settings`` (a dict or a dataclass) and ``machine`` (default
        :func:`~vecenvs.bench.machine.machine_info`); return its id."""
        if not isinstance(kind, str) or not kind:
            raise StoreError(f"kind must be a non-empty string such as 'bench', got {kind!r}")
        if label is not None and not isinstance(label, str):
            raise StoreError(f"label must be a string or None, got {label!r}")
        # Gathered before the transaction, to keep the time the write lock is held short.
        machine_json = to_json(machine_info() if machine is None else machine)
        process = (os.getpid(), socket.gethostname())
        with self.transaction(write=True) as connection:
            cursor = connection.execute(
                "INSERT INTO runs (kind, status, started_at, label, settings, machine, pid, host) "
                "VALUES (?, 'running', ?, ?, ?, ?, ?, ?)",
                (kind, utc_now(), label, to_json(settings), machine_json, *process),
            )
            return int(cursor.lastrowid or 0)  # (always set after an INSERT)

    def add_measurement(self, run_id: int, measurement: Measurement | Mapping[str, Any]) -> int:
        """Save a :class:`~vecenvs.bench.Measurement` (or a dict like its ``to_dict()``: at
        least ``config`` with ``env_id``, ``num_envs`` and ``backend``) in run ``run_id``;
        return its id. StoreError for an unknown run id or a dict without those keys."""
        columns = measurement_columns(measurement)
        with self.transaction(write=True) as connection:
            require_runs(connection, self.path, [run_id])
            cursor = connection.execute(
                f"INSERT INTO measurements (run_id, recorded_at, {', '.join(columns)}) "
                f"VALUES (?, ?, {', '.join('?' * len(columns))})",
                (run_id, utc_now(), *columns.values()),
            )
            return int(cursor.lastrowid or 0)

    def finish_run(
        self,
        run_id: int,
        status: str = "done",
        *,
        summary: Any = None,
        error: str | None = None,
        if_running: bool = False,
    ) -> None:
        """Record that run ``run_id`` has ended (most code lets :func:`recording` do it), with
        a JSON-ready ``summary`` of the whole run and the ``error`` that failed it. Calling it
        again overwrites, unless ``if_running``: then an ended run is left as it is."""
        if status not in FINAL_STATUSES:
            raise StoreError(f"status must be one of {', '.join(FINAL_STATUSES)}, got {status!r}")
        if error is not None and not isinstance(error, str):
            raise StoreError(f"error must be a string or None, got {error!r}")
        summary_json = None if summary is None else to_json(summary)
        with self.transaction(write=True) as connection:
            (run_id,) = require_runs(connection, self.path, [run_id])
            connection.execute(
                "UPDATE runs SET status = ?, finished_at = ?, summary = ?, error = ? WHERE id = ?"
                + (" AND status = 'running'" if if_running else ""),
                (status, utc_now(), summary_json, error, run_id),
            )

    def fail_abandoned_runs(self) -> list[int]:
        """Mark as failed, and return, the runs still ``"running"`` whose process has ended.

        A run killed with ``kill -9`` never calls :meth:`finish_run`. Only runs started on this
        host (another machine's processes can't be seen) that recorded their process (schema
        version 2) are checked.
        """
        with self.transaction(write=False) as connection:
            candidates = connection.execute(
                "SELECT id, pid, started_at FROM runs "
                "WHERE status = 'running' AND host = ? AND pid IS NOT NULL",
                (socket.gethostname(),),
            ).fetchall()
        abandoned = [run["id"] for run in candidates if not _alive(run["pid"], run["started_at"])]
        for run_id in abandoned:
            with self.transaction(write=True) as connection:
                connection.execute(
                    "UPDATE runs SET status = 'failed', finished_at = ?, error = ? "
                    "WHERE id = ? AND status = 'running'",
                    (utc_now(), _ABANDONED, run_id),
                )
        return abandoned

    def runs(self, limit: int | None = None, kind: str | None = None) -> list[RunRecord]:
        """The runs, newest first (at most ``limit``; only those of ``kind`` if given)."""
        if limit is not None:
            whole_number("limit", limit, minimum=1)
        with self.transaction(write=False) as connection:
            return select_runs(connection, kind=kind, limit=limit)

    def run(self, run_id: int) -> RunRecord:
        """StoreError, saying which ids the store has, if there is none."""
        with self.transaction(write=False) as connection:
            return select_runs(connection, ids=require_runs(connection, self.path, [run_id]))[0]

    def kinds(self) -> list[str]:
        """The kinds of run in the store, e.g. ``["bench", "sweep"]``."""
        with self.transaction(write=False) as connection:
            return [
                kind
                for (kind,) in connection.execute("SELECT DISTINCT kind FROM runs ORDER BY kind")
            ]

    def measurements(self, run_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """Measurements as flat rows, ready for a table or ``pandas.DataFrame(rows)``.

        Each row has the run's ``run_id``, ``run_kind``, ``run_status``, ``run_started_at``,
        ``run_label``; the machine's ``hostname``, ``cpu_model``, ``logical_cpus``,
        ``physical_cores``, ``python``; the measurement's ``measurement_id``, ``recorded_at``,
        ``env_id``, ``env_kwargs`` (a dict), ``num_envs``, ``backend``, ``backend_kwargs`` (a
        dict), ``mean``, ``median``, ``std``, ``ratio``; and ``data``, the whole measurement
        as it was saved (a dict). Only the runs ``run_ids`` if given (StoreError for one not
        in the store); by run, then in the order the measurements were added.
        """
        return self._read(run_ids, runs=False)[1]

    def export_json(
        self, path_or_file: export.Destination, run_ids: Iterable[int] | None = None
    ) -> int:
        """Write runs (``run_ids``, or all), oldest first, as JSON, each with every
        :class:`RunRecord` field and its ``measurements``, to a file name or an open text file;
        return how many. StoreError for a run id not in the store, OSError if the file can't be
        written. Everything is read before the file is touched: no half-written file."""
        runs, rows = self._read(run_ids)
        export.write_json(path_or_file, runs, rows)
        return len(runs)

    def export_csv(
        self, path_or_file: export.Destination, run_ids: Iterable[int] | None = None
    ) -> int:
        """Write measurements as CSV, one line each: the columns of :meth:`measurements`, then
        every field of the saved measurement, flattened (see
        :func:`~vecenvs.bench.store.export.write_csv`). Arguments, errors and answer as
        :meth:`export_json`, counting measurements."""
        rows = self._read(run_ids, runs=False)[1]
        export.write_csv(path_or_file, rows)
        return len(rows)

    def _read(
        self, run_ids: Iterable[int] | None, *, runs: bool = True
    ) -> tuple[list[RunRecord], list[dict[str, Any]]]:
        """The runs ``run_ids`` (``None``: all), oldest first, and their measurement rows
        (``runs=False``: only the rows), read in one transaction."""
        with self.transaction(write=False) as connection:
            ids = None if run_ids is None else require_runs(connection, self.path, run_ids)
            found = select_runs(connection, ids=ids, newest_first=False) if runs else []
            return found, measurement_rows(connection, ids)


_ABANDONED = (
    "the process running it ended without finishing it (killed, or the machine restarted); "
    "the measurements saved before that are kept"
)


def _alive(pid: int, started_at: str) -> bool:
    """Whether process ``pid`` still runs and started before ``started_at`` (pids are reused)."""
    import psutil  # only here: reading and writing the store needs nothing beyond sqlite3

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:  # ended, not yet waited for by its parent
            return False
        process_started = process.create_time()
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # someone else's process: it exists, assume it is the one
        return True
    run_started = datetime.fromisoformat(started_at).timestamp()
    return process_started <= run_started + 1.0  # clocks are read at different moments
