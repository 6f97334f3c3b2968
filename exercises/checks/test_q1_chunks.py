"""Exercise 1: share the envs out by cost (``q1_chunks.py``).

Each case below comes with the least possible cost of the most expensive chunk, worked out by
hand (trying every split): the checks compare yours with it, not with a solution.
"""

import math

import pytest
from conftest import call, expect_error, fail, type_name

#: (costs, num_workers, the least possible cost of the most expensive chunk)
CASES = [
    ([1] * 10, 3, 4),
    ([5, 1, 1, 1, 1, 1, 1, 1, 1, 1], 4, 5),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], 3, 17),
    ([10, 10, 10, 1, 1, 1, 30], 3, 30),
    ([0, 0, 7, 0, 0], 2, 7),
    ([2.5, 0.5, 1.5, 3.0, 0.25, 4.0], 2, 7.25),
    ([8], 1, 8),
    ([4, 4, 4], 3, 4),
]


@pytest.fixture
def split_by_cost(student):
    return student.module("q1_chunks.py").get("split_by_cost")


def chunks_of(split_by_cost, costs, num_workers):
    """The student's chunks as lists of indices, after checking that they are chunks at all."""
    chunks = call(split_by_cost, costs, num_workers)
    where = f"split_by_cost({costs}, {num_workers})"
    if not isinstance(chunks, (list, tuple)):
        fail(f"{where} returned {type_name(chunks)}: expected a list of ranges")
    for chunk in chunks:
        if not (
            isinstance(chunk, (range, list, tuple)) and all(type(index) is int for index in chunk)
        ):
            fail(f"{where} has a chunk {chunk!r:.60}: each chunk should be a range of env indices")
    chunks = [list(chunk) for chunk in chunks]
    if len(chunks) != num_workers:
        fail(f"{where} gave {len(chunks)} chunks: expected one per worker, {num_workers}")
    if any(not chunk for chunk in chunks):
        fail(f"{where} = {chunks}: a worker with no env only adds overhead; no chunk may be empty")
    flat = [index for chunk in chunks for index in chunk]
    if flat != list(range(len(costs))):
        fail(
            f"{where} = {chunks}: joined in order, the chunks must be 0, 1, ..., "
            f"{len(costs) - 1}, each index once and each chunk consecutive"
        )
    return chunks


def test_covers_every_env_once_in_consecutive_chunks(split_by_cost):
    for costs, num_workers, _ in CASES:
        chunks_of(split_by_cost, costs, num_workers)


def test_equal_costs_split_as_evenly_as_possible(split_by_cost):
    costs, num_workers, least = CASES[0]
    chunks = chunks_of(split_by_cost, costs, num_workers)
    largest = max(len(chunk) for chunk in chunks)
    assert largest == least, (
        f"split_by_cost({costs}, {num_workers}) = {chunks}: with equal costs the largest chunk "
        f"needs only {least} envs, yours has {largest}"
    )


def test_most_expensive_chunk_costs_as_little_as_possible(split_by_cost):
    for costs, num_workers, least in CASES[1:]:
        chunks = chunks_of(split_by_cost, costs, num_workers)
        largest = max(sum(costs[index] for index in chunk) for chunk in chunks)
        assert math.isclose(largest, least), (
            f"split_by_cost({costs}, {num_workers}) = {chunks}: its most expensive chunk costs "
            f"{largest:g}, but a split whose most expensive chunk costs {least:g} exists. Every "
            "step waits for that chunk: where could a cut move to make it cheaper?"
        )


def test_impossible_splits_raise_value_error_first(split_by_cost):
    # Refusing is only half of it: a function that raises ValueError for everything earns nothing.
    chunks = chunks_of(split_by_cost, [1, 1, 1, 1], 2)
    assert chunks == [[0, 1], [2, 3]], (
        f"split_by_cost([1, 1, 1, 1], 2) = {chunks}: before refusing the impossible splits, make "
        "the possible ones (expected [range(0, 2), range(2, 4)])"
    )
    for costs, num_workers, why in [
        ([1, 1, 1, 1], 0, "no worker"),
        ([1, 1, 1, 1], -1, "a negative number of workers"),
        ([1, 1, 1], 4, "more workers than envs"),
        ([1, -1, 1], 2, "a negative cost"),
        ([1, float("nan"), 1], 2, "a NaN cost"),
        ([1, float("inf"), 1], 2, "an infinite cost"),
    ]:
        hint = f"split_by_cost({costs}, {num_workers}) ({why}): expected ValueError"
        expect_error("ValueError", hint, split_by_cost, costs, num_workers)


def test_part_b_answers_have_the_right_form(student):
    q1 = student.module("q1_chunks.py")
    speedup = q1.get("BEST_POSSIBLE_SPEEDUP")
    if speedup is None:
        fail("BEST_POSSIBLE_SPEEDUP is still None: answer with a number")
    assert type(speedup) in (int, float) and 1 <= speedup < math.inf, (
        f"BEST_POSSIBLE_SPEEDUP = {speedup!r}: expected a number, at least 1 (times faster than one worker)"
    )
    workers = q1.get("FEWEST_WORKERS_FOR_IT")
    if workers is None:
        fail("FEWEST_WORKERS_FOR_IT is still None: answer with a whole number")
    assert type(workers) is int and 1 <= workers <= 31, (
        f"FEWEST_WORKERS_FOR_IT = {workers!r}: expected a whole number of workers, 1 to 31"
    )
