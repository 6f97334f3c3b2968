"""Our vector envs as Stable-Baselines3 VecEnvs (vecenvs.sb3): SB3's layout, and PPO training on the pool.

The reference is SB3's own DummyVecEnv over the same env factories: given the same seeds and
actions, the adapter must return what it returns, step by step, whichever autoreset mode the
vector env underneath uses. (SB3's ``env_checker.check_env`` checks single envs, not vec envs;
its vec-env wrappers, VecMonitor and VecCheckNan, and ``evaluate_policy`` run over the adapter
in the training test instead.)
"""

from __future__ import annotations

import functools
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from vecenvs import MultiEnv, PoolVecEnv, make_vec
from vecenvs.factory import env_fns_for

pytest.importorskip(
    "stable_baselines3", reason="Stable-Baselines3 is not installed: pip install 'vecenvs[sb3]'"
)

from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    VecCheckNan,
    VecEnv,
    VecMonitor,
)

from vecenvs.sb3 import to_sb3, unbatch_infos

SAME_STEP, NEXT_STEP, DISABLED = (
    AutoresetMode.SAME_STEP,
    AutoresetMode.NEXT_STEP,
    AutoresetMode.DISABLED,
)


def pool(env_fns, autoreset_mode):
    return PoolVecEnv(env_fns, num_workers=2, autoreset_mode=autoreset_mode, start_method="fork")


def multi(env_fns, autoreset_mode):
    return MultiEnv(env_fns, autoreset_mode=autoreset_mode)


def gym_sync(env_fns, autoreset_mode):
    return SyncVectorEnv(env_fns, autoreset_mode=autoreset_mode)


