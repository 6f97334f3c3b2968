"""Run a process, and everything it starts, as if on another machine: n CPUs, or a container's
CPU quota on a big host. Our VM has 2 cores; the course must work on 1 to 128.

Two fakes, both described in ``shared/MACHINE.md``:

- **n CPUs**: :func:`environment` gives the environment variables that make every Python process
  started with them see n CPUs (``site/sitecustomize.py`` patches ``os.cpu_count``,
  ``os.sched_getaffinity`` and ``psutil.cpu_count`` at startup, in kernels and workers alike).
- **A container's quota**: :func:`quota_group` makes a real cgroup v1 group with a real CPU
  quota (root only), and :func:`in_container` is the command line that starts a program inside
  it, in a cgroup namespace of its own, so that it sees its group as the root of the hierarchy
  with the quota in the root's files, as a program under ``docker --cpus=4`` does. With the host
  faked at 64 CPUs too, :func:`vecenvs.cpus.cpu_count` there says "4 CPUs: cgroup quota
  400000/100000 on a 64-CPU host".

:func:`kernel_manager` puts either under a Jupyter kernel, for running notebooks.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The folder holding the ``sitecustomize`` module that fakes the CPU count.
SITE = Path(__file__).resolve().parent / "site"
#: Where cgroup v1's cpu controller is mounted on our VM (and on most v1 hosts).
CPU_CONTROLLER = Path("/sys/fs/cgroup/cpu")


@dataclass(frozen=True)
class Machine:
    """A machine to play: ``cpus`` CPUs on the host, and optionally a CPU quota of ``quota``
    CPUs' worth (``quota * 100000`` µs per 100000 µs period) in a container on it."""

    cpus: int
    quota: int | None = None

    @property
    def id(self) -> str:
        """How test ids name it: ``"8cpus"``, ``"quota4-of-64cpus"``."""
        return f"{self.cpus}cpus" if self.quota is None else f"quota{self.quota}-of-{self.cpus}cpus"

    @property
    def count(self) -> int:
        """How many CPUs :func:`vecenvs.cpus.available_cpus` says there."""
        return self.cpus if self.quota is None else min(self.cpus, self.quota)


def environment(cpus: int) -> dict[str, str]:
    """The variables that make a Python process started with them see ``cpus`` CPUs (merged
    into this process's environment: PYTHONPATH keeps what it had, after the fake)."""
    path = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH", "")) if p)
    return {"VECENVS_FAKE_CPUS": str(cpus), "PYTHONPATH": path}


def quota_skip_reason() -> str | None:
    """Why a real quota cannot be set here, or None when it can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "a real cgroup quota needs root (shared/MACHINE.md)"
    if not (CPU_CONTROLLER / "cpu.cfs_quota_us").exists():
        return f"no writable cgroup v1 cpu controller at {CPU_CONTROLLER}"
    if shutil.which("unshare") is None:
        return "a cgroup namespace needs util-linux's unshare"
    return None


@contextmanager
def quota_group(cpus: int, period: int = 100_000) -> Iterator[Path]:
    """A new cgroup v1 group allowing ``cpus`` CPUs' worth of time; removed afterwards, once the
    processes in it have ended (waits up to 30 s for them)."""
    reason = quota_skip_reason()
    if reason is not None:
        raise RuntimeError(reason)
    group = CPU_CONTROLLER / f"vecenvs-fake-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text(str(period))
        (group / "cpu.cfs_quota_us").write_text(str(cpus * period))
        yield group
    finally:
        deadline = time.monotonic() + 30
        while True:
            try:
                group.rmdir()
                break
            except OSError:  # EBUSY while a process is still in it (a kernel shutting down)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def in_container(group: Path, argv: list[str]) -> list[str]:
    """A command line that runs ``argv`` in ``group``, in a cgroup and mount namespace of its
    own with the cpu controller mounted again there: ``argv`` sees ``group`` as the root (as
    under ``docker --cpus``), its quota in ``/sys/fs/cgroup/cpu/cpu.cfs_quota_us``."""
    mount = shlex.quote(str(CPU_CONTROLLER))
    inside = f'umount {mount} && mount -t cgroup -o cpu cgroup {mount} && exec "$@"'
    enter = (
        f"echo $$ > {shlex.quote(str(group / 'cgroup.procs'))} && "
        f"exec unshare --cgroup --mount --propagation private bash -c {shlex.quote(inside)} "
        'bash "$@"'
    )
    return ["bash", "-c", enter, "bash", *argv]


@contextmanager
def kernel_manager(
    machine: Machine, folder: Path, env: dict[str, str] | None = None
) -> Iterator[Any]:
    """A Jupyter ``KernelManager`` whose kernel (this venv's Python, with ``env`` added to its
    environment) runs on ``machine``; its kernel spec is written under ``folder``. The kernel is
    shut down on the way out. RuntimeError where the machine's quota cannot be set."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    with quota_group(machine.quota) if machine.quota else _no_group() as group:
        if group is not None:
            argv = in_container(group, argv)
        spec = {
            "argv": argv,
            "display_name": f"Python 3 on {machine.id}",
            "language": "python",
            "env": {**(env or {}), **environment(machine.cpus)},
        }
        kernels = folder / "kernels"
        (kernels / machine.id).mkdir(parents=True, exist_ok=True)
        (kernels / machine.id / "kernel.json").write_text(json.dumps(spec))
        specs = KernelSpecManager(kernel_dirs=[str(kernels)])
        manager = KernelManager(kernel_name=machine.id, kernel_spec_manager=specs)
        try:
            yield manager
        finally:  # before the group is removed: it cannot be while the kernel is in it
            if manager.has_kernel:
                manager.shutdown_kernel(now=True)


@contextmanager
def _no_group() -> Iterator[None]:
    yield None
