"""Exercise 3: ``step_wait`` of the pipe-based vector env (``q3_step_wait.py``)."""

import time
import traceback

import gymnasium as gym
import numpy as np
import pytest
from conftest import attribute, call, load

import vecenvs  # noqa: F401  (registers vecenvs/Costly-v0 and vecenvs/Faulty-v0)
from exercises.pipe_env import Command, WorkerError, WorkerTimeout
from vecenvs.envs import faulty_env_fns

NUM_ENVS = 3
OBS_SIZE = 5


def costly(**kwargs):
    """A factory for the teaching env; short episodes, so that envs reset during the checks."""
    return lambda: gym.make("vecenvs/Costly-v0", obs_size=OBS_SIZE, episode_steps=7, **kwargs)


def answering_worker(pipe, env_fn):
    """A worker that sends env errors back as ``(False, traceback)`` (exercise 4 writes one)."""
    env = env_fn()
    try:
        while True:
            command, data = pipe.recv()
            if command is Command.CLOSE:
                pipe.send((True, None))
                return
            try:
                if command is Command.RESET:
                    reply = env.reset(seed=data)
                else:
                    observation, reward, terminated, truncated, info = env.step(data)
                    if terminated or truncated:
                        observation, _ = env.reset()
                    reply = observation, reward, terminated, truncated, info
                pipe.send((True, reply))
            except Exception:  # noqa: BLE001 - every env error goes back to the parent
                pipe.send((False, traceback.format_exc()))
    except EOFError:
        pass
    finally:
        env.close()


@pytest.fixture
def make_envs(submission):
    """Builds the student's vector env; every one built is closed after the check."""
    env_class = attribute(load(submission, "q3_step_wait.py"), "MyPipeVecEnv")
    built = []

    def build(env_fns, **kwargs):
        envs = env_class(env_fns, **kwargs)
        built.append(envs)
        return envs

    yield build
    for envs in built:
        envs.close()


def step(envs, actions, seconds=10.0, **kwargs):
    envs.step_async(actions)
    return call(envs.step_wait, seconds=seconds, **kwargs)


def test_returns_batched_arrays(make_envs):
    envs = make_envs([costly(step_seconds=0)] * NUM_ENVS)
    envs.reset(seed=0)
    result = step(envs, [0, 1, 0])
    assert isinstance(result, tuple) and len(result) == 5, (
        "step_wait must return a tuple of 5: (observations, rewards, terminations, truncations, infos)")
    observations, rewards, terminations, truncations, infos = result
    expected = [("observations", observations, (NUM_ENVS, OBS_SIZE), np.float32),
                ("rewards", rewards, (NUM_ENVS,), np.float64),
                ("terminations", terminations, (NUM_ENVS,), np.bool_),
                ("truncations", truncations, (NUM_ENVS,), np.bool_)]
    for name, value, shape, dtype in expected:
        assert isinstance(value, np.ndarray), (
            f"{name} is a {type(value).__name__}: expected a numpy array (np.stack / np.array)")
        assert value.shape == shape, (
            f"{name} has shape {value.shape}: expected {shape}, one row per env in env order "
            "(stack the envs' results along a new first axis)")
        assert value.dtype == dtype, f"{name} has dtype {value.dtype}: expected {np.dtype(dtype)}"
    assert isinstance(infos, (list, tuple)) and len(infos) == NUM_ENVS, (
        f"infos should be a list of {NUM_ENVS} dicts, one per env; got {type(infos).__name__}")


