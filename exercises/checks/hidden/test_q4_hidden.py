"""Exercise 4, hidden checks (the grader's only; not in the student release).

Each check draws (from its seed, which the grader derives from the course and the student; the
failure message names it) which step fails, with which kind of exception, and makes errors come
twice in a row: a worker that handles only what the public examples raise, or only once, fails
them.
"""

import gymnasium as gym
from conftest import toolkit
from test_q4_worker_errors import same_observation, start_worker  # noqa: F401  (a fixture)

from exercises.pipe_env import Command


def failing_with(rng, fail_on, at, **options):
    """A CartPole (built over there) that raises as ``toolkit.FailingEnv`` says, and the start of
    its message, ending in a token drawn from ``rng``."""
    token = f"{rng.getrandbits(32):08x}"
    return toolkit.failing_env_fn(fail_on, at, token, **options), token


def test_error_at_a_random_step_of_another_kind(start_worker, seed, rng):  # noqa: F811  (the fixture)
    at, kind = rng.randint(1, 6), rng.choice(("ValueError", "KeyError"))  # the public: RuntimeError
    env_fn, token = failing_with(rng, "step", at, error=kind)
    worker = start_worker(env_fn)
    by_hand = gym.make("CartPole-v1")
    same_observation(worker.works(Command.RESET, 5), by_hand.reset(seed=5)[0], "RESET")
    for number in range(1, at):
        hint = f"step #{number} should work: only step #{at} raises (seed {seed})"
        same_observation(worker.works(Command.STEP, 0, hint), by_hand.step(0)[0], "STEP")
    worker.fails(Command.STEP, 0, token)
    hint = f"after a {kind} in step #{at}, the worker should go on serving (seed {seed})"
    worker.works(Command.STEP, 0, hint)


def test_errors_twice_in_a_row_then_serving_again(start_worker, rng):  # noqa: F811  (the fixture)
    env_fn, token = failing_with(rng, "step", 2, error="ValueError", also=(3,))
    worker = start_worker(env_fn)
    worker.works(Command.RESET, 0, "RESET failed, before any error")
    worker.works(Command.STEP, 1, "step #1 should work: steps #2 and #3 raise")
    worker.fails(Command.STEP, 1, token)
    worker.fails(Command.STEP, 1, token)
    hint = "after two errors in a row the worker should still serve commands; RESET then failed"
    payload = worker.works(Command.RESET, 7, hint)
    same_observation(payload, gym.make("CartPole-v1").reset(seed=7)[0], "RESET")
    assert worker.ask(Command.CLOSE) == (True, None), "CLOSE must be answered with (True, None)"
    alive, _ = worker.join(5.0)
    assert alive is False, "after answering CLOSE the worker must return (end its loop)"
    assert worker.remote.env_was_closed() is True, "after CLOSE the env was not closed"


def test_error_in_a_later_reset(start_worker, rng):  # noqa: F811  (the fixture)
    env_fn, token = failing_with(rng, "reset", 2, error="KeyError")
    worker = start_worker(env_fn)
    worker.works(Command.RESET, 0, "the first RESET should work: only the second raises")
    worker.fails(Command.RESET, 1, token)
    worker.works(Command.RESET, 2, "after an error in RESET, the next RESET should work")
