"""Measurements made up from the overhead model itself, for the model and figure tests.

With a known t_env and t_os, the fit has a right answer to find, and a chart has known points
to draw; :func:`finished_job` puts made-up measurements in a store as a job the dashboard can
show (a real run cannot be made to stall a window on cue). (A plain module, not a conftest
fixture, because the tests call these with arguments.)
"""

from __future__ import annotations

import math
import random

from vecenvs.bench import BenchConfig, Measurement

US = 1e-6
CHEAP, COSTLY = "CartPole-v1", "Acrobot-v1"
ENV_STEP = {CHEAP: 20 * US, COSTLY: 200 * US}
NUM_ENVS = (1, 2, 4, 8, 16, 32, 64)
CPUS = 2


def measurement(
    env_id: str,
    num_envs: int,
    backend: str,
    throughput: float,
    *,
    workers: int = 1,
    ratio: float | None = None,
    backend_kwargs: dict | None = None,
    spread: float = 0.02,
) -> Measurement:
    """A measurement with three windows around ``throughput`` (its median)."""
    return Measurement(
        config=BenchConfig(env_id, num_envs, backend, backend_kwargs=dict(backend_kwargs or {})),
        throughputs=[throughput * (1 - spread), throughput, throughput * (1 + spread)],
        window_steps=[100, 100, 100],
        window_seconds=[0.2, 0.2, 0.2],
        startup_seconds=0.01,
        parent_cpu_seconds=0.5,
        children_cpu_seconds=0.0,
        child_processes=0 if workers == 1 else workers,
        rss_bytes=10**8,
        children_uss_bytes=None,
        workers=workers,
        ratio=ratio,
    )


def model_speedup(num_envs: float, t_env: float, c: float, t_os: float) -> float:
    """The formula under test, written out once more: S = c N t_env / (N t_env + c t_os)."""
    return c * num_envs * t_env / (num_envs * t_env + c * t_os)


def synthetic(
    overheads: dict[str, tuple[float, float]],
    *,
    envs: dict[str, float] = ENV_STEP,
    num_envs=NUM_ENVS,
    cpus: int = CPUS,
    noise: float = 0.0,
    seed: int = 0,
    ceiling: float | None = None,
) -> list[Measurement]:
    """The reference plus one measurement per env x N x backend, made from the model.

    ``overheads`` maps a backend to (a, b): its overhead is t_os(N) = a + b N. ``"pool"`` has 2
    workers; anything else one process per env. ``noise`` multiplies each speed-up by a random
    factor exp(gauss(0, noise)). ``ceiling``: the machine's efficiency per process; when given,
    the ceiling row is measured too (min(cpus, N) processes at that efficiency) and caps how
    many envs step at once.
    """
    rng = random.Random(seed)
    results = []
    for env_id, t_env in envs.items():
        for n in num_envs:
            results.append(measurement(env_id, n, "gym-sync", 1 / t_env, ratio=1.0))
            capacity = min(n, cpus) * (ceiling or 1.0)
            if ceiling is not None:
                results.append(
                    measurement(
                        env_id, n, "ceiling", capacity / t_env, workers=min(n, cpus), ratio=capacity
                    )
                )
            for backend, (fixed, per_env) in overheads.items():
                workers = min(2, n) if backend == "pool" else n
                c = max(1, min(workers, n, capacity))
                speedup = model_speedup(n, t_env, c, fixed + per_env * n)
                speedup *= math.exp(rng.gauss(0, noise)) if noise else 1.0
                results.append(
                    measurement(env_id, n, backend, speedup / t_env, workers=workers, ratio=speedup)
                )
    return results


def finished_job(queue, config, measurements, label: str | None = None) -> int:
    """A finished sweep job of ``queue`` (a :class:`vecenvs.lab.LabQueue`) whose run holds
    ``measurements``, saved the way the runner saves them; returns the job's id."""
    job = queue.submit_sweep(config, label=label, start_runner=False)
    run = queue.store.start_run("sweep", config.to_dict(), label=label)
    for each in measurements:
        queue.store.add_measurement(run, each)
    queue.store.finish_run(run)
    with queue.store.transaction(write=True) as connection:
        connection.execute("UPDATE jobs SET state = 'started', run_id = ? WHERE id = ?", (run, job))
    return job
