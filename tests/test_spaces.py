"""The conformance matrix: every gymnasium space type, in every backend, against SyncVectorEnv.

Each space of :data:`vecenvs.envs.spaces.SPACES` (every space type gymnasium has, and one of our
own) is run as the observation space, and as the action space, of ``vecenvs/Spaces-v0``, in
every backend, with shared memory on and off, in both autoreset modes: observations, rewards,
flags and infos must be exactly SyncVectorEnv's, and every env must receive its actions exactly
as given (same type, dtype and value: :attr:`SpacesEnv.actions_seen`). A backend with shared
memory may refuse, when it is built, an observation space shared memory cannot hold (Graph,
Sequence, a Space of one's own), with gymnasium's error; it may not take it and return
something else.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import vecenvs
from vecenvs.envs.spaces import SPACES
from vecenvs.testing.spaces import SHARED_MEMORY_CANNOT_HOLD, check_spaces, shared_memory_can_hold

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

#: name -> (builder, whether it lays observations out in shared memory)
MATRIX_BACKENDS = {
    "multi": (vecenvs.MultiEnv, False),
    "subproc": (vecenvs.SubprocVecEnv, False),
    "pool-shm": (functools.partial(vecenvs.PoolVecEnv, num_workers=2, step_in_caller=False), True),
    "pool-caller-shm": (functools.partial(vecenvs.PoolVecEnv, num_workers=2), True),
    "pool-pipes": (
        functools.partial(vecenvs.PoolVecEnv, num_workers=2, shared_memory=False),
        False,
    ),
    "async-pool-shm": (functools.partial(vecenvs.AsyncPoolVecEnv, num_workers=2), True),
    "async-pool-pipes": (
        functools.partial(vecenvs.AsyncPoolVecEnv, num_workers=2, shared_memory=False),
        False,
    ),
}
MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


#: (backend, mode): every backend in NEXT_STEP mode; SAME_STEP (which adds final_obs and
#: final_info to the infos) in one backend of each way of moving the results.
MATRIX = [(backend, AutoresetMode.NEXT_STEP) for backend in MATRIX_BACKENDS] + [
    (backend, AutoresetMode.SAME_STEP)
    for backend in ("multi", "subproc", "pool-caller-shm", "async-pool-pipes")
]


@pytest.mark.parametrize(("backend", "mode"), MATRIX, ids=[f"{b}-{m.value}" for b, m in MATRIX])
@pytest.mark.parametrize("space", list(SPACES))
def test_every_space_as_observation_and_action(space, backend, mode):
    build, shared = MATRIX_BACKENDS[backend]
    observation = space
    if shared and space in SHARED_MEMORY_CANNOT_HOLD:
        # Refused when built, with gymnasium's error (and only those: see the assertion below);
        # then the space is still checked as the action space, beside a Box observation.
        assert check_spaces(build, space, "discrete", steps=1, may_refuse=True)
        observation = "box"
    assert (
        check_spaces(build, observation, space, steps=30, autoreset_mode=mode, may_refuse=shared)
        == []
    )


def _as_float64(actions):
    return (
        actions.astype(np.float64)
        if isinstance(actions, np.ndarray) and actions.dtype.kind == "f"
        else actions
    )


def _as_lists(actions):
    if isinstance(actions, dict):
        return {key: _as_lists(value) for key, value in actions.items()}
    if isinstance(actions, tuple):
        return tuple(_as_lists(part) for part in actions)
    return actions.tolist() if isinstance(actions, np.ndarray) else actions


@pytest.mark.parametrize("form", [_as_float64, _as_lists], ids=["float64", "lists"])
@pytest.mark.parametrize(
    "backend", ["multi", "subproc", "pool-caller-shm", "pool-pipes", "async-pool-shm"]
)
@pytest.mark.parametrize(
    "space", ["box", "box-int", "box-bool", "discrete", "multi-binary", "dict", "tuple"]
)
def test_actions_reach_the_envs_exactly_as_given(space, backend, form):
    # float64 actions for a float32 Box must not be cast to float32 on the way (the shared
    # memory of the pool holds the space's dtype: those travel pickled instead); a Python list
    # must arrive as Python numbers, as SyncVectorEnv hands them on.
    build, shared = MATRIX_BACKENDS[backend]
    assert (
        check_spaces(build, "box", space, steps=15, may_refuse=shared, transform_actions=form) == []
    )


@pytest.mark.parametrize("backend", ["multi", "pool-caller-shm", "pool-pipes"])
@pytest.mark.parametrize("space", ["graph", "text", "one-of", "dict"])
def test_autoreset_disabled(space, backend):
    build, shared = MATRIX_BACKENDS[backend]
    check_spaces(build, space, "discrete", autoreset_mode=AutoresetMode.DISABLED, may_refuse=shared)


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
@pytest.mark.parametrize("backend", ["subproc", "pool-shm", "pool-pipes"])
def test_other_start_methods(backend, start_method):
    build, shared = MATRIX_BACKENDS[backend]
    build = functools.partial(build, start_method=start_method)
    for observation, action in (("one-of", "text"), ("graph" if not shared else "dict", "custom")):
        check_spaces(build, observation, action, steps=20, may_refuse=shared)


def test_the_catalogue_has_every_gymnasium_space_type():
    from gymnasium import spaces

    types = {type(SPACES[name]()) for name in SPACES}
    every = {
        spaces.Box,
        spaces.Discrete,
        spaces.MultiDiscrete,
        spaces.MultiBinary,
        spaces.Text,
        spaces.Dict,
        spaces.Tuple,
        spaces.Sequence,
        spaces.Graph,
        spaces.OneOf,
    }
    assert every <= types
    assert any(
        not type(space).__module__.startswith("gymnasium")
        for space in map(lambda name: SPACES[name](), SPACES)
    )
    assert [name for name in SPACES if not shared_memory_can_hold(name)] == list(
        SHARED_MEMORY_CANNOT_HOLD
    )


def test_shared_memory_refuses_with_gymnasiums_own_errors():
    # The same types and words as gymnasium's AsyncVectorEnv(shared_memory=True).
    from vecenvs.factory import env_fns_for

    with pytest.raises(
        TypeError, match="has a dynamic shape so its not possible to make a static shared memory"
    ):
        vecenvs.PoolVecEnv(env_fns_for("vecenvs/Spaces-v0", 2, observation="graph"), num_workers=2)
    with pytest.raises(ValueError, match="shared_memory=False"):
        vecenvs.PoolVecEnv(env_fns_for("vecenvs/Spaces-v0", 2, observation="custom"), num_workers=2)


def test_sync_vector_env_itself_passes_the_matrix():
    # The checker is right about the reference (a check that fails gymnasium's own class would
    # say nothing about ours).
    for space in ("graph", "text", "one-of", "custom"):
        assert check_spaces(SyncVectorEnv, space, space) == []
