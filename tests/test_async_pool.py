"""The async pool: EnvPool's send/recv API on top of the pool, and its sync API unchanged.

What it must do: give every env exactly the results the sync pool gives it (only the order in
which envs come back differs), say which env each row is, let a slow env delay only the envs
queued behind it, refuse bad input before any work, and fail (crash, hang, dead worker) the way
the other backends do. Timing is never asserted: a straggler is an env that waits on an event
the test sets, so "who comes back first" is decided by the test, not by the machine's speed.
"""

from __future__ import annotations

import functools
import signal
import threading
import time

import gymnasium as gym
import multiprocess
import numpy as np
import pytest
from conftest import assert_same
from gymnasium.vector import AutoresetMode

import vecenvs
from vecenvs import (
    AlreadyPendingCallError,
    AsyncPoolVecEnv,
    ClosedEnvironmentError,
    EnvCrashedError,
    NoAsyncCallError,
    PoolVecEnv,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.envs.faulty import faulty_env_fns
from vecenvs.testing import check_vector_env

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

#: The teaching env with a random cost per step, so its infos carry "step_cost" (a key the
#: infos of a recv() must place on the right row), and short episodes, so envs autoreset.
COSTLY = functools.partial(
    gym.make,
    "vecenvs/Costly-v0",
    step_seconds=2e-4,
    step_spread=1.0,
    cost_kind="sleep",
    episode_steps=3,
)


def action_of(env: int, step: int) -> int:
    """The action env ``env`` takes at its ``step``-th step: differs between envs and over time."""
    return (env * 7 + step * 3) % 2


def info_row(infos: dict, row: int) -> dict:
    """One env's info out of batched infos (nested dicts too), without the async pool's env_id."""
    return {
        key: info_row(value, row) if isinstance(value, dict) else value[row]
        for key, value in infos.items()
        if not key.startswith("_") and key != "env_id" and infos[f"_{key}"][row]
    }


def sync_trajectories(num_envs: int, steps: int, **kwargs) -> list[list[tuple]]:
    """Per env: (observation, reward, terminated, truncated, info) after reset and each step."""
    with PoolVecEnv([COSTLY] * num_envs, num_workers=2, step_in_caller=False, **kwargs) as envs:
        observations, infos = envs.reset(seed=0)
        trajectories = [[(observations[i], 0.0, False, False, {})] for i in range(num_envs)]
        for step in range(steps):
            actions = np.array([action_of(i, step) for i in range(num_envs)])
            observations, rewards, terminations, truncations, infos = envs.step(actions)
            for i in range(num_envs):
                trajectories[i].append(
                    (
                        observations[i],
                        rewards[i],
                        terminations[i],
                        truncations[i],
                        info_row(infos, i),
                    )
                )
    return trajectories


def async_trajectories(num_envs: int, batch_size: int, rounds: int, **kwargs) -> list[list[tuple]]:
    """The same, from send/recv: each env gets its own action sequence whatever order it comes in."""
    trajectories: list[list[tuple]] = [[] for _ in range(num_envs)]
    with AsyncPoolVecEnv(
        [COSTLY] * num_envs, num_workers=2, batch_size=batch_size, **kwargs
    ) as envs:
        envs.async_reset(seed=0)
        for _ in range(rounds):
            observations, rewards, terminations, truncations, infos = envs.recv()
            env_ids = infos["env_id"]
            assert (
                env_ids.dtype == np.int32 and len(env_ids) == batch_size and infos["_env_id"].all()
            )
            for row, env in enumerate(env_ids):
                trajectories[env].append(
                    (
                        observations[row],
                        rewards[row],
                        terminations[row],
                        truncations[row],
                        info_row(infos, row),
                    )
                )
            steps_done = [len(trajectories[env]) - 1 for env in env_ids]
            envs.send(
                np.array([action_of(env, step) for env, step in zip(env_ids, steps_done)]), env_ids
            )
    return trajectories


@pytest.mark.parametrize(
    "mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value
)
@pytest.mark.parametrize("shared_memory", [True, False], ids=["shm", "pipes"])
def test_every_env_gets_exactly_what_the_sync_pool_gives_it(mode, shared_memory):
    num_envs, batch_size, rounds = 6, 2, 24
    got = async_trajectories(
        num_envs, batch_size, rounds, autoreset_mode=mode, shared_memory=shared_memory
    )
    assert sum(len(steps) for steps in got) == batch_size * rounds
    expected = sync_trajectories(num_envs, max(len(steps) for steps in got), autoreset_mode=mode)
    for env in range(num_envs):
        assert got[env], f"env {env} never came back"
        # (mode SAME_STEP puts final_obs in the infos: assert_same compares those arrays too)
        assert_same(got[env], expected[env][: len(got[env])], f"env {env}")


def test_env_ids_say_which_envs_came_back_and_each_env_once_per_send():
    with AsyncPoolVecEnv([COSTLY] * 6, num_workers=3, batch_size=2) as envs:
        envs.async_reset(seed=0)
        first_round = np.concatenate([envs.recv()[4]["env_id"] for _ in range(3)])
        assert sorted(first_round.tolist()) == list(range(6))
        envs.send([1, 0, 1], [5, 0, 3])
        returned = np.concatenate([envs.recv()[4]["env_id"] for _ in range(1)])
        assert set(returned.tolist()) <= {0, 3, 5}
        # Sending a single env id (a scalar, as EnvPool allows) works too.
        envs.send([0], 1)


def test_a_slow_env_delays_only_itself_and_the_envs_queued_behind_it():
    """Env 0 waits for an event the test sets; worker 1's envs keep coming back meanwhile."""
    context = multiprocess.get_context("fork")
    release = context.Event()

    class Straggler(gym.Wrapper):
        def step(self, action):
            assert release.wait(timeout=20), "never released"
            return self.env.step(action)

    env_fns = [lambda: Straggler(COSTLY())] + [COSTLY] * 3  # worker 0: envs 0, 1; worker 1: 2, 3
    with AsyncPoolVecEnv(
        env_fns, num_workers=2, batch_size=1, start_method="fork", timeout=30
    ) as envs:
        envs.async_reset(seed=0)
        for _ in range(4):
            envs.recv()
        envs.send([0, 0, 0, 0], [0, 1, 2, 3])  # env 1 is queued behind env 0 in worker 0
        seen = []
        for _ in range(6):  # worker 1 goes round and round while env 0 is stuck
            env_id = int(envs.recv()[4]["env_id"][0])
            seen.append(env_id)
            envs.send([1], [env_id])
        assert set(seen) == {2, 3}, f"envs {seen} came back while env 0 was still stepping"
        release.set()
        later = {int(envs.recv()[4]["env_id"][0]) for _ in range(4)}
        assert {0, 1} <= later


def test_recv_without_a_pending_send_raises_at_once():
    with AsyncPoolVecEnv([COSTLY] * 4, num_workers=2, batch_size=2) as envs:
        with pytest.raises(NoAsyncCallError, match="no env has a pending send"):
            envs.recv()
        envs.async_reset(seed=0)
        envs.recv()
        envs.recv()
        with pytest.raises(NoAsyncCallError, match="no env has a pending send"):
            envs.recv()
        envs.send([0], [3])  # one pending, but a batch is two: waiting could never end
        with pytest.raises(
            NoAsyncCallError, match=r"only 1 have a pending send\(\) \(envs \[3\]\)"
        ):
            envs.recv()


@pytest.mark.parametrize(
    ("actions", "env_ids", "error", "match"),
    [
        ([0, 1], [0, 9], ValueError, r"env_ids \[9\] out of range"),
        ([0, 1], [-1, 0], ValueError, r"env_ids \[-1\] out of range"),
        ([0, 1], [2, 2], ValueError, r"env_ids has \[2\] more than once"),
        ([0, 1], [0.5, 1], ValueError, r"env_ids is \[0.5, 1\]"),
        ([0, 1], [[0, 1]], ValueError, r"env_ids is \[\[0, 1\]\]"),
        ([], [], ValueError, r"env_ids is \[\]"),
        ([0, 1, 1], [0, 1], ValueError, r"actions: expected shape \(2,\)"),
        ([0, 5], [0, 1], ValueError, "5"),
        ([0, 1], [3, 1], AlreadyPendingCallError, r"envs \[3\] already have a pending send"),
    ],
)
def test_bad_input_is_refused_before_any_work(actions, env_ids, error, match):
    with AsyncPoolVecEnv([COSTLY] * 4, num_workers=2, batch_size=1) as envs:
        envs.reset(seed=0)
        envs.send([0], [3])
        with pytest.raises(error, match=match):
            envs.send(actions, env_ids)
        # Nothing was sent: env 3 is still the only one pending, and the env still works.
        assert envs.recv()[4]["env_id"].tolist() == [3]
        with pytest.raises(NoAsyncCallError):
            envs.recv()


def test_bad_batch_size_is_refused_before_any_process_starts():
    for batch_size, error in (
        (0, ValueError),
        (5, ValueError),
        (2.0, TypeError),
        (True, TypeError),
    ):
        with pytest.raises(error, match=f"batch_size is {batch_size!r}"):
            AsyncPoolVecEnv([COSTLY] * 4, num_workers=2, batch_size=batch_size)
    with AsyncPoolVecEnv(
        [COSTLY] * 4, num_workers=2, batch_size=np.int64(2)
    ) as envs:  # numpy's ints are fine
        assert envs.batch_size == 2


def test_an_env_crash_reaches_the_caller_with_its_index_and_traceback():
    env_fns = faulty_env_fns(4, bad_index=2, fail_on="step", at=2)
    with AsyncPoolVecEnv(env_fns, num_workers=2, batch_size=2) as envs:
        envs.async_reset(seed=0)
        with pytest.raises(EnvCrashedError) as caught:
            for _ in range(
                1000
            ):  # which envs come back first is up to the machine: until env 2 steps twice
                envs.send([0, 1], envs.recv()[4]["env_id"])
        assert caught.value.env_index == 2 and caught.value.command == "step"
        assert "deliberate failure in step #2" in caught.value.remote_traceback
        assert envs.closed
        with pytest.raises(ClosedEnvironmentError):
            envs.recv()


def test_a_hung_env_ends_in_a_timeout_naming_it():
    env_fns = faulty_env_fns(4, bad_index=1, fail_on="step", at=1, how="hang")
    with AsyncPoolVecEnv(env_fns, num_workers=2, batch_size=4, timeout=0.5) as envs:
        envs.async_reset(seed=0)
        envs.recv()
        envs.send([0, 0, 0, 0])
        with pytest.raises(WorkerTimeoutError) as caught:
            envs.recv()
        assert caught.value.worker_indices == [0] and 1 in caught.value.env_indices
        assert envs.closed


def test_a_killed_worker_is_reported():
    with AsyncPoolVecEnv([COSTLY] * 4, num_workers=2, batch_size=2) as envs:
        envs.async_reset(seed=0)
        envs.recv()
        envs.recv()
        envs.processes[1].kill()
        envs.processes[1].join(5)
        # Every env sent an action (through shared memory: no pipe to break on the way), so the
        # second recv() at the latest waits for the dead worker's envs. (Sending only to the
        # live worker's envs left it to chance: a loaded machine answered the first recv() from
        # them without ever sleeping, and the second had nothing to wait for.)
        envs.send(np.zeros(4, dtype=np.int64), [0, 1, 2, 3])
        with pytest.raises(WorkerDiedError) as caught:
            envs.recv()
            envs.recv()
        assert caught.value.worker_index == 1 and caught.value.exitcode == -signal.SIGKILL
        assert envs.closed


def test_closing_with_envs_still_stepping_leaves_no_process():
    envs = AsyncPoolVecEnv([COSTLY] * 4, num_workers=2, batch_size=2)
    try:
        envs.async_reset(seed=0)
        envs.send([0, 1], envs.recv()[4]["env_id"])
    finally:
        envs.close()  # two envs stepping, two reset but never received: all dropped
    envs.close()  # idempotent
    assert envs.closed


def test_the_sync_api_is_the_pools_and_waits_for_pending_envs():
    with AsyncPoolVecEnv([COSTLY] * 4, num_workers=2, batch_size=2) as envs:
        envs.reset(seed=0)
        envs.send([0, 1], [0, 2])
        with pytest.raises(AlreadyPendingCallError, match=r"envs \[0, 2\] have a pending send"):
            envs.step([0, 0, 0, 0])
        with pytest.raises(AlreadyPendingCallError, match=r"pending send"):
            envs.get_attr("episode_steps")
        with pytest.raises(AlreadyPendingCallError, match=r"pending send"):
            envs.async_reset(seed=0)
        envs.recv()
        assert envs.step([0, 0, 0, 0])[0].shape == (4, 4)  # nothing pending: lock-step again
        envs.send([0, 1], [1, 3])
        envs.reset(seed=0)  # drops the pending results, like gymnasium
        with pytest.raises(NoAsyncCallError):
            envs.recv()
        assert envs.get_attr("episode_steps") == (3, 3, 3, 3)


def test_without_batch_size_the_sync_api_keeps_the_vector_env_contract():
    check_vector_env(
        lambda env_fns, **kwargs: AsyncPoolVecEnv(env_fns, num_workers=2, **kwargs),
        env_ids=("CartPole-v1",),
    )


def test_make_vec_builds_it_with_half_the_envs_per_batch():
    with vecenvs.make_vec("CartPole-v1", 6, backend="pool-async", num_workers=2) as envs:
        assert isinstance(envs, AsyncPoolVecEnv) and envs.batch_size == 3
        envs.async_reset(seed=0)
        assert envs.recv()[0].shape == (3, 4)


def test_the_benchmark_steps_it_with_send_and_recv():
    from vecenvs.bench import BenchConfig, measure

    config = BenchConfig(
        "CartPole-v1",
        num_envs=5,
        backend="pool-async",
        backend_kwargs={"num_workers": 2, "batch_size": 2},
        warmup_seconds=0.05,
        measure_seconds=0.1,
        repeats=2,
    )
    result = measure(config)
    # Two env steps per recv: the throughput counts env steps, whatever the batch size.
    for steps, seconds, throughput in zip(
        result.window_steps, result.window_seconds, result.throughputs
    ):
        assert steps > 0 and throughput == pytest.approx(2 * steps / seconds)


class _CloseRaises(gym.Wrapper):
    def close(self):
        super().close()
        raise RuntimeError("deliberate failure in close")


@pytest.mark.parametrize("shared_memory", [True, False], ids=["shm", "pipes"])
@pytest.mark.parametrize(
    "env_fn", [functools.partial(gym.make, "CartPole-v1"), COSTLY], ids=["no-infos", "infos"]
)
def test_reset_and_close_drop_the_results_of_a_pending_send(env_fn, shared_memory):
    """What a send() left pending is waited for and dropped by reset() and by close(): with no
    infos there is no message to read (reset waited for one and timed out), and with infos the
    message must be read, or close() would take it for its answer and lose an env's close error."""
    kwargs = {"num_workers": 2, "batch_size": 2, "shared_memory": shared_memory}
    with AsyncPoolVecEnv([env_fn] * 4, **kwargs) as envs:
        envs.async_reset(seed=0)
        envs.send([0, 0], envs.recv()[4]["env_id"])
        envs.reset(seed=1)
        envs.send([0] * 4, list(range(4)))
        assert len(envs.recv()[4]["env_id"]) == 2

    envs = AsyncPoolVecEnv([lambda: _CloseRaises(env_fn())] * 4, **kwargs)
    envs.async_reset(seed=0)
    envs.send([0, 0], envs.recv()[4]["env_id"])
    with pytest.raises(EnvCrashedError) as caught:
        envs.close()
    assert caught.value.command == "close" and "deliberate failure in close" in str(caught.value)
    assert envs.closed


def test_one_caller_at_a_time_in_the_async_api_too():
    """recv() waiting in one thread: another thread's send() or recv() is refused, not mixed in."""
    slow = functools.partial(gym.make, "vecenvs/Costly-v0", step_seconds=0.3, cost_kind="sleep")
    with AsyncPoolVecEnv([slow] * 2, num_workers=2, batch_size=2) as envs:
        envs.async_reset(seed=0)
        envs.recv()
        envs.send(np.zeros(2, dtype=np.int64), [0, 1])
        results: dict[str, object] = {}
        waiting = threading.Thread(target=lambda: results.setdefault("recv", envs.recv()))
        waiting.start()
        time.sleep(0.1)  # the first thread is inside recv(), waiting for the 0.3 s steps
        with pytest.raises(vecenvs.ConcurrentCallError, match=r"AsyncPoolVecEnv.send\(\)"):
            envs.send(np.zeros(2, dtype=np.int64), [0, 1])
        with pytest.raises(vecenvs.ConcurrentCallError, match=r"AsyncPoolVecEnv.recv\(\)"):
            envs.recv()
        waiting.join(10)
        assert sorted(results["recv"][4]["env_id"].tolist()) == [0, 1]  # intact
        assert not envs.closed  # refusing a second caller does not close the first's envs
