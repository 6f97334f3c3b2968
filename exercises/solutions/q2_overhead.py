"""Exercise 2, reference solution: throughput and the overhead model."""


def throughput(num_envs: int, steps: int, seconds: float) -> float:
    """Env steps per second: ``steps`` calls of ``step()`` on ``num_envs`` envs took ``seconds``."""
    return num_envs * steps / seconds


def concurrency(num_envs: int, workers: int, cpus: int) -> int:
    """c: how many envs really step at the same moment."""
    return min(workers, num_envs, cpus)


def predicted_speedup(num_envs: int, t_env: float, t_os: float, workers: int, cpus: int) -> float:
    """The model's speed-up over the sequential loop: N t_env / (N t_env / c + t_os)."""
    c = concurrency(num_envs, workers, cpus)
    return num_envs * t_env / (num_envs * t_env / c + t_os)


def t_os_from_speedup(
    num_envs: int, t_env: float, speedup: float, workers: int, cpus: int
) -> float:
    """The overhead t_os that would make the model predict this measured ``speedup``."""
    c = concurrency(num_envs, workers, cpus)
    t_batch = num_envs * t_env / speedup  # the batch time this speed-up implies
    return t_batch - num_envs * t_env / c


def break_even_num_envs(
    t_env: float, t_os: float, workers: int, cpus: int, max_envs: int = 100_000
) -> int | None:
    """The smallest N (1 to ``max_envs``) at which the model's speed-up is at least 1."""
    for num_envs in range(1, max_envs + 1):
        if predicted_speedup(num_envs, t_env, t_os, workers, cpus) >= 1:
            return num_envs
    return None
