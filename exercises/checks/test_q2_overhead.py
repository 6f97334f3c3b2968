"""Exercise 2: the overhead model, from measurements to a decision (``q2_overhead.py``).

The measurements below were made up from known t_env and t_os (with a loop that has a fixed
cost of its own, and 1.5% noise); the checks compare your estimates with those known values,
and your break-even N with values worked out by hand.
"""

import math
import statistics

import pytest
from conftest import call, expect_error, fail, type_name

US = 1e-6

#: (measurements (N, loop s, pool s), workers, cpus, the t_env and t_os they were made from)
DATASETS = [
    (
        [
            (1, 4.123e-05, 7.241e-05),
            (2, 5.481e-05, 7.145e-05),
            (4, 7.645e-05, 8.392e-05),
            (8, 0.0001269, 0.0001098),
            (16, 0.000218, 0.000153),
            (32, 0.0004184, 0.0002538),
            (64, 0.0008164, 0.0004505),
            (128, 0.001564, 0.0008246),
        ],
        2,
        2,
        12e-6,
        60e-6,
    ),
    (
        [
            (1, 0.0009294, 0.001154),
            (2, 0.001195, 0.001142),
            (3, 0.001471, 0.001151),
            (4, 0.001693, 0.001181),
            (6, 0.002184, 0.001251),
            (8, 0.002644, 0.001389),
            (12, 0.003737, 0.001671),
            (16, 0.00478, 0.001953),
            (24, 0.006873, 0.002424),
            (32, 0.008877, 0.00293),
        ],
        4,
        8,
        250e-6,
        900e-6,
    ),
]

#: (t_env, t_os, workers, cpus, the break-even N)
BREAK_EVEN = [
    (10 * US, 57 * US, 2, 2, 12),
    (10 * US, 600 * US, 8, 8, 69),
    (1e-3, 1e-4, 4, 2, 2),
    (20 * US, 30 * US, 8, 8, 3),
    (3 * US, 10 * US, 8, 2, 7),
    (2 * US, 0.0, 4, 4, 1),
    (1e-7, 301.0, 16, 64, 3_210_666_667),
]


@pytest.fixture
def q2(student):
    return student.module("q2_overhead.py")


def number(function, *args):
    """``function(*args)``, which must be a number (an int or a float, not a bool)."""
    got = call(function, *args)
    if type(got) not in (int, float):
        fail(f"{function.__name__}{args} returned {type_name(got)} {got!r:.60}: expected a number")
    return got


def fit_is_close(got, measurements, workers, cpus, t_env, t_os, where):
    """Fails unless ``got`` is ``(t_env, t_os)`` within the noise of the measurements."""
    if not (isinstance(got, tuple) and len(got) == 2 and all(type(v) in (int, float) for v in got)):
        fail(f"{where} returned {got!r:.80}: expected a tuple (t_env, t_os) of two numbers")
    got_env, got_os = got
    assert abs(got_env - t_env) <= 0.08 * t_env, (
        f"{where}: t_env = {got_env / US:.2f} µs, but these measurements were made with "
        f"t_env = {t_env / US:.2f} µs. The loop takes a + N t_env, with a fixed cost a of its "
        "own: which estimate of t_env does that a not spoil?"
    )
    parallel = statistics.mean(n * t_env / min(workers, n, cpus) for n, _, _ in measurements)
    assert abs(got_os - t_os) <= 0.25 * t_os + 0.04 * parallel, (
        f"{where}: t_os = {got_os / US:.1f} µs, but these measurements were made with "
        f"t_os = {t_os / US:.1f} µs. What is left of the pool's time once its envs' share of the "
        "work (N t_env / c) is taken off?"
    )


def test_throughput_counts_every_env_step(q2):
    throughput = q2.get("throughput")
    got = number(throughput, 8, 100, 0.5)
    if math.isclose(got, 200):
        fail(
            "throughput(8 envs, 100 steps, 0.5 s) = 200: that is step() calls per second. "
            "Each call steps all 8 envs: count env steps"
        )
    assert math.isclose(got, 1600), (
        f"throughput(8 envs, 100 steps, 0.5 s) = {got}: expected 1600 env steps/s"
    )
    assert math.isclose(number(throughput, 1, 1000, 2.0), 500), (
        "throughput(1, 1000, 2.0): expected 500"
    )


def test_fit_model_finds_t_env_and_t_os(q2):
    fit_model = q2.get("fit_model")
    for measurements, workers, cpus, t_env, t_os in DATASETS:
        where = f"fit_model(<{len(measurements)} measurements>, workers={workers}, cpus={cpus})"
        got = call(fit_model, measurements, workers, cpus)
        fit_is_close(got, measurements, workers, cpus, t_env, t_os, where)


def test_break_even_num_envs(q2):
    break_even = q2.get("break_even_num_envs")
    for t_env, t_os, workers, cpus, expected in BREAK_EVEN:
        got = call(break_even, t_env, t_os, workers, cpus, seconds=5.0)
        assert type(got) is int and got == expected, (
            f"break_even_num_envs(t_env={t_env:g}, t_os={t_os:g}, workers={workers}, cpus={cpus}) "
            f"= {got!r}: expected {expected}, the first N at which the pool is at least as fast "
            "as the loop (while N is below the number of workers, c = N)"
        )


def test_break_even_num_envs_none_and_bad_arguments(q2):
    break_even = q2.get("break_even_num_envs")
    never = call(break_even, 10 * US, 50 * US, 1, 2)
    assert never is None, (
        f"with one worker the pool steps one env at a time and adds t_os: it never catches up "
        f"with the loop, but you returned {never!r}: expected None"
    )
    for args in [(0.0, 1e-5, 2, 2), (-1e-5, 1e-5, 2, 2), (1e-5, -1e-6, 2, 2), (1e-5, 1e-5, 0, 2)]:
        expect_error(
            "ValueError", f"break_even_num_envs{args}: expected ValueError", break_even, *args
        )


def test_part_b_answer_has_the_right_form(q2):
    answer = q2.get("WHAT_THE_MODEL_LEAVES_OUT")
    if answer is None:
        fail(
            "WHAT_THE_MODEL_LEAVES_OUT is still None: answer 'a', 'b' or 'c', your letter: "
            "`python -m exercises.options YOUR_STUDENT_ID` letters the options for you"
        )
    assert answer in ("a", "b", "c"), (
        f"WHAT_THE_MODEL_LEAVES_OUT = {answer!r}: answer 'a', 'b' or 'c'"
    )
