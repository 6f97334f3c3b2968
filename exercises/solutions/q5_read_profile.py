"""Exercise 5, reference solution: read a profile and say where the time goes."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import exercises
from exercises import options

# As in the student's file, which is this one with holes.
DATA = Path(exercises.__file__).resolve().parent / "data" / "profiles.json"
SUBPROC = "subproc, CartPole-v1, N=8"
POOL = "pool (num_workers=2), CartPole-v1, N=128"


def load_profiles(path: Path = DATA) -> dict[str, list[dict]]:
    """Profile name -> its rows."""
    return json.loads(Path(path).read_text())["profiles"]


def shares(rows: list[dict], process: str) -> dict[str, float]:
    """``{category: share}`` of one process's samples (``"workers"``: all but the parent)."""
    counts = Counter()
    for row in rows:
        if row["process"] == process or (process == "workers" and row["process"] != "parent"):
            counts[row["category"]] += row["samples"]
    total = sum(counts.values())
    return {category: count / total for category, count in counts.items()}


def busiest(rows: list[dict], process: str) -> str:
    """The category with the largest share of ``process``'s samples."""
    process_shares = shares(rows, process)
    return max(process_shares, key=process_shares.get)


_PROFILES = load_profiles()
SUBPROC_PARENT_MOSTLY = busiest(_PROFILES[SUBPROC], "parent")  # "waiting"
SUBPROC_WORKERS_MOSTLY = busiest(_PROFILES[SUBPROC], "workers")  # "waiting"
SUBPROC_WORKERS_ENV_SHARE = shares(_PROFILES[SUBPROC], "workers")["env compute"]  # about 0.017
POOL_WORKERS_MOSTLY = busiest(_PROFILES[POOL], "workers")  # "env compute"
# The letter is the student's own (exercises/options.py): "one CartPole step takes microseconds".
WHY_SUBPROC_WORKERS_WAIT = options.letter_of(
    "WHY_SUBPROC_WORKERS_WAIT", 1, os.environ.get("VECENVS_STUDENT", "")
)
