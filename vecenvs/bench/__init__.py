"""Measuring: one engine for every number the lab reports, so the CLI, the notebooks and the
dashboard give the same answer to the same question.

- :mod:`vecenvs.bench.engine`: measure one backend (:func:`measure`) or several, interleaved,
  on one env and N (:func:`compare`).
- :mod:`vecenvs.bench.ceiling`: the ``ceiling`` row, the machine's limit measured beside them.
- :mod:`vecenvs.bench.sweep`: a grid of envs x N x backends, with live progress, cancelling and
  saving as it goes (:func:`run_sweep`).
- :mod:`vecenvs.bench.model`: the overhead model fitted to measurements (t_env, t_os, the
  machine's limit) (:func:`fit_overhead_model`).
- :mod:`vecenvs.bench.verdict`: what to use at each N, or "too close to call", and the model's
  fit quality in words.
- :mod:`vecenvs.bench.figures`: plotly charts of all of that (the seeds' figure, throughput,
  speed-up, efficiency).
- :mod:`vecenvs.bench.store`: the SQLite results store (:class:`ResultsStore`).
- :mod:`vecenvs.bench.machine`: what machine the numbers were measured on, and how busy it is
  now (:func:`machine_load`).
- :mod:`vecenvs.bench.static`: a still picture of a figure, for where plotly's JavaScript
  does not run (an exported notebook).

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
