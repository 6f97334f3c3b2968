"""Infos through shared memory: the pool learns, from the first steps, which infos are numbers
(or arrays of numbers) under keys that stay, and its workers write those into shared memory;
everything else still travels pickled, only from the workers that have some. What a step
returns must stay exactly gymnasium's ``SyncVectorEnv``'s, dtypes and ``_key`` masks included.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import SyncVectorEnv

from vecenvs import AsyncPoolVecEnv, PoolVecEnv, core

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


class InfoMixEnv(gym.Env):
    """An env whose infos have every kind: a float, an int, a bool and an array every step; a
    key that comes and goes; a string now and then; a nested dict at an episode's end; and, in
    the envs ``odd_envs`` after step 12, a float key that turns int and a float32 array that
    turns float64 (their dtypes change)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, index: int = 0, odd_envs: tuple[int, ...] = ()):
        self.index, self.odd_envs, self.steps, self.t = index, odd_envs, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {"start": float(self.np_random.random())}

    def step(self, action):
        self.t += 1
        self.steps += 1
        speed, odd = float(self.np_random.random()), self.index in self.odd_envs and self.steps > 12
        info = {
            "speed": speed if not odd else 7,
            "count": self.t,
            "fast": speed > 0.5,
            "where": np.array([speed, -speed], dtype=np.float64 if odd else np.float32),
        }
        if self.t % 4 == 0:
            info["sometimes"] = self.t
        if (self.t + self.index) % 5 == 0:
            info["note"] = f"env {self.index} at {self.t}"
        terminated = self.t >= 6 + self.index % 3
        if terminated:
            info["episode"] = {"r": float(self.t), "l": self.t}
        return self._observation(), float(action), terminated, False, info

    def _observation(self):
        return self.np_random.uniform(-1, 1, 3).astype(np.float32)


def _env_fns(num_envs: int, odd_envs: tuple[int, ...] = ()):
    return [lambda i=i: InfoMixEnv(i, odd_envs) for i in range(num_envs)]


def _same_as_sync(make, num_envs=6, steps=40, odd_envs=(), mode="NextStep"):
    env_fns = _env_fns(num_envs, odd_envs)
    reference = SyncVectorEnv(env_fns, autoreset_mode=mode)
    with make(env_fns, autoreset_mode=mode) as envs:
        assert data_equivalence(envs.reset(seed=5), reference.reset(seed=5), exact=True)
        rng = np.random.default_rng(0)
        for step in range(steps):
            actions = rng.integers(0, 3, num_envs)
            got, expected = envs.step(actions), reference.step(actions)
            assert data_equivalence(got, expected, exact=True), (step, got[-1], expected[-1])
        shared = sorted(getattr(envs, "info_arrays", {}))
    reference.close()
    return shared


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("step_in_caller", [True, False], ids=["caller", "workers"])
def test_numeric_infos_go_through_shared_memory_and_the_infos_stay_gymnasiums(mode, step_in_caller):
    shared = _same_as_sync(
        lambda fns, **kw: PoolVecEnv(fns, num_workers=3, step_in_caller=step_in_caller, **kw),
        mode=mode,
    )
    assert shared == ["count", "fast", "speed", "where"], "the keys present at every step"


def test_a_key_whose_dtype_changes_in_a_chunk_is_merged_as_gymnasium_merges_it():
    """Envs 4 and 5 (worker 2's chunk) turn their float "speed" into an int after step 12 (and
    "where" into float64): that worker pickles them, and each merged array takes the dtype of
    the first env that has the key, as gymnasium's does."""
    shared = _same_as_sync(lambda fns, **kw: PoolVecEnv(fns, num_workers=3, **kw), odd_envs=(4, 5))
    assert "speed" in shared


@pytest.mark.parametrize("shared_memory", [True, False], ids=["shared", "pickled"])
@pytest.mark.parametrize("odd_envs", [(2,), (0, 3), (0, 4), (0, 2, 5)])
def test_the_envs_of_one_chunk_may_disagree_on_a_dtype(odd_envs, shared_memory):
    """Chunks of two envs, where some envs turn a float into an int (and float32 into float64):
    gymnasium casts every env's value into the dtype of the first env over all six, so a chunk
    cannot cast its envs' values into the dtype of its own first (env 2's int would truncate
    env 3's float; env 3's float64, cast into env 2's float32, would lose digits where env 0's
    float64 keeps them). Such values travel as they are, and the caller casts them."""
    _same_as_sync(
        lambda fns, **kw: PoolVecEnv(fns, num_workers=3, shared_memory=shared_memory, **kw),
        odd_envs=odd_envs,
    )


