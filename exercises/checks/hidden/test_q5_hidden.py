"""Exercise 5, hidden checks (the grader's only; not in the student release).

Profiles made up from the check's seed (which the grader derives from the course and the student;
the failure message names it), with process names the public examples never use, every process of
the recorded profiles, and Part B's answers.
"""

import math
from collections import Counter

from conftest import call, right_letter
from test_q5_read_profile import CATEGORIES, POOL, PROFILES, SUBPROC


def true_shares(rows, process):
    """Written out here: the checks never import a solution."""
    if process == "workers":
        mine = [row for row in rows if row["process"] != "parent"]
    else:
        mine = [row for row in rows if row["process"] == process]
    counts = Counter()
    for row in mine:
        counts[row["category"]] += row["samples"]
    total = sum(counts.values())
    return {category: count / total for category, count in counts.items()}


def busiest(rows, process):
    shares = true_shares(rows, process)
    return max(shares, key=shares.get)


def made_up_profile(rng):
    """A profile of 2 to 6 processes with random sample counts (several rows per category for
    some), in which every process, and the workers pooled, has one clear busiest category."""
    names = ["parent", *(f"worker {index}" for index in rng.sample(range(12), rng.randint(1, 5)))]
    while True:
        rows = [
            {"process": name, "category": category, "samples": rng.randint(0, 400)}
            for name in names
            for category in CATEGORIES
            for _ in range(rng.choice((1, 1, 2)))
        ]
        rng.shuffle(rows)
        processes = [*names, "workers"]
        if all(sum(r["samples"] for r in rows if r["process"] == name) for name in names):
            top_two = (sorted(true_shares(rows, name).values())[-2:] for name in processes)
            if all(second + 1e-9 < first for second, first in top_two):
                return rows, names


def same_shares(got, expected, where):
    assert isinstance(got, dict) and all(type(share) in (int, float) for share in got.values()), (
        f"{where} returned {got!r:.80}: expected a dict category -> share"
    )
    for category in set(got) | set(expected):
        assert math.isclose(got.get(category, 0.0), expected.get(category, 0.0), abs_tol=1e-6), (
            f"{where}: share of {category!r} is {got.get(category, 0.0):.3f}, expected "
            f"{expected.get(category, 0.0):.3f}"
        )


def test_made_up_profiles(student, seed, rng):
    q5 = student.module("q5_read_profile.py")
    shares, busiest_of = q5.get("shares"), q5.get("busiest")
    for _ in range(3):
        rows, names = made_up_profile(rng)
        for process in [*rng.sample(names, min(2, len(names))), "workers"]:
            where = f"shares(<a made-up profile, seed {seed}>, {process!r})"
            same_shares(call(shares, rows, process), true_shares(rows, process), where)
            got = call(busiest_of, rows, process)
            assert got == busiest(rows, process), (
                f"busiest(<a made-up profile, seed {seed}>, {process!r}) = {got!r}: expected "
                f"{busiest(rows, process)!r}"
            )


def test_every_process_of_the_recorded_profiles(student):
    shares = student.module("q5_read_profile.py").get("shares")
    for name, rows in PROFILES.items():
        for process in sorted({row["process"] for row in rows} | {"workers"}):
            where = f"shares(rows of {name!r}, {process!r})"
            same_shares(call(shares, rows, process), true_shares(rows, process), where)


def test_part_b_answers(student, student_id):
    q5 = student.module("q5_read_profile.py")
    for name, profile, process in [
        ("SUBPROC_PARENT_MOSTLY", SUBPROC, "parent"),
        ("SUBPROC_WORKERS_MOSTLY", SUBPROC, "workers"),
        ("POOL_WORKERS_MOSTLY", POOL, "workers"),
    ]:
        answer = q5.get(name)
        assert answer == busiest(PROFILES[profile], process), (
            f"{name} = {answer!r}: not where most of the time goes"
        )
    share = q5.get("SUBPROC_WORKERS_ENV_SHARE")
    expected = true_shares(PROFILES[SUBPROC], "workers")["env compute"]
    assert type(share) in (int, float) and abs(share - expected) < 0.005, (
        f"SUBPROC_WORKERS_ENV_SHARE = {share!r}: expected {expected:.3f}"
    )
    answer = q5.get("WHY_SUBPROC_WORKERS_WAIT")
    right = right_letter("WHY_SUBPROC_WORKERS_WAIT", "one CartPole step takes", student_id)
    assert answer == right, (
        f"WHY_SUBPROC_WORKERS_WAIT = {answer!r} (the options lettered for student id "
        f"{student_id!r}): compare the workers' 'env compute' share with "
        "their 'waiting' share (if the env were slow, which would be large?); and processes have "
        "a GIL each, not one between them"
    )
