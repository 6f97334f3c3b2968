"""Which machine measured this, and how busy is it now?

"250,000 steps/s" means little without the machine: its cores, CPU, Python and the versions of
gymnasium and numpy. :func:`machine_info` gathers those facts as a JSON-ready dict, which the
results store saves with every run, so runs of different days and machines can be compared
fairly. :func:`machine_load` says whether the machine is quiet enough to measure on right now:
a speed measured while other programs hold the cores is low and noisy, and says little.

Example:
    >>> from vecenvs.bench.machine import format_machine, machine_info, machine_load
    >>> print(format_machine(machine_info()))  # doctest: +SKIP
    Intel(R) Xeon(R) Processor: 2 logical CPUs (2 physical cores), 7.8 GiB memory; 2 CPUs usable
    here: all of the host's, no affinity mask or cgroup quota limits them; Linux-6.1.0-x86_64-with-
    glibc2.36; CPython 3.11.7; host lab-vm; vecenvs 0.1.0, ...
    >>> print(machine_load(seconds=0.2).sentence())  # doctest: +SKIP
    Load check: other programs used 3% of this machine's 2 CPUs over the last 0.2 s (1-minute
    load average 0.41). Quiet (busy from 20%): the numbers measured now should repeat.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import psutil

from vecenvs.cpus import CpuCount, cpu_count

__all__ = [
    "BUSY_SHARE",
    "PACKAGES",
    "MachineLoad",
    "cpu_model",
    "cpu_seconds",
    "format_machine",
    "machine_info",
    "machine_load",
    "package_versions",
]

#: From this share of the machine's CPU time used by other programs, a measurement is called
#: unreliable. On 2 CPUs it is 0.4 of a core: one busy program beside us is well past it, the
#: odd daemon waking up is not.
BUSY_SHARE = 0.2

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

    Cheap enough for every run: on Linux it reads ``/proc/cpuinfo`` and starts no process, and
    package versions come from their metadata, so asking about torch does not import it.
    ``usable_cpus`` are the CPUs this process may use (:func:`vecenvs.cpus.cpu_count`: a
    container's quota or ``taskset`` can make them fewer than ``logical_cpus``), ``cpus_from``
    says what decided that count ("4 CPUs: cgroup quota 400000/100000 on a 64-CPU host"),
    ``affinity_cpus`` and ``cpu_quota`` (``{"quota": 400000, "period": 100000}``) are the limits
    it was read from, ``None`` where there are none. ``physical_cores`` is ``None`` when unknown,
    and a package's version ``None`` when it is not installed. Runs stored before ``cpus_from``
    existed lack the last three keys; :func:`format_machine` reads both.
    """
    cpus = cpu_count()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "logical_cpus": cpus.host,
        "usable_cpus": cpus.count,
        "cpus_from": str(cpus),
        "affinity_cpus": cpus.affinity,
        "cpu_quota": None
        if cpus.quota is None
        else {"quota": cpus.quota.quota, "period": cpus.quota.period},
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

    Linux: ``/proc/cpuinfo``'s first ``model name``; macOS: ``sysctl``. Elsewhere, or when those
    say nothing (ARM Linux boards often have no ``model name``): ``platform.processor()``, then
    the architecture, then ``"unknown"``.
    """
    model = ""
    try:
        if platform.system() == "Linux":
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
                lines = (line.partition(":") for line in cpuinfo)
                model = next((v.strip() for k, _, v in lines if k.strip() == "model name"), "")
        elif platform.system() == "Darwin":
            # A timeout, because a stuck sysctl must not stop a benchmark from being saved.
            command = ["sysctl", "-n", "machdep.cpu.brand_string"]
            model = subprocess.run(
                command, capture_output=True, text=True, timeout=5, check=True
            ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return model or platform.processor() or platform.machine() or "unknown"


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (``None`` if not installed), read from its metadata
    without importing it."""
    versions: dict[str, str | None] = dict.fromkeys(names)
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


def format_machine(info: dict[str, Any]) -> str:
    """One paragraph summing up a :func:`machine_info` dict, for a terminal or a page.

    Missing keys are fine (what an older vecenvs stored); packages not installed are left out.
    Where the run says what decided its usable CPUs, that sentence follows the CPU:
    ``"...: 64 logical CPUs (32 physical cores), 251.0 GiB memory; 4 CPUs usable here: cgroup
    quota 400000/100000 on a 64-CPU host; Linux-..."``.
    """
    usable, physical = info.get("usable_cpus"), info.get("physical_cores")
    cpus_from = info.get("cpus_from")
    details = [f"{usable} usable here"] if usable is not None and not cpus_from else []
    if physical is not None:
        details.append(f"{physical} physical core{'' if physical == 1 else 's'}")
    cpus = f"{info.get('logical_cpus', '?')} logical CPUs"
    cpus += f" ({', '.join(details)})" if details else ""
    memory, python = info.get("memory_bytes"), info.get("python")
    cpus += f", {memory / 2**30:.1f} GiB memory" if memory else ""
    parts = [
        f"{info.get('cpu_model', 'unknown CPU')}: {cpus}",
        # "4 CPUs: cgroup quota ..." -> "4 CPUs usable here: cgroup quota ..."
        str(cpus_from).replace(": ", " usable here: ", 1) if cpus_from else "",
        str(info.get("os") or ""),
        f"{info.get('python_implementation', 'Python')} {python}" if python else "",
        f"host {info['hostname']}" if info.get("hostname") else "",
        ", ".join(f"{n} {v}" for n, v in (info.get("packages") or {}).items() if v is not None),
    ]
    return "; ".join(part for part in parts if part)