def adapt(vector_env, monitor=False):
    """to_sb3, without the warning a mode other than SAME_STEP gives (tested on its own), and
    without episode statistics (DummyVecEnv, the reference, has none; tested on their own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_sb3(vector_env, monitor=monitor)


def assert_same_as_dummy(got, expected, where):
    """The adapter's step (or reset) results equal DummyVecEnv's, key by key."""
    if isinstance(expected, dict):  # Dict observations
        assert set(got) == set(expected), where
        for key in expected:
            assert_same_as_dummy(got[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, list):  # infos
        assert len(got) == len(expected), where
        for index, (info, expected_info) in enumerate(zip(got, expected)):
            assert set(info) == set(expected_info), f"{where}: env {index}'s info keys"
            for key in expected_info:
                assert_same_as_dummy(
                    info[key], expected_info[key], f"{where}: env {index}'s info[{key!r}]"
                )
    else:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected), err_msg=where)


# ------------------------------------------------------------------------------------------------
# What SB3 gets: exactly DummyVecEnv's results, in every autoreset mode
# ------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("mode", [SAME_STEP, NEXT_STEP, DISABLED], ids=lambda mode: mode.value)
@pytest.mark.parametrize("backend", [pool, multi, gym_sync])
@pytest.mark.parametrize(("env_id", "steps"), [("CartPole-v1", 200), ("vecenvs/DictObs-v0", 60)])
def test_steps_exactly_like_sb3s_dummy_vec_env(backend, mode, env_id, steps):
    # CartPole's episodes end by termination, DictObs's by truncation (every 25 steps), with
    # Dict observations and reset infos.
    env_fns = env_fns_for(env_id, 4)
    reference = DummyVecEnv(env_fns)
    envs = adapt(backend(env_fns, mode))
    try:
        assert isinstance(envs, VecEnv) and envs.num_envs == 4
        assert envs.observation_space == reference.observation_space
        assert envs.action_space == reference.action_space
        assert envs.seed(11) == reference.seed(11)
        assert_same_as_dummy(envs.reset(), reference.reset(), "reset")
        assert_same_as_dummy(envs.reset_infos, reference.reset_infos, "reset infos")
        action_space = gym.vector.utils.batch_space(reference.action_space, 4)
        action_space.seed(5)
        ended = 0
        for step in range(steps):
            actions = action_space.sample()
            got, expected = envs.step(actions), reference.step(actions)
            for name, part, expected_part in zip(
                ("observations", "rewards", "dones", "infos"), got, expected
            ):
                if name == "rewards":  # float32, as DummyVecEnv's buffer holds them
                    assert part.dtype == expected_part.dtype == np.float32
                assert_same_as_dummy(part, expected_part, f"step {step} {name}")
            assert_same_as_dummy(
                envs.reset_infos, reference.reset_infos, f"step {step} reset infos"
            )
            ended += int(expected[2].sum())
        assert ended >= 4
    finally:
        envs.close()
        reference.close()


@pytest.mark.parametrize("mode", [SAME_STEP, NEXT_STEP], ids=lambda mode: mode.value)
def test_infos_tell_truncation_from_termination(mode):
    # 5-step episodes: balancing (alternate pushes) reaches the time limit; pushing one way
    # topples the pole (terminated) after ~10 steps, before a 500-step limit.
    short = [functools.partial(gym.make, "CartPole-v1", max_episode_steps=5)] * 2
    with adapt(multi(short, mode)) as envs:
        envs.seed(0)
        first = envs.reset()
        for step in range(5):
            observations, _, dones, infos = envs.step(np.array([step % 2] * 2))
        assert dones.tolist() == [True, True]
        for index, info in enumerate(infos):
            assert info["TimeLimit.truncated"] is True
            assert info["terminal_observation"].shape == (4,)
            # the returned observation starts a new episode; the last one is kept for SB3
            assert not np.array_equal(info["terminal_observation"], observations[index])
        assert np.all(np.abs(observations) <= 0.05) and not np.array_equal(observations, first)

    with adapt(multi(env_fns_for("CartPole-v1", 2), mode)) as envs:
        envs.reset()
        for _ in range(100):
            _, _, dones, infos = envs.step(np.zeros(2, dtype=np.int64))
            if dones.any():
                break
        assert dones.any()
        for done, info in zip(dones, infos):
            assert info["TimeLimit.truncated"] is False  # present in every info, as SB3 sets it
            assert ("terminal_observation" in info) == bool(done)
            if done:
                assert abs(info["terminal_observation"][2]) > 0.2  # the pole fell (> 12 degrees)


def test_a_mode_other_than_same_step_warns_and_same_step_does_not():
    with pytest.warns(UserWarning, match="autoresets in NextStep mode.*autoreset_mode='SameStep'"):
        to_sb3(multi(env_fns_for("CartPole-v1", 2), NEXT_STEP)).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_sb3(multi(env_fns_for("CartPole-v1", 2), SAME_STEP)).close()


def test_attributes_methods_wrappers_and_options():
    env_fns = [lambda: Monitor(gym.make("CartPole-v1")), lambda: gym.make("CartPole-v1")]
    with adapt(pool(env_fns, SAME_STEP)) as envs:
        assert envs.env_is_wrapped(Monitor) == [True, False]
        assert envs.env_is_wrapped(gym.wrappers.TimeLimit, indices=[1]) == [True]
        assert envs.get_attr("render_mode") == [None, None] and envs.render_mode is None
        envs.set_attr("probe", 3)
        envs.set_attr("probe", [1, 2], indices=1)  # a list value is one value, not one per env
        assert envs.get_attr("probe") == [3, [1, 2]]
        assert envs.get_attr("probe", indices=[1]) == [[1, 2]]
        assert envs.env_method("get_wrapper_attr", "probe", indices=0) == [3]
        assert envs.has_attr("probe") and not envs.has_attr("no_such_attribute")
        envs.set_options({"low": -0.01, "high": 0.01})  # CartPole's reset options
        assert np.all(np.abs(envs.reset()) <= 0.01)
        # One options dict per env, as SB3 keeps them: envs given different ones are reset in
        # groups (gymnasium's reset takes one dict for all).
        envs.set_options([{"low": -0.001, "high": 0.001}, {"low": 0.04, "high": 0.05}])
        observations = envs.reset()
        assert np.all(np.abs(observations[0]) <= 0.001) and np.all(
            (observations[1] >= 0.04) & (observations[1] <= 0.05)
        )


class Counter(gym.Env):
    """Counts the calls of ``bump``: a method with a side effect, to see which envs were called."""

    observation_space = gym.spaces.Box(-1.0, 1.0, shape=(1,))
    action_space = gym.spaces.Box(-1, 1, shape=(1,), dtype=np.int64)  # an integer Box

    def __init__(self):
        self.bumps = 0

    def bump(self, by=1):
        self.bumps += by
        return self.bumps

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.last_action = action
        return np.zeros(1, dtype=np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("make", [pool, multi], ids=["pool", "multi"])
def test_indices_reach_only_the_envs_named(make):
    with adapt(make([Counter for _ in range(3)], SAME_STEP)) as envs:
        assert envs.env_method("bump", 5, indices=[2, 0]) == [5, 5]  # only envs 2 and 0 are called
        assert envs.get_attr("bumps") == [5, 0, 5]
        assert envs.env_method("bump", indices=[-1]) == [6]  # -1: the last env, as in SB3
        envs.set_attr("new_attribute", 7, indices=[0])  # a new attribute: nothing read first
        assert envs.get_attr("new_attribute", indices=0) == [7] and not envs.has_attr(
            "new_attribute"
        )


@pytest.mark.parametrize("make", [pool, multi], ids=["pool", "multi"])
def test_float_actions_for_an_integer_box_pass_as_dummy_vec_env_passes_them(make):
    # PPO's Gaussian policy gives floats for an integer Box: DummyVecEnv hands them to the env.
    with adapt(make([Counter for _ in range(2)], SAME_STEP)) as envs:
        envs.reset()
        envs.step(np.array([[0.25], [-0.5]]))
        assert [a.dtype for a in envs.get_attr("last_action")] == [np.float64, np.float64]


class DictActions(Counter):
    action_space = gym.spaces.Dict(
        {"move": gym.spaces.Discrete(3), "force": gym.spaces.Box(-1, 1, shape=(2,))}
    )


@pytest.mark.parametrize("make", [pool, multi], ids=["pool", "multi"])
def test_per_env_dict_actions_are_batched(make):
    reference = DummyVecEnv([DictActions for _ in range(2)])
    with adapt(make([DictActions for _ in range(2)], SAME_STEP)) as envs:
        envs.reset()
        reference.reset()
        actions = [
            {"move": 2, "force": np.array([0.5, -0.5], dtype=np.float32)},
            {"move": 0, "force": np.zeros(2, dtype=np.float32)},
        ]
        envs.step(actions)
        reference.step(actions)
        got, expected = envs.get_attr("last_action"), reference.get_attr("last_action")
        for a, b in zip(got, expected):
            assert a["move"] == b["move"] and np.array_equal(a["force"], b["force"])


def test_one_env_given_n_times_is_refused_as_dummy_vec_env_refuses_it():
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError):
        DummyVecEnv([lambda: env] * 2)
    with pytest.raises(ValueError, match="returned an env that an earlier factory returned too"):
        multi([lambda: env] * 2, SAME_STEP)
    env.close()


def test_unbatch_infos_follows_the_masks_into_nested_dicts():
    infos = {
        "a": np.array([1, 0, 3]),
        "_a": np.array([True, False, True]),
        "episode": {"r": np.array([0.0, 9.5, 0.0]), "_r": np.array([False, True, False])},
        "_episode": np.array([False, True, False]),
    }
    assert unbatch_infos(infos, 3) == [{"a": 1}, {"episode": {"r": 9.5}}, {"a": 3}]
    assert unbatch_infos({}, 2) == [{}, {}]


# ------------------------------------------------------------------------------------------------
# Training: SB3's PPO on CartPole, stepped by our pool
# ------------------------------------------------------------------------------------------------


class CountSteps(gym.Wrapper):
    """Counts the env's steps: how many the algorithm really took."""

    def __init__(self, env):
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        return self.env.step(action)


