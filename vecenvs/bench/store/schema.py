"""The file's format: its tables, its version, and the steps that upgrade an older file.

The version is kept in the file (``PRAGMA user_version``); opening an older file upgrades it
with :data:`MIGRATIONS`, and a file from a newer vecenvs is refused rather than misread. Times
are ISO-8601 text in UTC (``2026-05-09T07:35:25.123+00:00``), which sorts correctly as text;
JSON columns hold plain JSON (NaN and infinities as ``null``), kwargs with sorted keys so that
equal arguments are equal text.

- ``runs``: one row per run; ``settings`` is what was asked for, ``machine`` the writer's
  :func:`~vecenvs.bench.machine.machine_info`, ``summary`` a result of the whole run (a fitted
  model, a breakdown). ``pid`` and ``host`` (v2; NULL in older runs) tell a run left
  ``'running'`` by a killed process from one still going.
- ``measurements``: one row per measured (env, N, backend); ``mean``, ``median`` and ``std``
  in env steps per second over the timed windows, ``ratio`` the speed-up: the median over the
  reference backend's median at the same point of the same run, as
  :mod:`vecenvs.bench.ratios` defines it (runs saved before that module held the median of the
  window-by-window ratios here; the dashboard and ``results show`` recompute them from
  ``data``). The key columns are there to filter and sort on; ``data`` holds the whole
  ``Measurement.to_dict()`` (its efficiency and checks included), so a field added later needs
  no new schema.
- ``jobs`` (v2): the dashboard's queue, documented by :mod:`vecenvs.bench.jobs`, its only user;
  ``notes`` (v3) what its page says of it later, e.g. that the machine was busy.
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
    (  # 2 -> 3: what a job's page must say of it later, e.g. that the machine was busy.
        "ALTER TABLE jobs ADD COLUMN notes TEXT",
    ),
)

#: The schema version this code writes (and the newest it can read).
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(connection: sqlite3.Connection, path: Path) -> None:
    """Create the tables in a new file, or upgrade an older one; refuse (StoreError) a newer
    one, or another program's SQLite file (left exactly as it was)."""

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
