"""Exercise 4: a worker that reports its env's errors (``q4_worker_errors.py``).

The student's worker runs in a process forked in the student's process; these checks talk to it
over a pipe, as its parent would, through ``toolkit.WorkerUnderTest`` (which runs over there),
and compare its answers with the same env stepped here.
"""

import contextlib

import gymnasium as gym
import numpy as np
import pytest
from conftest import StudentCodeFailed, call, fail, toolkit

from exercises.pipe_env import Command

ANSWER_SECONDS = 5.0


class Worker:
    """The student's worker, in a forked process over there, and what it answers."""

    def __init__(self, student, worker_function, env_fn):
        self.remote = student.build(toolkit.WorkerUnderTest(worker_function, env_fn))

    def ask(self, command, data=None):
        """Sends one command; returns the ``(ok, payload)`` reply, or fails the check with why not."""
        outcome = call(
            self.remote.ask, command.name, data, ANSWER_SECONDS, seconds=ANSWER_SECONDS + 10
        )
        if not isinstance(outcome, dict) or not ({"reply", "dead", "silent"} & set(outcome)):
            fail(f"the harness could not tell what the worker did ({outcome!r:.80})")
        if "dead" in outcome:
            fail(
                f"the worker process died while {outcome.get('doing')} (exit code {outcome['dead']}), "
                "without sending (False, traceback). Catch the exception around each command "
                "and send (False, traceback.format_exc()). (Exit code 1 at the first command "
                "often means careful_worker still raises NotImplementedError.)"
            )
        if "silent" in outcome:
            fail(
                f"the worker did not answer {command.name} within {ANSWER_SECONDS:g} s: is "
                "it stuck, or did it skip pipe.send for this command?"
            )
        reply = outcome["reply"]
        assert isinstance(reply, tuple) and len(reply) == 2 and isinstance(reply[0], bool), (
            f"the worker answered {command.name} with {reply!r:.80}: every reply must be (ok, payload)"
        )
        return reply

    def works(self, command, data=None, hint=""):
        """:meth:`ask`, whose reply must say ok; returns its payload."""
        ok, payload = self.ask(command, data)
        assert ok, f"{hint or command.name + ' failed'}:\n{payload}"
        return payload

    def fails(self, command, data, message):
        """:meth:`ask` when the env raises: the reply must be ``(False, its traceback)``."""
        ok, payload = self.ask(command, data)
        name = command.name.lower()
        assert not ok, (
            f"the env raised in {name}, but the reply says ok=True: expected (False, traceback)"
        )
        assert isinstance(payload, str) and "Traceback (most recent call last)" in payload, (
            f"after the env raised in {name}, the payload should be the traceback text from "
            f"traceback.format_exc(), got {payload!r:.120}"
        )
        assert message in payload, (
            "the traceback should end with the env's own error message (format_exc inside the except block)"
        )

    def join(self, seconds):
        """Waits for the worker process to end; returns ``(alive, exit code)``."""
        state = call(self.remote.join, seconds, seconds=seconds + 10)
        return state.get("alive"), state.get("exitcode")


@pytest.fixture
def start_worker(student):
    # (One the course ships, imported or wrapped, is refused: conftest's OWN_WORK.)
    worker_function = student.module("q4_worker_errors.py").get("careful_worker")
    started = []

    def start(env_fn):
        worker = Worker(student, worker_function, env_fn)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        with contextlib.suppress(StudentCodeFailed):  # its process may be gone already
            worker.remote.close()


def failing(rng, fail_on, at):
    """A CartPole (built over there) that raises at the ``at``-th ``fail_on``, and its message,
    ending in a token drawn from ``rng``: only a real traceback carries it, no canned text can."""
    token = f"{rng.getrandbits(32):08x}"
    message = f"deliberate failure in {fail_on} #{at} ({token})"
    return toolkit.failing_env_fn(fail_on, at, token), message


