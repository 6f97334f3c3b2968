"""The spin policy, all of it in ``vecenvs/doorbell.py``: how long each side may spin (a process
with a CPU to itself; the caller that only waits sleeps first, its workers spin briefly), and
for how long it does (sized from the waits a side measured, not from its own step time; none
while the other side thinks for longer)."""

from __future__ import annotations

import pytest

from vecenvs import AsyncPoolVecEnv, PoolVecEnv, doorbell, pool
from vecenvs.doorbell import DEFAULT_SPIN_SECONDS, SHARED_SPIN_SECONDS, Spin, spin_limits
from vecenvs.factory import env_fns_for

ALL, BRIEF = (DEFAULT_SPIN_SECONDS, DEFAULT_SPIN_SECONDS), (0.0, SHARED_SPIN_SECONDS)


@pytest.mark.parametrize(
    ("workers", "caller_steps", "cpus", "expected"),
    [
        (1, True, 2, ALL),  # the pool on 2 CPUs: caller and one worker, a CPU each
        (2, True, 2, (0.0, 0.0)),  # one process too many, and the caller steps too
        (2, False, 2, BRIEF),  # the async pool at K = CPUs: the caller only waits
        (15, True, 16, ALL),
        (16, False, 16, BRIEF),
        (17, False, 16, (0.0, 0.0)),  # two too many: nobody spins
        (63, True, 64, ALL),
        (1, False, 1, BRIEF),  # one CPU: the worker spins briefly while the caller sleeps
    ],
)
def test_spin_limits(workers, caller_steps, cpus, expected):
    assert spin_limits(workers, caller_steps, cpus) == expected
    assert spin_limits(workers, caller_steps, cpus, longest=0.0) == (0.0, 0.0)


def test_a_spin_is_sized_from_the_waits_measured():
    spin = Spin(longest=1e-3)
    assert spin.budget() == Spin.SHORTEST  # nothing measured yet: the shortest spin
    for _ in range(20):
        spin.record(100e-6)  # the answer comes after about 100 µs
    assert spin.budget() == pytest.approx(Spin.MARGIN * 100e-6, rel=0.05)
    for _ in range(20):
        spin.record(5e-3)  # the other side now thinks for 5 ms between steps
    assert spin.budget() == 0.0, "a spin would only burn a CPU: sleep at once"
    for _ in range(20):
        spin.record(50e-6)  # quick again: spinning comes back, no back-off to sit out
    assert 0 < spin.budget() <= 1e-3


def test_a_spin_never_lasts_longer_than_its_longest_and_zero_never_spins():
    spin = Spin(longest=1e-3)
    for _ in range(20):
        spin.record(0.9e-3)
    assert spin.budget() == 1e-3
    never = Spin(longest=0.0)
    never.record(1e-6)
    assert never.budget() == 0.0


@pytest.mark.parametrize(
    ("cpus", "num_workers", "caller", "workers"),
    [
        (2, 2, DEFAULT_SPIN_SECONDS, DEFAULT_SPIN_SECONDS),  # K processes on K CPUs
        (2, 3, 0.0, 0.0),  # oversubscribed
        (16, 16, DEFAULT_SPIN_SECONDS, DEFAULT_SPIN_SECONDS),
    ],
)
def test_the_pool_spins_where_each_process_has_a_cpu(
    monkeypatch, cpus, num_workers, caller, workers
):
    monkeypatch.setattr(pool, "available_cpus", lambda: cpus)
    with PoolVecEnv(env_fns_for("CartPole-v1", num_workers), num_workers=num_workers) as envs:
        assert (envs.caller_spin_seconds, envs.spin_seconds) == (caller, workers)
        assert envs.crew.waiter.spin.longest == caller


def test_the_async_pool_at_k_equal_cpus_lets_its_caller_sleep_and_its_workers_spin_briefly(
    monkeypatch,
):
    monkeypatch.setattr(pool, "available_cpus", lambda: 2)
    with AsyncPoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=2) as envs:
        assert envs.caller_spin_seconds == 0.0 and envs.spin_seconds == SHARED_SPIN_SECONDS


def test_spin_seconds_given_is_for_both_sides_and_pickled_results_never_spin(monkeypatch):
    monkeypatch.setattr(pool, "available_cpus", lambda: 64)
    with PoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=2, spin_seconds=5e-3) as envs:
        assert envs.caller_spin_seconds == envs.spin_seconds == 5e-3
    with PoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=2, shared_memory=False) as envs:
        assert envs.caller_spin_seconds == envs.spin_seconds == 0.0


def test_the_policy_has_one_home():
    """No other module decides how long to spin."""
    assert pool.DEFAULT_SPIN_SECONDS is doorbell.DEFAULT_SPIN_SECONDS
