"""The load check every notebook starts with (vecenvs.bench.machine.machine_load)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from vecenvs.bench import machine
from vecenvs.bench.machine import BUSY_SHARE, MachineLoad, machine_load
from vecenvs.cpus import CpuCount, Quota

BUSY_LOOP = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"


def test_the_verdict_follows_the_share_and_says_its_numbers():
    quiet = MachineLoad(cpus=2, others_share=0.05, seconds=1.0, load_average=0.3)
    busy = MachineLoad(cpus=2, others_share=BUSY_SHARE, seconds=1.0, load_average=None)
    assert not quiet.busy and busy.busy
    assert "5% of the 2 CPUs this process may use" in quiet.sentence()
    assert "Quiet" in quiet.sentence()
    assert "BUSY" in busy.sentence() and "load average" not in busy.sentence()
    assert busy.busy_cores == 2 * BUSY_SHARE


def spin_outside_our_tree() -> int:
    """Starts a busy loop that is not our descendant (its parent shell exits): its pid."""
    shell = subprocess.run(
        ["sh", "-c", f"'{sys.executable}' -c '{BUSY_LOOP}' >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(shell.stdout.split()[-1])


def test_a_busy_loop_beside_us_is_counted():
    stranger = spin_outside_our_tree()
    try:
        readings = sorted(machine_load(seconds=0.3).others_share for _ in range(3))
    finally:
        os.kill(stranger, signal.SIGKILL)
    # It holds one CPU, or its fair turn of one when others' work shares the machine too.
    assert readings[1] >= 0.4 / len(os.sched_getaffinity(0)), readings
    assert all(0.0 <= reading <= 1.0 for reading in readings)


def test_our_own_work_is_subtracted(monkeypatch):
    """The arithmetic, with the machine's counters made up: the machine was busy 1.5 CPU
    seconds over 1 s on 2 CPUs, 1.0 of them ours; others used 0.5 of 2, a quarter."""
    readings = {"busy": iter([100.0, 101.5]), "own": iter([10.0, 11.0])}
    monkeypatch.setattr(machine, "_busy_cpu_seconds", lambda: next(readings["busy"]))
    monkeypatch.setattr(machine, "_own_cpu_seconds", lambda: next(readings["own"]))
    monkeypatch.setattr(machine, "cpu_count", lambda: CpuCount(2, 2, 2, None))
    clock = iter([0.0, 1.0])
    monkeypatch.setattr(machine.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(machine.time, "sleep", lambda seconds: None)
    load = machine_load(seconds=1.0)
    assert load.others_share == 0.25 and load.busy_cores == 0.5 and load.busy


def test_our_own_cpu_time_includes_our_children():
    child = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        time.sleep(0.2)  # started
        before = machine._own_cpu_seconds()
        time.sleep(0.5)
        gained = machine._own_cpu_seconds() - before
    finally:
        child.kill()
        child.wait()
    assert gained >= 0.1, f"a child spinning for 0.5 s added only {gained:.2f} CPU seconds"


def test_under_a_quota_only_what_others_take_from_our_share_counts():
    """64 CPUs, a 4-CPU quota: others busy on 30 leave us our 4 (quiet); on 62, only 2 (busy)."""
    quota = CpuCount(4, 64, 64, Quota(400_000, 100_000, "cpu.max"))
    assert machine._others_share(30.0, quota) == 0.0
    assert machine._others_share(62.0, quota) == 0.5
    assert machine._others_share(0.5, CpuCount(2, 2, 2, None)) == 0.25
