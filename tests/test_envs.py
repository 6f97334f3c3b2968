"""Tests of the teaching envs: spaces, determinism, costs, and the failures FaultyEnv stages.

The FaultyEnv modes that hang or end the process ("hang", "exit", "kill") are only ever run in
a subprocess, since they would otherwise hang or end pytest itself.
"""

from __future__ import annotations

import importlib
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import vecenvs.envs
from vecenvs.envs import CostlyEnv, DictObsEnv, FaultyEnv, faulty_env_fns

ALL_IDS = ["vecenvs/Costly-v0", "vecenvs/DictObs-v0", "vecenvs/Faulty-v0", "vecenvs/Spaces-v0"]


def rollout(env: gym.Env, seed: int, num_steps: int, action_seed: int = 0) -> list:
    """Reset ``env`` with ``seed``, take ``num_steps`` seeded random actions, record everything.

    Resets (unseeded) whenever an episode ends, so autoreset-like sequences are covered too.
    """
    env.action_space.seed(action_seed)
    observation, info = env.reset(seed=seed)
    record = [("reset", observation, info)]
    for _ in range(num_steps):
        action = env.action_space.sample()
        observation, reward, terminated, truncated, info = env.step(action)
        record.append(("step", action, observation, reward, terminated, truncated, info))
        if terminated or truncated:
            observation, info = env.reset()
            record.append(("reset", observation, info))
    return record


def same(record_1: list, record_2: list) -> bool:
    """Whether two rollouts are exactly equal, arrays and dicts included."""
    return gym.utils.env_checker.data_equivalence(record_1, record_2, exact=True)


# ---------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------


def test_all_ids_are_registered():
    assert set(ALL_IDS) == set(vecenvs.envs.ENV_IDS)
    for env_id in ALL_IDS:
        assert env_id in gym.registry
    assert gym.spec("vecenvs/DictObs-v0").max_episode_steps == 25


def test_registering_again_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(vecenvs.envs)


def test_make_with_kwargs():
    env = gym.make("vecenvs/Costly-v0", step_seconds=1e-3, cost_kind="sleep")
    assert env.unwrapped.step_seconds == 1e-3
    assert env.unwrapped.cost_kind == "sleep"
    env.reset(seed=0)
    env.step(0)
    env.close()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_check_env_passes(env_id):
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if env_id == "vecenvs/Faulty-v0":
            # CartPole's own observation space has infinite bounds, which check_env flags.
            warnings.filterwarnings("ignore", message=".*infinity.*")
        check_env(env.unwrapped)
    env.close()


# ---------------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------------

RANDOM_COSTLY = dict(step_seconds=1e-6, step_spread=0.5, straggler_probability=0.2, episode_steps=7)


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("vecenvs/Costly-v0", {}),
        ("vecenvs/Costly-v0", RANDOM_COSTLY),
        ("vecenvs/DictObs-v0", {}),
        ("vecenvs/Faulty-v0", {}),
    ],
)
def test_same_seed_same_actions_same_everything(env_id, kwargs):
    record_1 = rollout(gym.make(env_id, **kwargs), seed=42, num_steps=60)
    record_2 = rollout(gym.make(env_id, **kwargs), seed=42, num_steps=60)
    assert same(record_1, record_2)


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [("vecenvs/Costly-v0", {}), ("vecenvs/Costly-v0", RANDOM_COSTLY), ("vecenvs/DictObs-v0", {})],
)
def test_different_seeds_differ(env_id, kwargs):
    record_1 = rollout(gym.make(env_id, **kwargs), seed=1, num_steps=20)
    record_2 = rollout(gym.make(env_id, **kwargs), seed=2, num_steps=20)
    assert not same(record_1, record_2)


@pytest.mark.parametrize("env_id", ["vecenvs/Costly-v0", "vecenvs/DictObs-v0"])
def test_observations_depend_on_actions(env_id):
    record_1 = rollout(gym.make(env_id), seed=3, num_steps=20, action_seed=1)
    record_2 = rollout(gym.make(env_id), seed=3, num_steps=20, action_seed=2)
    observations_1 = [entry[2] for entry in record_1 if entry[0] == "step"]
    observations_2 = [entry[2] for entry in record_2 if entry[0] == "step"]
    assert not same(observations_1, observations_2)


