"""Exercise 5: read a profile (``q5_read_profile.py``)."""

import json
import math
import random
from collections import Counter
from pathlib import Path

import pytest
from conftest import call, fail, type_name

DATA = Path(__file__).resolve().parent.parent / "data" / "profiles.json"
PROFILES = json.loads(DATA.read_text())["profiles"]
SUBPROC = "subproc, CartPole-v1, N=8"
POOL = "pool (num_workers=2), CartPole-v1, N=128"
CATEGORIES = ("env compute", "serialization", "pipe & shm I/O", "waiting", "bookkeeping", "other")


def true_shares(rows, process):
    # Written out here: the checks never import a solution.
    if process == "workers":
        mine = [row for row in rows if row["process"] != "parent"]
    else:
        mine = [row for row in rows if row["process"] == process]
    total = sum(row["samples"] for row in mine)
    counts = Counter()
    for row in mine:
        counts[row["category"]] += row["samples"]
    return {category: count / total for category, count in counts.items()}


def busiest(rows, process):
    shares = true_shares(rows, process)
    return max(shares, key=shares.get)


def made_up_profile():
    """A profile of three processes with random sample counts, different each run, in which
    every process (and the workers pooled) has one clear busiest category: only a function that
    reads the rows gets it right."""
    rng = random.Random()
    while True:
        rows = [
            {"process": process, "category": category, "samples": rng.randint(1, 400)}
            for process in ("parent", "worker 0", "worker 1")
            for category in CATEGORIES
        ]
        rng.shuffle(rows)
        top_two = (
            sorted(true_shares(rows, process).values())[-2:]
            for process in ("parent", "worker 0", "worker 1", "workers")
        )
        if all(second + 1e-9 < first for second, first in top_two):
            return rows


@pytest.fixture
def q5(student):
    return student.module("q5_read_profile.py")


def check_shares(shares, profile, process):
    rows = PROFILES[profile] if isinstance(profile, str) else profile
    profile = profile if isinstance(profile, str) else "a made-up profile"
    got = call(shares, rows, process)
    expected = true_shares(rows, process)
    assert isinstance(got, dict) and all(type(share) in (int, float) for share in got.values()), (
        f"shares(...) returned {type_name(got)} {got!r:.80}: expected a dict category -> share (a number)"
    )
    assert math.isclose(sum(got.values()), 1.0, abs_tol=1e-6), (
        f"shares(rows, {process!r}) sums to {sum(got.values()):.3f}: divide each category's samples "
        "by the process's total samples"
    )
    pooled = " (for 'workers', add up every process but the parent)" if process == "workers" else ""
    for category, share in expected.items():
        assert math.isclose(got.get(category, 0.0), share, abs_tol=1e-6), (
            f"{profile}, {process!r}: share of {category!r} is {got.get(category, 0.0):.3f}, "
            f"expected {share:.3f}{pooled}"
        )


def test_shares_of_one_process(q5):
    shares = q5.get("shares")
    check_shares(shares, SUBPROC, "parent")
    check_shares(shares, SUBPROC, "worker 3")
    check_shares(shares, made_up_profile(), "worker 1")


def test_shares_of_the_workers_pooled(q5):
    shares = q5.get("shares")
    check_shares(shares, SUBPROC, "workers")
    check_shares(shares, POOL, "workers")
    check_shares(shares, made_up_profile(), "workers")


def test_busiest(q5):
    busiest_of = q5.get("busiest")
    made_up = made_up_profile()
    cases = [
        (SUBPROC, PROFILES[SUBPROC], "parent"),
        (POOL, PROFILES[POOL], "parent"),
        (POOL, PROFILES[POOL], "workers"),
        *(("a made-up profile", made_up, process) for process in ("parent", "worker 0", "workers")),
    ]
    for profile, rows, process in cases:
        got = call(busiest_of, rows, process)
        assert got == busiest(rows, process), (
            f"busiest(rows of {profile!r}, {process!r}) = {got!r}: that is not the category with "
            "the largest share"
        )


def answered(q5, name, how):
    """The student's answer ``name``, or the check fails while it is still ``None``."""
    answer = q5.get(name)
    if answer is None:
        fail(f"{name} is still None: {how}")
    return answer


def test_answers_where_the_time_goes(q5):
    for name, profile, process, where in [
        (
            "SUBPROC_PARENT_MOSTLY",
            SUBPROC,
            "parent",
            "the parent's row of the SubprocVecEnv profile",
        ),
        ("SUBPROC_WORKERS_MOSTLY", SUBPROC, "workers", "the SubprocVecEnv workers, pooled"),
        ("POOL_WORKERS_MOSTLY", POOL, "workers", "the pool's worker (N=128)"),
    ]:
        answer = answered(q5, name, f"look at {where} and give a category")
        assert answer in CATEGORIES, f"{name} = {answer!r}: expected one of {CATEGORIES}"
        assert answer == busiest(PROFILES[profile], process), (
            f"{name} = {answer!r}: not where most of the time goes. Look at {where}"
        )
    share = answered(q5, "SUBPROC_WORKERS_ENV_SHARE", "compute it with shares()")
    expected = true_shares(PROFILES[SUBPROC], "workers")["env compute"]
    assert isinstance(share, (int, float)) and abs(share - expected) < 0.005, (
        f"SUBPROC_WORKERS_ENV_SHARE = {share!r}: expected the share as a number from 0 to 1 (not a "
        "percentage) of the pooled workers' samples in 'env compute'"
    )


def test_answers_why(q5):
    answer = answered(q5, "WHY_SUBPROC_WORKERS_WAIT", "answer 'a', 'b' or 'c'")
    assert answer in ("a", "b", "c"), (
        f"WHY_SUBPROC_WORKERS_WAIT = {answer!r}: answer 'a', 'b' or 'c'"
    )
    assert answer == "b", (
        "not that one. Compare the workers' 'env compute' share with their 'waiting' share: if the "
        "env were slow, which would be large? And processes have a GIL each, not one between them"
    )
