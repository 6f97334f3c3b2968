"""The memory-ordering contract (docs/memory-ordering.md): where one process's writes must be
seen before another's read, ``doorbell.publish`` / ``observe`` / ``fence`` stand between them,
each one needed; and on a CPU without a barrier we trust the pool talks over pipes instead.

The pools run in the test mode of :mod:`ordering` (tests/ordering.py): every process logs its
accesses to shared memory and its barriers, and the logs are checked against the ordering
points. x86-64 would hide a missing barrier (it keeps stores in order and loads in order); the
logs do not: they are the program order that arm64 keeps only where a barrier says so.
"""

from __future__ import annotations

import ctypes.util
import inspect
import logging
import platform
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import ordering
import pytest

from vecenvs import AsyncPoolVecEnv, MultiEnv, PoolVecEnv, async_pool, doorbell, pool, workers
from vecenvs.factory import env_fns_for
from vecenvs.workers import ProcessWorker, SharedMemoryWorker

DOC = Path(__file__).resolve().parent.parent / "docs" / "memory-ordering.md"


class _Infos(gym.Wrapper):
    """CartPole with infos: numbers (which go into shared memory once learnt) and, every third
    step, a string (which is pickled)."""

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps = getattr(self, "steps", 0) + 1
        info = {**info, "x": float(observation[0]), "pair": np.asarray(observation[:2])}
        if self.steps % 3 == 0:
            info["note"] = "every third step"
        return observation, reward, terminated, truncated, info


ENV_FNS = [lambda: _Infos(gym.make("CartPole-v1"))] * 6


def _lock_step(**kwargs):
    """Everything the lock-step pool does with its words: steps through shared memory (infos
    learnt and shared on the way), a step whose actions are pickled, calls, a masked reset."""
    with PoolVecEnv(ENV_FNS, num_workers=3, start_method="fork", **kwargs) as envs:
        envs.reset(seed=0)
        for step in range(8):
            envs.step(np.array([step % 2] * 6))
        envs.step([0, 1, 0, 1, 0, 1])
        envs.call("spec")
        envs.reset(seed=1, options={"reset_mask": np.array([0, 0, 1, 0, 0, 1], dtype=bool)})
        envs.step(np.zeros(6, dtype=np.int64))


def _async(**kwargs):
    """The async pool: envs asked and done one by one, then its lock-step API."""
    with AsyncPoolVecEnv(
        ENV_FNS, num_workers=3, batch_size=3, start_method="fork", **kwargs
    ) as envs:
        envs.async_reset(seed=0)
        for _ in range(10):
            *_, infos = envs.recv()
            envs.send(np.zeros(3, dtype=np.int64), infos["env_id"])
        envs.reset(seed=0)
        envs.step(np.zeros(6, dtype=np.int64))


def _record(*scenarios):
    with ordering.recording() as log:
        for scenario in scenarios:
            scenario()
    return log.read()


@pytest.fixture(scope="module")
def logs():
    """Both pools, spinning (the default) and sleeping at every wait (``spin_seconds=0``, the
    caller only waiting: every process sleeps and is rung)."""
    return _record(
        _lock_step,
        lambda: _lock_step(step_in_caller=False, spin_seconds=0),
        _async,
        lambda: _async(spin_seconds=0),
    )


def test_the_pools_keep_every_ordering_point(logs):
    assert len(logs) > 1 and all(logs.values()), "every process logged what it did"
    assert ordering.violations(logs) == []


@pytest.mark.parametrize("site", ordering.barrier_sites())
def test_every_barrier_call_is_needed(logs, site):
    """Removing any one publish(), observe() or fence() call breaks an ordering point."""
    assert any(event[1] == site for events in logs.values() for event in events), (
        f"the barrier at {site} never ran in the recorded pools: what is it for?"
    )
    assert ordering.violations(ordering.without(logs, site)), (
        f"without the barrier at {site}, every ordering point still holds: no test needs it"
    )


def _site(function, text):
    """The ``"file.py:line"`` of the barrier call in ``function``: the line that starts with
    ``text`` (``"publish()"``, say)."""
    function = inspect.unwrap(function)
    lines, first = inspect.getsourcelines(function)
    index = next(i for i, line in enumerate(lines) if line.strip().startswith(text))
    return f"{Path(inspect.getsourcefile(function)).name}:{first + index}"


