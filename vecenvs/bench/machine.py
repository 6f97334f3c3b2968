"""Which machine measured this? The facts that make a speed comparable across machines.

"250,000 steps/s" means little without the machine: how many cores, which CPU, which Python,
which versions of gymnasium and numpy. :func:`machine_info` gathers those facts as a plain,
JSON-ready dict; the results store saves it with every run, so runs from different days and
different machines can be told apart and compared fairly.

Example:
    >>> from vecenvs.bench.machine import format_machine, machine_info
    >>> info = machine_info()
    >>> info["logical_cpus"] >= 1
    True
    >>> print(format_machine(info))  # doctest: +SKIP
    Intel(R) Xeon(R) Processor: 2 logical CPUs (2 usable here, 2 physical cores), 7.8 GiB memory;
    Linux-6.1.0-x86_64-with-glibc2.36; CPython 3.11.7; host lab-vm; vecenvs 0.1.0, ...
"""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
from importlib import metadata
from typing import Any

import psutil

__all__ = ["PACKAGES", "cpu_model", "format_machine", "machine_info", "package_versions"]

#: The packages whose versions can change a measurement: ours, the env and array libraries, the
#: process and pickling libraries, the profiler, and the peers measured beside our backends.
PACKAGES = (
    "vecenvs",
    "gymnasium",
    "numpy",
    "multiprocess",
    "dill",
    "psutil",
    "mujoco",
    "stable-baselines3",
    "torch",
    "envpool",
    "py-spy",
    "plotly",
)


def machine_info() -> dict[str, Any]:
    """The facts about this machine and this Python that a measurement depends on.

    Cheap enough to call for every run: on Linux it reads ``/proc/cpuinfo`` and starts no
    process. Nothing is imported to find a package's version, so asking about torch costs
    nothing even when torch is installed.

    Returns:
        A JSON-ready dict with these keys: ``hostname``, ``cpu_model``, ``logical_cpus``
        (``os.cpu_count()``), ``usable_cpus`` (the CPUs this process may run on, which a
        container or ``taskset`` can make fewer), ``physical_cores`` (``None`` if unknown),
        ``memory_bytes``, ``os`` (``platform.platform()``), ``system``, ``release``,
        ``architecture``, ``python``, ``python_implementation`` and ``packages`` (package name
        -> version, ``None`` when not installed).
    """
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": _usable_cpus(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_bytes": psutil.virtual_memory().total,
        "os": platform.platform(),
        "system": platform.system(),
        "release": platform.release(),
        "architecture": platform.machine(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "packages": package_versions(),
    }


# The CPU does not change while we run; on macOS finding it starts a process, so ask once.
@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's marketing name, e.g. ``"Intel(R) Xeon(R) Processor"``, or a best guess.

    Linux: the ``model name`` line of ``/proc/cpuinfo``. macOS: ``sysctl -n
    machdep.cpu.brand_string``. Elsewhere, or when those say nothing (ARM Linux boards often
    have no ``model name``): ``platform.processor()``, then the architecture, then ``"unknown"``.
    """
    system = platform.system()
    model = ""
    if system == "Linux":
        model = _linux_cpu_model()
    elif system == "Darwin":
        model = _macos_cpu_model()
    return model or platform.processor() or platform.machine() or "unknown"


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package in ``names``, ``None`` for those not installed.

    Read from the installed package metadata, without importing the package.
    """
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def format_machine(info: dict[str, Any]) -> str:
    """One paragraph summing up a :func:`machine_info` dict, for a terminal or a page.

    Tolerates missing keys, so it also works on what an older version of vecenvs stored.
    Packages that are not installed are left out.
    """
    cpus = f"{info.get('logical_cpus', '?')} logical CPUs"
    details = []
    usable = info.get("usable_cpus")
    if usable is not None:
        details.append(f"{usable} usable here")
    physical = info.get("physical_cores")
    if physical is not None:
        details.append(f"{physical} physical core{'' if physical == 1 else 's'}")
    if details:
        cpus += f" ({', '.join(details)})"
    parts = [f"{info.get('cpu_model', 'unknown CPU')}: {cpus}"]
    memory = info.get("memory_bytes")
    if memory:
        parts[0] += f", {memory / 2**30:.1f} GiB memory"
    if info.get("os"):
        parts.append(str(info["os"]))
    if info.get("python"):
        parts.append(f"{info.get('python_implementation', 'Python')} {info['python']}")
    if info.get("hostname"):
        parts.append(f"host {info['hostname']}")
    installed = [f"{name} {version}" for name, version in (info.get("packages") or {}).items()
                 if version is not None]
    if installed:
        parts.append(", ".join(installed))
    return "; ".join(parts)


def _usable_cpus() -> int | None:
    """How many CPUs this process may run on; ``os.cpu_count()`` where the OS won't say."""
    # sched_getaffinity exists on Linux only. In a container limited to 2 of 64 CPUs it says 2
    # where cpu_count says 64: the number that matters for how many workers can run at once.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _linux_cpu_model() -> str:
    """The first ``model name`` in ``/proc/cpuinfo``, or ``""``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return ""


def _macos_cpu_model() -> str:
    """What ``sysctl`` calls the CPU, or ``""``."""
    try:
        # A timeout, because a stuck sysctl must not stop a benchmark from being saved.
        completed = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"],
            capture_output=True, text=True, timeout=5, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return completed.stdout.strip()
