"""The results store: every run, with its machine and settings, in one SQLite file.

A speed measured today is only worth keeping if, next week, you can still say what was
measured, how, and on which machine. So every run (a ``bench`` command, a sweep from the
dashboard, a profile) is saved with its settings and :func:`~vecenvs.bench.machine.machine_info`,
and each of its measurements is saved as it arrives. Runs can then be listed, compared across
days and machines, and exported to CSV or JSON (``python -m vecenvs results --help``).

The store is one SQLite file, ``results.sqlite``: SQLite ships with Python, needs no server, and
several processes can write to one file at once without losing anything. Where it lives:
``$VECENVS_STORE`` if set, else ``$XDG_DATA_HOME/vecenvs/results.sqlite``, else
``~/.local/share/vecenvs/results.sqlite`` (see :func:`default_store_path`); every entry point
also takes an explicit path.

Example:
    >>> from vecenvs.bench import QUICK, BenchConfig, measure
    >>> from vecenvs.bench.store import ResultsStore
    >>> with ResultsStore("/tmp/example-results.sqlite") as store:  # doctest: +SKIP
    ...     run_id = store.start_run("bench", {"env_id": "CartPole-v1"}, label="first try")
    ...     store.add_measurement(run_id, measure(BenchConfig("CartPole-v1", 8, **QUICK)))
    ...     store.finish_run(run_id)
    ...     store.export_csv("/tmp/example-results.csv")

Schema
------
Version 2. The version is kept in the file itself (``PRAGMA user_version``); opening an older
file upgrades it with the steps in ``_MIGRATIONS``, and a file from a newer vecenvs is refused
rather than misread. All times are ISO-8601 text in UTC (``2026-05-09T07:35:25.123+00:00``),
which sorts correctly as text. JSON columns hold plain JSON; a value JSON cannot hold (NaN, an
infinity) is stored as ``null``.

``runs``: one row per run.

============== ======= =====================================================================
column         type    meaning
============== ======= =====================================================================
id             INTEGER primary key, increasing: a larger id is a later run
kind           TEXT    what made the run: ``'bench'``, ``'sweep'``, ``'profile'``, ...
status         TEXT    ``'running'``, then ``'done'``, ``'cancelled'`` or ``'failed'``
started_at     TEXT    when :meth:`ResultsStore.start_run` was called
finished_at    TEXT    when :meth:`ResultsStore.finish_run` was called; NULL while running
label          TEXT    the user's name for the run, or NULL
settings       TEXT    JSON: what was asked for (env ids, N values, backends, timing, ...)
machine        TEXT    JSON: :func:`~vecenvs.bench.machine.machine_info` of the writer
summary        TEXT    JSON or NULL: a result of the whole run (a fitted model, a breakdown)
error          TEXT    why the run failed, or NULL
pid            INTEGER the process that started the run (v2; NULL in runs from version 1)
host           TEXT    the host name of that process (v2), so that a run left ``'running'`` by
                       a process that was killed can be told from one still going
============== ======= =====================================================================

``measurements``: one row per measured (env, N, backend), indexed by ``run_id``.

============== ======= =====================================================================
column         type    meaning
============== ======= =====================================================================
id             INTEGER primary key, increasing in the order measurements were added
run_id         INTEGER the run it belongs to (``runs.id``)
recorded_at    TEXT    when it was added
env_id         TEXT    the gymnasium env id
env_kwargs     TEXT    JSON with sorted keys, so equal arguments are equal text
num_envs       INTEGER N
backend        TEXT    the backend's name
backend_kwargs TEXT    JSON with sorted keys
mean           REAL    env steps per second, mean over the timed windows
median         REAL    env steps per second, median
std            REAL    env steps per second, standard deviation
ratio          REAL    mean / the reference backend's mean in the same run, or NULL
data           TEXT    JSON: the whole ``Measurement.to_dict()``
============== ======= =====================================================================

The key columns are there to filter and sort on; ``data`` holds everything, so a field added to
:class:`~vecenvs.bench.Measurement` later is stored without changing the schema.

``jobs`` (v2): the dashboard's queue of benchmarks and profiles waiting for their turn on this
machine; :mod:`vecenvs.bench.jobs` documents it and is the only code that uses it.

Several writers
---------------
The dashboard's benchmark process, a ``bench`` command in a terminal and a notebook may all
write to the same file at once. Nothing is lost because:

- the file is in WAL mode (write-ahead log): readers never block the writer, nor it them;
- each write is one short transaction that takes the write lock at its start
  (``BEGIN IMMEDIATE``), and a writer that finds the lock taken waits for it (up to
  :data:`BUSY_TIMEOUT_SECONDS`) instead of failing;
- row ids come from SQLite inside those transactions, never from a count read earlier.

A :class:`ResultsStore` holds one connection, opened when the store is created, so that a bad
path fails at once rather than after an hour of measuring. Threads of one process may share a
store (a lock lets one use the connection at a time). A store can be pickled, e.g. sent to a
worker process: only its path travels, and the copy opens its own connection when first used.
After a ``fork`` the child does the same: a SQLite connection must not be used from two
processes. After :meth:`ResultsStore.close`, using the store opens it again.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from vecenvs.bench.machine import machine_info

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11


class Measurement(Protocol):
    """What the store needs of a measurement (:class:`vecenvs.bench.Measurement` is one): its
    JSON-ready form. The engine, which produces them, stands above the store, not below."""

    def to_dict(self) -> dict[str, Any]: ...


__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "FINAL_STATUSES",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "STORE_ENV_VAR",
    "ResultsStore",
    "Run",
    "RunCancelled",
    "RunRecord",
    "StoreError",
    "default_store_path",
    "recording",
]

#: The environment variable that, when set, says where the results store is.
STORE_ENV_VAR = "VECENVS_STORE"

#: How long a writer waits for another process to finish writing before giving up. Writes take
#: milliseconds, so reaching this means something is stuck (or the disk is very slow).
BUSY_TIMEOUT_SECONDS = 30.0

#: Every status a run can have; ``running`` until :meth:`ResultsStore.finish_run` is called.
RUN_STATUSES = ("running", "done", "cancelled", "failed")

#: The statuses :meth:`ResultsStore.finish_run` accepts.
FINAL_STATUSES = ("done", "cancelled", "failed")

#: The statements that bring a store from schema version ``i`` to ``i + 1``, at index ``i``.
#: To change the schema, append a step (never edit a released one) and the version follows.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 0 -> 1: the first schema.
        """
        CREATE TABLE runs (
            id          INTEGER PRIMARY KEY,
            kind        TEXT NOT NULL,
            status      TEXT NOT NULL
                        CHECK (status IN ('running', 'done', 'cancelled', 'failed')),
            started_at  TEXT NOT NULL,
            finished_at TEXT,
            label       TEXT,
            settings    TEXT NOT NULL,
            machine     TEXT NOT NULL,
            summary     TEXT,
            error       TEXT
        )
        """,
        """
        CREATE TABLE measurements (
            id             INTEGER PRIMARY KEY,
            run_id         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            recorded_at    TEXT NOT NULL,
            env_id         TEXT NOT NULL,
            env_kwargs     TEXT NOT NULL,
            num_envs       INTEGER NOT NULL,
            backend        TEXT NOT NULL,
            backend_kwargs TEXT NOT NULL,
            mean           REAL,
            median         REAL,
            std            REAL,
            ratio          REAL,
            data           TEXT NOT NULL
        )
        """,
        "CREATE INDEX measurements_by_run ON measurements (run_id)",
    ),
    (  # 1 -> 2: who is running a run; the dashboard's job queue (see vecenvs.bench.jobs).
        "ALTER TABLE runs ADD COLUMN pid INTEGER",
        "ALTER TABLE runs ADD COLUMN host TEXT",
        """
        CREATE TABLE jobs (
            id               INTEGER PRIMARY KEY,
            kind             TEXT NOT NULL,
            settings         TEXT NOT NULL,
            label            TEXT,
            state            TEXT NOT NULL
                             CHECK (state IN ('queued', 'started', 'cancelled')),
            submitted_at     TEXT NOT NULL,
            run_id           INTEGER REFERENCES runs (id) ON DELETE SET NULL,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            progress         TEXT
        )
        """,
    ),
)

#: The schema version this code writes (and the newest it can read).
SCHEMA_VERSION = len(_MIGRATIONS)

#: The measurement columns saying what was measured, and those saying how fast it went.
_CONFIG_COLUMNS = ("env_id", "env_kwargs", "num_envs", "backend", "backend_kwargs")
_NUMBER_COLUMNS = ("mean", "median", "std", "ratio")
#: The measurement columns, in the order they are listed and exported.
_MEASUREMENT_COLUMNS = (*_CONFIG_COLUMNS, *_NUMBER_COLUMNS)

#: Facts about the run copied into every flat measurement row (and CSV line).
_RUN_COLUMNS = ("run_kind", "run_status", "run_started_at", "run_label")

#: Facts about the machine copied into every flat measurement row (and CSV line).
_MACHINE_COLUMNS = ("hostname", "cpu_model", "logical_cpus", "physical_cores", "python")


class _Locked(Exception):
    """Opening the store met another process's lock: try again (see ``_open_checked``)."""

    def __init__(self, error: sqlite3.Error):
        super().__init__(str(error))
        self.error = error


