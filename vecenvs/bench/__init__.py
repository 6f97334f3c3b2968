"""Measuring: one engine for every number the lab reports.

- :mod:`vecenvs.bench.engine`: measure one backend (or several, interleaved) on one env and N.
"""

from vecenvs.bench.engine import (
    ACTION_RING_SIZE,
    DEFAULT_REFERENCE,
    QUICK,
    BenchConfig,
    Measurement,
    compare,
    measure,
    validate_config,
)

__all__ = [
    "ACTION_RING_SIZE",
    "DEFAULT_REFERENCE",
    "QUICK",
    "BenchConfig",
    "Measurement",
    "compare",
    "measure",
    "validate_config",
]