# ---------------------------------------------------------------------------------------------
# CostlyEnv
# ---------------------------------------------------------------------------------------------


def test_costly_spaces_and_episode_length():
    env = CostlyEnv(step_seconds=0, obs_size=6, episode_steps=5)
    assert env.observation_space == gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
    assert env.action_space == gym.spaces.Discrete(2)
    observation, info = env.reset(seed=0)
    assert observation in env.observation_space
    assert info == {}
    for step in range(1, 6):
        observation, reward, terminated, truncated, info = env.step(step % 2)
        assert observation.dtype == np.float32 and observation in env.observation_space
        assert isinstance(reward, float)
        assert terminated == (step == 5)
        assert truncated is False
        assert info == {}  # fixed costs: nothing to report


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        ({"step_seconds": -1.0}, "-1.0"),
        ({"step_seconds": float("nan")}, "nan"),
        ({"step_seconds": "fast"}, "'fast'"),
        ({"step_spread": -0.5}, "-0.5"),
        ({"cost_kind": "spin"}, "'spin'"),
        ({"straggler_probability": 1.5}, "1.5"),
        ({"straggler_factor": 0.5}, "0.5"),
        ({"reset_seconds": -2}, "-2"),
        ({"obs_size": 0}, "0"),
        ({"obs_size": 2.5}, "2.5"),
        ({"episode_steps": True}, "True"),
        ({"matmul_size": -1}, "-1"),
        ({"matmul_size": 64.0}, "64.0"),
    ],
)
def test_costly_validation_names_the_bad_value(kwargs, bad):
    (name,) = kwargs
    with pytest.raises(ValueError, match=name) as error:
        CostlyEnv(**kwargs)
    assert bad in str(error.value)


def test_costly_matmul_is_computed_each_step_and_changes_no_result():
    env = CostlyEnv(step_seconds=0, matmul_size=48)
    env.reset(seed=0)
    env._product.fill(np.nan)
    env.step(1)
    np.testing.assert_allclose(env._product, env._matrix @ env._matrix)
    assert env._matrix.shape == (48, 48) and env._matrix.dtype == np.float64
    plain = rollout(gym.make("vecenvs/Costly-v0", step_seconds=0), seed=5, num_steps=30)
    with_product = rollout(
        gym.make("vecenvs/Costly-v0", step_seconds=0, matmul_size=32), seed=5, num_steps=30
    )
    assert same(plain, with_product)  # its matrices come from a generator of their own


def test_costly_reports_the_thread_limits_of_its_process():
    from threadpoolctl import threadpool_info

    env = gym.make("vecenvs/Costly-v0")
    limits = env.unwrapped.thread_limits()
    assert limits["blas"] == max(
        p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"
    )


def test_costly_rejects_bad_actions_and_step_before_reset():
    env = CostlyEnv(step_seconds=0)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="got 2"):
        env.step(2)
    env.step(np.int64(1))  # numpy integers, as vector envs pass them, are fine


@pytest.mark.parametrize("cost_kind", ["sleep", "busy"])
def test_costly_step_cost_is_really_spent(cost_kind):
    # Only a lower bound: a busy machine can make steps slower, never faster.
    env = CostlyEnv(step_seconds=2e-3, cost_kind=cost_kind, reset_seconds=5e-3)
    start = time.perf_counter()
    env.reset(seed=0)
    for _ in range(20):
        env.step(0)
    assert time.perf_counter() - start >= 5e-3 + 20 * 2e-3


def test_costly_drawn_costs_are_spent_and_reported():
    env = CostlyEnv(step_seconds=1e-3, step_spread=0.5, cost_kind="sleep")
    env.reset(seed=0)
    costs = []
    start = time.perf_counter()
    for _ in range(20):
        costs.append(env.step(0)[4]["step_cost"])
    assert time.perf_counter() - start >= sum(costs)
    assert min(costs) > 0 and len(set(costs)) == len(costs)  # never negative, really drawn


