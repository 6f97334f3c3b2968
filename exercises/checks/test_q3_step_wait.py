"""Exercise 3: ``step_wait`` of the pipe-based vector env (``q3_step_wait.py``).

The student's vector env lives in the student's process, with its workers; these checks step it
from here and compare every answer with the same envs stepped here, one after the other.
"""

import contextlib
import functools
import time

import gymnasium as gym
import numpy as np
import pytest
from conftest import RemoteObject, StudentCodeFailed, call, expect_error, fail, toolkit, type_name
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import vecenvs  # noqa: F401  (registers vecenvs/Costly-v0 and vecenvs/Faulty-v0)
from vecenvs.envs import FaultyEnv, faulty_env_fns

NUM_ENVS = 3
OBS_SIZE = 5
COSTLY = "vecenvs/Costly-v0"


def costly(num_envs, **kwargs):
    """The teaching env, with short episodes so that envs reset during the checks: factories for
    the student's vector env (built in the student's process), and the same factories here."""
    kwargs = {"obs_size": OBS_SIZE, "episode_steps": 7, **kwargs}
    here = [functools.partial(gym.make, COSTLY, **kwargs)] * num_envs
    return toolkit.env_fns(COSTLY, num_envs, **kwargs), here


@pytest.fixture
def by_hand():
    """Builds the same envs here, stepped one after the other as the workers do: gymnasium's
    SyncVectorEnv, which (``SAME_STEP``) resets an env in the step that ends its episode. Every
    one built is closed after the check."""
    built = []

    def build(env_fns, seed=0):
        built.append(SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP))
        built[-1].reset(seed=seed)  # env i gets seed + i, as the student's vector env does
        return built[-1]

    yield build
    for envs in built:
        envs.close()


@pytest.fixture
def make_envs(student):
    """Builds the student's vector env (in the student's process); every one built is closed
    after the check."""
    env_class = student.module("q3_step_wait.py").get("MyPipeVecEnv")
    built = []

    def build(env_fns, **kwargs):
        envs = call(env_class, env_fns, **kwargs)
        if not isinstance(envs, RemoteObject):
            fail(
                f"MyPipeVecEnv(...) gave {type_name(envs)}: expected a vector env; is "
                "MyPipeVecEnv still a class, subclassing PipeVecEnv?"
            )
        built.append(envs)
        return envs

    yield build
    # Workers first (a hung one would make close() wait for it), then what the env holds.
    student.clean_up()
    for envs in built:
        with contextlib.suppress(StudentCodeFailed):  # its process may be gone already
            envs.close()


def step(envs, actions, seconds=10.0, **kwargs):
    envs.step_async(actions)
    return call(envs.step_wait, seconds=seconds, **kwargs)


def five(result):
    assert isinstance(result, tuple) and len(result) == 5, (
        "step_wait must return a tuple of 5: (observations, rewards, terminations, truncations, infos)"
    )
    return result


def same_as_by_hand(result, expected, when):
    """Fails unless ``result`` (what step_wait returned) holds the by-hand results, in env order."""
    observations, rewards, terminations, truncations, _ = five(result)
    for index, (observation, reward, terminated, truncated) in enumerate(zip(*expected[:4])):
        try:
            same = (
                np.array_equal(np.asarray(observations[index]), observation)
                and rewards[index] == reward
                and terminations[index] == terminated
                and truncations[index] == truncated
            )
        except (TypeError, IndexError, ValueError, KeyError):
            same = False
        assert same, (
            f"{when}, env {index}: your results differ from stepping env {index} by hand. Are the "
            "answers in env order (the order of self.parent_pipes), whatever order they arrived in?"
        )


def test_returns_batched_arrays(make_envs, by_hand):
    there, here = costly(NUM_ENVS, step_seconds=0)
    envs, reference = make_envs(there), by_hand(here)
    envs.reset(seed=0)
    result = step(envs, [0, 1, 0])
    observations, rewards, terminations, truncations, infos = five(result)
    expected = [
        ("observations", observations, (NUM_ENVS, OBS_SIZE), np.float32),
        ("rewards", rewards, (NUM_ENVS,), np.float64),
        ("terminations", terminations, (NUM_ENVS,), np.bool_),
        ("truncations", truncations, (NUM_ENVS,), np.bool_),
    ]
    for name, value, shape, dtype in expected:
        assert isinstance(value, np.ndarray), (
            f"{name} is a {type_name(value)}: expected a numpy array (np.stack / np.array)"
        )
        assert value.shape == shape, (
            f"{name} has shape {value.shape}: expected {shape}, one row per env in env order "
            "(stack the envs' results along a new first axis)"
        )
        assert value.dtype == dtype, f"{name} has dtype {value.dtype}: expected {np.dtype(dtype)}"
    assert isinstance(infos, (list, tuple)) and len(infos) == NUM_ENVS, (
        f"infos should be a list of {NUM_ENVS} dicts, one per env; got {type_name(infos)}"
    )
    # The right shapes filled with the wrong numbers are not a step.
    same_as_by_hand(result, reference.step([0, 1, 0]), "step 1")


def test_same_results_as_stepping_the_envs_by_hand(make_envs, by_hand):
    there, here = costly(NUM_ENVS, step_seconds=0)
    envs, reference = make_envs(there), by_hand(here, seed=7)
    envs.reset(seed=7)
    rng = np.random.default_rng(0)
    for step_number in range(20):  # three episode ends, so the workers' autoreset is in there
        actions = rng.integers(0, 2, NUM_ENVS).tolist()
        same_as_by_hand(step(envs, actions), reference.step(actions), f"step {step_number + 1}")


