"""Exercise 2, reference solution: the overhead model, from measurements to a decision."""

from __future__ import annotations

import math
import os

from exercises import options


def throughput(num_envs: int, steps: int, seconds: float) -> float:
    """Env steps per second: ``steps`` calls of ``step()`` on ``num_envs`` envs took ``seconds``."""
    return num_envs * steps / seconds


def fit_model(
    measurements: list[tuple[int, float, float]], workers: int, cpus: int
) -> tuple[float, float]:
    """``(t_env, t_os)`` estimated from measurements of the loop and of a pool."""
    sizes = [float(num_envs) for num_envs, _, _ in measurements]
    loop = [seconds for _, seconds, _ in measurements]
    # The loop takes a + N t_env: t_env is the slope of the least-squares line through the
    # points (t / N would count the loop's own fixed cost a into t_env, most at small N).
    mean_n, mean_t = sum(sizes) / len(sizes), sum(loop) / len(loop)
    spread = sum((n - mean_n) ** 2 for n in sizes)
    t_env = sum((n - mean_n) * (t - mean_t) for n, t in zip(sizes, loop)) / spread
    # What is left of the pool's time once its envs' parallel work is taken off: the mean of
    # these is the least-squares estimate of a constant t_os.
    left = [
        pool - num_envs * t_env / min(workers, num_envs, cpus) for num_envs, _, pool in measurements
    ]
    return t_env, sum(left) / len(left)


def break_even_num_envs(t_env: float, t_os: float, workers: int, cpus: int) -> int | None:
    """The smallest N at which the model's pool is at least as fast as the loop (None: no N)."""
    if not t_env > 0 or not t_os >= 0 or workers < 1 or cpus < 1:
        raise ValueError(
            f"expected t_env > 0, t_os >= 0, workers >= 1, cpus >= 1; got {t_env}, {t_os}, "
            f"{workers}, {cpus}"
        )
    most = min(workers, cpus)  # c once N reaches it
    # While N <= most, c = N: the pool takes t_env + t_os, the loop N t_env.
    small = max(1, math.ceil(1 + t_os / t_env))
    if small <= most:
        return small
    if most == 1:
        return None  # one env at a time plus t_os: never as fast as the loop
    # Beyond, c = most: N t_env / most + t_os <= N t_env  <=>  N >= t_os most / (t_env (most - 1)).
    return max(most, math.ceil(t_os * most / (t_env * (most - 1))))


# The letter is the student's own (exercises/options.py): the option "t_os is one constant...".
# The grader tells the student's process whose work it grades (VECENVS_STUDENT).
WHAT_THE_MODEL_LEAVES_OUT = options.letter_of(
    "WHAT_THE_MODEL_LEAVES_OUT", 2, os.environ.get("VECENVS_STUDENT", "")
)
