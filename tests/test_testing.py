"""Tests of the conformance checker: it passes correct vector envs and fails broken ones.

A checker that never fails proves nothing, so most tests here feed it a vector env broken on
purpose (each a small subclass of gymnasium's SyncVectorEnv with one deliberate bug) and check
that the failure message points a student at that bug.
"""

from __future__ import annotations

import functools
import multiprocessing
import threading
import time
import traceback
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ClosedEnvironmentError
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from vecenvs.errors import EnvCrashedError
from vecenvs.testing import (
    DEFAULT_ENV_IDS,
    ConformanceError,
    ConformanceWarning,
    check_api,
    check_close,
    check_error_propagation,
    check_matches_sync,
    check_vector_env,
)

# gymnasium's VectorEnv has no `with` support, which check_api notes as a ConformanceWarning;
# the test of that note checks it explicitly.
pytestmark = pytest.mark.filterwarnings("ignore::vecenvs.testing.ConformanceWarning")

MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)
STEPS = {"CartPole-v1": 300, "Acrobot-v1": 550, "Pendulum-v1": 250, "vecenvs/DictObs-v0": 150}


# --------------------------------------------------------------------------------------------
# Vector envs with one deliberate bug each.
# --------------------------------------------------------------------------------------------


class ForgetsAutoreset(SyncVectorEnv):
    """NEXT_STEP mode without the autoreset: an ended env is stepped again."""

    def step(self, actions):
        result = super().step(actions)
        self._autoreset_envs[:] = False
        return result


class RewardOnResetStep(SyncVectorEnv):
    """Returns reward 1 instead of 0 on the step that autoresets an env."""

    def step(self, actions):
        resetting = self._autoreset_envs.copy()
        observations, rewards, terminations, truncations, infos = super().step(actions)
        rewards[resetting] = 1.0
        return observations, rewards, terminations, truncations, infos


class Float32Rewards(SyncVectorEnv):
    """Returns rewards as float32."""

    def step(self, actions):
        observations, rewards, terminations, truncations, infos = super().step(actions)
        return observations, rewards.astype(np.float32), terminations, truncations, infos


class ObservationsOffByOne(SyncVectorEnv):
    """Gathers step observations one env off: env i gets env i-1's row."""

    def step(self, actions):
        observations, *rest = super().step(actions)
        return (np.roll(observations, 1, axis=0), *rest)


class NoFinalObs(SyncVectorEnv):
    """SAME_STEP mode without infos["final_obs"]."""

    def step(self, actions):
        *rest, infos = super().step(actions)
        infos.pop("final_obs", None)
        infos.pop("_final_obs", None)
        return (*rest, infos)


class StringAutoresetMode(SyncVectorEnv):
    """Stores the autoreset mode in metadata as a string instead of the enum member."""

    def __init__(self, env_fns, **kwargs):
        super().__init__(env_fns, **kwargs)
        self.metadata["autoreset_mode"] = self.autoreset_mode.value


class LeaksAProcess(SyncVectorEnv):
    """Starts a child process and never stops it."""

    #: The last helper process started, so the test can see what became of it.
    last_helper = None

    def __init__(self, env_fns, **kwargs):
        super().__init__(env_fns, **kwargs)
        helper = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
        helper.start()
        LeaksAProcess.last_helper = helper


class HangsOnError(SyncVectorEnv):
    """Waits forever instead of raising when an env's step fails."""

    def step(self, actions):
        try:
            return super().step(actions)
        except RuntimeError:
            threading.Event().wait()  # never set: the caller never hears back


# --------------------------------------------------------------------------------------------
# A correct synchronous backend, to show every check can pass.
# --------------------------------------------------------------------------------------------


