"""The file's format: its tables, its version, and the steps that upgrade an older file.

Version 2. The version is kept in the file itself (``PRAGMA user_version``); opening an older
file upgrades it with the steps in :data:`MIGRATIONS`, and a file from a newer vecenvs is
refused rather than misread. All times are ISO-8601 text in UTC
(``2026-05-09T07:35:25.123+00:00``), which sorts correctly as text. JSON columns hold plain
JSON; a value JSON cannot hold (NaN, an infinity) is stored as ``null``.

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
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from vecenvs.bench.store.values import StoreError

#: The statements that bring a store from schema version ``i`` to ``i + 1``, at index ``i``.
#: To change the schema, append a step (never edit a released one) and the version follows.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
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
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(connection: sqlite3.Connection, path: Path) -> None:
    """Create the tables in a new file, or upgrade an older one; refuse a newer one, or a
    SQLite file of another program (which is left exactly as it was)."""

    def version() -> int:
        found: int = connection.execute("PRAGMA user_version").fetchone()[0]
        if found > SCHEMA_VERSION:  # reading it with the old schema could lie
            raise StoreError(
                f"results store {path} has schema version {found}, newer than this vecenvs "
                f"understands ({SCHEMA_VERSION}); upgrade vecenvs or choose another path"
            )
        return found

    if version() == SCHEMA_VERSION:
        return
    # Several processes may open a new file at once. Taking the write lock first and reading
    # the version again inside it makes exactly one of them create the tables.
    connection.execute("BEGIN IMMEDIATE")
    try:
        found = version()
        if found == 0 and connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise StoreError(
                f"results store {path} is a SQLite database of something else (it has "
                "tables, but not ours); choose another path"
            )
        for steps in MIGRATIONS[found:]:
            for statement in steps:
                connection.execute(statement)
        # A PRAGMA can't take a ? parameter; SCHEMA_VERSION is our own integer.
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
