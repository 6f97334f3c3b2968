"""The one CPU count (vecenvs.cpus): the host, the affinity mask and cgroup v1/v2 quotas.

The quota is read from a folder laid out like ``/proc`` and ``/sys/fs/cgroup`` (cgroup v2 is not
mounted with a CPU controller on our VM), and, as root, from a real cgroup v1 group with a real
quota: seen from the host, and from inside a cgroup namespace, as a container sees it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from vecenvs import cpus
from vecenvs.cpus import CpuCount, Quota, cpu_count


def fake_machine(
    root: Path, *, v2: dict[str, str] | None = None, v1: dict[str, tuple[str, str]] | None = None
) -> Path:
    """A fake /proc and /sys/fs/cgroup under ``root``; returns the fake /proc.

    ``v2``: group path -> cpu.max text, the process in the deepest one; ``v1``: group path ->
    (cfs_quota_us, cfs_period_us).
    """
    membership, mounts = [], []
    if v2 is not None:
        membership.append(f"0::{max(v2, key=len)}")
        mounts.append("41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw")
        for group, text in v2.items():
            folder = root / "sys/fs/cgroup" / group.lstrip("/")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "cpu.max").write_text(text + "\n")
    if v1 is not None:
        membership.append(f"4:cpu,cpuacct:{max(v1, key=len)}")
        mounts.append("32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct")
        for group, (quota, period) in v1.items():
            folder = root / "sys/fs/cgroup/cpu,cpuacct" / group.lstrip("/")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "cpu.cfs_quota_us").write_text(quota + "\n")
            (folder / "cpu.cfs_period_us").write_text(period + "\n")
    proc = root / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self/cgroup").write_text("\n".join(membership) + "\n")
    (proc / "self/mountinfo").write_text("\n".join(mounts) + "\n")
    return proc


@pytest.fixture
def host_of(monkeypatch):
    """Makes this process see a host of ``n`` CPUs, all in its affinity mask."""

    def host(n: int) -> None:
        monkeypatch.setattr(cpus.os, "cpu_count", lambda: n)
        monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: set(range(n)), raising=False)

    return host


def test_a_v2_quota_on_a_64_cpu_host(tmp_path, monkeypatch, host_of):
    host_of(64)
    monkeypatch.setattr(
        cpus,
        "PROC",
        fake_machine(tmp_path, v2={"/": "max 100000", "/jupyter/alice": "400000 100000"}),
    )
    count = cpu_count()
    assert count == CpuCount(4, 64, 64, count.quota)
    assert count.quota == Quota(400000, 100000, count.quota.path)
    assert count.quota.path.endswith("jupyter/alice/cpu.max")
    assert str(count) == "4 CPUs: cgroup quota 400000/100000 on a 64-CPU host"
    assert cpus.available_cpus() == 4


def test_a_parent_groups_quota_binds_too_and_the_tightest_wins(tmp_path, monkeypatch, host_of):
    host_of(64)
    groups = {
        "/": "max 100000",
        "/user.slice": "250000 100000",
        "/user.slice/alice": "800000 100000",
    }
    monkeypatch.setattr(cpus, "PROC", fake_machine(tmp_path, v2=groups))
    count = cpu_count()
    assert count.count == 3  # 2.5 CPUs' worth, rounded up
    assert str(count) == "3 CPUs: cgroup quota 250000/100000, rounded up on a 64-CPU host"


def test_a_v1_quota(tmp_path, monkeypatch, host_of):
    host_of(16)
    groups = {"/": ("-1", "100000"), "/docker/abc": ("200000", "100000")}
    monkeypatch.setattr(cpus, "PROC", fake_machine(tmp_path, v1=groups))
    assert str(cpu_count()) == "2 CPUs: cgroup quota 200000/100000 on a 16-CPU host"


def test_no_quota_and_no_cgroups(tmp_path, monkeypatch, host_of):
    host_of(8)
    monkeypatch.setattr(cpus, "PROC", fake_machine(tmp_path, v2={"/": "max 100000"}))
    assert cpu_count() == CpuCount(8, 8, 8, None)
    assert (
        str(cpu_count())
        == "8 CPUs: all of the host's, no affinity mask or cgroup quota limits them"
    )
    monkeypatch.setattr(cpus, "PROC", tmp_path / "nowhere")  # macOS, Windows: no /proc at all
    assert cpu_count() == CpuCount(8, 8, 8, None)


def test_a_quota_above_the_cpus_we_have_does_not_raise_the_count(tmp_path, monkeypatch, host_of):
    host_of(2)
    monkeypatch.setattr(cpus, "PROC", fake_machine(tmp_path, v2={"/a": "800000 100000"}))
    count = cpu_count()
    assert count.count == 2 and count.source == "host"
    assert str(count) == "2 CPUs: all of the host's (the cgroup quota 800000/100000 allows 8)"


def test_the_affinity_mask_limits_it(tmp_path, monkeypatch):
    monkeypatch.setattr(cpus.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(cpus, "PROC", tmp_path / "nowhere")
    assert str(cpu_count()) == "3 CPUs: the affinity mask allows 3 of the host's 64"


def test_unreadable_or_garbled_files_are_no_quota(tmp_path, monkeypatch, host_of):
    host_of(4)
    proc = fake_machine(tmp_path, v2={"/a": "lots 100000"})
    monkeypatch.setattr(cpus, "PROC", proc)
    assert cpu_count().quota is None
    (proc / "self/cgroup").write_text("garbage without colons\n")
    assert cpu_count() == CpuCount(4, 4, 4, None)


# ------------------------------------------------------------------------------------------------
# A real quota (root: cgroup v1's cpu controller is writable on our VM; see shared/MACHINE.md)
# ------------------------------------------------------------------------------------------------

CPU_CONTROLLER = Path("/sys/fs/cgroup/cpu")
PRINT_COUNT = "import vecenvs.cpus as c; print(c.cpu_count())"


def real_quota_group(quota: int):
    if os.geteuid() != 0 or not (CPU_CONTROLLER / "cpu.cfs_quota_us").exists():
        pytest.skip("needs root and a writable cgroup v1 cpu controller (shared/MACHINE.md)")
    group = CPU_CONTROLLER / f"vecenvs-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    (group / "cpu.cfs_period_us").write_text("100000")
    (group / "cpu.cfs_quota_us").write_text(str(quota))
    return group


@pytest.fixture
def one_cpu_group():
    group = real_quota_group(100_000)
    yield group
    group.rmdir()


def run_in(group: Path, command: str) -> str:
    script = f"echo $$ > {group}/cgroup.procs && exec {command}"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_real_quota_seen_from_the_host(one_cpu_group):
    printed = run_in(one_cpu_group, f"{sys.executable} -c '{PRINT_COUNT}'")
    assert printed == f"1 CPU: cgroup quota 100000/100000 on a {os.cpu_count()}-CPU host"


def test_a_real_quota_seen_from_inside_a_container(one_cpu_group):
    """As under ``docker --cpus=1``: a cgroup namespace makes our group the root of the mount."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare")
    inside = (
        f"umount {CPU_CONTROLLER} && mount -t cgroup -o cpu cgroup {CPU_CONTROLLER} && "
        f"grep ' {CPU_CONTROLLER} ' /proc/self/mountinfo >&2 && {sys.executable} -c '{PRINT_COUNT}'"
    )
    command = f'unshare --cgroup --mount --propagation private bash -c "{inside}"'
    printed = run_in(one_cpu_group, command)
    assert printed == f"1 CPU: cgroup quota 100000/100000 on a {os.cpu_count()}-CPU host"