class MixedTypesEnv(gym.Env):
    """Infos whose types differ between envs as some real envs' do: a bonus that is the int 0
    when there is none, an episode's return that is an int or a float, a level that is an int
    in odd envs (at reset too), and an array whose dtype follows the env."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, index: int):
        self.index, self.t = index, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        level = self.index if self.index % 2 else self.index + 0.25
        return np.zeros(1, np.float32), {"level": level}

    def step(self, action):
        self.t += 1
        bonus = 0 if (self.t + self.index) % 3 else float(self.np_random.random())
        kind = np.float64 if (self.t + self.index) % 4 == 0 else np.float32
        info = {"bonus": bonus, "trace": np.array([bonus, 1 / 3], dtype=kind)}
        terminated = self.t >= 5 + self.index % 3
        if terminated:
            ret = self.t if self.index % 2 else self.t + 1 / 3
            info["episode"] = {"r": ret, "l": np.int32(self.t)}
        return np.zeros(1, np.float32), bonus, terminated, False, info


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize(
    "make",
    [
        lambda fns, **kw: PoolVecEnv(fns, num_workers=3, **kw),
        lambda fns, **kw: PoolVecEnv(fns, num_workers=2, step_in_caller=True, **kw),
        lambda fns, **kw: PoolVecEnv(fns, num_workers=4, shared_memory=False, **kw),
        lambda fns, **kw: AsyncPoolVecEnv(fns, num_workers=3, **kw),
    ],
    ids=["K=3", "caller", "pickled", "async"],
)
def test_infos_whose_types_differ_between_envs_are_gymnasiums(make, mode):
    env_fns = [lambda i=i: MixedTypesEnv(i) for i in range(8)]
    reference = SyncVectorEnv(env_fns, autoreset_mode=mode)
    with make(env_fns, autoreset_mode=mode) as envs:
        assert data_equivalence(envs.reset(seed=2), reference.reset(seed=2), exact=True)
        for step in range(30):
            actions = np.full(8, step % 2)
            got, expected = envs.step(actions), reference.step(actions)
            assert data_equivalence(got, expected, exact=True), (step, got[-1], expected[-1])
        partial = {"reset_mask": np.arange(8) % 3 == 1}
        got, expected = (
            envs.reset(seed=4, options=partial),
            reference.reset(seed=4, options=partial),
        )
        assert data_equivalence(got, expected, exact=True), (got[-1], expected[-1])
    reference.close()


class TextAfterStepsEnv(MixedTypesEnv):
    """MixedTypesEnv's resets, and at each step a float "score" alone, which env 3 turns into a
    string at step 3."""

    def step(self, action):
        self.t += 1
        score = "high" if self.index == 3 and self.t == 3 else 0.5
        return np.zeros(1, np.float32), 1.0, False, False, {"score": score}


@pytest.mark.parametrize("shared_memory", [True, False], ids=["shared", "pickled"])
def test_a_value_that_fits_no_batch_is_an_error_naming_its_env(shared_memory):
    env_fns = [lambda i=i: TextAfterStepsEnv(i) for i in range(4)]
    reference = SyncVectorEnv(env_fns)
    reference.reset(seed=0)
    actions = np.zeros(4, dtype=np.int64)
    reference.step(actions), reference.step(actions)
    with pytest.raises(ValueError):  # gymnasium cannot batch it either
        reference.step(actions)
    reference.close()
    with PoolVecEnv(env_fns, num_workers=2, shared_memory=shared_memory) as envs:
        envs.reset(seed=0)
        envs.step(actions), envs.step(actions)
        with pytest.raises(
            ValueError, match=r"env 3's info\['score'\] is a str, .* \(float64, \(\)\)"
        ):
            envs.step(actions)


def test_a_key_whose_dtype_changes_in_the_first_env_takes_the_new_dtype_as_gymnasiums_does():
    """Env 0's float "speed" turns int after step 12, and its float32 "where" float64:
    gymnasium's batches of them then take those dtypes (the first env that has a key gives its
    dtype), so they cannot be written into the rows learnt in the first steps: they travel
    pickled, and the caller merges them."""
    shared = _same_as_sync(lambda fns, **kw: PoolVecEnv(fns, num_workers=3, **kw), odd_envs=(0,))
    assert {"speed", "where"} <= set(shared)


def test_a_key_whose_dtype_changes_after_the_first_env_of_a_chunk_is_cast_as_gymnasium_casts_it():
    """Env 1, the second of its chunk of three, turns its float "speed" int (and "where"
    float64): gymnasium's batch already has the dtype of env 0, so env 1's value is cast into
    it, and env 2's float stays a float (a batch of env 1's dtype would have truncated it)."""
    shared = _same_as_sync(lambda fns, **kw: PoolVecEnv(fns, num_workers=2, **kw), odd_envs=(1,))
    assert {"speed", "where"} <= set(shared)


@pytest.mark.parametrize(
    "make",
    [
        lambda fns, **kw: PoolVecEnv(fns, num_workers=2, shared_memory=False, **kw),
        lambda fns, **kw: PoolVecEnv(fns, num_workers=1, **kw),
        lambda fns, **kw: AsyncPoolVecEnv(fns, num_workers=3, **kw),
    ],
    ids=["pickled", "K=1", "async"],
)
def test_the_other_pools_give_the_same_infos(make):
    _same_as_sync(make)


def test_only_the_workers_with_other_infos_are_read_from_their_pipes():
    with PoolVecEnv(_env_fns(6), num_workers=3, step_in_caller=False) as envs:
        envs.reset(seed=0)
        for _ in range(core.LEARN_STEPS):
            envs.step(np.zeros(6, dtype=np.int64))
        assert envs.info_arrays, "learnt"
        for _ in range(10):
            read = np.array(envs.crew.read)
            infos = envs.step(np.zeros(6, dtype=np.int64))[-1]
            pickled = {"note", "episode", "sometimes", "start"}
            having = set()
            for key in pickled & set(infos):
                if not key.startswith("_"):
                    having |= set(np.flatnonzero(infos[f"_{key}"]).tolist())
            with_message = {env // 2 for env in having}
            assert set(np.flatnonzero(np.array(envs.crew.read) - read).tolist()) == with_message


class OnceIntEnv(gym.Env):
    """Only numeric infos: a float "speed", which is an int at step 8 alone."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        speed = 8 if self.t == 8 else float(self.np_random.random())
        return np.zeros(1, np.float32), 1.0, False, False, {"speed": speed}