def test_steps_the_envs_in_parallel(make_envs, by_hand):
    """Sleeping envs: one after the other, 4 envs x 3 steps x 0.2 s take at least 2.4 s however
    busy the machine is (a sleep never ends early); in parallel about 0.6 s. The bound, 3/4 of
    the 2.4 s, leaves a correct step_wait 1.2 s of slack for a loaded machine's delays, and
    still fails one that waits for the envs one at a time."""
    num_envs, steps, seconds = 4, 3, 0.2
    there, _ = costly(num_envs, step_seconds=seconds, cost_kind="sleep")
    _, here = costly(num_envs, step_seconds=0)  # the same results (fixed costs draw nothing)
    reference = by_hand(here)
    expected = [reference.step([0] * num_envs) for _ in range(steps)]
    one_by_one = num_envs * steps * seconds  # the least stepping them in turn can take

    envs = make_envs(there)
    envs.reset(seed=0)
    start = time.perf_counter()
    results = [step(envs, [0] * num_envs) for _ in range(steps)]
    parallel = time.perf_counter() - start
    for step_number, (result, want) in enumerate(zip(results, expected)):
        same_as_by_hand(result, want, f"step {step_number + 1}")  # fast and right, not just fast
    assert parallel < 0.75 * one_by_one, (
        f"{num_envs} envs that each sleep {seconds} s per step took {parallel:.2f} s for {steps} "
        f"steps; one after the other they take at least {one_by_one:.1f} s, in parallel about "
        f"{steps * seconds:.1f} s. step_async has already sent every action, so the workers are "
        "all stepping while step_wait waits: does step_wait sleep between looks at the pipes, "
        "or wait for each worker to finish before the next starts?"
    )


def step_until_env_fails(make_envs, by_hand, faulty, what):
    """Envs whose env ``faulty["bad_index"]`` fails at step ``faulty["at"]`` (2): checks step 1,
    then sends the actions of step 2 (the check then waits for it). The workers are
    ``toolkit.scripted_worker``, whose reply for the failing step is ``(False, text)``."""
    failing = toolkit.scripted_failure_fns(NUM_ENVS, faulty["bad_index"], faulty["at"])
    envs = make_envs(failing, worker=toolkit.scripted_worker)
    reference = by_hand(faulty_env_fns(NUM_ENVS, **faulty))
    envs.reset(seed=0)
    actions = [0] * NUM_ENVS
    before = f"step 1 (before env {faulty['bad_index']} {what})"
    same_as_by_hand(step(envs, actions), reference.step(actions), before)
    envs.step_async(actions)
    return envs


def test_env_error_arrives_as_worker_error_with_its_traceback(make_envs, by_hand):
    faulty = {"bad_index": 1, "fail_on": "step", "at": 2}
    envs = step_until_env_fails(make_envs, by_hand, faulty, "fails")
    error = expect_error(
        "WorkerError",
        "env 1 replied (False, traceback): step_wait should check ok in each (ok, payload) reply "
        "and raise WorkerError(env_index, payload)",
        envs.step_wait,
    )
    assert error.attributes.get("env_index") == 1, (
        f"WorkerError names env {error.attributes.get('env_index')!r}: the env that failed is env 1 "
        "(the index of its pipe)"
    )
    assert "deliberate failure in step" in error.message, (
        "the WorkerError should carry the worker's traceback text (the payload of its (False, text) reply)"
    )
    assert envs.waiting is False, (
        "after step_wait (even one that raised), self.waiting must be False again"
    )


def test_hung_workers_end_in_one_worker_timeout(make_envs, by_hand):
    """Two of four workers hang, the first and the third: the deadline is for all of them
    together, so waiting for each silent pipe in turn takes twice too long. The bound counts
    deadlines: fewer than two passed. A correct step_wait has a whole ``timeout`` (1.5 s) of
    slack for a loaded machine's delays; one that waits per pipe needs two and fails."""
    num_envs, hung, timeout = 4, [0, 2], 1.5
    envs = make_envs(toolkit.faulty_env_fns_at(num_envs, hung, fail_on="step", at=2, how="hang"))
    reference = by_hand(faulty_env_fns_at_here(num_envs, hung, fail_on="step", at=2, how="hang"))
    envs.reset(seed=0)
    actions = [0] * num_envs
    same_as_by_hand(
        step(envs, actions), reference.step(actions), "step 1 (before envs 0 and 2 hang)"
    )
    envs.step_async(actions)
    start = time.perf_counter()
    hint = (
        f"envs {hung} never answered: step_wait should raise WorkerTimeout({hung}, timeout) at its "
        "deadline"
    )
    error = expect_error("WorkerTimeout", hint, envs.step_wait, timeout=timeout, seconds=5.0)
    waited = time.perf_counter() - start
    indices = error.attributes.get("env_indices")
    assert isinstance(indices, list) and sorted(indices) == hung, (
        f"WorkerTimeout names envs {indices!r}: envs {hung} hung, the others answered"
    )
    assert waited >= timeout, (
        f"step_wait gave up after {waited:.2f} s, before its {timeout} s deadline: wait for the "
        "silent workers until the deadline"
    )
    # Waiting for each silent pipe in turn takes at least 2 x timeout, whatever the load.
    assert waited < 2 * timeout, (
        f"step_wait took {waited:.2f} s to give up on 2 silent workers with a {timeout} s deadline: "
        "the deadline is for all the workers together (one deadline, then wait only for the "
        f"time left), not {timeout} s for each silent pipe in turn"
    )


def faulty_env_fns_at_here(num_envs, bad_indices, **faulty_kwargs):
    """The same envs as ``toolkit.faulty_env_fns_at``, built here."""
    good = functools.partial(FaultyEnv, fail_on=None)
    bad = functools.partial(FaultyEnv, **faulty_kwargs)
    return [bad if index in bad_indices else good for index in range(num_envs)]
