"""Exercise 5: read a profile (``q5_read_profile.py``).

The expected shares below were counted by hand; none of them is one that Part B asks for.
"""

import json
import math
from pathlib import Path

import pytest
from conftest import call, fail, type_name

DATA = Path(__file__).resolve().parent.parent / "data" / "profiles.json"
PROFILES = json.loads(DATA.read_text())["profiles"]
SUBPROC = "subproc, CartPole-v1, N=8"
POOL = "pool (num_workers=2), CartPole-v1, N=128"
CATEGORIES = ("env compute", "serialization", "pipe & shm I/O", "waiting", "bookkeeping", "other")


#: A profile made by hand: worker 0's env compute comes in two rows, to be added up.
HAND_MADE = [
    {"process": "parent", "category": "waiting", "samples": 30},
    {"process": "parent", "category": "pipe & shm I/O", "samples": 50},
    {"process": "parent", "category": "bookkeeping", "samples": 20},
    {"process": "worker 0", "category": "env compute", "samples": 60},
    {"process": "worker 0", "category": "waiting", "samples": 40},
    {"process": "worker 1", "category": "env compute", "samples": 20},
    {"process": "worker 1", "category": "waiting", "samples": 70},
    {"process": "worker 1", "category": "serialization", "samples": 10},
    {"process": "worker 0", "category": "env compute", "samples": 20},
]

#: (profile name or rows, process, the shares counted by hand, the busiest category)
SHARES = [
    (
        "a hand-made profile",
        "parent",
        {"waiting": 0.3, "pipe & shm I/O": 0.5, "bookkeeping": 0.2},
        "pipe & shm I/O",
    ),
    (
        "a hand-made profile",
        "worker 0",
        {"env compute": 80 / 120, "waiting": 40 / 120},
        "env compute",
    ),
    (
        "a hand-made profile",
        "workers",
        {"env compute": 100 / 220, "waiting": 110 / 220, "serialization": 10 / 220},
        "waiting",
    ),
    (
        SUBPROC,
        "worker 3",
        {
            "env compute": 2 / 198,
            "serialization": 3 / 198,
            "pipe & shm I/O": 2 / 198,
            "waiting": 191 / 198,
        },
        "waiting",
    ),
    (
        POOL,
        "parent",
        {
            "env compute": 111 / 199,
            "serialization": 1 / 199,
            "pipe & shm I/O": 3 / 199,
            "waiting": 49 / 199,
            "bookkeeping": 35 / 199,
        },
        "env compute",
    ),
]


def rows_of(profile):
    return HAND_MADE if profile == "a hand-made profile" else PROFILES[profile]


@pytest.fixture
def q5(student):
    return student.module("q5_read_profile.py")


def check_shares(shares, profile, process, expected):
    """Fails unless ``shares(rows, process)`` has ``expected``'s shares (a category missing from
    ``expected`` must have none)."""
    got = call(shares, rows_of(profile), process)
    assert isinstance(got, dict) and all(type(share) in (int, float) for share in got.values()), (
        f"shares(...) returned {type_name(got)} {got!r:.80}: expected a dict category -> share (a number)"
    )
    assert math.isclose(sum(got.values()), 1.0, abs_tol=1e-6), (
        f"shares(rows, {process!r}) sums to {sum(got.values()):.3f}: divide each category's samples "
        "by the process's total samples"
    )
    pooled = " (for 'workers', add up every process but the parent)" if process == "workers" else ""
    for category in set(expected) | set(got):
        share, want = got.get(category, 0.0), expected.get(category, 0.0)
        assert math.isclose(share, want, abs_tol=1e-6), (
            f"{profile}, {process!r}: share of {category!r} is {share:.3f}, expected {want:.3f}"
            f"{pooled}. Several rows may have the same category: add their samples up"
        )


def test_shares_of_one_process(q5):
    shares = q5.get("shares")
    for profile, process, expected, _ in SHARES:
        if process != "workers":
            check_shares(shares, profile, process, expected)


def test_shares_of_the_workers_pooled(q5):
    shares = q5.get("shares")
    for profile, process, expected, _ in SHARES:
        if process == "workers":
            check_shares(shares, profile, process, expected)


def test_busiest(q5):
    busiest_of = q5.get("busiest")
    for profile, process, _, expected in SHARES:
        got = call(busiest_of, rows_of(profile), process)
        assert got == expected, (
            f"busiest(rows of {profile!r}, {process!r}) = {got!r}: that is not the category with "
            "the largest share"
        )


def answered(q5, name, how):
    """The student's answer ``name``, or the check fails while it is still ``None``."""
    answer = q5.get(name)
    if answer is None:
        fail(f"{name} is still None: {how}")
    return answer


def test_part_b_answers_have_the_right_form(q5):
    for name in ("SUBPROC_PARENT_MOSTLY", "SUBPROC_WORKERS_MOSTLY", "POOL_WORKERS_MOSTLY"):
        answer = answered(q5, name, "give a category")
        assert answer in CATEGORIES, f"{name} = {answer!r}: expected one of {CATEGORIES}"
    share = answered(q5, "SUBPROC_WORKERS_ENV_SHARE", "compute it with shares()")
    assert type(share) in (int, float) and 0 <= share <= 1, (
        f"SUBPROC_WORKERS_ENV_SHARE = {share!r}: expected the share as a number from 0 to 1 (not "
        "a percentage)"
    )
    answer = answered(
        q5,
        "WHY_SUBPROC_WORKERS_WAIT",
        "answer 'a', 'b' or 'c', your letter: `python -m exercises.options YOUR_STUDENT_ID` "
        "letters the options for you",
    )
    assert answer in ("a", "b", "c"), (
        f"WHY_SUBPROC_WORKERS_WAIT = {answer!r}: answer 'a', 'b' or 'c'"
    )
