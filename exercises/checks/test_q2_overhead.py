"""Exercise 2: throughput and the overhead model (``q2_overhead.py``)."""

import math

import pytest
from conftest import call, fail, type_name

US = 1e-6


@pytest.fixture
def q2(student):
    return student.module("q2_overhead.py")


def number(function, *args):
    """``function(*args)``, which must be a number (an int or a float, not a bool)."""
    got = call(function, *args)
    if type(got) not in (int, float):
        fail(f"{function.__name__}{args} returned {type_name(got)} {got!r:.60}: expected a number")
    return got


def model_speedup(num_envs, t_env, t_os, workers, cpus):
    """The formula, written out here to compare with."""
    c = min(workers, num_envs, cpus)
    return num_envs * t_env / (num_envs * t_env / c + t_os)


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


def test_predicted_speedup_matches_the_model(q2):
    predicted_speedup = q2.get("predicted_speedup")
    cases = [
        (8, 10 * US, 50 * US, 2, 2),
        (128, 10 * US, 50 * US, 2, 2),
        (1, 600 * US, 20 * US, 4, 8),
        (64, 1e-3, 5e-4, 64, 2),
        (4, 100 * US, 300 * US, 1, 2),
    ]
    for num_envs, t_env, t_os, workers, cpus in cases:
        expected = model_speedup(num_envs, t_env, t_os, workers, cpus)
        got = number(predicted_speedup, num_envs, t_env, t_os, workers, cpus)
        assert math.isclose(got, expected, rel_tol=1e-6), (
            f"predicted_speedup(N={num_envs}, t_env={t_env:g}, t_os={t_os:g}, workers={workers}, "
            f"cpus={cpus}) = {got:.4g}: expected {expected:.4g}. Is c = min(workers, N, cpus)?"
        )


def test_predicted_speedup_limits(q2):
    predicted_speedup = q2.get("predicted_speedup")
    no_overhead = number(predicted_speedup, 16, 1e-3, 0.0, 4, 8)
    assert math.isclose(no_overhead, 4), (
        f"with t_os = 0 and 4 workers on 8 CPUs the speed-up is {no_overhead:.3g}: expected 4, the workers"
    )
    capped = number(predicted_speedup, 16, 1e-3, 0.0, 8, 2)
    assert math.isclose(capped, 2), (
        f"8 workers on 2 CPUs with t_os = 0 gave {capped:.3g}: expected 2, no more envs step at once "
        "than there are CPUs"
    )
    cheap = number(predicted_speedup, 2, 10 * US, 500 * US, 2, 2)
    assert cheap < 1, (
        f"2 cheap envs (10 µs) and t_os = 500 µs gave {cheap:.3g}: the model should be below 1"
    )


def test_t_os_from_speedup_inverts_the_model(q2):
    t_os_from_speedup = q2.get("t_os_from_speedup")
    for num_envs, t_env, t_os, workers, cpus in [
        (8, 10 * US, 50 * US, 2, 2),
        (64, 1e-3, 5e-4, 64, 2),
        (3, 200 * US, 0.0, 3, 4),
    ]:
        speedup = model_speedup(num_envs, t_env, t_os, workers, cpus)
        got = number(t_os_from_speedup, num_envs, t_env, speedup, workers, cpus)
        assert math.isclose(got, t_os, rel_tol=1e-6, abs_tol=1e-12), (
            f"t_os_from_speedup(N={num_envs}, t_env={t_env:g}, speedup={speedup:.4g}, workers={workers}, "
            f"cpus={cpus}) = {got:.4g}: expected {t_os:g}. Batch time = N t_env / speedup; then "
            "subtract the parallel part N t_env / c"
        )


def test_break_even_num_envs(q2):
    break_even = q2.get("break_even_num_envs")
    for t_env, t_os, workers, cpus in [
        (10 * US, 50 * US, 2, 2),
        (10 * US, 600 * US, 8, 8),
        (1e-3, 1e-4, 4, 2),
        (50 * US, 1e-3, 2, 2),
    ]:
        expected = next(
            n for n in range(1, 100_000) if model_speedup(n, t_env, t_os, workers, cpus) >= 1
        )
        got = call(break_even, t_env, t_os, workers, cpus)
        assert type(got) is int and got == expected, (
            f"break_even_num_envs(t_env={t_env:g}, t_os={t_os:g}, workers={workers}, cpus={cpus}) = "
            f"{got}: expected {expected}, the first N whose predicted speed-up is >= 1"
        )
    never = call(break_even, 10 * US, 50 * US, 1, 2)
    assert never is None, (
        f"with one worker the speed-up N t_env / (N t_env + t_os) never reaches 1, but you returned {never}: "
        "expected None"
    )