# ------------------------------------------------------------------------------------------------
# Episode statistics: as SB3's VecMonitor records them, so that PPO logs ep_rew_mean
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [SAME_STEP, NEXT_STEP], ids=lambda mode: mode.value)
def test_episode_statistics_are_vec_monitors(mode):
    # 7-step time limit and pushes one way: episodes end by truncation and by termination.
    env_fns = [functools.partial(gym.make, "CartPole-v1", max_episode_steps=7)] * 3
    reference = VecMonitor(DummyVecEnv(env_fns))
    envs = adapt(multi(env_fns, mode), monitor=True)
    try:
        assert envs.seed(3) == reference.seed(3)
        envs.reset(), reference.reset()
        episodes = 0
        for step in range(40):
            actions = np.array([step % 2, 1, 1])
            _, _, dones, infos = envs.step(actions)
            _, _, expected_dones, expected_infos = reference.step(actions)
            assert dones.tolist() == expected_dones.tolist()
            for info, expected in zip(infos, expected_infos):
                assert ("episode" in info) == ("episode" in expected), f"step {step}"
                if "episode" in expected:
                    got, want = info["episode"], expected["episode"]
                    assert (got["r"], got["l"]) == (want["r"], want["l"]), f"step {step}"
                    assert got["r"].dtype == np.float32 and got["t"] >= 0
                    episodes += 1
        assert episodes >= 10 and envs.episode_count == episodes
    finally:
        envs.close(), reference.close()