@dataclass(frozen=True)
class MachineLoad:
    """How busy other programs kept this machine over a short interval (:func:`machine_load`)."""

    cpus: int  # the CPUs this process may use (vecenvs.cpus.available_cpus)
    # The share of those CPUs' time that other programs took, from 0 (all ours) to 1 (none left).
    others_share: float
    seconds: float  # how long the interval was
    # The 1-minute load average (runnable processes); None where the OS has none. It also
    # remembers the last minute, which the share does not.
    load_average: float | None
    threshold: float = BUSY_SHARE  # from this others_share on, the machine counts as busy
    # Where the CPU count came from ("4 CPUs: cgroup quota 400000/100000 on a 64-CPU host").
    cpus_from: str = ""

    @property
    def busy(self) -> bool:
        return self.others_share >= self.threshold

    @property
    def busy_cores(self) -> float:
        """The same share as a number of CPUs' worth of work."""
        return self.others_share * self.cpus

    def sentence(self) -> str:
        """The check in words, with its numbers and what follows from them."""
        average = (
            "" if self.load_average is None else f" (1-minute load average {self.load_average:.2f})"
        )
        where = f" ({self.cpus_from})" if self.cpus_from else ""
        text = (
            f"Load check: other programs used {self.others_share:.0%} of the {self.cpus} CPUs "
            f"this process may use{where} over the last {self.seconds:.1f} s{average}. "
        )
        if self.busy:
            return text + (
                f"BUSY (busy from {self.threshold:.0%}): numbers measured now will be lower and "
                "noisier than on a quiet machine, close calls can go either way, and conclusions "
                "drawn from them may not hold on a quiet run. Rerun when the machine is quiet."
            )
        return text + (
            f"Quiet (busy from {self.threshold:.0%}): the numbers measured now should "
            "repeat; still, rerun a cell before believing a surprising one."
        )


def machine_load(seconds: float = 1.0, threshold: float = BUSY_SHARE) -> MachineLoad:
    """Measure how much of the CPUs we may use other programs take, over ``seconds`` from now
    (at least 0.05 s: shorter intervals are all noise).

    Other programs' CPU time is the busy time (``psutil.cpu_times``: everything but idle and I/O
    wait) of the CPUs in our affinity mask, minus the CPU time of this process and its children.
    Under a cgroup quota we may use fewer CPUs than the mask holds, and others may use the rest
    without slowing us: only what they take beyond that spare room counts (64 CPUs, a 4-CPU quota
    and others busy on 30 leaves us our 4: quiet). Call it while this process is idle (before
    measuring), or its own work is subtracted but its pressure on the other programs is not.
    """
    seconds = max(0.05, float(seconds))
    cpus = cpu_count()
    busy_before, own_before, start = _busy_cpu_seconds(), _own_cpu_seconds(), time.perf_counter()
    time.sleep(seconds)
    busy_after, own_after = _busy_cpu_seconds(), _own_cpu_seconds()
    elapsed = time.perf_counter() - start
    others = (busy_after - busy_before) - (own_after - own_before)
    share = _others_share(others / elapsed, cpus)
    load_average = None
    with contextlib.suppress(AttributeError, OSError):  # Windows has no load average
        load_average = os.getloadavg()[0]
    return MachineLoad(cpus.count, share, elapsed, load_average, threshold, str(cpus))


def _others_share(others_cpus: float, cpus: CpuCount) -> float:
    """The share of our usable CPUs that ``others_cpus`` CPUs' worth of other work takes away."""
    spare = (cpus.affinity or cpus.host) - cpus.count  # CPUs beyond our quota: others may use them
    return min(1.0, max(0.0, (others_cpus - spare) / cpus.count))


def _busy_cpu_seconds() -> float:
    """CPU seconds the CPUs of our affinity mask have spent busy since boot (all together)."""
    mask = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    per_cpu = psutil.cpu_times(percpu=True)
    chosen = [t for cpu, t in enumerate(per_cpu) if mask is None or cpu in mask] or per_cpu
    busy = 0.0
    for times in chosen:
        idle = times.idle + getattr(times, "iowait", 0.0)
        # Linux counts guest time inside user time already: leave it out of the sum once.
        guest = getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
        busy += sum(times) - idle - guest
    return busy


def _own_cpu_seconds() -> float:
    """CPU seconds used by this process and its descendants (those alive now)."""
    own = psutil.Process()
    return sum(cpu_seconds([own, *own.children(recursive=True)]).values())


def cpu_seconds(processes: Iterable[psutil.Process]) -> dict[int, float]:
    """User + system CPU seconds of each process, by pid; one that has ended is left out."""
    seconds = {}
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):  # it ended in between (or is a zombie)
            times = process.cpu_times()
            seconds[process.pid] = times.user + times.system
    return seconds
