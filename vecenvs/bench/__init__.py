"""Measuring: one engine for every number the lab reports, so the CLI, the notebooks and the
dashboard give the same answer to the same question.

- :mod:`~vecenvs.bench.engine`: measure one backend or several, interleaved (:func:`compare`);
  :mod:`~vecenvs.bench.ceiling`: the machine's limit, measured beside them;
  :mod:`~vecenvs.bench.sweep`: a grid of envs x N x backends (:func:`run_sweep`).
- :mod:`~vecenvs.bench.model`: the overhead model fitted to measurements;
  :mod:`~vecenvs.bench.verdict`: what to use at each N, in words;
  :mod:`~vecenvs.bench.figures`: plotly charts of all of that, and
  :mod:`~vecenvs.bench.static` a still picture of one where plotly's JavaScript does not run.
- :mod:`~vecenvs.bench.store`: the SQLite results store; :mod:`~vecenvs.bench.machine`: what
  machine measured, and how busy it is now.

Example:
    >>> from vecenvs.bench import QUICK, SweepConfig, run_sweep
    >>> result = run_sweep(SweepConfig(["CartPole-v1"], [2, 4], ["multi", "pool"], **QUICK))
    >>> model = result.model()
"""

from vecenvs.bench.engine import (
    ACTION_RING_SIZE,
    CEILING,
    DEFAULT_REFERENCE,
    QUICK,
    BenchConfig,
    Measurement,
    MeasurementCancelled,
    compare,
    measure,
    validate_config,
)
from vecenvs.bench.machine import MachineLoad, machine_info, machine_load
from vecenvs.bench.model import OverheadModel, fit_overhead_model
from vecenvs.bench.store import ResultsStore, StoreError, default_store_path
from vecenvs.bench.sweep import (
    Backend,
    BenchEnv,
    SweepConfig,
    SweepProgress,
    SweepResult,
    env_grid,
    run_sweep,
)

__all__ = [
    "ACTION_RING_SIZE",
    "CEILING",
    "DEFAULT_REFERENCE",
    "QUICK",
    "Backend",
    "BenchConfig",
    "BenchEnv",
    "MachineLoad",
    "Measurement",
    "MeasurementCancelled",
    "OverheadModel",
    "ResultsStore",
    "StoreError",
    "SweepConfig",
    "SweepProgress",
    "SweepResult",
    "compare",
    "default_store_path",
    "env_grid",
    "fit_overhead_model",
    "machine_info",
    "machine_load",
    "measure",
    "run_sweep",
    "validate_config",
]
