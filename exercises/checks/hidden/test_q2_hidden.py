"""Exercise 2, hidden checks (the grader's only; not in the student release).

Measurements made up from random t_env, t_os, workers and CPUs (drawn from the check's seed, which
the grader derives from the course and the student; the failure message names it), and break-even N
worked out exactly here, in fractions: a function that only fits the public examples fails them.
Part B's answer is checked here too.
"""

import math
from fractions import Fraction

from conftest import call, fail, right_letter
from test_q2_overhead import fit_is_close


def made_up_measurements(rng):
    """Measurements of a loop (with a fixed cost of 2 to 4 t_env per step()) and a pool, from
    random t_env and t_os, with 1.5% noise; and what they were made from."""
    t_env = math.exp(rng.uniform(math.log(2e-6), math.log(2e-3)))
    loop_cost = t_env * rng.uniform(2, 4)
    t_os = t_env * math.exp(rng.uniform(math.log(2), math.log(100)))
    workers, cpus = rng.randint(2, 16), rng.choice((1, 2, 4, 8, 16, 64))
    sizes = [3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    measurements = []
    for num_envs in sorted({1, 2, *rng.sample(sizes, rng.randint(4, 8))}):
        c = min(workers, num_envs, cpus)
        loop = (loop_cost + num_envs * t_env) * (1 + rng.gauss(0, 0.015))
        pool = (num_envs * t_env / c + t_os) * (1 + rng.gauss(0, 0.015))
        measurements.append((num_envs, loop, pool))
    return measurements, workers, cpus, t_env, t_os


def test_fit_model_on_new_measurements(student, seed, rng):
    fit_model = student.module("q2_overhead.py").get("fit_model")
    for _ in range(3):
        measurements, workers, cpus, t_env, t_os = made_up_measurements(rng)
        got = call(fit_model, measurements, workers, cpus)
        where = f"fit_model(<random measurements, seed {seed}>, workers={workers}, cpus={cpus})"
        fit_is_close(got, measurements, workers, cpus, t_env, t_os, where)


def exact_break_even(t_env, t_os, workers, cpus):
    """The break-even N in exact arithmetic, and the Ns a float computation may give instead
    (a neighbour, when the speed-up there is 1 to within rounding)."""
    t_env, t_os = Fraction(t_env), Fraction(t_os)

    def speedup(num_envs):
        c = min(workers, cpus, num_envs)
        return num_envs * t_env / (num_envs * t_env / c + t_os)

    most = min(workers, cpus)
    answer = max(1, math.ceil(1 + t_os / t_env))
    if answer > most:
        if most == 1:
            return None, {None}
        answer = max(most, math.ceil(t_os * most / (t_env * (most - 1))))
    assert speedup(answer) >= 1 and (answer == 1 or speedup(answer - 1) < 1)
    accepted = {answer}
    for neighbour in (answer - 1, answer + 1):
        if neighbour >= 1 and abs(speedup(neighbour) - 1) < Fraction(1, 10**9):
            accepted.add(neighbour)
    return answer, accepted


def test_break_even_on_new_numbers(student, seed, rng):
    break_even = student.module("q2_overhead.py").get("break_even_num_envs")
    cases = []
    for _ in range(12):
        t_env = math.exp(rng.uniform(math.log(1e-7), math.log(1e-2)))
        t_os = t_env * math.exp(rng.uniform(math.log(0.01), math.log(1e9)))
        cases.append((t_env, t_os, rng.randint(1, 64), rng.randint(1, 128)))
    cases.append((5e-6, 5e-6 * rng.randint(2, 9), 64, 64))  # small N, where c = N
    for t_env, t_os, workers, cpus in cases:
        expected, accepted = exact_break_even(t_env, t_os, workers, cpus)
        got = call(break_even, t_env, t_os, workers, cpus, seconds=5.0)
        if got not in accepted or (got is not None and type(got) is not int):
            fail(
                f"break_even_num_envs(t_env={t_env!r}, t_os={t_os!r}, workers={workers}, "
                f"cpus={cpus}) = {got!r}: expected {expected} (random case, seed {seed})"
            )


def test_part_b_answer(student, student_id):
    answer = student.module("q2_overhead.py").get("WHAT_THE_MODEL_LEAVES_OUT")
    right = right_letter("WHAT_THE_MODEL_LEAVES_OUT", "t_os is one constant", student_id)
    assert answer == right, (
        f"WHAT_THE_MODEL_LEAVES_OUT = {answer!r} (the options lettered for student id "
        f"{student_id!r}): the model's t_os is one constant, but every worker adds its own "
        "wake-up and answer to each step, and 8 processes take turns on 2 CPUs"
    )
