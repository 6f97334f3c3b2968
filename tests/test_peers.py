"""The peers (SB3's DummyVecEnv/SubprocVecEnv, EnvPool) as backends of make_vec and the benchmark.

What is checked: the backend table and its labels; that a missing library gives an install
hint; that each peer builds, resets, steps through several episode ends and closes without
leaving a process behind, and runs through the benchmark; that SB3's vector envs return exactly
what gymnasium's SyncVectorEnv returns in SAME_STEP mode (their only mode); and what EnvPool
refuses. Tests that need a peer's library skip where its extra is not installed.
"""

from __future__ import annotations

import gc
import importlib.util
import subprocess
import sys
from contextlib import closing

import gymnasium as gym
import numpy as np
import psutil
import pytest
from conftest import assert_same, live_children
from gymnasium.vector import AutoresetMode

import vecenvs
from vecenvs.bench import QUICK, BenchConfig, measure
from vecenvs.factory import (
    BACKEND_INFO,
    BACKENDS,
    NATIVE_BACKENDS,
    available_backends,
    check_backend_available,
    check_backend_can_run,
    describe_backend,
)
from vecenvs.testing import check_api, check_matches_sync

PEERS = ("sb3-dummy", "sb3-subproc", "envpool")
#: Which library each peer needs, for pytest.importorskip.
LIBRARY = {
    "sb3-dummy": "stable_baselines3",
    "sb3-subproc": "stable_baselines3",
    "envpool": "envpool",
}
#: Fork is the quick start method: the workers need not import SB3 (and torch) again.
FORK = {"sb3-subproc": {"start_method": "fork"}}
SAME_STEP = AutoresetMode.SAME_STEP


def needs(backend: str) -> None:
    pytest.importorskip(LIBRARY[backend])


# ------------------------------------------------------------------------------------------------
# The table, the labels and availability (no peer library needed)
# ------------------------------------------------------------------------------------------------


def test_every_backend_is_described_and_only_envpool_is_native():
    assert list(BACKEND_INFO) == list(BACKENDS)
    assert set(PEERS) <= set(BACKENDS)
    assert {info.family for info in BACKEND_INFO.values()} == {
        "ours",
        "gymnasium",
        "sb3",
        "envpool",
    }
    assert {"envpool"} == NATIVE_BACKENDS
    assert describe_backend("pool") == "pool"
    assert describe_backend("envpool") == (
        "envpool (native C++ envs: a reference, not like-for-like)"
    )
    # What is always installed needs no extra; each peer (and ray) names the extra that installs it.
    assert {name: info.extra for name, info in BACKEND_INFO.items() if info.extra} == {
        "sb3-dummy": "sb3",
        "sb3-subproc": "sb3",
        "envpool": "envpool",
        "ray": "ray",
    }


def test_unknown_backend_is_refused_by_name():
    for call in (
        lambda: describe_backend("turbo"),
        lambda: check_backend_available("turbo"),
        lambda: vecenvs.make_vec("CartPole-v1", 2, backend="turbo"),
    ):
        with pytest.raises(ValueError, match=r"unknown backend 'turbo'; expected one of \["):
            call()


@pytest.mark.parametrize(
    ("missing", "backends", "extra"),
    [
        ("stable_baselines3", ("sb3-dummy", "sb3-subproc"), "sb3"),
        ("envpool", ("envpool",), "envpool"),
        ("ray", ("ray",), "ray"),
    ],
)
def test_a_missing_library_gives_its_install_command(monkeypatch, missing, backends, extra):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == missing else real_find_spec(name, *args),
    )
    assert not set(backends) & set(available_backends())
    assert {"pool", "gym-sync"} <= set(available_backends())
    for backend in backends:
        with pytest.raises(ValueError) as info:
            check_backend_available(backend)
        assert f"pip install 'vecenvs[{extra}]'" in str(info.value)
        assert "make peers" in str(info.value)  # the one step a checkout takes
        assert repr(backend) in str(info.value) and missing in str(info.value)
        with pytest.raises(ValueError, match=rf"pip install 'vecenvs\[{extra}\]'"):
            vecenvs.make_vec("CartPole-v1", 2, backend=backend)
        with pytest.raises(ValueError, match=rf"pip install 'vecenvs\[{extra}\]'"):
            check_backend_can_run(backend, "CartPole-v1")


