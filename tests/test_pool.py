"""What is particular to the pool: how it splits envs, its defaults, and that idle workers sleep."""

from __future__ import annotations

import time

import gymnasium as gym
import psutil
import pytest

import vecenvs.pool
from vecenvs import PoolVecEnv
from vecenvs.factory import env_fns_for
from vecenvs.pool import split_evenly


@pytest.mark.parametrize(("num_envs", "lanes"), [(1, 1), (7, 3), (8, 2), (128, 2), (5, 5), (130, 7)])
def test_split_evenly_covers_every_env_once_with_sizes_differing_by_at_most_one(num_envs, lanes):
    chunks = split_evenly(num_envs, lanes)
    assert len(chunks) == lanes
    assert [i for chunk in chunks for i in chunk] == list(range(num_envs))
    sizes = [len(chunk) for chunk in chunks]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(
    ("cpus", "num_envs", "num_workers", "expected_workers", "expected_caller"),
    [
        (2, 128, None, 1, True),  # default: one core for a worker, one for the caller
        (2, 128, 2, 2, False),  # asked for 2 workers on 2 cores: the caller would have no core
        (8, 64, None, 7, True),
        (8, 64, 3, 3, True),  # spare cores: the caller joins in
        (1, 16, None, 1, False),  # one core: a single worker, the caller waits
        (4, 2, None, 1, True),  # never more processes than envs
    ],
)
def test_default_workers_and_caller(monkeypatch, cpus, num_envs, num_workers, expected_workers, expected_caller):
    monkeypatch.setattr(vecenvs.pool, "available_cpus", lambda: cpus)
    monkeypatch.setattr(vecenvs.process_env, "available_cpus", lambda: cpus)
    with PoolVecEnv(env_fns_for("CartPole-v1", num_envs), num_workers=num_workers) as envs:
        assert envs.num_workers == expected_workers
        assert envs.step_in_caller is expected_caller
        assert len(envs.processes) == expected_workers
        stepped = [i for chunk in ([envs.caller_chunk] if envs.caller_chunk else []) + envs.chunks for i in chunk]
        assert sorted(stepped) == list(range(num_envs))


def test_idle_workers_do_not_burn_cpu():
    """A worker may spin for a moment after answering, but an idle pool must not use the CPU."""
    with PoolVecEnv(env_fns_for("CartPole-v1", 8), num_workers=1, step_in_caller=True, spin_seconds=200e-6) as envs:
        envs.reset(seed=0)
        for _ in range(50):
            envs.step(envs.action_space.sample())
        workers = [psutil.Process(process.pid) for process in envs.processes]
        time.sleep(0.2)  # let any spin run out
        before = sum(sum(worker.cpu_times()[:2]) for worker in workers)
        time.sleep(1.0)
        used = sum(sum(worker.cpu_times()[:2]) for worker in workers) - before
    assert used < 0.2, f"idle workers used {used:.2f} CPU seconds in 1 s: they are busy-waiting"


@pytest.mark.parametrize("spin_seconds", [-1, "fast", True])
def test_bad_spin_seconds_is_refused(spin_seconds):
    with pytest.raises(ValueError, match="spin_seconds"):
        PoolVecEnv([lambda: gym.make("CartPole-v1")] * 2, num_workers=1, spin_seconds=spin_seconds)
