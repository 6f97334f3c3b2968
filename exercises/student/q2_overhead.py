"""Exercise 2: throughput and the overhead model.

Notebook 6 fits the overhead model with ``vecenvs.bench.model``. Here you write its formulas.

One ``step()`` of N envs, on a backend that steps c envs at the same moment, takes

    t_batch = N * t_env / c + t_os        with  c = min(workers, N, cpus)

where t_env is one env step and t_os the backend's fixed overhead per ``step()`` call
(pipes, waking processes, waiting). A plain loop takes N * t_env, so the speed-up over it is

    speedup = N * t_env / t_batch

Write the four functions below. Times are in seconds. Check: ``pytest exercises/checks -k q2``.
"""


def throughput(num_envs: int, steps: int, seconds: float) -> float:
    """Env steps per second: ``steps`` calls of ``step()`` on ``num_envs`` envs took ``seconds``.

    Every env's step counts: one ``step()`` of 8 envs is 8 env steps.
    """
    raise NotImplementedError("Exercise 2: write throughput")


def predicted_speedup(num_envs: int, t_env: float, t_os: float, workers: int, cpus: int) -> float:
    """The model's speed-up over the sequential loop (see the module docstring)."""
    raise NotImplementedError("Exercise 2: write predicted_speedup")


def t_os_from_speedup(
    num_envs: int, t_env: float, speedup: float, workers: int, cpus: int
) -> float:
    """The overhead t_os that would make the model predict this measured ``speedup``.

    Solve the model for t_os: first the batch time the speed-up implies, then subtract the
    parallel part.
    """
    raise NotImplementedError("Exercise 2: write t_os_from_speedup")


def break_even_num_envs(
    t_env: float, t_os: float, workers: int, cpus: int, max_envs: int = 100_000
) -> int | None:
    """The smallest N (1 to ``max_envs``) at which the model's speed-up is at least 1.

    Returns None when no N up to ``max_envs`` gets there (for example with one worker, or one
    CPU: then the backend can never beat the loop it adds overhead to).
    """
    raise NotImplementedError("Exercise 2: write break_even_num_envs")