class StoreError(ValueError):
    """The results store can't be used as asked; the message is one line saying what to fix.

    Raised for a bad path, a file that is not a results store (or is from a newer vecenvs), an
    unknown run id, or a bad argument.
    """


@dataclass
class RunRecord:
    """One run as the store knows it: what :meth:`ResultsStore.run` and ``runs`` return."""

    id: int
    """The run's id, used by :meth:`ResultsStore.run` and ``python -m vecenvs results show``."""

    kind: str
    """What made the run, e.g. ``"bench"``, ``"sweep"`` or ``"profile"``."""

    status: str
    """``"running"``, ``"done"``, ``"cancelled"`` or ``"failed"``."""

    started_at: str
    """When the run started, ISO-8601 in UTC."""

    finished_at: str | None
    """When the run finished, ISO-8601 in UTC; ``None`` while it is running."""

    label: str | None
    """The user's name for the run, if they gave one."""

    settings: Any
    """What was asked for, as given to :meth:`ResultsStore.start_run` (decoded JSON)."""

    machine: dict[str, Any]
    """The machine that ran it: a :func:`~vecenvs.bench.machine.machine_info` dict."""

    summary: Any
    """A result of the whole run given to :meth:`ResultsStore.finish_run`, or ``None``."""

    error: str | None
    """Why the run failed, or ``None``."""

    measurement_count: int
    """How many measurements the run has."""

    env_ids: list[str]
    """The env ids measured, in the order they were first measured."""

    num_envs: list[int]
    """The values of N measured, smallest first."""

    backends: list[str]
    """The backends measured, in the order they were first measured."""

    pid: int | None = None
    """The process that started the run (``None`` for runs saved by schema version 1)."""

    host: str | None = None
    """The host name of that process."""

    @property
    def duration_seconds(self) -> float | None:
        """Seconds from start to finish; ``None`` while the run is not finished."""
        if self.finished_at is None:
            return None
        started = datetime.fromisoformat(self.started_at)
        return (datetime.fromisoformat(self.finished_at) - started).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON-ready values."""
        return dataclasses.asdict(self)


class RunCancelled(Exception):
    """A run stopped because someone asked it to (the dashboard's Cancel, a job's deadline)."""


class Run:
    """A run being recorded: what the body of ``with recording(...) as run:`` fills in.

    Attributes:
        id: the run's id in the store (None when there is no store).
        summary: a JSON-ready result of the whole run, saved when the run ends.
        cancelled: set it when the body stopped early on request, without raising.
    """

    def __init__(self, store: ResultsStore | None, run_id: int | None):
        self.store, self.id = store, run_id
        self.summary: Any = None
        self.cancelled = False

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

    The run starts here (or is the caller's ``run_id``, already started), and ends when the
    block does: *done* (or *cancelled* if the body set ``run.cancelled``), *cancelled* on
    :class:`RunCancelled` or Ctrl-C, *failed* with the error's text on any other exception,
    which goes on up. A run that something else has already ended is left as it is, so blocks
    may nest: the innermost ends the run. A process killed mid-run cannot end it; the store
    finds such runs when it is read (:meth:`ResultsStore.fail_abandoned_runs`). Without a store
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


def default_store_path() -> Path:
    """Where the results store is when no path is given.

    ``$VECENVS_STORE`` if set; else ``$XDG_DATA_HOME/vecenvs/results.sqlite`` if
    ``XDG_DATA_HOME`` is set (the freedesktop.org convention for user data); else
    ``~/.local/share/vecenvs/results.sqlite``.
    """
    explicit = os.environ.get(STORE_ENV_VAR)
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME")
    base = Path(data_home).expanduser() if data_home else Path.home() / ".local" / "share"
    return base / "vecenvs" / "results.sqlite"


class ResultsStore:
    """A results store in one SQLite file: runs, their measurements, their machines.

    Creating the object opens the file (creating it and its directory if needed) and checks
    it, so a command can check its ``--store`` before it spends minutes measuring. See the
    module docstring for the schema and for how several processes write at once.

    Args:
        path: the SQLite file; ``None`` means :func:`default_store_path`.

    Attributes:
        path: the SQLite file, as an absolute :class:`~pathlib.Path`.

    Raises:
        StoreError: the path is a directory, its directory can't be created or written, the
            file is not a SQLite database (or is another program's), or it comes from a newer
            vecenvs. The message names the path and what to do.

    Example:
        >>> with ResultsStore(tmp_path / "results.sqlite") as store:  # doctest: +SKIP
        ...     run_id = store.start_run("bench", {"num_envs": [8]})
        ...     store.add_measurement(run_id, measurement)
        ...     store.finish_run(run_id, summary={"best": "pool"})
        ...     [run.measurement_count for run in store.runs()]
        [1]
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        chosen = default_store_path() if path is None else Path(path).expanduser()
        self._set_up(chosen)
        self.open()

    def _set_up(self, path: Path) -> None:
        """The state of a store that has no connection yet."""
        # Absolute, so that a notebook changing its directory, or a worker process started
        # elsewhere, still finds the same file.
        self.path = path.absolute()
        self._connection: sqlite3.Connection | None = None
        self._connection_pid: int | None = None
        # Re-entrant, so that a method holding it may open the connection (which takes it too).
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.path)!r})"

    # --- Opening and closing --------------------------------------------------------------

    def open(self) -> Self:
        """Open the file now if it is not open (e.g. after :meth:`close`) and check it.

        Returns:
            This store.

        Raises:
            StoreError: the path is a directory, its directory can't be created or written,
                the file is not a SQLite database, or it comes from a newer vecenvs.
        """
        self._connect()
        return self

    def close(self) -> None:
        """Close the connection; safe to call twice. Using the store again reopens it."""
        with self._lock:
            connection, self._connection = self._connection, None
            # A connection inherited through fork belongs to the parent: leave it alone.
            if connection is not None and self._connection_pid == os.getpid():
                connection.close()

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # Only the path travels: a connection can't be pickled, and the copy opens its own.
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Not opened here: unpickling should not fail or touch the disk; first use opens it.
        self._set_up(Path(state["path"]))

    # --- Writing --------------------------------------------------------------------------

    def start_run(
        self,
        kind: str,
        settings: Any,
        *,
        machine: Mapping[str, Any] | None = None,
        label: str | None = None,
    ) -> int:
        """Record that a run has started, with status ``"running"``.

        Args:
            kind: what is running, e.g. ``"bench"``, ``"sweep"`` or ``"profile"``.
            settings: what was asked for, JSON-ready (a dict, or a dataclass such as
                :class:`~vecenvs.bench.BenchConfig`).
            machine: the machine running it; default :func:`~vecenvs.bench.machine.machine_info`.
            label: a name the user chose for the run, e.g. ``"after the pipe fix"``.

        Returns:
            The new run's id, for :meth:`add_measurement` and :meth:`finish_run`.
        """
        if not isinstance(kind, str) or not kind:
            raise StoreError(f"kind must be a non-empty string such as 'bench', got {kind!r}")
        if label is not None and not isinstance(label, str):
            raise StoreError(f"label must be a string or None, got {label!r}")
        # Gathered before the transaction, to keep the time the write lock is held short.
        machine_json = to_json(machine_info() if machine is None else machine)
        settings_json, process = to_json(settings), (os.getpid(), socket.gethostname())
        with self._transaction(write=True) as connection:
            cursor = connection.execute(
                "INSERT INTO runs (kind, status, started_at, label, settings, machine, pid, host) "
                "VALUES (?, 'running', ?, ?, ?, ?, ?, ?)",
                (kind, utc_now(), label, settings_json, machine_json, *process),
            )
            return int(cursor.lastrowid or 0)  # (always set after an INSERT)

    def add_measurement(self, run_id: int, measurement: Measurement | Mapping[str, Any]) -> int:
        """Save one measurement as part of run ``run_id``.

        Args:
            run_id: what :meth:`start_run` returned.
            measurement: a :class:`~vecenvs.bench.Measurement`, or a dict shaped like its
                ``to_dict()`` (at least ``config`` with ``env_id``, ``num_envs`` and
                ``backend``; ``mean``, ``median``, ``std``, ``ratio`` if known).

        Returns:
            The new measurement's id.

        Raises:
            StoreError: an unknown run id, or a dict without the keys above.
        """
        _check_run_id(run_id)
        columns, data = _measurement_columns(measurement)
        data_json = to_json(data)
        with self._transaction(write=True) as connection:
            self._require_run(connection, run_id)
            cursor = connection.execute(
                f"INSERT INTO measurements (run_id, recorded_at, {', '.join(columns)}, data) "
                f"VALUES (?, ?, {', '.join('?' * len(columns))}, ?)",
                (run_id, utc_now(), *columns.values(), data_json),
            )
            return int(cursor.lastrowid or 0)  # (always set after an INSERT)

    def finish_run(
        self,
        run_id: int,
        status: str = "done",
        *,
        summary: Any = None,
        error: str | None = None,
        if_running: bool = False,
    ) -> None:
        """Record that a run has ended. Calling it again overwrites what the last call wrote.

        Most code ends its runs with :func:`recording` rather than calling this.

        Args:
            run_id: what :meth:`start_run` returned.
            status: ``"done"``, ``"cancelled"`` or ``"failed"``.
            summary: a JSON-ready result of the whole run, e.g. the fitted overhead model.
            error: why the run failed, e.g. the message of the exception.
            if_running: leave the run as it is if it has ended already.
        """
        _check_run_id(run_id)
        if status not in FINAL_STATUSES:
            raise StoreError(f"status must be one of {', '.join(FINAL_STATUSES)}, got {status!r}")
        if error is not None and not isinstance(error, str):
            raise StoreError(f"error must be a string or None, got {error!r}")
        summary_json = None if summary is None else to_json(summary)
        with self._transaction(write=True) as connection:
            cursor = connection.execute(
                "UPDATE runs SET status = ?, finished_at = ?, summary = ?, error = ? WHERE id = ?"
                + (" AND status = 'running'" if if_running else ""),
                (status, utc_now(), summary_json, error, run_id),
            )
            if cursor.rowcount == 0:
                self._require_run(connection, run_id)

    def fail_abandoned_runs(self) -> list[int]:
        """Mark as failed the runs still ``"running"`` whose process has ended on this host.

        A run killed with ``kill -9``, or whose machine lost power, never calls
        :meth:`finish_run`; without this it would look as if it were still going. Only runs
        started on this host are checked (a process on another machine can't be seen from here),
        and only those that recorded their process (schema version 2 and later).

        Returns:
            The ids of the runs marked failed.
        """
        import psutil  # only here: reading and writing the store needs nothing beyond sqlite3

        host = socket.gethostname()
        with self._transaction(write=False) as connection:
            candidates = connection.execute(
                "SELECT id, pid, started_at FROM runs "
                "WHERE status = 'running' AND host = ? AND pid IS NOT NULL",
                (host,),
            ).fetchall()
        abandoned = [
            record["id"]
            for record in candidates
            if not _process_alive(record["pid"], record["started_at"], psutil)
        ]
        for run_id in abandoned:
            with self._transaction(write=True) as connection:
                connection.execute(
                    "UPDATE runs SET status = 'failed', finished_at = ?, error = ? "
                    "WHERE id = ? AND status = 'running'",
                    (
                        utc_now(),
                        "the process running it ended without finishing it (killed, or "
                        "the machine restarted); the measurements saved before that are kept",
                        run_id,
                    ),
                )
        return abandoned

    @contextlib.contextmanager
    def transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """A short transaction on this store's connection, for modules that keep their own
        tables in the file (:mod:`vecenvs.bench.jobs`). Keep it short: writers wait for it."""
        with self._transaction(write=write) as connection:
            yield connection

    # --- Reading --------------------------------------------------------------------------

    def runs(self, limit: int | None = None, kind: str | None = None) -> list[RunRecord]:
        """The runs, newest first, each with how many measurements it has.

        Args:
            limit: at most this many (the newest); ``None`` for all.
            kind: only runs of this kind, e.g. ``"bench"``.
        """
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise StoreError(f"limit must be a whole number >= 1 or None, got {limit!r}")
        with self._transaction(write=False) as connection:
            return _select_runs(
                connection,
                "WHERE (:kind IS NULL OR kind = :kind)",
                {"kind": kind},
                newest_first=True,
                limit=limit,
            )

    def run(self, run_id: int) -> RunRecord:
        """The run with id ``run_id``.

        Raises:
            StoreError: no such run; the message says which ids the store has.
        """
        _check_run_id(run_id)
        with self._transaction(write=False) as connection:
            return self._run(connection, run_id)

    def kinds(self) -> list[str]:
        """The kinds of run in the store, e.g. ``["bench", "sweep"]``."""
        with self._transaction(write=False) as connection:
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
        as it was saved (a dict).

        Args:
            run_ids: only these runs; ``None`` for all. Rows come by run, then in the order the
                measurements were added.

        Raises:
            StoreError: one of ``run_ids`` is not in the store.
        """
        with self._transaction(write=False) as connection:
            return self._measurements(connection, run_ids)

    # --- Exporting ------------------------------------------------------------------------

    def export_json(
        self, path_or_file: str | os.PathLike[str] | IO[str], run_ids: Iterable[int] | None = None
    ) -> int:
        """Write runs as JSON: a list of runs, oldest first, each with its measurements.

        Each run has every :class:`RunRecord` field (machine, settings, summary, ...) and
        ``measurements``: a list of ``{"id", "recorded_at", "env_id", ..., "ratio", "data"}``.

        Args:
            path_or_file: a file name, or an open text file such as ``sys.stdout``.
            run_ids: only these runs; ``None`` for all.

        Returns:
            How many runs were written.

        Raises:
            StoreError: one of ``run_ids`` is not in the store.
            OSError: the file can't be written.
        """
        runs, rows = self._read_for_export(run_ids)
        by_run: dict[int, list[dict[str, Any]]] = {run.id: [] for run in runs}
        for row in rows:
            by_run[row["run_id"]].append(
                {
                    "id": row["measurement_id"],
                    "recorded_at": row["recorded_at"],
                    **{name: row[name] for name in _MEASUREMENT_COLUMNS},
                    "data": row["data"],
                }
            )
        document = [{**run.to_dict(), "measurements": by_run[run.id]} for run in runs]
        # Everything is read before the file is touched: a failure leaves no half-written file.
        _write_text(path_or_file, json.dumps(document, indent=2, allow_nan=False) + "\n")
        return len(runs)

    def export_csv(
        self, path_or_file: str | os.PathLike[str] | IO[str], run_ids: Iterable[int] | None = None
    ) -> int:
        """Write measurements as CSV: one line per measurement, with its run and machine.

        The columns are those of :meth:`measurements` (the kwargs as JSON text), then every
        field of the saved measurement, flattened: nested dicts become dotted names
        (``config.warmup_seconds``), lists become JSON text (``throughputs``). Fields that
        repeat a column already there are left out. Arguments and errors as :meth:`export_json`.

        Returns:
            How many measurements were written.
        """
        _, rows = self._read_for_export(run_ids)
        lines = []
        columns: dict[str, None] = {}  # an ordered set: every row may add fields
        for row in rows:
            line = {name: value for name, value in row.items() if name != "data"}
            for name in ("env_kwargs", "backend_kwargs"):
                line[name] = json.dumps(line[name], sort_keys=True)
            for name, value in _flatten(row["data"]).items():
                duplicate = name in line or name.removeprefix("config.") in line
                if not duplicate:
                    line[name] = value
            columns.update(dict.fromkeys(line))
            lines.append(line)
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=list(columns), restval="")
        writer.writeheader()
        writer.writerows(lines)
        _write_text(path_or_file, text.getvalue())
        return len(lines)

    # --- Inside ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        """This process's connection, opened (and the file checked) if there is none yet."""
        with self._lock:
            if self._connection is not None and self._connection_pid == os.getpid():
                return self._connection
            # No connection yet, or one inherited through fork, which is the parent's to use.
            self._connection = None
            self._connection = self._open_checked()
            self._connection_pid = os.getpid()
            return self._connection

    def _open_checked(self) -> sqlite3.Connection:
        """Open the file, switch it to WAL, bring its schema up to date; or raise StoreError.

        Several processes opening a new file at once race to create its tables and switch it to
        WAL. SQLite makes the losers wait for most locks, but not all: in the old journal mode
        it answers "database is locked" at once where waiting could deadlock. Such an opening
        is simply tried again, for up to :data:`BUSY_TIMEOUT_SECONDS`.
        """
        _check_path(self.path)
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        pause = 0.01
        while True:
            try:
                return self._open_once()
            except _Locked as locked:
                if time.monotonic() + pause > deadline:
                    raise StoreError(self._describe_open_error(locked.error)) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)

    def _open_once(self) -> sqlite3.Connection:
        """One try of :meth:`_open_checked`; raises _Locked when another process is in the way."""
        try:
            # isolation_level=None: we begin and commit transactions ourselves (see _transaction).
            # check_same_thread=False: threads may share the store; self._lock serializes them.
            connection = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as error:
            raise StoreError(f"results store {self.path} cannot be opened: {error}") from None
        try:
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA foreign_keys = ON")
            # First make sure the file is ours: a file that is not must be left as it was.
            self._migrate(connection)
            # WAL is a property of the file: the first process to open it switches it, once.
            # (A file system without WAL support answers with another mode; that still works.)
            if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                connection.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as error:
            connection.close()
            if "locked" in str(error) or "busy" in str(error):
                raise _Locked(error) from None
            raise StoreError(self._describe_open_error(error)) from None
        except BaseException:
            connection.close()
            raise
        return connection

    def _migrate(self, connection: sqlite3.Connection) -> None:
        """Create the tables in a new file, or upgrade an older one; refuse a newer one."""
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        self._check_version(version)
        # Several processes may open a new file at once. Taking the write lock first and reading
        # the version again inside it makes exactly one of them create the tables.
        connection.execute("BEGIN IMMEDIATE")
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            self._check_version(version)
            tables = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if version == 0 and tables:
                raise StoreError(
                    f"results store {self.path} is a SQLite database of something else (it has "
                    "tables, but not ours); choose another path"
                )
            for steps in _MIGRATIONS[version:]:
                for statement in steps:
                    connection.execute(statement)
            # A PRAGMA can't take a ? parameter; SCHEMA_VERSION is our own integer.
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    def _check_version(self, version: int) -> None:
        """Refuse a file written by a newer vecenvs: reading it with the old schema could lie."""
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"results store {self.path} has schema version {version}, newer than this "
                f"vecenvs understands ({SCHEMA_VERSION}); upgrade vecenvs or choose another path"
            )

    def _describe_open_error(self, error: sqlite3.Error) -> str:
        """A one-line message for an error SQLite raised while opening the file."""
        if getattr(error, "sqlite_errorname", "") == "SQLITE_NOTADB" or (
            "not a database" in str(error)
        ):
            return (
                f"results store {self.path} is not a SQLite database (is it some other "
                "file?); choose another path, or move that file away"
            )
        return f"results store {self.path} cannot be used: {error}"

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One short transaction: committed if the block succeeds, rolled back if not.

        A write transaction takes the write lock at its start (``BEGIN IMMEDIATE``). With a
        plain ``BEGIN`` (what ``with connection:`` does) the lock is taken at the first write,
        and if another process got it first SQLite must fail at once with "database is locked"
        rather than wait: waiting there could deadlock two writers that each hold a read snapshot.
        A read transaction (``BEGIN``) sees one consistent snapshot of the file.
        """
        with self._lock:
            connection = self._connect()
            try:
                connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                yield connection
                connection.execute("COMMIT")
            except BaseException as error:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                if not isinstance(error, sqlite3.Error):
                    raise
                stuck = f" (another process has been writing for over {BUSY_TIMEOUT_SECONDS:g} s"
                hint = f"{stuck}: is one stuck?)" if "locked" in str(error) else ""
                raise StoreError(f"results store {self.path}: {error}{hint}") from None

    def _run(self, connection: sqlite3.Connection, run_id: int) -> RunRecord:
        """The run ``run_id``, read on ``connection``; StoreError if there is none."""
        found = _select_runs(connection, "WHERE id = :id", {"id": run_id})
        if not found:
            raise self._unknown_run(connection, run_id)
        return found[0]

    def _require_run(self, connection: sqlite3.Connection, run_id: int) -> None:
        """Raise StoreError unless run ``run_id`` exists."""
        if connection.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise self._unknown_run(connection, run_id)

    def _unknown_run(self, connection: sqlite3.Connection, run_id: int) -> StoreError:
        """The error for a run id the store does not have, saying which ids it does have."""
        low, high, count = connection.execute(
            "SELECT min(id), max(id), count(*) FROM runs"
        ).fetchone()
        if count == 0:
            has = "has no runs yet"
        elif low == high:
            has = f"has only run {low}"
        else:
            has = f"has runs {low}-{high}"
        return StoreError(f"unknown run id {run_id}; the store {self.path} {has}")

    def _read_for_export(
        self, run_ids: Iterable[int] | None
    ) -> tuple[list[RunRecord], list[dict[str, Any]]]:
        """The runs ``run_ids`` (checked), or all runs, oldest first, and their measurement
        rows, read in one transaction: an export is read whole before its file is touched."""
        with self._transaction(write=False) as connection:
            if run_ids is None:
                runs = _select_runs(connection, "", {}, newest_first=False)
            else:
                wanted = (self._run(connection, run_id) for run_id in _unique_run_ids(run_ids))
                runs = sorted(wanted, key=lambda run: run.id)
            return runs, self._measurements(connection, [run.id for run in runs])

    def _measurements(
        self, connection: sqlite3.Connection, run_ids: Iterable[int] | None
    ) -> list[dict[str, Any]]:
        """The flat measurement rows of :meth:`measurements`, read on ``connection``."""
        query = (
            "SELECT m.*, r.kind AS run_kind, r.status AS run_status, "
            "r.started_at AS run_started_at, r.label AS run_label, r.machine AS run_machine "
            "FROM measurements AS m JOIN runs AS r ON r.id = m.run_id"
        )
        parameters: list[int] = []
        if run_ids is not None:
            parameters = _unique_run_ids(run_ids)
            for run_id in parameters:
                self._require_run(connection, run_id)
            if not parameters:
                return []
            # One ? per id; run lists are short, far below SQLite's limit on parameters.
            query += f" WHERE m.run_id IN ({', '.join('?' * len(parameters))})"
        query += " ORDER BY m.run_id, m.id"

        machines: dict[int, dict[str, Any]] = {}  # decode each run's machine once
        rows = []
        for record in connection.execute(query, parameters):
            run_id = record["run_id"]
            if run_id not in machines:
                machines[run_id] = _from_json(record["run_machine"]) or {}
            machine = machines[run_id]
            row = {
                "run_id": run_id,
                **{name: record[name] for name in _RUN_COLUMNS},
                **{name: machine.get(name) for name in _MACHINE_COLUMNS},
                "measurement_id": record["id"],
                "recorded_at": record["recorded_at"],
                **{name: record[name] for name in _MEASUREMENT_COLUMNS},
                "data": _from_json(record["data"]),
            }
            for name in ("env_kwargs", "backend_kwargs"):  # the JSON columns
                row[name] = _from_json(row[name])
            rows.append(row)
        return rows


# --- Helpers ------------------------------------------------------------------------------


def _select_runs(
    connection: sqlite3.Connection,
    where: str,
    parameters: Mapping[str, Any],
    *,
    newest_first: bool = True,
    limit: int | None = None,
) -> list[RunRecord]:
    """Runs matching ``where`` (an SQL ``WHERE`` clause on ``runs``), as RunRecords."""
    order = "DESC" if newest_first else "ASC"
    selected = f"SELECT id FROM runs {where} ORDER BY id {order} LIMIT :limit"
    parameters = {**parameters, "limit": -1 if limit is None else limit}  # -1: no limit
    records = connection.execute(
        "SELECT runs.*, (SELECT count(*) FROM measurements WHERE run_id = runs.id) AS count "
        f"FROM runs WHERE id IN ({selected}) ORDER BY id {order}",
        parameters,
    ).fetchall()
    # What each run measured: every distinct (env, N, backend), in the order first measured.
    env_ids: dict[int, dict[str, None]] = {record["id"]: {} for record in records}
    num_envs: dict[int, set[int]] = {record["id"]: set() for record in records}
    backends: dict[int, dict[str, None]] = {record["id"]: {} for record in records}
    for measured in connection.execute(
        "SELECT run_id, env_id, num_envs, backend, min(id) AS first FROM measurements "
        f"WHERE run_id IN ({selected}) GROUP BY run_id, env_id, num_envs, backend ORDER BY first",
        parameters,
    ):
        run_id = measured["run_id"]
        env_ids[run_id][measured["env_id"]] = None
        num_envs[run_id].add(measured["num_envs"])
        backends[run_id][measured["backend"]] = None
    plain = ("id", "kind", "status", "started_at", "finished_at", "label", "error", "pid", "host")
    return [
        RunRecord(
            **{name: record[name] for name in plain},
            settings=_from_json(record["settings"]),
            machine=_from_json(record["machine"]) or {},
            summary=_from_json(record["summary"]),
            measurement_count=record["count"],
            env_ids=list(env_ids[record["id"]]),
            num_envs=sorted(num_envs[record["id"]]),
            backends=list(backends[record["id"]]),
        )
        for record in records
    ]


def _check_path(path: Path) -> None:
    """Raise StoreError unless ``path`` can hold a results store; create its directory."""
    if path.is_dir():
        raise StoreError(
            f"results store {path} is a directory; expected a file name such as "
            f"{path / 'results.sqlite'}"
        )
    # A file where a directory should be: mkdir's own "File exists" would only puzzle.
    for ancestor in path.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise StoreError(f"results store {path}: {ancestor} is a file, not a directory")
            break
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StoreError(
            f"results store {path}: cannot create the directory {directory} "
            f"({error.strerror or error})"
        ) from None
    # SQLite writes its log files (results.sqlite-wal, -shm) next to the file, even to read.
    if not os.access(directory, os.W_OK | os.X_OK):
        raise StoreError(
            f"results store {path}: the directory {directory} is not writable; "
            "choose a path in a directory you can write to"
        )
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise StoreError(
            f"results store {path} is not readable and writable by you; "
            "check its permissions or choose another path"
        )


def _process_alive(pid: int, started_at: str, psutil: Any) -> bool:
    """Whether process ``pid`` still runs and is the one that started a run at ``started_at``.

    A pid is reused once its process has ended, so a live pid is only the run's own process if
    that process started before the run did.
    """
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


def _check_run_id(run_id: object) -> None:
    """Raise StoreError unless ``run_id`` is a whole number (not a bool)."""
    if isinstance(run_id, bool) or not isinstance(run_id, int):
        raise StoreError(f"a run id is a whole number, got {run_id!r}")


def _unique_run_ids(run_ids: Iterable[int]) -> list[int]:
    """The ids in order, each once, each checked to be a whole number."""
    unique = list(dict.fromkeys(run_ids))
    for run_id in unique:
        _check_run_id(run_id)
    return unique


def _measurement_columns(
    measurement: Measurement | Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The key columns and the full JSON-ready data of a Measurement or of its to_dict()."""
    data = _plain(measurement if isinstance(measurement, Mapping) else measurement.to_dict())
    config = data.get("config")
    if not isinstance(config, dict):
        raise StoreError(
            "a measurement dict needs a 'config' dict, as Measurement.to_dict() "
            f"gives; got keys {sorted(data)}"
        )
    missing = [key for key in ("env_id", "num_envs", "backend") if key not in config]
    if missing:
        raise StoreError(f"the measurement's config has no {', '.join(missing)}")
    numbers = {name: data.get(name) for name in _NUMBER_COLUMNS}
    if isinstance(config["num_envs"], bool) or not isinstance(config["num_envs"], int):
        raise StoreError(f"num_envs must be a whole number, got {config['num_envs']!r}")
    columns = {
        "env_id": str(config["env_id"]),
        "env_kwargs": to_json(config.get("env_kwargs") or {}),
        "num_envs": config["num_envs"],
        "backend": str(config["backend"]),
        "backend_kwargs": to_json(config.get("backend_kwargs") or {}),
        **{name: _plain(_number(value)) for name, value in numbers.items()},
    }
    return columns, data


