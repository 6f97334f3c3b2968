"""Exercise 3, hidden checks (the grader's only; not in the student release).

Each check draws (from its seed, which the grader derives from the course and the student; the
failure message names it) how many envs there are, which of them hang and which one fails, and
makes the answers arrive in reverse order: a ``step_wait`` written for the public examples'
positions fails them.
"""

import functools
import time

import gymnasium as gym
from conftest import expect_error, toolkit
from test_q3_step_wait import (  # noqa: F401  (by_hand and make_envs are fixtures)
    COSTLY,
    OBS_SIZE,
    by_hand,
    faulty_env_fns_at_here,
    make_envs,
    same_as_by_hand,
    step,
)

import vecenvs  # noqa: F401  (registers the envs)
from vecenvs.envs import faulty_env_fns


def test_several_hung_workers_at_random_positions(make_envs, by_hand, seed, rng):  # noqa: F811  (the fixtures imported above)
    num_envs, hung = 4, [0, 2]
    while hung == [0, 2]:  # any positions but the public example's
        num_envs = rng.randint(3, 6)
        hung = sorted(rng.sample(range(num_envs), rng.randint(2, num_envs - 1)))
    # At least 1 s: a correct step_wait has a whole timeout of slack under load (see the
    # public check), one that waits per silent pipe needs two.
    timeout = round(rng.uniform(1.0, 1.5), 2)
    faulty = {"fail_on": "step", "at": 2, "how": "hang"}
    envs = make_envs(toolkit.faulty_env_fns_at(num_envs, hung, **faulty))
    reference = by_hand(faulty_env_fns_at_here(num_envs, hung, **faulty))
    envs.reset(seed=0)
    actions = [1] * num_envs
    same_as_by_hand(step(envs, actions), reference.step(actions), f"step 1 (seed {seed})")
    envs.step_async(actions)
    start = time.perf_counter()
    hint = f"envs {hung} of {num_envs} never answered (seed {seed}): expected WorkerTimeout"
    error = expect_error("WorkerTimeout", hint, envs.step_wait, timeout=timeout, seconds=5.0)
    waited = time.perf_counter() - start
    indices = error.attributes.get("env_indices")
    assert isinstance(indices, list) and sorted(indices) == hung, (
        f"WorkerTimeout names envs {indices!r}; envs {hung} of {num_envs} hung (seed {seed})"
    )
    assert timeout <= waited < 2 * timeout, (
        f"step_wait gave up after {waited:.2f} s on {len(hung)} silent workers with a {timeout} s "
        f"deadline (seed {seed}): one deadline for all of them"
    )


def test_answers_arriving_in_reverse_order_come_back_in_env_order(make_envs, by_hand, rng):  # noqa: F811  (the fixtures imported above)
    num_envs = rng.randint(3, 5)
    # The last env answers first, the first last.
    delays = [0.02 * (num_envs - index) for index in range(num_envs)]
    kwargs = [
        {"obs_size": OBS_SIZE, "episode_steps": 5, "step_seconds": delay, "cost_kind": "sleep"}
        for delay in delays
    ]
    envs = make_envs(toolkit.env_fns_each(COSTLY, kwargs))
    reference = by_hand([functools.partial(gym.make, COSTLY, **each) for each in kwargs], seed=3)
    envs.reset(seed=3)
    for step_number in range(8):
        actions = [rng.randint(0, 1) for _ in range(num_envs)]
        same_as_by_hand(
            step(envs, actions), reference.step(actions), f"step {step_number + 1}, last env first"
        )


def test_an_error_in_a_random_env(make_envs, by_hand, seed, rng):  # noqa: F811  (the fixtures imported above)
    num_envs = rng.randint(3, 6)
    bad_index = rng.choice([index for index in range(num_envs) if index != 1])  # not the public one
    faulty = {"bad_index": bad_index, "fail_on": "step", "at": 2}
    envs = make_envs(
        toolkit.scripted_failure_fns(num_envs, bad_index, at=2), worker=toolkit.scripted_worker
    )
    reference = by_hand(faulty_env_fns(num_envs, **faulty))
    envs.reset(seed=0)
    actions = [0] * num_envs
    same_as_by_hand(step(envs, actions), reference.step(actions), f"step 1 (seed {seed})")
    envs.step_async(actions)
    error = expect_error(
        "WorkerError", f"env {bad_index} of {num_envs} failed (seed {seed})", envs.step_wait
    )
    assert error.attributes.get("env_index") == bad_index, (
        f"WorkerError names env {error.attributes.get('env_index')!r}; env {bad_index} of "
        f"{num_envs} failed (seed {seed})"
    )
    assert envs.waiting is False, "after step_wait raised, self.waiting must be False again"
