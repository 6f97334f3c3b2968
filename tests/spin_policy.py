"""The async pool at K = CPUs, one process more than CPUs: how long may its workers spin?

``vecenvs.doorbell.spin_limits`` lets the caller (which only waits) sleep there, and the workers
spin for at most ``SHARED_SPIN_SECONDS``. This script measures the async pool with that limit
set to each candidate (0: nobody spins), each candidate beside gymnasium's ``SyncVectorEnv`` in
the same windows (``vecenvs.bench.compare``), and writes the speed-ups with how the run was made::

    python tests/spin_policy.py --env CartPole-v1 --num-envs 32 --json spin.json

It is what chose the limit (docs/results/core2.md shows the committed runs).
"""

from __future__ import annotations

import json
import sys

from bare_pool import point_arguments  # (this folder is the script's: first on sys.path)

from vecenvs import doorbell
from vecenvs.bench import compare
from vecenvs.cli.bench import finished, provenance
from vecenvs.cpus import available_cpus

#: The workers' longest spins tried, in seconds: the old default, the limit, shorter, none.
CANDIDATES = (1e-3, 100e-6, 30e-6, 0.0)


def measure(env_id: str, num_envs: int, seconds: float, repeats: int) -> list[dict]:
    """Each candidate's speed-up over gym-sync (ratio of the median throughputs)."""
    workers = available_cpus()  # K = CPUs: with the caller, one process more than CPUs
    rows = []
    chosen = doorbell.SHARED_SPIN_SECONDS
    try:
        for longest in CANDIDATES:
            doorbell.SHARED_SPIN_SECONDS = longest
            pool, reference = compare(
                env_id,
                num_envs,
                [("pool-async", {"num_workers": workers})],
                warmup_seconds=0.3,
                measure_seconds=seconds,
                repeats=repeats,
            )
            rows.append(
                {
                    "workers_longest_spin": longest,
                    "num_workers": workers,
                    "speedup": pool.ratio,
                    "throughputs": pool.throughputs,
                    "reference_throughputs": reference.throughputs,
                }
            )
    finally:
        doorbell.SHARED_SPIN_SECONDS = chosen
    return rows


def main() -> None:
    parser = point_arguments(__doc__, num_envs=32, workers=None, seconds=1.0, repeats=3)
    parser.add_argument("--json", help="also write the run to this file")
    arguments = parser.parse_args()
    run = {
        **provenance(["python", "tests/spin_policy.py", *sys.argv[1:]]),
        "cpus": available_cpus(),
    }
    rows = measure(arguments.env, arguments.num_envs, arguments.seconds, arguments.repeats)
    finished(run)
    for row in rows:
        print(
            f"{arguments.env} N={arguments.num_envs} K={row['num_workers']} workers spin at most "
            f"{row['workers_longest_spin'] * 1e6:5.0f} µs: {row['speedup']:.2f}x gym-sync"
        )
    if arguments.json:
        document = {
            "run": run,
            "env_id": arguments.env,
            "num_envs": arguments.num_envs,
            "rows": rows,
        }
        with open(arguments.json, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=2)
            file.write("\n")


if __name__ == "__main__":
    main()
