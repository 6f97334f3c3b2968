"""Exercise 1, hidden checks (the grader's only; not in the student release).

Costs and worker counts drawn from the check's seed (``conftest.seed``: the grader's, from the
course and the student, so a regrade draws the same; the failure message names it), and the least
possible cost worked out here by trying splits: a function that only knows the public examples
fails them. Part B's answers are checked here too.
"""

import functools
import math

from conftest import expect_error
from test_q1_chunks import chunks_of


def least_largest_chunk(costs, num_workers):
    """The least possible cost of the most expensive of ``num_workers`` consecutive non-empty
    chunks, by trying every position of every cut (memoised)."""

    @functools.cache
    def best(start, workers):  # envs start.. split into `workers` chunks
        if workers == 1:
            return sum(costs[start:])
        return min(
            max(sum(costs[start:end]), best(end, workers - 1))
            for end in range(start + 1, len(costs) - workers + 2)
        )

    return best(0, num_workers)


def random_case(rng):
    num_envs = rng.randint(1, 24)
    kind = rng.choice(("uniform", "one heavy", "heavy tail", "zeros"))
    if kind == "uniform":
        costs = [rng.randint(1, 50) for _ in range(num_envs)]
    elif kind == "one heavy":
        costs = [rng.randint(1, 10) for _ in range(num_envs)]
        costs[rng.randrange(num_envs)] = rng.randint(50, 200)
    elif kind == "heavy tail":
        costs = [round(rng.paretovariate(1.2), 3) for _ in range(num_envs)]
    else:
        costs = [rng.choice((0, 0, rng.randint(1, 9))) for _ in range(num_envs)]
    return costs, rng.randint(1, num_envs)


def test_random_costs_get_the_best_split(student, seed, rng):
    split_by_cost = student.module("q1_chunks.py").get("split_by_cost")
    for _ in range(25):
        costs, num_workers = random_case(rng)
        chunks = chunks_of(split_by_cost, costs, num_workers)
        largest = max(sum(costs[index] for index in chunk) for chunk in chunks)
        least = least_largest_chunk(costs, num_workers)
        assert math.isclose(largest, least, rel_tol=1e-9, abs_tol=1e-9), (
            f"split_by_cost({costs}, {num_workers}): its most expensive chunk costs {largest:g}, "
            f"the least possible is {least:g} (random case, seed {seed})"
        )


def test_one_worker_and_one_env_per_worker(student, rng):
    split_by_cost = student.module("q1_chunks.py").get("split_by_cost")
    costs = [rng.randint(0, 99) for _ in range(rng.randint(2, 12))]
    assert chunks_of(split_by_cost, costs, 1) == [list(range(len(costs)))]
    assert chunks_of(split_by_cost, costs, len(costs)) == [[index] for index in range(len(costs))]


def test_refuses_bad_input_it_was_not_shown(student):
    split_by_cost = student.module("q1_chunks.py").get("split_by_cost")
    # Refusing is only half of it: a function that raises ValueError for everything earns nothing.
    assert chunks_of(split_by_cost, [3, 1, 2], 2) in ([[0], [1, 2]], [[0, 1], [2]])
    for costs, num_workers in [([], 1), ([3, 2], 3), ([2, -0.5, 1], 1), ([float("-inf")], 1)]:
        hint = f"split_by_cost({costs}, {num_workers}): expected ValueError"
        expect_error("ValueError", hint, split_by_cost, costs, num_workers)


def test_part_b_answers(student):
    q1 = student.module("q1_chunks.py")
    speedup = q1.get("BEST_POSSIBLE_SPEEDUP")
    assert type(speedup) in (int, float) and math.isclose(speedup, 2.5, rel_tol=1e-3), (
        f"BEST_POSSIBLE_SPEEDUP = {speedup!r}: no split can make a step shorter than its most "
        "expensive env (400 µs), and one worker takes 1000 µs: 2.5"
    )
    workers = q1.get("FEWEST_WORKERS_FOR_IT")
    assert workers == 3, (
        f"FEWEST_WORKERS_FOR_IT = {workers!r}: the expensive env alone, then 600 µs of cheap envs "
        "in chunks of at most 400 µs: 3 workers"
    )
