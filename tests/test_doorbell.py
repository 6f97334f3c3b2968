"""The doorbell without a futex (macOS has none), forced on Linux with ``doorbell.FUTEX = False``.

The pools must give the same results, notice hung envs and dead workers in time, and the
choice made in the parent must reach workers started by spawn (a fresh interpreter, which reads
the module's default again). Where each process sleeps is read from the kernel: a thread
asleep in a futex shows ``futex...`` in ``/proc/<pid>/task/<tid>/wchan``, one polling with
``time.sleep`` shows a nanosleep.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np
import pytest
from conftest import REPORTED_WITHIN, assert_same, second_step_raises, sync_reference

from vecenvs import AsyncPoolVecEnv, PoolVecEnv, WorkerDiedError, WorkerTimeoutError, doorbell
from vecenvs.envs.faulty import faulty_env_fns
from vecenvs.factory import env_fns_for
from vecenvs.workers import SLEEPING

pytestmark = [
    pytest.mark.usefixtures("no_leftover_processes"),
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or not doorbell.FUTEX_FOUND,
        reason="forcing the polling path is a test of a machine that has a futex (Linux)",
    ),
]


@pytest.fixture(params=[True, False], ids=["futex", "polling"])
def futex(request, monkeypatch) -> bool:
    """Pools made in the test use the futex, or poll (the module setting, as a user sets it)."""
    monkeypatch.setattr(doorbell, "FUTEX", request.param)
    return request.param


def _where_it_sleeps(pid: int, samples: int = 20) -> list[str]:
    """The kernel function the process's main thread waits in, sampled every 10 ms."""
    seen = []
    for _ in range(samples):
        with open(f"/proc/{pid}/task/{pid}/wchan") as file:
            seen.append(file.read())
        time.sleep(0.01)
    return seen


def test_the_pool_gives_sync_results_and_its_spawned_worker_sleeps_as_told(futex):
    env_fns = env_fns_for("CartPole-v1", 6)
    actions = [np.array([i % 2, 1, 0, 1, i % 3 // 2, 0]) for i in range(40)]
    reference = sync_reference(env_fns)
    with PoolVecEnv(env_fns, num_workers=2, start_method="spawn") as envs:
        assert envs.area.worker_bell.futex is futex and envs.area.parent_bell.futex is futex
        assert_same(envs.reset(seed=3), reference.reset(seed=3))
        for step, batch in enumerate(actions):
            assert_same(envs.step(batch), reference.step(batch), f"step {step}")
            if step % 10 == 9:
                time.sleep(0.05)  # the worker stops spinning and sleeps: it must be woken
        time.sleep(0.3)
        line = envs.area.line(1)
        assert line[SLEEPING] == 1, "an idle worker sleeps"
        places = _where_it_sleeps(envs.processes[0].pid)
        in_futex = sum("futex" in place for place in places)
        if futex:
            assert in_futex > len(places) / 2, places
        else:
            assert in_futex < len(places) / 2 and any("nanosleep" in p for p in places), places
        assert_same(envs.step(actions[0]), reference.step(actions[0]), "after the sleep")
    reference.close()


@pytest.mark.parametrize(
    ("how", "error"), [("hang", WorkerTimeoutError), ("kill", WorkerDiedError)]
)
def test_a_hung_env_times_out_and_a_dead_worker_is_noticed(futex, how, error):
    # Env 3 is in the worker's chunk (the caller steps envs 0-1): the parent sleeps on its bell.
    envs = PoolVecEnv(faulty_env_fns(4, 3, fail_on="step", at=2, how=how), timeout=1.5)
    assert envs.area.parent_bell.futex is futex
    info = second_step_raises(envs, error)
    assert 3 in info.value.env_indices and envs.closed


def test_without_futex_the_async_pool_steps_and_notices_a_death(futex):
    with AsyncPoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=2, batch_size=2) as envs:
        envs.async_reset(seed=0)
        for _ in range(20):
            *_, infos = envs.recv()
            envs.send(np.zeros(2, dtype=np.int64), infos["env_id"])
        envs.recv(), envs.recv()  # every env idle now (4 were pending)
        time.sleep(0.2)  # and every worker asleep
        os.kill(envs.processes[1].pid, signal.SIGKILL)
        envs.send(np.zeros(4, dtype=np.int64))  # envs 2 and 3 are the dead worker's
        start = time.monotonic()
        with pytest.raises(WorkerDiedError) as info:
            envs.recv()  # envs 0 and 1, or the death
            envs.recv()  # then it is due
        assert time.monotonic() - start < REPORTED_WITHIN
        assert info.value.env_indices == [2, 3]