def _broken(logs, rule):
    return [line for line in ordering.violations(logs) if rule in line]


def test_b1_an_env_is_stepped_with_the_action_its_request_announces(logs):
    """B1: the async pool's send writes the actions, then the env's requested word; its worker
    reads that word, then the actions. Without the barrier on either side an env could be
    stepped with its previous action."""
    send = _site(AsyncPoolVecEnv.send, "publish()")
    serve = _site(async_pool.serve_envs, "observe()")
    assert _broken(ordering.without(logs, send), "an env asked")
    assert _broken(ordering.without(logs, serve), "an env asked")


def test_b2_a_worker_serves_what_the_generation_it_saw_announces(monkeypatch):
    """B2: a worker that read the generation word again after its wait's observe() would serve
    counts that word did not announce (unordered): the check sees the rereading."""
    waiter_of = workers.command_waiter

    def rereading(area, line, spin_seconds):
        waiter, generation = waiter_of(area, line, spin_seconds)

        class Rereads:
            def wait(self, **kwargs):
                waiter.wait(**kwargs)
                return generation()  # as CommandWait.after did

        return Rereads(), generation

    monkeypatch.setattr(workers, "command_waiter", rereading)
    monkeypatch.setattr(async_pool, "command_waiter", rereading)
    assert _broken(_record(_lock_step), "a round given")


def test_b3_recv_returns_what_its_wait_saw_done(monkeypatch):
    """B3: recv() counting the done envs again after its wait's observe() would read rows not
    yet ordered after the words it counted: the check sees the recount."""
    wait_for = AsyncPoolVecEnv._wait_for

    def recounting(self, count, timeout, waiting):
        wait_for(self, count, timeout, waiting)
        return np.flatnonzero(self._pending & (self._done >= self._requested))  # as it was

    monkeypatch.setattr(AsyncPoolVecEnv, "_wait_for", recounting)
    assert _broken(_record(_async), "an env done")


def test_b4_a_sleeper_reads_the_bell_before_the_word_it_waits_for(logs):
    """B4: a sleeper reads the bell's count, then the word; unordered, it may see an old word
    and a new count, and sleep through the ring (a 50 ms nap)."""
    site = _site(doorbell.Waiter._sleep, "observe()")
    assert _broken(ordering.without(logs, site), "doorbell rung")


def test_a_step_is_one_publish_and_one_observe_on_each_side_whatever_k():
    """The broadcast: per step, the parent publishes once (before the generation word) and
    observes once (after all the done words), and so does each worker (the other way round)."""
    steps, sleeping = 20, _site(doorbell.Waiter._sleep, "observe()")
    for num_workers in (2, 4):
        with ordering.recording() as log:
            with PoolVecEnv(
                env_fns_for("CartPole-v1", 8), num_workers=num_workers, start_method="fork"
            ) as envs:
                envs.reset(seed=0)
                log.clear()
                for _ in range(steps):
                    envs.step(np.zeros(8, dtype=np.int64))
                counts = {
                    name: {
                        kind: sum(e[0] == kind and e[1] != sleeping for e in events)
                        for kind in "PO"
                    }
                    for name, events in log.read().items()
                }
        assert len(counts) == num_workers, counts
        for name, count in counts.items():
            assert count == {"P": steps, "O": steps}, (num_workers, name, count)


def test_the_document_has_a_row_for_every_ordering_point():
    text = DOC.read_text()
    for rule in (*ordering.ORDERING_POINTS, *ordering.SLEEP_HANDSHAKES):
        assert rule.name in text, f"docs/memory-ordering.md does not name {rule.name!r}"
    listed = text[text.index("## Every barrier") :].split("\n\n")[1]
    for site in ordering.barrier_sites():
        function = ordering.function_at(site)
        assert f"`{function}`" in listed, f"the barrier at {site}, in {function}, is not listed"
    assert listed.count("\n|") - 1 == len(ordering.barrier_sites()), "one row per barrier call"


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