def test_costly_spread_has_the_requested_mean_and_spread():
    # Tiny costs, so that many steps take little time; the drawn costs scale with the mean.
    env = CostlyEnv(step_seconds=1e-7, step_spread=0.5)
    env.reset(seed=0)
    costs = np.array([env.step(0)[4]["step_cost"] for _ in range(20_000)])
    assert costs.mean() == pytest.approx(1e-7, rel=0.02)
    assert costs.std() == pytest.approx(0.5e-7, rel=0.05)


def test_costly_straggler_frequency_matches_probability():
    env = CostlyEnv(step_seconds=0, straggler_probability=0.1, straggler_factor=10.0)
    env.reset(seed=0)
    num_steps = 10_000
    stragglers = 0
    for step in range(num_steps):
        info = env.step(step % 2)[4]
        assert info["step_cost"] == 0.0  # zero cost stays zero, even for a straggler
        stragglers += info.get("straggler", False)
    assert 0.08 < stragglers / num_steps < 0.12


def test_costly_straggler_steps_cost_factor_times_more():
    env = CostlyEnv(step_seconds=1e-6, straggler_probability=0.5, straggler_factor=7.0)
    env.reset(seed=0)
    infos = [env.step(0)[4] for _ in range(200)]
    for info in infos:
        expected = 7e-6 if info.get("straggler") else 1e-6
        assert info["step_cost"] == pytest.approx(expected)
    assert any("straggler" in info for info in infos)
    assert not all("straggler" in info for info in infos)
    assert env.mean_step_seconds == pytest.approx(1e-6 * (1 + 0.5 * 6))


# ---------------------------------------------------------------------------------------------
# DictObsEnv
# ---------------------------------------------------------------------------------------------


def test_dict_obs_spaces():
    env = DictObsEnv()
    space = env.observation_space
    assert isinstance(space, gym.spaces.Dict)
    assert space["position"].shape == (3,) and space["position"].dtype == np.float32
    assert space["velocity"].shape == (2,) and space["velocity"].dtype == np.float64
    assert space["mode"] == gym.spaces.Discrete(3)
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def test_dict_obs_ends_both_ways_and_reports_infos():
    env = gym.make("vecenvs/DictObs-v0")
    env.action_space.seed(0)
    endings = {"terminated": 0, "truncated": 0}
    optional_key_seen = optional_key_missing = False
    env.reset(seed=0)
    for _ in range(300):
        observation, _reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert observation in env.observation_space
        assert isinstance(info["distance"], float) and isinstance(info["steps"], int)
        optional_key_seen |= "mode_changed" in info
        optional_key_missing |= "mode_changed" not in info
        if terminated or truncated:
            endings["terminated" if terminated else "truncated"] += 1
            env.reset()
    assert endings["terminated"] > 0 and endings["truncated"] > 0
    assert optional_key_seen and optional_key_missing


# ---------------------------------------------------------------------------------------------
# FaultyEnv, in-process ("raise" only)
# ---------------------------------------------------------------------------------------------


def test_faulty_never_fails_by_default():
    env = FaultyEnv()
    inner = gym.make("CartPole-v1")
    assert env.observation_space == inner.observation_space
    assert env.action_space == inner.action_space
    env.reset(seed=0)
    for _ in range(30):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    assert env.ping(5) == 5


def test_faulty_fails_in_make():
    with pytest.raises(RuntimeError, match=r"deliberate failure in make #1"):
        FaultyEnv(fail_on="make")


def test_faulty_fails_on_the_chosen_reset():
    env = FaultyEnv(fail_on="reset", at=2)
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match=r"^FaultyEnv: deliberate failure in reset #2$"):
        env.reset()
    env.reset()  # only that one call fails