def test_monitoring_can_be_turned_off_and_a_vec_monitor_on_top_counts_each_episode_once():
    env_fns = [functools.partial(gym.make, "CartPole-v1", max_episode_steps=5)] * 2
    with adapt(multi(env_fns, SAME_STEP), monitor=False) as bare:
        bare.reset()
        _, _, dones, infos = [bare.step(np.zeros(2, dtype=np.int64)) for _ in range(5)][-1]
        assert dones.all() and not any("episode" in info for info in infos)
        assert bare.env_is_wrapped(Monitor) == [False, False]
    with to_sb3(multi(env_fns, SAME_STEP)) as monitored:
        assert monitored.env_is_wrapped(Monitor) == [True, True]
        # SB3's own answer to a monitored env wrapped again: a warning, its numbers win.
        with pytest.warns(UserWarning, match="already wrapped with a `Monitor`"):
            envs = VecMonitor(monitored)
        envs.reset()
        for _ in range(10):
            _, _, dones, infos = envs.step(np.zeros(2, dtype=np.int64))
            assert [("episode" in info) for info in infos] == dones.tolist()
            assert all(info["episode"]["l"] == 5 for info in infos if "episode" in info)
        assert envs.episode_count == monitored.episode_count == 4  # 2 envs x 2 episodes


@pytest.mark.usefixtures("no_leftover_processes")
def test_ppo_logs_episode_statistics_from_to_sb3_alone(capsys):
    envs = to_sb3(make_vec("CartPole-v1", 4, "pool", num_workers=2, autoreset_mode="SameStep"))
    try:
        model = PPO("MlpPolicy", envs, n_steps=32, batch_size=64, n_epochs=1, device="cpu")
        model.set_logger(configure(None, ["stdout"]))
        model.learn(total_timesteps=128)  # one rollout: ~20-step episodes under a random policy
    finally:
        envs.close()
    logged = capsys.readouterr().out
    assert re.search(r"ep_rew_mean\s+\|\s+\d", logged), logged
    assert re.search(r"ep_len_mean\s+\|\s+\d", logged), logged
    assert len(model.ep_info_buffer) > 0


@pytest.mark.usefixtures("no_leftover_processes")
def test_ppo_trains_on_the_pool():
    num_envs, n_steps, total = 4, 128, 2048
    env_fns = [lambda: CountSteps(gym.make("CartPole-v1"))] * num_envs
    pool_envs = PoolVecEnv(env_fns, num_workers=2, autoreset_mode="SameStep", start_method="fork")
    # SB3's own vec-env wrapper over the adapter: NaN checks on every step. The episode
    # statistics are the adapter's own.
    envs = VecCheckNan(to_sb3(pool_envs), raise_exception=True)
    try:
        model = PPO(
            "MlpPolicy", envs, n_steps=n_steps, batch_size=256, n_epochs=2, seed=0, device="cpu"
        )
        model.learn(total_timesteps=total)
        assert model.num_timesteps == total  # 4 rollouts of 4 envs x 128 steps
        assert sum(pool_envs.get_attr("steps")) == total
        assert len(model.ep_info_buffer) > 20  # ~20-step episodes under an untrained policy
        assert all(info["l"] == info["r"] for info in model.ep_info_buffer)  # CartPole: 1 per step
        mean_reward, _ = evaluate_policy(model, envs, n_eval_episodes=4)
        assert mean_reward >= 8
    finally:
        envs.close()
    assert pool_envs.closed


@pytest.mark.usefixtures("no_leftover_processes")
def test_training_throughput_reports_progress_after_every_rollout():
    from vecenvs.bench.training import N_STEPS, compare_training

    reports = []
    results = compare_training(
        "CartPole-v1",
        2,
        ["sb3-dummy", "multi"],
        timesteps=512,
        repeats=1,
        torch_threads=1,
        on_progress=lambda message, done: reports.append((message, done)),
    )

    assert [result.measurement.config.backend for result in results] == ["sb3-dummy", "multi"]
    rollouts = (N_STEPS * 2 + 512) // (N_STEPS * 2)  # warm-up + one timed learn(), per backend
    assert len(reports) >= 2 * rollouts, "a report per rollout, not per backend"
    fractions = [done for _, done in reports]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert reports[1][0].startswith("sb3-dummy: ") and "(1 of 2 vector envs)" in reports[1][0]
    assert reports[-1][0] == "multi: 640 of 640 env steps (2 of 2 vector envs)"
