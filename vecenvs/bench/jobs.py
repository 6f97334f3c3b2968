"""The job queue: measurements that wait their turn, one at a time per machine.

Two measurements running at once on one machine measure each other. So the dashboard never
measures in its own process: *Run* only writes a **job** into the results store and makes sure
a **runner** process is going, which takes jobs oldest first and saves every result in the
store as it comes; a page only reads the store. What a job does is a subclass's business
(:class:`vecenvs.lab.LabQueue`), so the queue depends on nothing above it. Two tabs pressing
*Run* get two jobs, run one after the other; closing the tab stops nothing; a runner that dies
is noticed (its run marked failed by :meth:`ResultsStore.fail_abandoned_runs`) and the next
page load starts a new one.

Two ``filelock`` locks, which the OS frees when their process dies: the **runner lock**, one
per store file (a second runner finds it held and exits), and the **machine lock**
(:func:`machine_turn`), which runners of different stores and the ``bench``, ``autotune`` and
``profile`` commands take in turn.

The ``jobs`` table (schema version 2): ``kind`` and ``settings`` (JSON) say what to run,
``state`` is ``'queued'``, ``'started'`` or ``'cancelled'`` (before it started), ``run_id`` the
run it became (whose status says how it goes), ``cancel_requested`` 1 once someone asked a
started job to stop, ``progress`` the runner's JSON ``{"done", "total", "message"}``, ``notes``
(schema version 3) JSON that whoever queued it wants shown with it later, e.g. the machine's
load when it was queued (:meth:`JobQueue.add_notes`). As
:attr:`Job.status` reports it: ``queued`` -> ``running`` -> ``done``, ``cancelled`` or
``failed``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import filelock

from vecenvs.bench.store import (
    ResultsStore,
    Run,
    RunCancelled,
    RunRecord,
    StoreError,
    from_json,
    recording,
    to_json,
    utc_now,
)

__all__ = [
    "MACHINE_LOCK_ENV_VAR",
    "Job",
    "JobQueue",
    "Progress",
    "machine_lock_path",
    "machine_turn",
]

#: Set this to use another machine lock file (the tests give each test its own).
MACHINE_LOCK_ENV_VAR = "VECENVS_MACHINE_LOCK"

#: How often a waiting runner, or :meth:`JobQueue.wait`, looks again.
POLL_SECONDS = 0.2

#: A job submitted again within this many seconds, with the same kind, settings and label,
#: while the first is unfinished, is that first job (a double-click on Run), not a second one.
DUPLICATE_SECONDS = 5.0

#: The runner writes a job's progress at most this often (a write per timed window is too many
#: for nothing: the page polls once a second).
PROGRESS_SECONDS = 0.25

#: The jobs, each beside its run, and which of them are unfinished: queued, or started and
#: either getting its run this instant or with its run still going.
_JOBS_AND_RUNS = "jobs LEFT JOIN runs ON runs.id = jobs.run_id"
_UNFINISHED = (
    "(jobs.state = 'queued' OR (jobs.state = 'started' "
    "AND (jobs.run_id IS NULL OR runs.status = 'running')))"
)
_OLDEST_QUEUED = "SELECT * FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1"


def machine_lock_path() -> Path:
    """The lock file of this machine's benchmarks: ``$VECENVS_MACHINE_LOCK``, else
    ``vecenvs-bench.lock`` in the temporary directory (shared by every user, as the CPUs are)."""
    explicit = os.environ.get(MACHINE_LOCK_ENV_VAR)
    return Path(explicit) if explicit else Path(tempfile.gettempdir()) / "vecenvs-bench.lock"


@dataclass
class Job:
    """One job of the queue (a row of ``jobs``), with the run it became once started."""

    id: int
    kind: str
    settings: dict[str, Any]
    label: str | None
    state: str
    submitted_at: str
    run_id: int | None
    cancel_requested: bool
    progress: dict[str, Any] = field(default_factory=dict)
    run: RunRecord | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # what its page says of it later

    @property
    def status(self) -> str:
        """``"queued"``, ``"running"``, ``"done"``, ``"cancelled"`` or ``"failed"``."""
        if self.state in ("queued", "cancelled"):
            return self.state
        if self.run_id is None:  # taken by the runner, its run being created this instant
            return "running"
        if self.run is None:  # its run was deleted from the store
            return "failed"
        return self.run.status

    @property
    def finished(self) -> bool:
        """True once nothing more will happen to this job."""
        return self.status in ("done", "cancelled", "failed")

    @property
    def fraction_done(self) -> float:
        """From 0 to 1, for a progress bar."""
        done, total = self.progress.get("done", 0), self.progress.get("total", 0)
        if self.status == "done":
            return 1.0
        return min(done / total, 1.0) if total else 0.0


class JobQueue:
    """The job queue kept in the ``jobs`` table of ``store``, where results go too."""

    #: The module the runner process runs, ``python -m <runner_module> --store PATH``: the
    #: subclass's, which knows how to carry out its kinds of job.
    runner_module = ""

    def __init__(self, store: ResultsStore):
        self.store = store
        self._runners: list[subprocess.Popen] = []

    @property
    def runner_lock_path(self) -> Path:
        return self.store.path.with_name(self.store.path.name + ".runner.lock")

    @property
    def runner_log_path(self) -> Path:
        """Where runners started by :meth:`ensure_runner` write what they print."""
        return self.store.path.with_name(self.store.path.name + ".runner.log")

    @property
    def profiles_dir(self) -> Path:
        """Where profiles run from the queue keep their files: ``<store dir>/profiles/run-<id>``."""
        return self.store.path.parent / "profiles"

    def submit(
        self,
        kind: str,
        settings: Mapping[str, Any],
        label: str | None = None,
        start_runner: bool = True,
    ) -> int:
        """Insert the job, unless the very same one was submitted a moment ago and is still
        unfinished (see :data:`DUPLICATE_SECONDS`): then that one's id is the answer."""
        if label is not None and not isinstance(label, str):
            raise ValueError(f"label must be a string or None, got {label!r}")
        settings_json = to_json(settings)
        recent = (datetime.now(timezone.utc) - timedelta(seconds=DUPLICATE_SECONDS)).isoformat(
            timespec="milliseconds"
        )
        # One write transaction for the look and the insert: two clicks arriving together
        # cannot both find no duplicate.
        with self.store.transaction(write=True) as connection:
            same = connection.execute(
                f"SELECT jobs.id FROM {_JOBS_AND_RUNS} WHERE jobs.kind = ? AND jobs.settings = ? "
                f"AND jobs.label IS ? AND jobs.submitted_at >= ? AND {_UNFINISHED} "
                "ORDER BY jobs.id DESC LIMIT 1",
                (kind, settings_json, label or None, recent),
            ).fetchone()
            if same is not None:
                return same["id"]
            job_id = connection.execute(
                "INSERT INTO jobs (kind, settings, label, state, submitted_at) "
                "VALUES (?, ?, ?, 'queued', ?)",
                (kind, settings_json, label or None, utc_now()),
            ).lastrowid
            assert job_id is not None  # (always set after an INSERT)
        if start_runner:
            self.ensure_runner()
        return job_id

    def get(self, job_id: int) -> Job:
        """The job ``job_id``, with its run. Raises StoreError for an unknown id."""
        record = self._read_one("SELECT * FROM jobs WHERE id = ?", job_id)
        if record is None:
            raise StoreError(f"unknown job id {job_id!r} in the store {self.store.path}")
        return self._job(record)

    def jobs(self, *, unfinished: bool = False, limit: int = 50) -> list[Job]:
        """The newest jobs first; ``unfinished=True`` keeps only those queued or running."""
        with self.store.transaction(write=False) as connection:
            records = connection.execute(
                "SELECT * FROM jobs ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        jobs = [self._job(record) for record in records]
        return [job for job in jobs if not job.finished] if unfinished else jobs

    def position(self, job_id: int) -> int:
        """How many jobs are ahead of ``job_id``: queued before it, or running now."""
        sql = f"SELECT count(*) FROM {_JOBS_AND_RUNS} WHERE jobs.id < ? AND {_UNFINISHED}"
        return self._read_one(sql, job_id)[0]

    def _read_one(self, sql: str, *parameters: Any) -> Any:
        with self.store.transaction(write=False) as connection:
            return connection.execute(sql, parameters).fetchone()

    def _job(self, record: Any) -> Job:
        run = None
        if record["run_id"] is not None:
            with contextlib.suppress(StoreError):
                run = self.store.run(record["run_id"])
        plain_columns = ("id", "kind", "label", "state", "submitted_at", "run_id")
        return Job(
            **{name: record[name] for name in plain_columns},
            settings=from_json(record["settings"]),
            cancel_requested=bool(record["cancel_requested"]),
            progress=from_json(record["progress"]) or {},
            run=run,
            notes=from_json(record["notes"]) or {},
        )

    def add_notes(self, job_id: int, notes: Mapping[str, Any]) -> None:
        """Keep ``notes`` (JSON-ready) with job ``job_id``, beside those it has, for whoever
        shows the job later: a reopened page says what the page that queued it said."""
        with self.store.transaction(write=True) as connection:
            record = connection.execute("SELECT notes FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if record is None:
                raise StoreError(f"unknown job id {job_id!r} in the store {self.store.path}")
            merged = {**(from_json(record["notes"]) or {}), **notes}
            connection.execute("UPDATE jobs SET notes = ? WHERE id = ?", (to_json(merged), job_id))

    def wait(self, job_id: int, timeout: float) -> Job:
        """Wait until job ``job_id`` has finished and return it; TimeoutError (naming its
        status) if it has not after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            self.store.fail_abandoned_runs()
            job = self.get(job_id)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"job {job_id} is still {job.status} after {timeout:g} s "
                    f"({job.progress.get('message', 'no progress reported')})"
                )
            if job.status == "queued" and not self.runner_alive():
                self.ensure_runner()  # its runner died before taking it
            time.sleep(POLL_SECONDS)

    def cancel(self, job_id: int) -> str:
        """Stop job ``job_id``: a queued job is dropped at once, a running one stops at its
        next timed window (its measurements so far are kept). Returns what happened:
        ``"dropped"``, ``"requested"`` or ``"finished"`` (it had already ended)."""
        with self.store.transaction(write=True) as connection:
            dropped = connection.execute(
                "UPDATE jobs SET state = 'cancelled' WHERE id = ? AND state = 'queued'", (job_id,)
            ).rowcount
            if dropped:
                return "dropped"
            connection.execute(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND state = 'started'", (job_id,)
            )
        return "finished" if self.get(job_id).finished else "requested"

    def cancel_requested(self, job_id: int) -> bool:
        """Whether someone asked the started job ``job_id`` to stop (its runner polls this)."""
        return bool(self._read_one("SELECT cancel_requested FROM jobs WHERE id = ?", job_id)[0])

    def runner_alive(self) -> bool:
        """True if some process holds this store's runner lock (is serving the queue)."""
        self._reap()
        with try_lock(self.runner_lock_path) as held:
            return not held

    def ensure_runner(self) -> subprocess.Popen | None:
        """Start a runner for this store and return it; None when one is already serving it
        or one this object started is still running.

        It is started without a shell and reads what to run from the store, never from its
        command line. It is in this process's process group, so Ctrl-C in the dashboard's
        terminal stops it too (its run marked cancelled); else it exits once the queue is empty.
        """
        if not self.runner_module:
            raise NotImplementedError(f"{type(self).__name__} has no runner_module to start")
        self.store.fail_abandoned_runs()
        # A runner we started may still be importing, not yet holding the lock: starting
        # another each poll would leave dozens behind on a busy machine.
        if self.runner_alive() or self._runners:
            return None
        log = open(self.runner_log_path, "a", encoding="utf-8")  # noqa: SIM115 - the child owns it
        try:
            runner = subprocess.Popen(
                [sys.executable, "-m", self.runner_module, "--store", str(self.store.path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()
        self._runners.append(runner)
        return runner

    def _reap(self) -> None:
        """Collect the exit status of runners this object started (no zombies)."""
        self._runners = [runner for runner in self._runners if runner.poll() is None]

    def execute(self, job: Job, run: Run, progress: Progress) -> None:
        """Carry out one job, saving into ``run``; a subclass says how, for each kind it has
        (:class:`vecenvs.lab.LabQueue`). Raise :class:`RunCancelled` when cancelled."""
        raise NotImplementedError(f"{type(self).__name__} cannot run {job.kind!r} jobs")

    def serve(self) -> None:
        """Run queued jobs, oldest first, until none is left (what the runner process does);
        return at once if another runner already serves this store."""
        while True:
            with try_lock(self.runner_lock_path) as held:
                if not held:
                    return
                while self._next_queued() is not None:
                    self._run_next()
            # The lock is released: a job submitted while we were finishing may have seen it
            # held (so its runner exited). Look once more, now that the lock is free.
            if self._next_queued() is None:
                return

    def _next_queued(self) -> int | None:
        record = self._read_one(_OLDEST_QUEUED)
        return None if record is None else record["id"]

    def _run_next(self) -> None:
        """Take the machine lock, then the oldest queued job, and run it."""
        job_id = self._next_queued()
        if job_id is None:
            return

        def say_waiting(holder: str) -> None:
            message = f"waiting for another benchmark on this machine to finish (pid {holder})"
            Progress(self, job_id).update(0, 0, message, force=True)

        # Give up when everything waiting has been cancelled meanwhile.
        with machine_turn(say_waiting, give_up=lambda: self._next_queued() is None):
            job = self._claim()  # None if the queue emptied while we waited
            if job is not None:
                self._execute(job)

    def _claim(self) -> Job | None:
        """Mark the oldest queued job started and give it a run in the store; None if the
        queue emptied meanwhile (everything cancelled)."""
        with self.store.transaction(write=True) as connection:
            record = connection.execute(_OLDEST_QUEUED).fetchone()
            if record is None:
                return None
            connection.execute("UPDATE jobs SET state = 'started' WHERE id = ?", (record["id"],))
        job = self._job(record)
        settings = {**job.settings, "output_dir": None} if job.kind == "profile" else job.settings
        job.run_id = self.store.start_run(job.kind, settings, label=job.label)
        with self.store.transaction(write=True) as connection:
            connection.execute("UPDATE jobs SET run_id = ? WHERE id = ?", (job.run_id, job.id))
        return job

    def _execute(self, job: Job) -> None:
        """Run one started job; whatever happens, its run ends done, cancelled or failed."""
        progress = Progress(self, job.id)
        try:
            with recording(self.store, job.kind, job.settings, run_id=job.run_id) as run:
                # The last progress is written before the run ends: whoever sees the job
                # finished must also see its final count.
                try:
                    self.execute(job, run, progress)
                except RunCancelled:
                    progress.update(0, 0, "cancelled", force=True)
                    raise
                finally:
                    progress.flush()
        except RunCancelled:
            pass  # recorded as cancelled by ``recording``
        except Exception:  # the run is marked failed with the error; the queue goes on
            print(f"job {job.id} (run {job.run_id}) failed:", file=sys.stderr)
            traceback.print_exc()


class Progress:
    """Writes a job's progress to the store, at most every PROGRESS_SECONDS, but the last
    count (``done`` reaching ``total``) at once: a sweep's or a training's own run is marked
    done as it returns, before the job's last words, and whoever sees the job done must see
    its final count."""

    def __init__(self, queue: JobQueue, job_id: int):
        self._queue, self._job_id = queue, job_id
        self._last_write = 0.0
        self._pending: dict[str, Any] | None = None

    def update(self, done: int, total: int, message: str, *, force: bool = False) -> None:
        self._pending = {"done": done, "total": total, "message": message}
        last = 0 < total <= done
        if force or last or time.monotonic() - self._last_write >= PROGRESS_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self._pending is None:
            return
        with self._queue.store.transaction(write=True) as connection:
            connection.execute(
                "UPDATE jobs SET progress = ? WHERE id = ?", (to_json(self._pending), self._job_id)
            )
        self._pending, self._last_write = None, time.monotonic()


@contextlib.contextmanager
def try_lock(path: Path) -> Iterator[bool]:
    """Try to take the lock ``path`` without waiting; yield whether we hold it. The holder
    writes its pid in ``<path>.pid``, for the "waiting for" message."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(path)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        yield False
        return
    try:
        _pid_file(path).write_text(f"{os.getpid()}\n", encoding="utf-8")
        yield True
    finally:
        lock.release()


def _pid_file(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".pid")


@contextlib.contextmanager
def machine_turn(
    on_wait: Callable[[str], None] | None = None,
    give_up: Callable[[], bool] | None = None,
) -> Iterator[bool]:
    """Wait for this machine's benchmark lock and hold it for the ``with`` block.

    Every measuring entry point takes it, so two measurements never run on one machine at once.
    The wait has no deadline (the other benchmark's own bound it); Ctrl-C stops it. ``on_wait``
    is called once with the holder's pid if the lock is taken; ``give_up`` is polled while
    waiting. Yields True while holding the lock, False if ``give_up`` said stop.
    """
    path = machine_lock_path()
    told = False
    while True:
        with try_lock(path) as held:
            if held:
                yield True
                return
        if not told and on_wait is not None:
            holder = _pid_file(path)
            on_wait(holder.read_text(encoding="utf-8").strip() if holder.exists() else "?")
            told = True
        if give_up is not None and give_up():
            yield False
            return
        time.sleep(POLL_SECONDS)