def test_same_results_as_stepping_the_envs_by_hand(make_envs):
    envs = make_envs([costly(step_seconds=0)] * NUM_ENVS)
    reference = [costly(step_seconds=0)() for _ in range(NUM_ENVS)]
    envs.reset(seed=7)
    for index, env in enumerate(reference):
        env.reset(seed=7 + index)
    rng = np.random.default_rng(0)
    for step_number in range(20):  # three episode ends, so the workers' autoreset is in there
        actions = rng.integers(0, 2, NUM_ENVS).tolist()
        observations, rewards, terminations, _, _ = step(envs, actions)
        for index, (env, action) in enumerate(zip(reference, actions)):
            observation, reward, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                observation, _ = env.reset()
            assert np.array_equal(observations[index], observation) and rewards[index] == reward, (
                f"step {step_number + 1}, env {index}: your results differ from stepping env {index} "
                "by hand. Are the answers in env order (the order of self.parent_pipes), whatever "
                "order they arrived in?")
            assert terminations[index] == terminated
    for env in reference:
        env.close()


def test_steps_the_envs_in_parallel(make_envs):
    """Sleeping envs: stepping them in parallel pays off on any number of cores."""
    num_envs, steps, seconds = 4, 4, 0.05
    env_fn = costly(step_seconds=seconds, cost_kind="sleep")
    by_hand = [env_fn() for _ in range(num_envs)]
    for env in by_hand:
        env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        for env in by_hand:
            env.step(0)
    sequential = time.perf_counter() - start
    for env in by_hand:
        env.close()

    envs = make_envs([env_fn] * num_envs)
    envs.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        step(envs, [0] * num_envs)
    parallel = time.perf_counter() - start
    assert parallel < 0.6 * sequential, (
        f"{num_envs} envs that each sleep {seconds} s per step took {parallel:.2f} s for {steps} steps, "
        f"stepping them one after the other here took {sequential:.2f} s: in parallel it should take "
        "about 1/4 of that. Does step_wait wait for one worker before even looking at the next, "
        "or send anything to the workers? (step_async already sent the actions)")


def test_env_error_arrives_as_worker_error_with_its_traceback(make_envs):
    envs = make_envs(faulty_env_fns(NUM_ENVS, bad_index=1, fail_on="step", at=2), worker=answering_worker)
    envs.reset(seed=0)
    step(envs, [0] * NUM_ENVS)
    envs.step_async([0] * NUM_ENVS)
    try:
        call(envs.step_wait, seconds=10.0)
    except WorkerError as error:
        assert error.env_index == 1, (
            f"WorkerError names env {error.env_index}: the env that failed is env 1 (the index of its pipe)")
        assert "deliberate failure in step" in str(error), (
            "the WorkerError should carry the worker's traceback text (the payload of its (False, text) reply)")
    except pytest.fail.Exception:
        raise
    except Exception as error:  # noqa: BLE001 - the wrong error: say which
        pytest.fail(f"env 1 failed, and step_wait raised {type(error).__name__}: {error}. Expected "
                    "WorkerError(env_index, payload) for a (False, payload) reply", pytrace=False)
    else:
        pytest.fail("env 1 replied (False, traceback) but step_wait returned normally: check ok "
                    "in each (ok, payload) reply and raise WorkerError", pytrace=False)
    assert not envs.waiting, "after step_wait (even one that raised), self.waiting must be False again"


def test_hung_worker_ends_in_worker_timeout(make_envs):
    envs = make_envs(faulty_env_fns(NUM_ENVS, bad_index=2, fail_on="step", at=1, how="hang"))
    envs.reset(seed=0)
    envs.step_async([0] * NUM_ENVS)
    start = time.perf_counter()
    try:
        call(envs.step_wait, timeout=0.5, seconds=8.0)
    except WorkerTimeout as error:
        assert list(error.env_indices) == [2], (
            f"WorkerTimeout names envs {list(error.env_indices)}: only env 2 hung, the others answered")
        assert time.perf_counter() - start < 5.0, "the deadline was 0.5 s; step_wait gave up much later"
    except pytest.fail.Exception:
        raise
    except Exception as error:  # noqa: BLE001 - the wrong error: say which
        pytest.fail(f"env 2 hung and step_wait raised {type(error).__name__}: {error}. Expected "
                    "WorkerTimeout([2], timeout)", pytrace=False)
    else:
        pytest.fail("env 2 never answered, but step_wait returned", pytrace=False)