def test_importing_vecenvs_and_checking_availability_imports_no_peer_library():
    # SB3 imports torch (seconds): only building a peer may import it.
    code = (
        "import sys, vecenvs, vecenvs.peers\n"
        "from vecenvs.factory import available_backends\n"
        "available_backends()\n"
        "vecenvs.make_vec('CartPole-v1', 2, backend='gym-sync').close()\n"
        "print(sorted({'torch', 'stable_baselines3', 'envpool', 'ray'} & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------------
# Every peer: build, reset, step through episode ends, close; and the benchmark
# ------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("backend", PEERS)
def test_peer_steps_through_episode_ends_and_closes(backend):
    needs(backend)
    num_envs = 4
    envs = vecenvs.make_vec("CartPole-v1", num_envs, backend=backend, **FORK.get(backend, {}))
    try:
        assert isinstance(envs, gym.vector.VectorEnv) and envs.num_envs == num_envs
        expected_mode = SAME_STEP if backend.startswith("sb3") else AutoresetMode.NEXT_STEP
        assert envs.metadata["autoreset_mode"] is expected_mode
        assert envs.single_observation_space == gym.make("CartPole-v1").observation_space
        assert envs.action_space == gym.vector.utils.batch_space(gym.spaces.Discrete(2), 4)

        observations, infos = envs.reset(seed=7)
        assert observations.shape == (num_envs, 4) and observations.dtype == np.float32
        assert isinstance(infos, dict)
        envs.action_space.seed(7)
        episode_ends, restarts = 0, 0
        ended = np.zeros(num_envs, dtype=bool)
        for _ in range(300):
            observations, rewards, terminations, truncations, infos = envs.step(
                envs.action_space.sample()
            )
            assert observations.shape == (num_envs, 4) and observations.dtype == np.float32
            for flags in (rewards, terminations, truncations):
                assert flags.shape == (num_envs,)
            assert rewards.dtype == np.float64
            assert terminations.dtype == np.bool_ and truncations.dtype == np.bool_
            if expected_mode is SAME_STEP:
                # The episode's last observation is in the infos; the one returned is a reset's.
                done = terminations | truncations
                assert np.array_equal(infos.get("_final_obs", np.zeros(num_envs, bool)), done)
                restarts += int(np.sum(np.abs(observations[done]) <= 0.05))
            else:
                # The step after an episode's end only resets that env: reward 0, a new episode.
                assert np.all(rewards[ended] == 0.0)
                assert not np.any(terminations[ended] | truncations[ended])
                assert np.all(infos["elapsed_step"][ended] == 0) and infos["_elapsed_step"].all()
                restarts += int(np.sum(np.abs(observations[ended]) <= 0.05))
            ended = terminations | truncations
            episode_ends += int(np.sum(ended))
        assert episode_ends >= 10
        # CartPole starts every episode with each state variable in [-0.05, 0.05].
        assert restarts >= episode_ends - num_envs
    finally:
        envs.close()
    assert envs.closed
    with pytest.raises(gym.error.ClosedEnvironmentError):
        envs.step(envs.action_space.sample())


@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("backend", PEERS)
def test_peer_runs_through_the_benchmark(backend):
    needs(backend)
    result = measure(
        BenchConfig(
            "CartPole-v1",
            num_envs=4,
            backend=backend,
            backend_kwargs=FORK.get(backend, {}),
            **QUICK,
        )
    )
    assert len(result.throughputs) == QUICK["repeats"]
    assert all(throughput > 0 for throughput in result.throughputs)
    # SB3's SubprocVecEnv: a process per env; the others step in this process (envpool in
    # threads, whose CPU time counts as this process's).
    assert result.child_processes == (4 if backend == "sb3-subproc" else 0)
    assert result.parent_cpu_seconds > 0


@pytest.mark.parametrize(
    ("backend", "asked"),
    [
        ("sb3-dummy", "NextStep"),
        ("sb3-subproc", AutoresetMode.DISABLED),
        ("envpool", "SameStep"),
    ],
)
def test_a_peer_refuses_an_autoreset_mode_it_cannot_do(backend, asked, children_before):
    needs(backend)
    own = BACKEND_INFO[backend].autoreset_mode.value
    with pytest.raises(ValueError, match=f"can only autoreset in {own} mode, not "):
        vecenvs.make_vec("CartPole-v1", 2, backend=backend, autoreset_mode=asked)
    assert not [p for p in live_children() if p.pid not in children_before]
    # Asking for its own mode, or for none, is fine.
    with vecenvs.make_vec(
        "CartPole-v1", 2, backend=backend, autoreset_mode=own, **FORK.get(backend, {})
    ) as envs:
        assert envs.metadata["autoreset_mode"] is AutoresetMode(own)


# ------------------------------------------------------------------------------------------------
# Stable-Baselines3: exactly what gymnasium's SyncVectorEnv returns in SAME_STEP mode
# ------------------------------------------------------------------------------------------------


def test_sb3_dummy_returns_exactly_what_gym_sync_returns():
    needs("sb3-dummy")
    with (
        vecenvs.make_vec("CartPole-v1", 4, backend="sb3-dummy") as envs,
        closing(
            vecenvs.make_vec("CartPole-v1", 4, backend="gym-sync", autoreset_mode=SAME_STEP)
        ) as reference,
    ):
        assert_same(envs.reset(seed=3), reference.reset(seed=3), "reset")
        reference.action_space.seed(3)
        episode_ends = 0
        for step in range(300):
            actions = reference.action_space.sample()
            result = envs.step(actions)
            # observations, rewards, flags and infos (final_obs/final_info and masks included)
            assert_same(result, reference.step(actions), f"step {step}")
            episode_ends += int(np.sum(result[2] | result[3]))
        assert episode_ends >= 10


@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize(
    ("backend", "env_id"),
    [
        ("sb3-dummy", "CartPole-v1"),
        ("sb3-dummy", "Acrobot-v1"),
        ("sb3-subproc", "CartPole-v1"),
        ("sb3-subproc", "Pendulum-v1"),
    ],
)
def test_sb3_passes_the_conformance_checker_in_same_step_mode(backend, env_id):
    needs(backend)

    def make_vector_env(env_fns, autoreset_mode):
        assert autoreset_mode is SAME_STEP
        return BACKENDS[backend](env_id, len(env_fns), {}, autoreset_mode, **FORK.get(backend, {}))

    check_api(make_vector_env, env_id, autoreset_mode=SAME_STEP, require_context_manager=True)
    steps = {"Acrobot-v1": 550, "Pendulum-v1": 450}.get(env_id, 300)
    check_matches_sync(make_vector_env, env_id, steps=steps, autoreset_mode=SAME_STEP)


def test_sb3_dummy_rewards_are_float32_rounded():
    # Documented in SB3VecEnv: DummyVecEnv keeps rewards in a float32 buffer.
    needs("sb3-dummy")
    with (
        vecenvs.make_vec("Pendulum-v1", 2, backend="sb3-dummy") as envs,
        closing(
            vecenvs.make_vec("Pendulum-v1", 2, backend="gym-sync", autoreset_mode=SAME_STEP)
        ) as reference,
    ):
        envs.reset(seed=0)
        reference.reset(seed=0)
        actions = np.array([[0.5], [-1.0]], dtype=np.float32)
        rewards, expected = envs.step(actions)[1], reference.step(actions)[1]
        assert rewards.dtype == np.float64 and not np.array_equal(rewards, expected)
        assert np.array_equal(rewards, expected.astype(np.float32).astype(np.float64))


@pytest.mark.usefixtures("no_leftover_processes")
def test_sb3_subproc_passes_start_method_on_and_its_workers_find_the_teaching_envs():
    # Under spawn the workers import SB3 (not vecenvs) afresh: the teaching envs must still be
    # registered there. The children's command lines show how they were started.
    needs("sb3-subproc")
    with vecenvs.make_vec(
        "vecenvs/DictObs-v0", 2, backend="sb3-subproc", start_method="spawn"
    ) as envs:
        observations, _ = envs.reset(seed=0)
        assert set(observations) == set(envs.single_observation_space.spaces)
        workers = list(envs.venv.processes)
        assert len(workers) == 2
        for worker in workers:
            assert "spawn_main" in " ".join(psutil.Process(worker.pid).cmdline())
        envs.step(envs.action_space.sample())


# ------------------------------------------------------------------------------------------------
# EnvPool: its own C++ envs, what it refuses, seeds and threads
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1", "Pendulum-v1"])
def test_envpool_has_the_spaces_and_shapes_of_gymnasiums_env(env_id):
    needs("envpool")
    with (
        vecenvs.make_vec(env_id, 3, backend="envpool") as envs,
        closing(vecenvs.make_vec(env_id, 3, backend="gym-sync")) as reference,
    ):
        for name in (
            "single_observation_space",
            "single_action_space",
            "observation_space",
            "action_space",
        ):
            assert getattr(envs, name) == getattr(reference, name), name
        observations, _ = envs.reset(seed=0)
        expected, _ = reference.reset(seed=0)
        assert observations.shape == expected.shape and observations.dtype == expected.dtype
        # Its own C++ env and random numbers: the same seed gives other episodes than gymnasium.
        assert not np.array_equal(observations, expected)


def test_envpool_refuses_teaching_envs_unknown_ids_and_env_kwargs(children_before):
    envpool = pytest.importorskip("envpool")
    with pytest.raises(ValueError) as info:
        vecenvs.make_vec("vecenvs/Costly-v0", 2, backend="envpool")
    message = str(info.value)
    assert "'vecenvs/Costly-v0'" in message and "teaching env" in message
    assert "CartPole-v1" in message and "envpool.list_all_envs()" in message

    missing = next(
        env_id
        for env_id in gym.registry
        if env_id not in envpool.list_all_envs() and not env_id.startswith("vecenvs/")
    )
    with pytest.raises(ValueError, match=f"cannot run '{missing}': envpool has no C\\+\\+ version"):
        vecenvs.make_vec(missing, 2, backend="envpool")

    with pytest.raises(ValueError, match="takes no env_kwargs .* for 'CartPole-v1'"):
        vecenvs.make_vec("CartPole-v1", 2, backend="envpool", env_kwargs={"sutton_barto_reward": 1})

    # A typo gets one line with gymnasium's own words (vecenvs.envspec reads every env name).
    with pytest.raises(ValueError, match="unknown env id 'CartPol-v1': .*Did you mean: `CartPole`"):
        vecenvs.make_vec("CartPol-v1", 2, backend="envpool")

    # The same checks, without building anything: for checking a grid of runs up front.
    with pytest.raises(ValueError, match="teaching env"):
        check_backend_can_run("envpool", "vecenvs/Costly-v0")
    with pytest.raises(ValueError, match="takes no env_kwargs"):
        check_backend_can_run("envpool", "CartPole-v1", {"sutton_barto_reward": 1})
    check_backend_can_run("envpool", "CartPole-v1")
    check_backend_can_run("pool", "vecenvs/Costly-v0", {"step_seconds": 1e-3})
    assert not [p for p in live_children() if p.pid not in children_before]


def test_envpool_seeds_on_reset_and_ends_its_threads_on_close():
    needs("envpool")
    gc.collect()
    threads_before = psutil.Process().num_threads()
    envs = vecenvs.make_vec("CartPole-v1", 4, backend="envpool")
    with pytest.raises(gym.error.ResetNeeded):  # the pool is built by the first reset
        envs.step(envs.action_space.sample())
    first, _ = envs.reset(seed=5)
    for _ in range(20):
        envs.step(envs.action_space.sample())
    again, _ = envs.reset(seed=5)  # a new pool, seeded afresh: the same episodes
    np.testing.assert_array_equal(again, first)
    other, _ = envs.reset(seed=6)
    assert not np.array_equal(other, first)
    # Env i gets seed + i, as in gymnasium: env 1 of seed 5 starts like env 0 of seed 6.
    np.testing.assert_array_equal(first[1], other[0])
    with pytest.raises(ValueError, match="32-bit"):
        envs.reset(seed=2**40)
    assert psutil.Process().num_threads() > threads_before
    envs.close()
    gc.collect()
    assert psutil.Process().num_threads() == threads_before


def test_envpool_num_workers_is_its_threads(monkeypatch):
    needs("envpool")
    with vecenvs.make_vec("CartPole-v1", 3, backend="envpool", num_workers=1) as envs:
        envs.reset(seed=0)
        assert envs.num_workers == 1 and envs._pool.config["num_threads"] == 1
    # Not told, it gets our pool's K: one thread per CPU this process may use (not envpool's
    # own default, every CPU of the host), at most one per env. 3 CPUs, as a container's quota.
    monkeypatch.setattr(vecenvs.pool, "available_cpus", lambda: 3)
    for num_envs, threads in ((64, 3), (2, 2)):
        with vecenvs.make_vec("CartPole-v1", num_envs, backend="envpool") as envs:
            envs.reset(seed=0)
            assert envs.num_workers == threads and envs._pool.config["num_threads"] == threads
    for bad in (0, 4, 1.5, True):
        with pytest.raises(ValueError, match="num_workers is"):
            vecenvs.make_vec("CartPole-v1", 3, backend="envpool", num_workers=bad)
