"""How many CPUs may this process use? One answer for the whole lab, and where it came from.

Three things can limit it, and ``os.cpu_count()`` sees none of them:

- the host's CPUs (``os.cpu_count()``: all of them, whatever this process may use);
- the *affinity mask* (``taskset``, ``docker --cpuset-cpus``, a batch scheduler): the CPUs this
  process may run on, which Linux tells through ``os.sched_getaffinity``;
- a *CPU quota* of the process's control group (``docker --cpus=4``, Kubernetes' CPU limit,
  JupyterHub's ``cpu_limit``, systemd's ``CPUQuota=``): the process may run on every CPU, but
  only for ``quota`` microseconds of CPU time per ``period``, ``quota / period`` CPUs' worth in
  all. cgroup v2 writes both in one file, ``cpu.max`` (``"400000 100000"``, or ``"max 100000"``
  for no limit); cgroup v1 in two, ``cpu.cfs_quota_us`` (``-1`` for none) and
  ``cpu.cfs_period_us``. A quota on any group above ours binds us too, so every ancestor counts.

Starting 64 workers under a 4-CPU quota is the mistake this module exists to prevent: the kernel
lets them all run for a few milliseconds, then stops every one of them for the rest of the period.
A fractional quota (``--cpus=2.5``) rounds up, as loky, the JVM and Go do: the third CPU is there
part of the time.

Example:
    >>> from vecenvs.cpus import cpu_count
    >>> print(cpu_count())  # doctest: +SKIP
    4 CPUs: cgroup quota 400000/100000 on a 64-CPU host
    >>> cpu_count().count  # doctest: +SKIP
    4

loky (joblib's process pool) also reads quotas, but only from the root of the cgroup mount, as
seen from inside a container: a quota on the process's own group seen from the host (systemd's
``CPUQuota=`` on a JupyterHub user's slice) escapes it, and it cannot say which limit applied.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuCount", "Quota", "available_cpus", "cpu_count"]

#: Where the kernel describes this process (its groups, its mounts). A test that plays a container
#: points this at a folder laid out like ``/proc`` (``self/cgroup``, ``self/mountinfo``).
PROC = Path("/proc")


@dataclass(frozen=True)
class Quota:
    """A cgroup's CPU quota: ``quota`` microseconds of CPU time in every ``period``."""

    quota: int
    period: int
    #: The file it was read from (``.../cpu.max``, or ``.../cpu.cfs_quota_us`` for cgroup v1).
    path: str

    @property
    def cpus(self) -> float:
        """How many CPUs' worth of time the quota allows (2.5 for 250000/100000)."""
        return self.quota / self.period


@dataclass(frozen=True)
class CpuCount:
    """The CPUs this process may use (:attr:`count`) and the limits that decided it."""

    #: What the lab uses: the fewest of the host's CPUs, the affinity mask and the quota (rounded
    #: up), at least 1.
    count: int
    #: ``os.cpu_count()``: every CPU of the machine (or of the VM), usable or not.
    host: int
    #: How many CPUs the affinity mask allows, or None where the OS does not say (macOS, Windows).
    affinity: int | None
    #: The tightest CPU quota of this process's cgroups, or None when there is none.
    quota: Quota | None

    @property
    def source(self) -> str:
        """What limited the count: ``"cgroup quota"``, ``"affinity"`` or ``"host"``."""
        if (
            self.quota is not None
            and self.count == max(1, math.ceil(self.quota.cpus))
            and self.count < min(self.host, self.affinity or self.host)
        ):
            return "cgroup quota"
        if self.affinity is not None and self.affinity < self.host:
            return "affinity"
        return "host"

    def __str__(self) -> str:
        """One line a reader can check: ``"4 CPUs: cgroup quota 400000/100000 on a 64-CPU host"``."""
        cpus = f"{self.count} CPU{'s' if self.count != 1 else ''}"
        if self.source == "cgroup quota":
            assert self.quota is not None
            rounded = "" if self.quota.quota % self.quota.period == 0 else ", rounded up"
            where = (
                f"cgroup quota {self.quota.quota}/{self.quota.period}{rounded} on a "
                f"{self.host}-CPU host"
            )
            if self.affinity is not None and self.affinity < self.host:
                where += f" ({self.affinity} in its affinity mask)"
            return f"{cpus}: {where}"
        if self.source == "affinity":
            return f"{cpus}: the affinity mask allows {self.affinity} of the host's {self.host}"
        if self.quota is not None:
            return (
                f"{cpus}: all of the host's (the cgroup quota {self.quota.quota}/"
                f"{self.quota.period} allows {self.quota.cpus:g})"
            )
        return f"{cpus}: all of the host's, no affinity mask or cgroup quota limits them"


