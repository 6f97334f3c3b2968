"""Exercise 1: split N envs over K workers (``q1_chunks.py``)."""

import pytest
from conftest import call, expect_error, type_name

#: (num_envs, num_workers) pairs every check tries.
CASES = [(1, 1), (8, 2), (10, 3), (7, 7), (128, 2), (5, 4)]


@pytest.fixture
def split_envs(student):
    return student.module("q1_chunks.py").get("split_envs")


def chunks_of(split_envs, num_envs, num_workers):
    chunks = call(split_envs, num_envs, num_workers)
    assert isinstance(chunks, (list, tuple)), (
        f"split_envs({num_envs}, {num_workers}) returned {type_name(chunks)}: "
        "expected a list of ranges"
    )
    for chunk in chunks:
        assert isinstance(chunk, (range, list, tuple)) and all(
            type(index) is int for index in chunk
        ), (
            f"split_envs({num_envs}, {num_workers}) has a chunk {chunk!r:.60}: each chunk should be a "
            "range of env indices"
        )
    return [list(chunk) for chunk in chunks]


def test_one_chunk_per_worker_covering_every_env_once(split_envs):
    for num_envs, num_workers in CASES:
        chunks = chunks_of(split_envs, num_envs, num_workers)
        assert len(chunks) == num_workers, (
            f"split_envs({num_envs}, {num_workers}) gave {len(chunks)} chunks: expected one per worker"
        )
        flat = [index for chunk in chunks for index in chunk]
        assert flat == list(range(num_envs)), (
            f"split_envs({num_envs}, {num_workers}) = {chunks}: joined in order, the chunks must be "
            f"0, 1, ..., {num_envs - 1}, each index once (look for an off-by-one at the chunk edges)"
        )


def test_chunk_sizes_differ_by_at_most_one_smaller_first(split_envs):
    for num_envs, num_workers in CASES:
        sizes = [len(chunk) for chunk in chunks_of(split_envs, num_envs, num_workers)]
        assert max(sizes) - min(sizes) <= 1, (
            f"split_envs({num_envs}, {num_workers}) has chunk sizes {sizes}: the worker with more "
            "envs than the others is the straggler on every step. Hand out the remainder one env "
            "per worker"
        )
        assert sizes == sorted(sizes), (
            f"split_envs({num_envs}, {num_workers}) has chunk sizes {sizes}: put the smaller chunks "
            "first (the first is the caller's, which has more to do), e.g. split_envs(10, 3) -> sizes [3, 3, 4]"
        )


def test_impossible_splits_raise_value_error(split_envs):
    # Refusing is only half of it: a function that raises ValueError for everything earns nothing.
    chunks = chunks_of(split_envs, 4, 2)
    assert chunks == [[0, 1], [2, 3]], (
        f"split_envs(4, 2) = {chunks}: before refusing the impossible splits, make the possible "
        "ones (expected [range(0, 2), range(2, 4)])"
    )
    for num_envs, num_workers in [(4, 0), (4, -1), (3, 4)]:
        hint = f"split_envs({num_envs}, {num_workers}): expected ValueError (check 1 <= num_workers <= num_envs first)"
        expect_error("ValueError", hint, split_envs, num_envs, num_workers)
