"""Exactly gymnasium: attributes, the errors users already catch, actions as given, misuse.

The behaviours code written for gymnasium's vector envs relies on, checked in every backend:
``np_random_seed``/``np_random``; ``RuntimeError`` for envs whose spaces differ,
``multiprocessing.TimeoutError`` for a deadline, ``TypeError``/``ValueError`` where gymnasium
raises them; an env's own exception class still catchable; actions reaching the envs exactly as
given and never changed by the caller after ``step_async``, nor, for an env that keeps them, by
the next step; timeouts of zero seconds and negative ones; numpy integers as counts.
"""

from __future__ import annotations

import multiprocessing
import re

import gymnasium as gym
import multiprocess
import numpy as np
import pytest
from conftest import ALL_BACKENDS, PROCESS_BACKENDS, Backend, assert_same, backend_params
from gymnasium.vector import SyncVectorEnv

import vecenvs
from vecenvs.envs.faulty import faulty_env_fns
from vecenvs.factory import env_fns_for

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

EVERY = [
    *backend_params(ALL_BACKENDS, ("fork",)),
    pytest.param(Backend("async-pool", "fork"), id="async-pool"),
]
IN_PROCESSES = [
    *backend_params(PROCESS_BACKENDS, ("fork",)),
    pytest.param(Backend("async-pool", "fork"), id="async-pool"),
]


@pytest.mark.parametrize("backend", EVERY)
def test_np_random_seed_and_np_random_per_env(backend):
    with backend(env_fns_for("CartPole-v1", 3)) as envs:
        envs.reset(seed=42)
        assert envs.np_random_seed == (42, 43, 44)
        generators = envs.np_random
        assert len(generators) == 3 and all(isinstance(g, np.random.Generator) for g in generators)
        reference = SyncVectorEnv(env_fns_for("CartPole-v1", 3))
        reference.reset(seed=42)
        assert [g.bit_generator.state for g in generators] == [
            g.bit_generator.state for g in reference.np_random
        ]
        envs.reset()  # seed=None keeps the seeds
        assert envs.np_random_seed == (42, 43, 44)


@pytest.mark.parametrize("backend", EVERY)
def test_envs_whose_spaces_differ_raise_runtime_error(backend, children_before):
    env_fns = [
        *env_fns_for("CartPole-v1", 2),
        *env_fns_for("FrozenLake-v1", 1),
        *env_fns_for("CartPole-v1", 1),
    ]
    with pytest.raises(RuntimeError, match="not equivalent"):
        backend(env_fns)


@pytest.mark.parametrize("backend", IN_PROCESSES)
def test_a_deadline_is_a_multiprocessing_timeout_error(backend):
    envs = backend(faulty_env_fns(4, 3, fail_on="step", at=1, how="hang"))
    envs.reset(seed=0)
    envs.step_async(np.zeros(4, dtype=np.int64))
    with pytest.raises(multiprocessing.TimeoutError) as info:  # what AsyncVectorEnv raises
        envs.step_wait(timeout=0.5)
    assert isinstance(
        info.value, (TimeoutError, multiprocess.TimeoutError, vecenvs.WorkerTimeoutError)
    )
    assert envs.closed


@pytest.mark.parametrize("backend", IN_PROCESSES)
def test_a_timeout_of_zero_seconds_and_a_negative_one(backend):
    # Env 0 is quick (in a pool it is the caller's own, stepped before any wait), env 1 slow.
    slow = [
        env_fns_for("vecenvs/Costly-v0", 1, cost_kind="sleep", step_seconds=seconds)[0]
        for seconds in (0.0, 0.3)
    ]
    envs = backend(slow)
    reference = SyncVectorEnv(
        env_fns_for("vecenvs/Costly-v0", 2, cost_kind="sleep", step_seconds=0.0)
    )
    assert_same(envs.reset(seed=0), reference.reset(seed=0))
    actions = np.array([0, 1])
    envs.step_async(actions)
    # Refused before anything is done: the env and its pending step are as they were.
    with pytest.raises(ValueError, match=r"timeout is -1"):
        envs.step_wait(timeout=-1)
    assert not envs.closed
    assert_same(envs.step_wait(timeout=10), reference.step(actions))
    # Zero seconds means zero: the answer is not there yet, so it times out at once.
    envs.step_async(actions)
    with pytest.raises(vecenvs.WorkerTimeoutError):
        envs.step_wait(timeout=0)
    assert envs.closed


@pytest.mark.parametrize("backend", EVERY)
def test_bad_reset_masks_raise_gymnasiums_errors_and_change_nothing(backend):
    reference = SyncVectorEnv(env_fns_for("CartPole-v1", 3))
    with backend(env_fns_for("CartPole-v1", 3)) as envs:
        assert_same(envs.reset(seed=1), reference.reset(seed=1))
        cases = [
            ([True, False, True], TypeError, "must be a numpy array"),
            (np.array([True]), ValueError, "must have shape `(3,)`, got (1,)"),
            (np.array([[True, True, True]]), ValueError, "must have shape `(3,)`, got (1, 3)"),
            (np.array([1, 1, 0]), TypeError, "must have `dtype=np.bool_`, got int64"),
            (np.array([False, False, False]), ValueError, "at least one True value"),
        ]
        for mask, error, words in cases:
            with pytest.raises(error, match=re.escape(words)):
                envs.reset(options={"reset_mask": mask})
        actions = np.array([1, 0, 1])
        assert_same(envs.step(actions), reference.step(actions))