def test_a_key_pickled_for_one_step_is_shared_again_at_the_next():
    """Step 8's int "speed" goes pickled from every worker (the first value of each chunk is
    an int); from step 9 on it is a float again and goes through shared memory: no worker is
    read from its pipe."""
    env_fns = [OnceIntEnv] * 4
    reference = SyncVectorEnv(env_fns)
    with PoolVecEnv(env_fns, num_workers=2, step_in_caller=False) as envs:
        assert data_equivalence(envs.reset(seed=1), reference.reset(seed=1), exact=True)
        actions = np.zeros(4, dtype=np.int64)
        for step in range(1, 16):
            read, learnt = list(envs.crew.read), bool(envs.info_arrays)
            got, expected = envs.step(actions), reference.step(actions)
            assert data_equivalence(got, expected, exact=True), step
            assert learnt or step <= core.LEARN_STEPS
            assert (envs.crew.read != read) == (step == 8 or not learnt), step
    reference.close()


def test_mujoco_infos_are_shared_and_equal():
    pytest.importorskip("mujoco")
    shared = _same_as_sync_id("HumanoidStandup-v5")
    assert {"x_position", "reward_linup", "reward_impact"} <= set(shared)


def _same_as_sync_id(env_id: str) -> list[str]:
    env_fns = [lambda: gym.make(env_id)] * 4
    reference = SyncVectorEnv(env_fns)
    with PoolVecEnv(env_fns, num_workers=2) as envs:
        assert data_equivalence(envs.reset(seed=3), reference.reset(seed=3), exact=True)
        space = reference.action_space
        space.seed(3)
        for _ in range(12):
            actions = space.sample()
            assert data_equivalence(envs.step(actions), reference.step(actions), exact=True)
        shared = sorted(envs.info_arrays)
    reference.close()
    return shared
