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


@pytest.mark.parametrize(
    ("num_envs", "lanes"), [(1, 1), (7, 3), (8, 2), (128, 2), (5, 5), (130, 7)]
)
def test_split_evenly_covers_every_env_once_with_sizes_differing_by_at_most_one(num_envs, lanes):
    chunks = split_evenly(num_envs, lanes)
    assert len(chunks) == lanes
    assert [i for chunk in chunks for i in chunk] == list(range(num_envs))
    sizes = [len(chunk) for chunk in chunks]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(
    ("cpus", "num_envs", "num_workers", "step_in_caller", "expected_processes"),
    [
        (2, 128, None, True, 1),  # default: K = 2 CPUs, the caller is one of them
        (2, 128, 2, False, 2),  # the caller only waits: two worker processes
        (8, 64, None, True, 7),
        (8, 3, None, True, 2),  # never more than one process per env
        (1, 16, None, True, 0),  # one CPU: the caller alone, i.e. the sequential loop
    ],
)
def test_how_many_processes_start(
    monkeypatch, cpus, num_envs, num_workers, step_in_caller, expected_processes
):
    monkeypatch.setattr(vecenvs.pool, "available_cpus", lambda: cpus)
    with PoolVecEnv(
        env_fns_for("CartPole-v1", num_envs), num_workers=num_workers, step_in_caller=step_in_caller
    ) as envs:
        assert len(envs.processes) == expected_processes
        assert envs.num_workers == min(num_workers or cpus, num_envs)
        stepped = [
            i for chunk in envs.chunks for i in chunk
        ]  # the caller's chunk first, if it has one
        assert sorted(stepped) == list(range(num_envs))


def test_one_worker_with_the_caller_is_the_sequential_loop():
    with PoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=1) as envs:
        assert envs.processes == []
        observations, _ = envs.reset(seed=0)
        observations, rewards, *_ = envs.step(envs.action_space.sample())
    assert observations.shape == (4, 4) and rewards.tolist() == [1.0] * 4


def test_idle_workers_do_not_burn_cpu():
    """A worker may spin for a moment after answering, but an idle pool must not use the CPU."""
    with PoolVecEnv(env_fns_for("CartPole-v1", 8), num_workers=2, spin_seconds=1e-3) as envs:
        envs.reset(seed=0)
        for _ in range(50):
            envs.step(envs.action_space.sample())
        workers = [psutil.Process(process.pid) for process in envs.processes]
        time.sleep(0.2)  # let any spin run out
        before = sum(sum(worker.cpu_times()[:2]) for worker in workers)
        time.sleep(1.0)
        used = sum(sum(worker.cpu_times()[:2]) for worker in workers) - before
    assert used < 0.2, f"idle workers used {used:.2f} CPU seconds in 1 s: they are busy-waiting"


@pytest.mark.parametrize(
    ("spin_seconds", "error"), [(-1, ValueError), ("fast", TypeError), (True, TypeError)]
)
def test_bad_spin_seconds_is_refused(spin_seconds, error):
    with pytest.raises(error, match="spin_seconds"):
        PoolVecEnv([lambda: gym.make("CartPole-v1")] * 2, num_workers=2, spin_seconds=spin_seconds)


def test_workers_stop_spinning_when_the_parent_is_slow_between_steps():
    """A slow policy between steps: waiting workers must sleep, not spin after every step."""
    # CPU times come in 10 ms ticks and this test shares the machine, so the numbers are chosen
    # far apart: a 5 ms spin after each of 50 steps would cost ~0.25 CPU seconds, while 50
    # wake-ups that step 2 CartPoles cost ~0.02.
    spin, think, steps = 5e-3, 0.04, 50  # think > 4 x spin: the worker's rule for "slow"
    with PoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=2, spin_seconds=spin) as envs:
        envs.reset(seed=0)
        worker = psutil.Process(envs.processes[0].pid)
        actions = envs.action_space.sample()
        envs.step(actions)
        time.sleep(think)
        before = sum(worker.cpu_times()[:2])
        for _ in range(steps):
            envs.step(actions)
            time.sleep(think)
        used = sum(worker.cpu_times()[:2]) - before
    assert used < steps * spin / 2, (
        f"the worker used {used:.3f} CPU seconds over {steps} slow steps: it spun while waiting"
    )


def test_without_shared_memory_the_pool_does_not_spin(monkeypatch):
    """Every answer is a pipe message then, read with a system call anyway: no spin by default."""
    monkeypatch.setattr(vecenvs.pool, "available_cpus", lambda: 8)  # CPUs to spare: it would spin
    fns = env_fns_for("CartPole-v1", 2)
    with vecenvs.PoolVecEnv(fns, num_workers=2, shared_memory=False) as envs:
        assert envs.spin_seconds == 0.0
    with vecenvs.PoolVecEnv(fns, num_workers=2) as envs:
        assert envs.spin_seconds == vecenvs.pool.DEFAULT_SPIN_SECONDS