@pytest.mark.parametrize("backend", EVERY)
def test_an_envs_exception_is_also_its_own_class(backend):
    envs = backend(faulty_env_fns(4, 2, fail_on="step", at=2))
    envs.reset(seed=0)
    envs.step(np.zeros(4, dtype=np.int64))
    with pytest.raises(
        RuntimeError, match="deliberate failure in step"
    ) as info:  # FaultyEnv raises RuntimeError
        envs.step(np.zeros(4, dtype=np.int64))
    assert isinstance(info.value, vecenvs.EnvCrashedError) and info.value.env_index == 2
    assert type(info.value).__name__ == "EnvCrashedError"
    envs.close()


class Deprecated(gym.Env):
    def __init__(self):
        raise gym.error.DeprecatedEnv("use Fresh-v1 instead")


@pytest.mark.parametrize("backend", EVERY)
def test_a_construction_error_keeps_the_envs_exception_type(backend, children_before):
    # Stable-Baselines3 catches gymnasium.error.DeprecatedEnv around making vector envs.
    with pytest.raises(gym.error.DeprecatedEnv, match="use Fresh-v1 instead") as info:
        backend([*env_fns_for("CartPole-v1", 2), Deprecated, *env_fns_for("CartPole-v1", 1)])
    assert info.value.env_index == 2 and info.value.command == "make"


@pytest.mark.parametrize("backend", EVERY)
def test_float64_actions_for_a_float32_box_reach_the_env_unchanged(backend):
    # The pools' shared memory holds float32: casting there changed Pendulum from step 0.
    reference = SyncVectorEnv(env_fns_for("Pendulum-v1", 4))
    rng = np.random.default_rng(0)
    with backend(env_fns_for("Pendulum-v1", 4)) as envs:
        assert_same(envs.reset(seed=3), reference.reset(seed=3))
        for step in range(20):
            actions = rng.uniform(-2, 2, size=(4, 1))  # float64
            assert_same(envs.step(actions.copy()), reference.step(actions.copy()), f"step {step}")


@pytest.mark.parametrize("backend", IN_PROCESSES)
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_actions_changed_after_step_async_do_not_reach_the_envs(backend, env_id):
    reference = SyncVectorEnv(env_fns_for(env_id, 4))
    with backend(env_fns_for(env_id, 4)) as envs:
        assert_same(envs.reset(seed=5), reference.reset(seed=5))
        space = envs.action_space
        space.seed(1)
        for _ in range(5):
            actions = space.sample()
            if env_id == "Pendulum-v1":
                actions = actions.astype(np.float64)  # (the pickled path, per env rows)
            expected = reference.step(actions.copy())
            envs.step_async(actions)
            actions[...] = space.sample()  # the caller reuses its buffer before step_wait
            assert_same(envs.step_wait(), expected)


class KeepsItsActions(gym.Env):
    """Keeps every action it is given, as an env that logs or replays them might."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, action_space: gym.Space):
        self.action_space, self.kept = action_space, []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.kept.append(action)
        return np.zeros(1, np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("backend", EVERY)
@pytest.mark.parametrize(
    "action_space",
    [gym.spaces.Discrete(5), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)],
    ids=["Discrete", "Box"],
)
def test_an_env_that_keeps_its_actions_keeps_those_it_was_given(backend, action_space):
    # In shared memory the next step's actions overwrite this one's: what an env keeps must
    # not be a view of them (the pools copy a Box's rows; a Discrete's are numbers already).
    action_space.seed(0)
    given = [np.stack([action_space.sample() for _ in range(4)]) for _ in range(3)]
    with backend([lambda: KeepsItsActions(action_space)] * 4) as envs:
        envs.reset(seed=0)
        for actions in given:
            envs.step(actions)
        kept = envs.get_attr("kept")
    for index, env_kept in enumerate(kept):
        assert np.array_equal(np.stack(env_kept), np.stack([a[index] for a in given])), index


@pytest.mark.parametrize("backend", EVERY)
def test_numpy_integers_count(backend):
    with vecenvs.make_vec(
        "CartPole-v1",
        np.int64(4),
        backend=backend.name if backend.name in vecenvs.BACKENDS else "pool",
    ) as envs:
        assert envs.num_envs == 4
    if backend.name.startswith("pool"):
        with vecenvs.PoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=np.int32(2)) as envs:
            assert envs.num_workers == 2


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(Backend("multi"), id="multi"),
        pytest.param(Backend("pool-caller", "fork"), id="pool-caller"),
    ],
)
def test_one_env_instance_given_twice_is_refused(backend, children_before):
    # [lambda: env] * n would step one env n times per step: refused, as SB3's DummyVecEnv does.
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="returned an env that an earlier factory returned too"):
        backend([lambda: env] * 4)
    env.close()