class _NamesItsErrors(gym.Wrapper):
    """Re-raises any exception of the wrapped env as EnvCrashedError naming its index."""

    def __init__(self, env: gym.Env, index: int):
        super().__init__(env)
        self.index = index

    def _guard(self, command: str, method, *args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as err:
            raise EnvCrashedError(
                self.index, command, type(err).__name__, str(err), traceback.format_exc()
            ) from err

    def reset(self, **kwargs):
        return self._guard("reset", self.env.reset, **kwargs)

    def step(self, action):
        return self._guard("step", self.env.step, action)

    def get_wrapper_attr(self, name: str) -> Any:
        attribute = super().get_wrapper_attr(name)
        if not callable(attribute):
            return attribute
        return functools.partial(self._guard, f"call {name}", attribute)


def _make_named(env_fn, index: int) -> gym.Env:
    try:
        env = env_fn()
    except Exception as err:
        raise EnvCrashedError(
            index, "make", type(err).__name__, str(err), traceback.format_exc()
        ) from err
    return _NamesItsErrors(env, index)


class CorrectSync(SyncVectorEnv):
    """SyncVectorEnv plus what the checker asks beyond it: named errors, closed errors, `with`."""

    def __init__(self, env_fns, **kwargs):
        named = [functools.partial(_make_named, fn, index) for index, fn in enumerate(env_fns)]
        super().__init__(named, **kwargs)

    def _refuse_if_closed(self):
        if self.closed:
            raise ClosedEnvironmentError("CorrectSync is closed")

    def reset(self, **kwargs):
        self._refuse_if_closed()
        return super().reset(**kwargs)

    def step(self, actions):
        self._refuse_if_closed()
        return super().step(actions)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False


def _failure_text(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value)


# --------------------------------------------------------------------------------------------
# The checker passes correct vector envs.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
@pytest.mark.parametrize("env_id", DEFAULT_ENV_IDS)
def test_sync_vector_env_passes_api_and_matches_itself(env_id, mode):
    check_api(SyncVectorEnv, env_id, autoreset_mode=mode)
    assert check_matches_sync(SyncVectorEnv, env_id, steps=STEPS[env_id], autoreset_mode=mode) == []


def test_sync_vector_env_passes_disabled_autoreset():
    # DISABLED mode is driven with reset(options={"reset_mask": ...}) after each episode end.
    check_matches_sync(
        SyncVectorEnv, "vecenvs/DictObs-v0", steps=100, autoreset_mode=AutoresetMode.DISABLED
    )


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_async_vector_env_matches_sync(mode):
    check_matches_sync(gym.vector.AsyncVectorEnv, "CartPole-v1", autoreset_mode=mode)


def test_a_correct_backend_passes_everything():
    report = check_vector_env(
        CorrectSync, env_ids=("CartPole-v1", "vecenvs/DictObs-v0"), require_context_manager=True
    )
    assert [status for _, status in report] == ["ok"] * len(report)
    names = [name for name, _ in report]
    assert "check_close[CartPole-v1]" in names
    assert "check_error_propagation[call]" in names
    assert "check_matches_sync[vecenvs/DictObs-v0, SameStep]" in names


def test_async_vector_env_closes_cleanly():
    check_close(gym.vector.AsyncVectorEnv)


def test_missing_with_support_is_a_note_unless_required():
    with pytest.warns(ConformanceWarning, match="does not support `with`"):
        notes = check_api(SyncVectorEnv)
    assert len(notes) == 1
    with pytest.raises(ConformanceError, match="__enter__"):
        check_api(SyncVectorEnv, require_context_manager=True)


def test_too_few_steps_is_reported_as_a_bad_argument():
    # Pendulum episodes are 200 steps long, so 50 steps never see one end.
    with pytest.raises(ValueError, match="steps=50 is too small"):
        check_matches_sync(SyncVectorEnv, "Pendulum-v1", steps=50)


# --------------------------------------------------------------------------------------------
# The checker fails broken vector envs, with a message that names the bug.
# --------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore")  # CartPole warns about being stepped after termination
def test_forgotten_autoreset_fails():
    with pytest.raises(ConformanceError) as excinfo:
        check_matches_sync(ForgetsAutoreset, "CartPole-v1")
    text = _failure_text(excinfo)
    assert "ended on the previous step" in text
    assert "NEXT_STEP mode the step after termination" in text


def test_reward_on_the_reset_step_fails():
    with pytest.raises(ConformanceError) as excinfo:
        check_matches_sync(RewardOnResetStep, "CartPole-v1")
    text = _failure_text(excinfo)
    assert "rewards" in text and "reward 0" in text
    assert "expected: 0.0" in text and "got:      1.0" in text


def test_float32_rewards_fail_both_checks():
    with pytest.raises(ConformanceError) as excinfo:
        check_api(Float32Rewards)
    assert "rewards" in _failure_text(excinfo) and "float32" in _failure_text(excinfo)
    with pytest.raises(ConformanceError) as excinfo:
        check_matches_sync(Float32Rewards, "CartPole-v1")
    text = _failure_text(excinfo)
    assert "dtype differs" in text and "float64" in text and "float32" in text


def test_observations_off_by_one_env_fail():
    with pytest.raises(ConformanceError) as excinfo:
        check_matches_sync(ObservationsOffByOne, "CartPole-v1", num_envs=4)
    text = _failure_text(excinfo)
    assert "step 1 " in text
    assert "observations" in text
    assert "env 0's result is what env 3 should have returned" in text


def test_missing_final_obs_fails_in_same_step_mode():
    with pytest.raises(ConformanceError) as excinfo:
        check_matches_sync(NoFinalObs, "CartPole-v1", autoreset_mode=AutoresetMode.SAME_STEP)
    text = _failure_text(excinfo)
    assert "missing key(s) ['final_obs', '_final_obs']" in text
    assert "SAME_STEP" in text


def test_autoreset_mode_stored_as_string_fails():
    with pytest.raises(ConformanceError, match="AutoresetMode member, not its string"):
        check_api(StringAutoresetMode)


def test_sync_vector_env_keeps_working_after_close():
    with pytest.raises(ConformanceError) as excinfo:
        check_close(SyncVectorEnv)
    text = _failure_text(excinfo)
    assert "reset() after close() must raise" in text
    assert "ClosedEnvironmentError" in text


def test_a_leaked_child_process_fails_and_is_cleaned_up():
    with pytest.raises(ConformanceError) as excinfo:
        check_close(LeaksAProcess, child_exit_timeout=0.5)
    text = _failure_text(excinfo)
    assert "1 still running" in text and "terminated them" in text
    helper = LeaksAProcess.last_helper
    helper.join(timeout=5)
    assert helper.exitcode is not None  # the checker terminated it


@pytest.mark.parametrize("phase", ["make", "reset", "step", "call"])
def test_sync_vector_env_errors_do_not_name_the_env(phase):
    with pytest.raises(ConformanceError) as excinfo:
        check_error_propagation(SyncVectorEnv, phase)
    text = _failure_text(excinfo)
    assert "must say which env failed" in text
    assert "err.env_index == 1" in text
    # SyncVectorEnv passes the env's own exception through, so its message is not missing.
    assert "must carry the env's own message" not in text


def test_a_hanging_backend_fails_within_the_timeout():
    started = time.monotonic()
    with pytest.raises(ConformanceError, match="the backend hangs"):
        check_error_propagation(HangsOnError, "step", timeout=1)
    assert time.monotonic() - started < 10


def test_check_vector_env_lists_every_failure():
    with pytest.raises(ConformanceError) as excinfo:
        check_vector_env(
            SyncVectorEnv, env_ids=("CartPole-v1",), autoreset_modes=(AutoresetMode.NEXT_STEP,)
        )
    error = excinfo.value
    assert isinstance(error, AssertionError)
    assert error.passed == 2  # check_api and check_matches_sync
    assert [failure.check for failure in error.failures] == [
        "check_close[CartPole-v1]",
        "check_error_propagation[make]",
        "check_error_propagation[reset]",
        "check_error_propagation[step]",
        "check_error_propagation[call]",
    ]
    assert str(error).startswith("5 conformance check(s) failed (2 passed)")
