"""The memory-ordering contract (docs/memory-ordering.md): where one process's writes must be
seen before another's read, ``doorbell.publish`` / ``doorbell.observe`` stand between them, and
on a CPU without a barrier we trust the pool talks over pipes instead.

Counting is done in real processes: the barrier is replaced (before the workers fork) by a
function that counts its calls in shared memory, the parent's and the workers' apart.
"""

from __future__ import annotations

import ctypes.util
import logging
import mmap
import os
import platform
import sys

import numpy as np
import pytest

from vecenvs import AsyncPoolVecEnv, MultiEnv, PoolVecEnv, doorbell, pool
from vecenvs.factory import env_fns_for
from vecenvs.workers import ProcessWorker, SharedMemoryWorker

STEPS = 20


class CountingBarrier:
    """Counts calls, in shared memory: word 0 this process's, word 1 its forked children's."""

    def __init__(self) -> None:
        self.memory = mmap.mmap(-1, mmap.PAGESIZE)
        self.counts = memoryview(self.memory).cast("q")
        self.parent = os.getpid()

    def __call__(self) -> None:
        self.counts[0 if os.getpid() == self.parent else 1] += 1

    def take(self) -> tuple[int, int]:
        counts = (self.counts[0], self.counts[1])
        self.counts[0] = self.counts[1] = 0
        return counts


@pytest.mark.parametrize("shared_memory", [True, False])
def test_every_step_orders_its_writes_through_publish_and_observe(monkeypatch, shared_memory):
    """One step, one worker: the parent publishes the actions before the generation word and
    observes the done word before reading results; the worker observes the generation word
    before reading the actions and publishes its results before the done word."""
    barrier = CountingBarrier()
    monkeypatch.setattr(doorbell, "_ORDER", barrier)
    envs = PoolVecEnv(
        env_fns_for("CartPole-v1", 4),
        num_workers=2,
        start_method="fork",
        shared_memory=shared_memory,
    )
    with envs:
        envs.reset(seed=0)
        barrier.take()
        for _ in range(STEPS):
            envs.step(np.zeros(4, dtype=np.int64))
        parent, worker = barrier.take()
    assert parent == 2 * STEPS, "the parent: publish (actions, generation), observe (done word)"
    assert worker == 2 * STEPS, "the worker: observe (generation word), publish (results, done)"


def test_the_async_pool_orders_its_writes_too(monkeypatch):
    barrier = CountingBarrier()
    monkeypatch.setattr(doorbell, "_ORDER", barrier)
    with AsyncPoolVecEnv(
        env_fns_for("CartPole-v1", 4), num_workers=2, batch_size=2, start_method="fork"
    ) as envs:
        envs.async_reset(seed=0)
        barrier.take()
        for _ in range(STEPS):
            infos = envs.recv()[-1]
            envs.send(np.zeros(2, dtype=np.int64), infos["env_id"])
        parent, worker = barrier.take()
    assert parent >= 2 * STEPS  # each send publishes, each recv observes
    assert worker >= STEPS  # each round observes what it was given and publishes what it did


def test_on_x86_64_the_cpu_keeps_order_and_the_full_barrier_is_a_locked_instruction(
    monkeypatch,
):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert doorbell._choose_barriers() == (doorbell._no_barrier, doorbell._locked_instruction)


@pytest.mark.skipif(not ctypes.util.find_library("atomic"), reason="no libatomic here")
def test_elsewhere_the_barriers_are_libatomics_compiled_c11_fence(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    order, full = doorbell._choose_barriers()
    assert order is full and full.func.__name__ == "atomic_thread_fence"
    assert full.args == (doorbell._SEQ_CST,)
    full()  # this machine's libatomic: a real fence instruction, called through ctypes


def test_a_mac_on_arm64_takes_apples_osmemorybarrier(monkeypatch):
    """macOS has no libatomic; its libSystem has OSMemoryBarrier. Faked here (no Mac at hand):
    what is checked is that the barrier is looked up there, called with no argument, and used
    for both kinds, and that a libSystem without it leaves no barrier."""
    calls = []

    class LibSystem:
        def __init__(self, path):
            assert path == doorbell.LIBSYSTEM
            self.OSMemoryBarrier = lambda: calls.append("dmb")

    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(ctypes, "CDLL", LibSystem)
    order, full = doorbell._choose_barriers()
    assert order is full
    full()
    assert calls == ["dmb"]

    def missing(path):
        raise OSError(f"{path}: not found")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert doorbell._choose_barriers() is None


def test_without_a_barrier_the_pool_talks_over_pipes_and_says_so_once(monkeypatch, caplog):
    """An arm64 machine without libatomic: no shared-memory spinning, the same results."""
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert doorbell._choose_barriers() is None
    monkeypatch.setattr(doorbell, "BARRIERS_FOUND", False)  # as it would be on that machine
    monkeypatch.setattr(pool, "_REFUSALS", set())
    actions = np.array([[0, 1, 1, 0, 1, 0]] * 30)
    reference = MultiEnv(env_fns_for("CartPole-v1", 6))
    expected = [reference.reset(seed=3)[0]] + [reference.step(a)[0] for a in actions]
    reference.close()
    with caplog.at_level(logging.WARNING, logger="vecenvs.pool"):
        for _ in range(2):
            with PoolVecEnv(env_fns_for("CartPole-v1", 6), num_workers=3) as envs:
                assert envs.area is None and not envs.shared_memory
                assert all(type(worker) is ProcessWorker for worker in envs.workers)
                got = [envs.reset(seed=3)[0]] + [envs.step(a)[0] for a in actions]
            for mine, theirs in zip(got, expected):
                np.testing.assert_array_equal(mine, theirs)
    refusals = [record for record in caplog.records if "no memory barrier" in record.message]
    assert len(refusals) == 1 and "aarch64" in refusals[0].message
    with pytest.raises(RuntimeError, match="AsyncPoolVecEnv cannot run here: no memory barrier"):
        AsyncPoolVecEnv(env_fns_for("CartPole-v1", 2), num_workers=2)


def test_with_barriers_the_pool_uses_its_words():
    with PoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=2) as envs:
        assert envs.area is not None
        assert all(type(worker) is SharedMemoryWorker for worker in envs.workers)