def cpu_count() -> CpuCount:
    """Count the CPUs this process may use, from the host, the affinity mask and cgroup quotas.

    Cheap (a few small reads of ``/proc`` and ``/sys``), so it is asked afresh each time rather
    than cached: a process moved into another group, or given another mask, gets the new answer.
    """
    host = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    quota = cgroup_quota()
    limits = [host, affinity or host]
    if quota is not None:
        limits.append(math.ceil(quota.cpus))
    return CpuCount(max(1, min(limits)), host, affinity, quota)


def available_cpus() -> int:
    """The number of CPUs this process may use: ``cpu_count().count``.

    The pools' default number of workers, the ceiling's processes, autotune's candidates, the
    overhead model's parallelism and the load check all ask this one function.
    """
    return cpu_count().count


def cgroup_quota() -> Quota | None:
    """The tightest CPU quota over this process's cgroups and their ancestors (v1 or v2), if any.

    None on a machine without cgroups (macOS, Windows), or where no group sets a quota. Files that
    cannot be read are skipped: a quota we cannot see is one we cannot respect, not an error.
    """
    quotas = [quota for folder in _cpu_groups() for quota in _quotas_up_from(*folder)]
    return min(quotas, key=lambda quota: quota.cpus, default=None)


def _cpu_groups() -> list[tuple[Path, Path]]:
    """(mount point, this process's group folder under it) for each mounted CPU controller."""
    try:
        membership = (PROC / "self" / "cgroup").read_text().splitlines()
        mounts = (PROC / "self" / "mountinfo").read_text().splitlines()
    except OSError:
        return []
    # /proc/self/cgroup: "0::/user.slice" (v2) or "4:cpu,cpuacct:/docker/abc" (v1).
    groups: dict[str, str] = {}
    for line in membership:
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            groups["v2"] = path
        elif "cpu" in controllers.split(","):
            groups["v1"] = path
    found = []
    for line in mounts:
        # mountinfo: "36 25 0:31 /root /sys/fs/cgroup/cpu rw,... - cgroup cgroup rw,cpu,cpuacct"
        fields, _, after = line.partition(" - ")
        fields_list, after_list = fields.split(), after.split()
        if len(fields_list) < 5 or len(after_list) < 3:
            continue
        root, mount_point, kind = fields_list[3], fields_list[4], after_list[0]
        if kind == "cgroup2" and "v2" in groups:
            version = "v2"
        elif kind == "cgroup" and "cpu" in after_list[2].split(",") and "v1" in groups:
            version = "v1"
        else:
            continue
        group = groups[version]
        # A mount of a sub-tree (a container's own group, bind-mounted) starts at `root`.
        relative = os.path.relpath(group, root) if _is_within(group, root) else "."
        found.append((_rebase(mount_point), _rebase(mount_point) / relative))
    return found


def _quotas_up_from(mount_point: Path, group: Path) -> list[Quota]:
    """Every quota set on ``group`` and on its ancestors up to the mount point."""
    quotas = []
    folder = group.resolve() if group.exists() else mount_point
    while True:
        quota = _read_quota(folder)
        if quota is not None:
            quotas.append(quota)
        if folder == mount_point or mount_point not in folder.parents:
            return quotas
        folder = folder.parent


def _read_quota(folder: Path) -> Quota | None:
    """The quota set in one cgroup folder, v2's ``cpu.max`` or v1's pair of files, if any."""
    try:
        if (folder / "cpu.max").exists():
            limit, period = (folder / "cpu.max").read_text().split()
            if limit == "max":
                return None
            return Quota(int(limit), int(period), str(folder / "cpu.max"))
        limit = (folder / "cpu.cfs_quota_us").read_text().strip()
        period = (folder / "cpu.cfs_period_us").read_text().strip()
    except (OSError, ValueError):
        return None
    if int(limit) <= 0:  # -1: no quota
        return None
    return Quota(int(limit), int(period), str(folder / "cpu.cfs_quota_us"))


def _is_within(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def _rebase(mount_point: str) -> Path:
    """A mount point as this process reads it: under :data:`PROC`'s parent when faked."""
    if Path("/proc") == PROC:
        return Path(mount_point)
    return PROC.parent / mount_point.lstrip("/")
