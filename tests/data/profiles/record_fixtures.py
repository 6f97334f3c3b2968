"""Record the py-spy profiles that tests/test_profile.py classifies.

They are real py-spy output, recorded once and committed, so the classification tests run in a
second and do not need ptrace permission. Re-record them (as root, or wherever py-spy may
attach) after a change to the backends that moves time around::

    .venv/bin/python tests/data/profiles/record_fixtures.py

Each profile gives two files: ``<name>.speedscope.json``, exactly as ``py-spy record --format
speedscope`` wrote it (every thread of every process), and ``<name>.processes.json``, the pid ->
label map the profiled process printed (``{"4906": "parent", "4908": "worker 0", ...}``).
A 2 s recording at 100 samples/s keeps each file under 200 KB.

``pool-raw.txt`` is py-spy's ``--format raw`` output (collapsed stacks) for the pool, to test
reading that format, with its ``pool-raw.processes.json``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from vecenvs.profile import ProfileConfig, find_py_spy, profile

HERE = Path(__file__).resolve().parent

#: name -> (backend, N, backend kwargs)
FIXTURES = {
    "subproc-cartpole-n8": ("subproc", 8, {}),
    "pool-cartpole-n8-w2": ("pool", 8, {"num_workers": 2}),
    "pool-cartpole-n128-w2": ("pool", 128, {"num_workers": 2}),
    "gym-async-cartpole-n8": ("gym-async", 8, {}),
}
#: Recorded without py-spy's --idle, as a default py-spy run would: notebook 5 compares.
WITHOUT_IDLE = {"subproc-cartpole-n8-noidle": ("subproc", 8, {})}


def main() -> None:
    """Record every fixture."""
    record_speedscope(FIXTURES)
    record_speedscope(WITHOUT_IDLE, idle=False)
    record_raw()


def record_speedscope(fixtures: dict, idle: bool = True) -> None:
    """The speedscope files, through :func:`vecenvs.profile.profile` itself."""
    with tempfile.TemporaryDirectory() as scratch:
        for name, (backend, num_envs, backend_kwargs) in fixtures.items():
            result = profile(
                ProfileConfig(
                    "CartPole-v1",
                    num_envs,
                    backend,
                    backend_kwargs=backend_kwargs,
                    seconds=2,
                    idle=idle,
                    output_dir=Path(scratch) / name,
                )
            )
            shutil.copy(result.speedscope_path, HERE / f"{name}.speedscope.json")
            labels = {str(pid): label for pid, label in result.processes.items()}
            (HERE / f"{name}.processes.json").write_text(json.dumps(labels, indent=1) + "\n")
            print(name, (HERE / f"{name}.speedscope.json").stat().st_size, "bytes")
            print(result.breakdown.format_table())


def record_raw() -> None:
    """py-spy's raw format (collapsed stacks whose first frames are `process <pid>:"<cmd>"`),
    of the pool with one worker, recorded the way profile() records speedscope."""
    target = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vecenvs.profile.target",
            "--env",
            "CartPole-v1",
            "--num-envs",
            "4",
            "--backend",
            "pool",
            "--workers",
            "2",
            "--max-seconds",
            "60",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready = json.loads(target.stdout.readline())
        subprocess.run(
            [
                find_py_spy(),
                "record",
                "--pid",
                str(ready["pid"]),
                "--subprocesses",
                "--idle",
                "--threads",
                "--format",
                "raw",
                "--rate",
                "50",
                "--duration",
                "1",
                "--output",
                str(HERE / "pool-raw.txt"),
            ],
            check=True,
            capture_output=True,
        )
        (HERE / "pool-raw.processes.json").write_text(json.dumps(ready["processes"]) + "\n")
    finally:
        target.communicate("stop\n", timeout=30)
    print("pool-raw.txt", (HERE / "pool-raw.txt").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
