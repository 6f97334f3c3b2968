"""Makes this Python process, and every Python process it starts, see a machine of n CPUs.

Python imports a module named ``sitecustomize`` at startup, from the first folder on ``sys.path``
that has one. The tests put this folder first on ``PYTHONPATH`` and set ``VECENVS_FAKE_CPUS=n``;
every process that inherits both (a notebook's kernel, pool workers under any start method,
Ray's workers) then starts with ``os.cpu_count()``, ``os.sched_getaffinity()`` and
``psutil.cpu_count()`` saying n. A forked child inherits the patched functions; a spawned one
runs this file again. Nothing else changes: the real cores still do the work, so timings are
those of the real machine, and cgroup quotas are read from the real files (a test that plays a
container sets a real one; see ``tests/fake_machine/__init__.py``).

Without ``VECENVS_FAKE_CPUS`` this module does nothing but hand over to the ``sitecustomize``
it hides, if the interpreter has one (Debian's Python does).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_FAKE = os.environ.get("VECENVS_FAKE_CPUS", "")


def _fake(cpus: int) -> None:
    os.cpu_count = lambda: cpus
    if hasattr(os, "process_cpu_count"):  # Python 3.13+: the affinity-aware count
        os.process_cpu_count = lambda: cpus
    if hasattr(os, "sched_getaffinity"):
        os.sched_getaffinity = lambda pid: set(range(cpus))
    try:
        import psutil
    except ImportError:  # an interpreter without psutil has nothing more to fake
        return
    psutil.cpu_count = lambda logical=True: cpus


if _FAKE:
    if not _FAKE.isdigit() or int(_FAKE) < 1:
        raise SystemExit(f"VECENVS_FAKE_CPUS is {_FAKE!r}: expected a whole number >= 1")
    _fake(int(_FAKE))


def _hand_over() -> None:
    """Run the sitecustomize this one hides (the next one on sys.path), as Python would have."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [path for path in sys.path if os.path.abspath(path or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_hand_over()