def _number(value: Any) -> float | None:
    """A float for a REAL column, ``None`` for a missing or non-numeric value."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _plain(value: Any) -> Any:
    """``value`` as plain JSON values: NaN and infinities become None, tuples lists, and so on.

    ``json.dumps`` would write NaN as the bare word ``NaN``, which is not JSON: other tools
    (and browsers) refuse to read it. A value JSON has no word for (an Enum, a Path) becomes
    its text rather than failing a run that may have taken an hour to measure.
    """
    if isinstance(value, float):  # numpy's float64 is a float too
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, Enum):
        return _plain(value.value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars, without importing numpy
        return _plain(value.tolist())
    return str(value)


def to_json(value: Any) -> str:
    """Compact JSON text of ``value`` made plain, keys sorted (equal values, equal text)."""
    return json.dumps(_plain(value), sort_keys=True, allow_nan=False)


def _from_json(text: str | None) -> Any:
    """The value of a JSON column; ``None`` for SQL NULL."""
    return None if text is None else json.loads(text)


def utc_now() -> str:
    """The time now, in UTC, as ISO-8601 text with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"config": {"seed": 0}, "throughputs": [1.0]}`` -> ``{"config.seed": 0,
    "throughputs": "[1.0]"}``: one value per CSV column."""
    if not isinstance(data, Mapping):
        return {prefix.rstrip(".") or "data": _csv_value(data)}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = _csv_value(value)
    return flat


def _csv_value(value: Any) -> Any:
    """Lists and dicts as JSON text; anything else as it is (None becomes an empty cell)."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def _write_text(path_or_file: str | os.PathLike[str] | IO[str], text: str) -> None:
    """Write ``text`` to a file name or to an open text file."""
    if isinstance(path_or_file, (str, os.PathLike)):
        # newline="": the text already has the line endings it needs (CSV uses \r\n).
        with open(path_or_file, "w", encoding="utf-8", newline="") as file:
            file.write(text)
    else:
        path_or_file.write(text)
