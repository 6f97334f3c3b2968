"""The contract every backend keeps, checked with real processes under every start method.

The conformance checker (:mod:`vecenvs.testing`) does most of the work: the API's shape, step
by step equality with gymnasium's SyncVectorEnv through several episode ends in both autoreset
modes, closing, and errors reaching the caller. Under fork every backend runs every env; under
forkserver and spawn (slow to start: each worker imports gymnasium afresh) a smaller set.

The rest covers what the checker does not: uneven chunks, lambdas and closures under spawn,
step_async/step_wait, reset masks, call/get_attr/set_attr with per-env values, and make_vec.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import (
    ALL_BACKENDS,
    PROCESS_BACKENDS,
    Backend,
    assert_same,
    backend_params,
)
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import vecenvs
from vecenvs import PoolVecEnv, SubprocVecEnv
from vecenvs.envs.faulty import faulty_env_fns
from vecenvs.factory import env_fns_for
from vecenvs.testing import (
    DEFAULT_ENV_IDS,
    check_api,
    check_close,
    check_error_propagation,
    check_matches_sync,
)

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)
#: Enough steps for several episode ends with random actions (DictObs and Pendulum are
#: truncated at 25 and 200 steps, Acrobot at 500; CartPole ends in ~20 steps).
STEPS = {"CartPole-v1": 300, "Acrobot-v1": 550, "Pendulum-v1": 250, "vecenvs/DictObs-v0": 150}
#: The envs run under forkserver and spawn: a discrete and a nested (Dict obs, Box action) one.
SLOW_START_ENV_IDS = ("CartPole-v1", "vecenvs/DictObs-v0")


def _contract_cases() -> list:
    """(backend, env_id, num_envs): every env under fork, fewer and smaller under the others."""
    cases = []
    for param in backend_params(ALL_BACKENDS, ("fork",)):
        backend = param.values[0]
        for env_id in DEFAULT_ENV_IDS:
            cases.append(pytest.param(backend, env_id, 4, id=f"{backend.id}-{env_id}"))
    for param in backend_params(PROCESS_BACKENDS, ("forkserver", "spawn")):
        backend = param.values[0]
        for env_id in SLOW_START_ENV_IDS:
            cases.append(pytest.param(backend, env_id, 3, id=f"{backend.id}-{env_id}"))
    return cases


CONTRACT_CASES = _contract_cases()
EVERY_BACKEND = backend_params(ALL_BACKENDS, ("fork", "forkserver", "spawn"))
FORK_BACKENDS = backend_params(ALL_BACKENDS, ("fork",))
FORK_PROCESS_BACKENDS = backend_params(PROCESS_BACKENDS, ("fork",))


# ------------------------------------------------------------------------------------------------
# The conformance checker, over every backend and start method
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("backend", "env_id", "num_envs"), CONTRACT_CASES)
def test_api(backend, env_id, num_envs):
    check_api(backend, env_id, num_envs=num_envs, require_context_manager=True)


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
@pytest.mark.parametrize(("backend", "env_id", "num_envs"), CONTRACT_CASES)
def test_matches_sync(backend, env_id, num_envs, mode):
    assert (
        check_matches_sync(
            backend, env_id, num_envs=num_envs, steps=STEPS[env_id], autoreset_mode=mode
        )
        == []
    )


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_close(backend):
    check_close(backend, num_envs=3)


@pytest.mark.parametrize("phase", ["make", "reset", "step", "call"])
@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_error_propagation(backend, phase):
    # 3 envs, env 1 fails: for pool-caller that is the caller's own chunk (envs 0-1).
    check_error_propagation(backend, phase, num_envs=3, bad_index=1)


@pytest.mark.parametrize("phase", ["make", "reset", "step", "call"])
@pytest.mark.parametrize(
    "backend", backend_params(("pool", "pool-caller", "pool-pipes"), ("fork",))
)
def test_error_propagation_from_the_last_worker(backend, phase):
    # The last env lives in the last worker's chunk in every pool layout.
    check_error_propagation(backend, phase, num_envs=5, bad_index=4)


# ------------------------------------------------------------------------------------------------
# Uneven chunks; factories that only dill can send
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pool_kwargs",
    [
        {"num_workers": 3, "step_in_caller": False},
        {"num_workers": 3, "shared_memory": False, "step_in_caller": False},
        {"num_workers": 3},  # the caller and 2 workers
    ],
    ids=["shm", "pipes", "caller"],
)
@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_seven_envs_on_three_lanes_match_sync(pool_kwargs, mode):
    def backend(env_fns, **kwargs):
        return PoolVecEnv(env_fns, start_method="fork", **pool_kwargs, **kwargs)

    with backend(env_fns_for("CartPole-v1", 7)) as envs:
        lanes = [list(chunk) for chunk in envs.chunks]  # the first is the caller's, if it has one
    assert lanes == [[0, 1], [2, 3], [4, 5, 6]]
    check_matches_sync(backend, "CartPole-v1", num_envs=7, steps=150, autoreset_mode=mode)
    check_matches_sync(backend, "vecenvs/DictObs-v0", num_envs=7, steps=80, autoreset_mode=mode)


@pytest.mark.parametrize(
    "backend",
    [
        *backend_params(("subproc", "pool", "pool-caller"), ("spawn",)),
        *backend_params(("pool",), ("forkserver",)),
    ],
)
def test_lambdas_and_closures_work_under_spawn(backend):
    # Everything here is local to the test function: standard pickle refuses all of it.
    env_id, episode_steps, scale = "CartPole-v1", 15, 2.5

    def make_scaled():  # a closure over locals, wrapping the env with a lambda of its own
        return gym.wrappers.TransformReward(
            gym.make(env_id, max_episode_steps=episode_steps), lambda r: scale * r
        )

    env_fns = [make_scaled, lambda: gym.make(env_id, max_episode_steps=episode_steps), make_scaled]
    reference = SyncVectorEnv(env_fns)
    with backend(env_fns) as envs:
        assert_same(envs.reset(seed=3), reference.reset(seed=3))
        first = envs.step(np.array([0, 1, 0]))
        assert_same(first, reference.step(np.array([0, 1, 0])))
        assert first[1].tolist() == [2.5, 1.0, 2.5]  # the closure's scale reached the workers
        rng = np.random.default_rng(0)
        episode_ends = 0
        for step in range(40):
            actions = rng.integers(0, 2, size=3)
            got, expected = envs.step(actions), reference.step(actions)
            assert_same(got, expected, f"step {step}")
            episode_ends += int(np.sum(expected[2] | expected[3]))
        assert episode_ends >= 2
    reference.close()


# ------------------------------------------------------------------------------------------------
# The rest of the API
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", FORK_PROCESS_BACKENDS)
def test_step_async_and_step_wait_match_sync(backend):
    env_fns = env_fns_for("vecenvs/DictObs-v0", 4)
    reference = SyncVectorEnv(env_fns)
    with backend(env_fns) as envs:
        assert callable(envs.step_async) and callable(envs.step_wait)
        assert_same(envs.reset(seed=5), reference.reset(seed=5))
        envs.action_space.seed(1)
        for step in range(40):
            actions = envs.action_space.sample()
            envs.step_async(actions)
            assert_same(envs.step_wait(), reference.step(actions), f"step {step}")
        # step_wait may be given its own deadline
        envs.step_async(actions)
        assert_same(envs.step_wait(timeout=30.0), reference.step(actions))
    reference.close()


@pytest.mark.parametrize("backend", FORK_BACKENDS)
def test_reset_mask_matches_sync(backend):
    env_fns = env_fns_for("vecenvs/DictObs-v0", 5)  # reports reset infos: they must line up too
    reference = SyncVectorEnv(env_fns)
    with backend(env_fns) as envs:
        assert_same(envs.reset(seed=0), reference.reset(seed=0))
        envs.action_space.seed(2)
        for round_ in range(3):
            for _ in range(7):
                actions = envs.action_space.sample()
                assert_same(envs.step(actions), reference.step(actions))
            mask = np.array([True, False, round_ == 1, False, True])
            seeds = [10 * round_ + i for i in range(5)]
            # SyncVectorEnv pops the mask from the options it is given: each gets its own dict
            assert_same(
                envs.reset(seed=seeds, options={"reset_mask": mask.copy()}),
                reference.reset(seed=seeds, options={"reset_mask": mask.copy()}),
                f"masked reset {round_}",
            )
        for _ in range(30):  # autoreset state is still in step with the reference
            actions = envs.action_space.sample()
            assert_same(envs.step(actions), reference.step(actions))
        with pytest.raises(ValueError, match="reset_mask"):
            envs.reset(options={"reset_mask": np.zeros(4, dtype=bool)})
    reference.close()


@pytest.mark.parametrize("backend", FORK_BACKENDS)
def test_call_get_attr_set_attr(backend):
    with backend(faulty_env_fns(5, 0, fail_on=None)) as envs:
        envs.reset(seed=0)
        envs.set_attr("probe", [10, 11, 12, 13, 14])
        assert envs.get_attr("probe") == (10, 11, 12, 13, 14)
        assert envs.call("probe") == (10, 11, 12, 13, 14)  # not callable: read
        assert envs.call("ping", 7) == (7,) * 5
        assert envs.call("ping", value={"a": [1]}) == ({"a": [1]},) * 5
        assert envs.get_attr("inner_id") == ("CartPole-v1",) * 5
        envs.set_attr("probe", "same")  # not a list: every env gets it
        assert envs.get_attr("probe") == ("same",) * 5
        envs.set_attr("probe", (None, 1, None, 1, None))
        assert envs.call("probe") == (None, 1, None, 1, None)
        # a value only dill can send travels both ways
        functions = envs.call("ping", lambda: 42)
        assert [function() for function in functions] == [42] * 5
        with pytest.raises(ValueError, match="expected 5 values"):
            envs.set_attr("probe", [1, 2])
        assert envs.get_attr("probe") == (None, 1, None, 1, None)  # unchanged
        envs.step(np.zeros(5, dtype=np.int64))  # still usable


#: The peers are left out: SB3 can only autoreset in SAME_STEP mode and envpool runs its own C++
#: envs. tests/test_peers.py checks them (SB3 against SyncVectorEnv in SAME_STEP mode). So is
#: ray, an optional extra that is slow to start: tests/test_ray.py checks it on one Ray.
STEPPING_GYMNASIUM_ENVS = [
    name
    for name, info in vecenvs.factory.BACKEND_INFO.items()
    if info.family in ("ours", "gymnasium") and info.extra is None
]


@pytest.mark.parametrize("name", STEPPING_GYMNASIUM_ENVS)
def test_make_vec_builds_every_backend(name):
    kwargs = {"num_workers": 2} if name == "pool" else {}
    envs = vecenvs.make_vec("CartPole-v1", 3, backend=name, **kwargs)
    reference = SyncVectorEnv(env_fns_for("CartPole-v1", 3))
    try:
        assert envs.num_envs == 3
        assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        assert_same(envs.reset(seed=1), reference.reset(seed=1))
        for step in range(60):
            actions = np.array([step % 2, 1, 0])
            assert_same(envs.step(actions), reference.step(actions), f"step {step}")
    finally:
        envs.close()
        reference.close()


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_make_vec_passes_backend_kwargs(start_method):
    with vecenvs.make_vec(
        "vecenvs/DictObs-v0",
        3,
        backend="pool",
        num_workers=2,
        start_method=start_method,
        autoreset_mode="SameStep",
    ) as envs:
        assert isinstance(envs, PoolVecEnv) and envs.start_method == start_method
        assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        envs.reset(seed=0)
    with vecenvs.make_vec("CartPole-v1", 2, backend="subproc", start_method=start_method) as envs:
        assert isinstance(envs, SubprocVecEnv) and len(envs.processes) == 2


def test_backend_params_cover_every_backend_and_start_method():
    ids = {param.id for param in EVERY_BACKEND}
    assert ids == {"multi"} | {
        f"{name}-{method}"
        for name in PROCESS_BACKENDS
        for method in ("fork", "forkserver", "spawn")
    }
    assert Backend("pool", "spawn").in_processes and not Backend("multi").in_processes
