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

One module per idea, each building on those before it:

- :mod:`~vecenvs.bench.store.values`: plain JSON, UTC times, checked numbers, and
  :class:`StoreError`, the one error the store raises;
- :mod:`~vecenvs.bench.store.schema`: the tables, the schema version and its migrations;
- :mod:`~vecenvs.bench.store.sqlite`: opening the file and short transactions, safely from
  several processes at once;
- :mod:`~vecenvs.bench.store.records`: a measurement as a row; runs and measurements read back;
- :mod:`~vecenvs.bench.store.export`: CSV and JSON;
- :mod:`~vecenvs.bench.store.runs`: the run lifecycle, :func:`recording`, and
  :class:`ResultsStore` itself.

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

# The old private name, kept for code that builds old files (tests/test_jobs.py).
from vecenvs.bench.store.schema import MIGRATIONS as _MIGRATIONS  # noqa: F401
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