def test_faulty_counts_steps_across_episodes():
    env = FaultyEnv(fail_on="step", at=4, inner_id="vecenvs/DictObs-v0")
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.action_space.sample())
        env.reset()  # a new episode does not restart the count
    with pytest.raises(RuntimeError, match=r"deliberate failure in step #4"):
        env.step(env.action_space.sample())
    env.step(env.action_space.sample())


def test_faulty_fails_on_the_chosen_call():
    env = FaultyEnv(fail_on="call", at=3)
    assert env.ping("a") == "a"
    assert env.ping("b") == "b"
    with pytest.raises(RuntimeError, match=r"deliberate failure in call #3"):
        env.ping("c")


def test_faulty_through_gymnasium_make():
    env = gym.make("vecenvs/Faulty-v0", fail_on="step", at=1)
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match=r"step #1"):
        env.step(0)


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [({"fail_on": "render"}, "'render'"), ({"at": 0}, "0"), ({"how": "explode"}, "'explode'")],
)
def test_faulty_validation_names_the_bad_value(kwargs, bad):
    (name,) = kwargs
    with pytest.raises(ValueError, match=name) as error:
        FaultyEnv(**kwargs)
    assert bad in str(error.value)


def test_faulty_env_fns_are_picklable_and_only_one_is_bad():
    env_fns = faulty_env_fns(4, bad_index=2, fail_on="step", at=1, inner_id="vecenvs/DictObs-v0")
    env_fns = pickle.loads(pickle.dumps(env_fns))
    envs = [env_fn() for env_fn in env_fns]
    assert [env.fail_on for env in envs] == [None, None, "step", None]
    assert all(env.inner_id == "vecenvs/DictObs-v0" for env in envs)
    for index, env in enumerate(envs):
        env.reset(seed=index)
        if index == 2:
            with pytest.raises(RuntimeError):
                env.step(env.action_space.sample())
        else:
            env.step(env.action_space.sample())


@pytest.mark.parametrize(("num_envs", "bad_index"), [(0, 0), (3, 3), (3, -1)])
def test_faulty_env_fns_validation(num_envs, bad_index):
    with pytest.raises(ValueError):
        faulty_env_fns(num_envs, bad_index)


# ---------------------------------------------------------------------------------------------
# FaultyEnv, in a subprocess ("exit", "kill", "hang")
# ---------------------------------------------------------------------------------------------

# The child makes the env, then reports each phase call it survives on stdout, so the parent
# can tell exactly where it stopped.
CHILD_SCRIPT = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import vecenvs

    phase, how = sys.argv[1], sys.argv[2]
    print("making", flush=True)
    env = gym.make("vecenvs/Faulty-v0", fail_on=phase, at=3, how=how)
    print("made", flush=True)
    for n in range(1, 4):
        print("entering", n, flush=True)
        if phase == "reset":
            env.reset(seed=n)
        elif phase == "step":
            if n == 1:
                env.reset(seed=0)
            env.step(0)
        else:
            env.unwrapped.ping(n)
        print("survived", n, flush=True)
    print("no failure", flush=True)
    """
)


def start_child(phase: str, how: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD_SCRIPT, phase, how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("phase", ["make", "reset", "step", "call"])
@pytest.mark.parametrize(("how", "returncode"), [("exit", 3), ("kill", -signal.SIGKILL)])
def test_faulty_exit_and_kill_end_the_process(phase, how, returncode):
    child = start_child(phase, how)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == returncode, stderr
    if phase == "make":
        assert stdout.splitlines() == ["making"]
    else:
        assert stdout.splitlines()[-2:] == ["survived 2", "entering 3"]
    assert "Traceback" not in stderr  # it vanished: no exception was raised


@pytest.mark.parametrize("phase", ["make", "step"])
def test_faulty_hang_hangs_and_can_be_killed(phase):
    child = start_child(phase, "hang")
    try:
        # Wait until the child reaches the failing call (imports take a moment)...
        expected = "entering 3" if phase == "step" else "making"
        while (line := child.stdout.readline()) and line.strip() != expected:
            pass
        assert line.strip() == expected, "the child ended before reaching the failing call"
        # ...then it must still be running a while later.
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=1.5)
    finally:
        child.kill()
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
