"""Exercise 5: read a profile (``q5_read_profile.py``)."""

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from conftest import attribute, call, load

DATA = Path(__file__).resolve().parent.parent / "data" / "profiles.json"
PROFILES = json.loads(DATA.read_text())["profiles"]
SUBPROC = "subproc, CartPole-v1, N=8"
POOL = "pool (num_workers=2), CartPole-v1, N=128"
CATEGORIES = ("env compute", "serialization", "pipe & shm I/O", "waiting", "bookkeeping", "other")


def true_shares(rows, process):
    counts = Counter()
    for row in rows:
        if row["process"] == process or (process == "workers" and row["process"] != "parent"):
            counts[row["category"]] += row["samples"]
    total = sum(counts.values())
    return {category: count / total for category, count in counts.items()}


def busiest(rows, process):
    shares = true_shares(rows, process)
    return max(shares, key=shares.get)


@pytest.fixture
def q5(submission):
    return load(submission, "q5_read_profile.py")


def check_shares(shares, profile, process):
    got = call(shares, PROFILES[profile], process)
    expected = true_shares(PROFILES[profile], process)
    assert isinstance(got, dict), f"shares(...) returned {type(got).__name__}: expected a dict category -> share"
    assert math.isclose(sum(got.values()), 1.0, abs_tol=1e-6), (
        f"shares(rows, {process!r}) sums to {sum(got.values()):.3f}: divide each category's samples "
        "by the process's total samples")
    for category, share in expected.items():
        assert math.isclose(got.get(category, 0.0), share, abs_tol=1e-6), (
            f"{profile}, {process!r}: share of {category!r} is {got.get(category, 0.0):.3f}, "
            f"expected {share:.3f}" + (" (for 'workers', add up every process but the parent)"
                                       if process == "workers" else ""))


def test_shares_of_one_process(q5):
    shares = attribute(q5, "shares")
    check_shares(shares, SUBPROC, "parent")
    check_shares(shares, SUBPROC, "worker 3")


def test_shares_of_the_workers_pooled(q5):
    shares = attribute(q5, "shares")
    check_shares(shares, SUBPROC, "workers")
    check_shares(shares, POOL, "workers")


def test_busiest(q5):
    busiest_of = attribute(q5, "busiest")
    for profile, process in [(SUBPROC, "parent"), (POOL, "parent"), (POOL, "workers")]:
        got = call(busiest_of, PROFILES[profile], process)
        assert got == busiest(PROFILES[profile], process), (
            f"busiest(rows of {profile!r}, {process!r}) = {got!r}: that is not the category with "
            "the largest share")


def check_category_answer(q5, name, expected, where):
    answer = attribute(q5, name)
    if answer is None:
        pytest.fail(f"{name} is still None: look at {where} and give a category", pytrace=False)
    assert answer in CATEGORIES, f"{name} = {answer!r}: expected one of {CATEGORIES}"
    assert answer == expected, f"{name} = {answer!r}: not where most of the time goes. Look at {where}"


def test_answers_where_the_time_goes(q5):
    check_category_answer(q5, "SUBPROC_PARENT_MOSTLY", busiest(PROFILES[SUBPROC], "parent"),
                          "the parent's row of the SubprocVecEnv profile")
    check_category_answer(q5, "SUBPROC_WORKERS_MOSTLY", busiest(PROFILES[SUBPROC], "workers"),
                          "the SubprocVecEnv workers, pooled")
    check_category_answer(q5, "POOL_WORKERS_MOSTLY", busiest(PROFILES[POOL], "workers"),
                          "the pool's worker (N=128)")
    share = attribute(q5, "SUBPROC_WORKERS_ENV_SHARE")
    expected = true_shares(PROFILES[SUBPROC], "workers")["env compute"]
    if share is None:
        pytest.fail("SUBPROC_WORKERS_ENV_SHARE is still None: compute it with shares()", pytrace=False)
    assert isinstance(share, (int, float)) and abs(share - expected) < 0.005, (
        f"SUBPROC_WORKERS_ENV_SHARE = {share!r}: expected the share as a number from 0 to 1 (not a "
        "percentage) of the pooled workers' samples in 'env compute'")


def test_answers_why(q5):
    answer = attribute(q5, "WHY_SUBPROC_WORKERS_WAIT")
    if answer is None:
        pytest.fail("WHY_SUBPROC_WORKERS_WAIT is still None: answer 'a', 'b' or 'c'", pytrace=False)
    assert answer in ("a", "b", "c"), f"WHY_SUBPROC_WORKERS_WAIT = {answer!r}: answer 'a', 'b' or 'c'"
    assert answer == "b", (
        "not that one. Compare the workers' 'env compute' share with their 'waiting' share: if the "
        "env were slow, which would be large? And processes have a GIL each, not one between them")