def same_observation(payload, expected, command):
    """Fails unless ``payload`` (a RESET or STEP answer) starts with the expected observation."""
    try:
        same = np.array_equal(np.asarray(payload[0]), expected)
    except (TypeError, IndexError, ValueError, KeyError):
        same = False
    assert same, (
        f"{command}'s payload {payload!r:.100} does not start with the env's observation: "
        "send what env.reset() / env.step() returned"
    )


def test_serves_reset_step_and_close(start_worker):
    worker = start_worker(toolkit.env_fn("CartPole-v1"))
    by_hand = gym.make("CartPole-v1")  # here, to compare the worker's answers with
    payload = worker.works(Command.RESET, 0)
    assert isinstance(payload, tuple) and len(payload) == 2, (
        "RESET's payload must be (observation, info)"
    )
    same_observation(payload, by_hand.reset(seed=0)[0], "RESET")
    payload = worker.works(Command.STEP, 1)
    assert isinstance(payload, tuple) and len(payload) == 5, (
        "STEP's payload must be (observation, reward, terminated, truncated, info)"
    )
    observation, reward, terminated, truncated, _ = by_hand.step(1)
    same_observation(payload, observation, "STEP")
    assert payload[1:4] == (reward, terminated, truncated), (
        f"STEP's reward, terminated, truncated are {payload[1:4]!r:.80}: expected {(reward, terminated, truncated)}"
    )
    assert worker.ask(Command.CLOSE) == (True, None), "CLOSE must be answered with (True, None)"
    alive, _ = worker.join(ANSWER_SECONDS)
    assert alive is False, "after answering CLOSE the worker must return (end its loop)"


def test_env_error_in_step_comes_back_as_traceback(start_worker, rng):
    env_fn, message = failing(rng, "step", 2)
    worker = start_worker(env_fn)
    by_hand = gym.make("CartPole-v1")  # here, to compare the worker's answers with
    same_observation(worker.works(Command.RESET, 0), by_hand.reset(seed=0)[0], "RESET")
    payload = worker.works(Command.STEP, 0, "the first step should work: only step #2 fails")
    same_observation(payload, by_hand.step(0)[0], "STEP")
    worker.fails(Command.STEP, 0, message)


def test_env_error_in_reset_comes_back_as_traceback(start_worker, rng):
    env_fn, message = failing(rng, "reset", 1)
    worker = start_worker(env_fn)
    worker.fails(Command.RESET, 0, message)


def test_keeps_serving_after_an_error(start_worker, rng):
    env_fn, message = failing(rng, "step", 1)
    worker = start_worker(env_fn)
    worker.works(Command.RESET, 0, "RESET failed, before any error")
    worker.fails(Command.STEP, 0, message)
    hint = "after reporting an error the worker should go on serving commands; RESET then failed"
    payload = worker.works(Command.RESET, 1, hint)
    same_observation(payload, gym.make("CartPole-v1").reset(seed=1)[0], "RESET")


def test_closes_its_env_on_close_and_when_the_parent_goes_away(start_worker):
    for how in ("CLOSE", "the parent closing its pipe"):
        worker = start_worker(toolkit.env_fn("CartPole-v1"))
        same_observation(
            worker.works(Command.RESET, 0), gym.make("CartPole-v1").reset(seed=0)[0], "RESET"
        )
        if how == "CLOSE":
            worker.ask(Command.CLOSE)
        else:
            worker.remote.close_pipe()  # the worker's recv() now raises EOFError
        alive, exitcode = worker.join(ANSWER_SECONDS)
        assert alive is False, (
            f"after {how} the worker process is still running: leave the loop (on EOFError too)"
        )
        assert worker.remote.env_was_closed() is True, (
            f"after {how} the env was not closed: call env.close() in a finally block around the loop"
        )
        if how != "CLOSE":
            assert exitcode == 0, (
                f"after {how} the worker ended with exit code {exitcode}: catch EOFError and return quietly"
            )
