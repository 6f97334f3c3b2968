"""Exercise 2: the overhead model, from measurements to a decision.

Notebook 6's model: one ``step()`` of N envs, on a backend whose K workers step c envs at the
same moment, takes

    t_batch = N * t_env / c + t_os        with  c = min(K, N, cpus)

where t_env is one env's step and t_os the backend's fixed cost per ``step()`` (waking the
workers, pipes, waiting). The loop steps the N envs one after the other.

Part A. Write the three functions below. Times are in seconds.

Part B. Replace ``None`` with your answer. The checks you run say whether it has the right form;
whether it is right is graded later.

Check your work: ``pytest exercises/checks -k q2``.
"""


def throughput(num_envs: int, steps: int, seconds: float) -> float:
    """Env steps per second: ``steps`` calls of ``step()`` on ``num_envs`` envs took ``seconds``."""
    raise NotImplementedError("Exercise 2: write throughput")


def fit_model(
    measurements: list[tuple[int, float, float]], workers: int, cpus: int
) -> tuple[float, float]:
    """``(t_env, t_os)`` estimated from measurements of the loop and of a pool.

    Each measurement is ``(N, loop_seconds, pool_seconds)``: the mean time of one ``step()`` of
    N envs in the loop, and in a pool of ``workers`` workers on ``cpus`` CPUs. Measurements are
    noisy, and the loop has a small fixed cost per ``step()`` of its own: use every measurement.
    """
    raise NotImplementedError("Exercise 2: write fit_model")


def break_even_num_envs(t_env: float, t_os: float, workers: int, cpus: int) -> int | None:
    """The smallest N at which the model's pool is at least as fast as the loop (None: no N).

    It raises ValueError for a ``t_env`` that is not above 0, a negative ``t_os``, or fewer
    than one worker or CPU. The answer may be in the billions: it must come within a second.
    """
    raise NotImplementedError("Exercise 2: write break_even_num_envs")


# ---------------------------------------------------------------- Part B

#: Notebook 4 measured a pool of 8 workers on 2 CPUs stepping slower than a pool of 2, while the
#: model predicts the same speed-up for both. Which part of a real pool does the model leave out?
#: One letter, from your own list: `python -m exercises.options YOUR_STUDENT_ID` letters these
#: options in an order of your own (your id as your instructor's class list has it).
#:   - nothing: c = min(K, N, cpus) is 2 for both pools, so the model is right that they tie;
#:     the gap is noise in the measurement
#:   - t_env is one constant, but each env step slows with more workers: 8 processes share
#:     the CPUs' caches and memory
#:   - t_os is one constant, but each step() costs more with more workers: each is woken and
#:     waited for, 8 taking turns on 2 CPUs
WHAT_THE_MODEL_LEAVES_OUT = None
