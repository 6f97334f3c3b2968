"""The results store: every run, with its machine and settings, in one SQLite file.

A speed measured today is only worth keeping if, next week, you can still say what was
measured, how, and on which machine. So every run (a ``bench`` command, a dashboard sweep, a
profile) is saved with its settings and :func:`~vecenvs.bench.machine.machine_info`, each
measurement as it arrives; runs can be listed, compared, and exported to CSV or JSON
(``python -m vecenvs results --help``). SQLite ships with Python, needs no server, and lets
several processes write to one file at once. The modules, each building on those before it:
``values`` (plain JSON, :class:`StoreError`), ``schema`` (tables and migrations), ``sqlite``
(opening the file, transactions), ``records`` (rows in, records out), ``export`` (CSV, JSON)
and ``runs`` (the run lifecycle, :func:`recording`, :class:`ResultsStore`).

Example:
    >>> from vecenvs.bench import QUICK, BenchConfig, measure
    >>> from vecenvs.bench.store import ResultsStore, recording
    >>> with ResultsStore("/tmp/example-results.sqlite") as store:  # doctest: +SKIP
    ...     with recording(store, "bench", {"env_id": "CartPole-v1"}, label="first try") as run:
    ...         run.add(measure(BenchConfig("CartPole-v1", 8, **QUICK)))
    ...     store.export_csv("/tmp/example-results.csv")
"""

from vecenvs.bench.store.records import RunRecord
from vecenvs.bench.store.runs import (
    FINAL_STATUSES,
    RUN_STATUSES,
    ResultsStore,
    Run,
    RunCancelled,
    recording,
)
from vecenvs.bench.store.schema import SCHEMA_VERSION
from vecenvs.bench.store.sqlite import BUSY_TIMEOUT_SECONDS, STORE_ENV_VAR, default_store_path
from vecenvs.bench.store.values import StoreError, from_json, to_json, utc_now

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
    "from_json",
    "recording",
    "to_json",
    "utc_now",
]
