"""Opening the store's SQLite file, and short transactions on it, safely from many writers.

The dashboard's runner, a ``bench`` command and a notebook may all write to one file at once.
Nothing is lost because the file is in WAL mode (readers never block the writer, nor it them),
each write is one short transaction that takes the write lock at its start and waits up to
:data:`BUSY_TIMEOUT_SECONDS` for it, and row ids come from SQLite inside those transactions.

A :class:`SQLiteFile` opens its connection when created, so a bad path fails at once rather
than after an hour of measuring. Threads may share it (a lock serializes them). Pickled, only
its path travels; the copy, like a child after ``fork``, opens its own connection on first use
(a SQLite connection must not be used from two processes). After :meth:`~SQLiteFile.close`,
using it opens it again.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vecenvs.bench.store.schema import migrate
from vecenvs.bench.store.values import StoreError

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

#: The environment variable that, when set, says where the results store is.
STORE_ENV_VAR = "VECENVS_STORE"

#: How long a writer waits for another process to finish writing before giving up. Writes take
#: milliseconds, so reaching this means something is stuck (or the disk is very slow).
BUSY_TIMEOUT_SECONDS = 30.0


def default_store_path() -> Path:
    """``$VECENVS_STORE`` if set; else ``$XDG_DATA_HOME/vecenvs/results.sqlite`` if
    ``XDG_DATA_HOME`` is set (the freedesktop.org convention); else
    ``~/.local/share/vecenvs/results.sqlite``."""
    explicit = os.environ.get(STORE_ENV_VAR)
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME")
    base = Path(data_home).expanduser() if data_home else Path.home() / ".local" / "share"
    return base / "vecenvs" / "results.sqlite"


class SQLiteFile:
    """The SQLite file at ``path`` (``None``: :func:`default_store_path`), opened (created,
    upgraded) and checked; ``self.path`` is it, absolute.

    Raises:
        StoreError: the path is a directory, its directory can't be created or written, the
            file is not a SQLite database (or is another program's), or it comes from a newer
            vecenvs. The message names the path and what to do.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self._set_up(default_store_path() if path is None else Path(path).expanduser())
        self.open()

    def _set_up(self, path: Path) -> None:
        # Absolute, so that a notebook changing its directory, or a worker process started
        # elsewhere, still finds the same file.
        self.path = path.absolute()
        self._connection: sqlite3.Connection | None = None
        self._connection_pid: int | None = None
        # Re-entrant, so that a method holding it may open the connection (which takes it too).
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def open(self) -> Self:
        """Open the file now if it is not open (e.g. after :meth:`close`) and check it."""
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
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Not opened here: unpickling should not fail or touch the disk; first use opens it.
        self._set_up(Path(state["path"]))

    @contextlib.contextmanager
    def transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One short transaction, committed if the block succeeds, rolled back if not; any
        SQLite error becomes a StoreError.

        A write transaction takes the write lock at its start (``BEGIN IMMEDIATE``). With a
        plain ``BEGIN`` the lock is taken at the first write, and if another process got it
        first SQLite must fail at once with "database is locked" rather than wait: waiting there
        could deadlock two writers that each hold a read snapshot. A read transaction sees one
        consistent snapshot of the file.
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

    def _connect(self) -> sqlite3.Connection:
        """This process's connection, opened (and the file checked) if there is none yet."""
        with self._lock:
            # No connection yet, or one inherited through fork, which is the parent's.
            if self._connection is None or self._connection_pid != os.getpid():
                self._connection = None
                self._connection = self._open_checked()
                self._connection_pid = os.getpid()
            return self._connection

    def _open_checked(self) -> sqlite3.Connection:
        """Open the file, bring its schema up to date, switch it to WAL; or raise StoreError.

        Several processes opening a new file at once race to create its tables and switch it to
        WAL, and SQLite answers some of the losers "database is locked" at once where waiting
        could deadlock. Such an opening is tried again, for up to :data:`BUSY_TIMEOUT_SECONDS`.
        """
        _check_path(self.path)
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        pause = 0.01
        while True:
            try:
                return self._open_once()
            except sqlite3.Error as error:
                busy = "locked" in str(error) or "busy" in str(error)
                if busy and time.monotonic() + pause <= deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
                    continue
                if "not a database" in str(error):  # SQLite's words for SQLITE_NOTADB
                    raise StoreError(
                        f"results store {self.path} is not a SQLite database (is it some other "
                        "file?); choose another path, or move that file away"
                    ) from None
                raise StoreError(f"results store {self.path} cannot be opened: {error}") from None

    def _open_once(self) -> sqlite3.Connection:
        # isolation_level=None: we begin and commit transactions ourselves (see transaction).
        # check_same_thread=False: threads may share the store; self._lock serializes them.
        connection = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA foreign_keys = ON")
            # First make sure the file is ours: a file that is not must be left as it was.
            migrate(connection, self.path)
            # WAL is a property of the file: the first process to open it switches it, once.
            # (A file system without WAL support answers with another mode; that still works.)
            if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                connection.execute("PRAGMA journal_mode = WAL")
        except BaseException:
            connection.close()
            raise
        return connection


def _check_path(path: Path) -> None:
    """Raise StoreError unless ``path`` can hold a results store; create its directory."""
    if path.is_dir():
        raise StoreError(
            f"results store {path} is a directory; expected a file name such as "
            f"{path / 'results.sqlite'}"
        )
    # A file where a directory should be: mkdir's own "File exists" would only puzzle.
    ancestor = next(ancestor for ancestor in path.parents if ancestor.exists())
    if not ancestor.is_dir():
        raise StoreError(f"results store {path}: {ancestor} is a file, not a directory")
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
