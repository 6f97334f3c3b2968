"""Exercise 4: a worker that reports its env's errors (``q4_worker_errors.py``).

These checks talk to the worker directly over a pipe, as its parent would.
"""

from pathlib import Path

import gymnasium as gym
import multiprocess
import pytest
from conftest import attribute, load

import vecenvs  # noqa: F401  (registers vecenvs/Faulty-v0)
from exercises.pipe_env import Command, _run_worker

ANSWER_SECONDS = 5.0


class Worker:
    """The student's worker in a forked process, and the parent's end of its pipe."""

    def __init__(self, worker_function, env_fn):
        context = multiprocess.get_context("fork")
        self.pipe, worker_pipe = context.Pipe()
        self.process = context.Process(target=_run_worker, daemon=True,
                                       args=(worker_function, worker_pipe, env_fn, [self.pipe]))
        self.process.start()
        worker_pipe.close()

    def ask(self, command, data=None):
        """Sends one command; returns the ``(ok, payload)`` reply, or fails the check with why not."""
        try:
            self.pipe.send((command, data))
        except (BrokenPipeError, OSError):
            self._fail_dead(f"sending {command.name}")
        if not self.pipe.poll(ANSWER_SECONDS):
            if not self.process.is_alive():
                self._fail_dead(f"answering {command.name}")
            pytest.fail(f"the worker did not answer {command.name} within {ANSWER_SECONDS:g} s: is "
                        "it stuck, or did it skip pipe.send for this command?", pytrace=False)
        try:
            reply = self.pipe.recv()
        except (EOFError, OSError):  # closed or reset: the worker is gone
            self._fail_dead(f"answering {command.name}")
        assert isinstance(reply, tuple) and len(reply) == 2 and isinstance(reply[0], bool), (
            f"the worker answered {command.name} with {reply!r:.80}: every reply must be (ok, payload)")
        return reply

    def _fail_dead(self, doing):
        self.process.join(1.0)
        pytest.fail(f"the worker process died while {doing} (exit code {self.process.exitcode}), "
                    "without sending (False, traceback). Catch the exception around each command "
                    "and send (False, traceback.format_exc()). (Exit code 1 at the first command "
                    "often means careful_worker still raises NotImplementedError.)", pytrace=False)

    def close(self):
        self.pipe.close()
        self.process.join(2.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2.0)


@pytest.fixture
def start_worker(submission):
    worker_function = attribute(load(submission, "q4_worker_errors.py"), "careful_worker")
    started = []

    def start(env_fn):
        worker = Worker(worker_function, env_fn)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


def faulty(**kwargs):
    return lambda: gym.make("vecenvs/Faulty-v0", **kwargs)


class CloseRecorder(gym.Wrapper):
    """Writes a file when closed, so the parent can tell whether the worker closed its env."""

    def __init__(self, env, marker):
        super().__init__(env)
        self.marker = marker

    def close(self):
        Path(self.marker).write_text("closed")
        super().close()


def test_serves_reset_step_and_close(start_worker):
    worker = start_worker(lambda: gym.make("CartPole-v1"))
    ok, payload = worker.ask(Command.RESET, 0)
    assert ok, f"RESET failed:\n{payload}"
    assert len(payload) == 2, "RESET's payload must be (observation, info)"
    ok, payload = worker.ask(Command.STEP, 1)
    assert ok, f"STEP failed:\n{payload}"
    assert len(payload) == 5, "STEP's payload must be (observation, reward, terminated, truncated, info)"
    assert worker.ask(Command.CLOSE) == (True, None), "CLOSE must be answered with (True, None)"
    worker.process.join(ANSWER_SECONDS)
    assert not worker.process.is_alive(), "after answering CLOSE the worker must return (end its loop)"


def test_env_error_in_step_comes_back_as_traceback(start_worker):
    worker = start_worker(faulty(fail_on="step", at=2))
    assert worker.ask(Command.RESET, 0)[0]
    assert worker.ask(Command.STEP, 0)[0], "the first step should work: only step #2 fails"
    ok, payload = worker.ask(Command.STEP, 0)
    assert not ok, "the env raised in step #2, but the reply says ok=True"
    assert isinstance(payload, str) and "Traceback (most recent call last)" in payload, (
        f"the payload should be the traceback text from traceback.format_exc(), got {payload!r:.120}")
    assert "deliberate failure in step #2" in payload, (
        "the traceback should end with the env's own error message (format_exc inside the except block)")


def test_env_error_in_reset_comes_back_as_traceback(start_worker):
    worker = start_worker(faulty(fail_on="reset", at=1))
    ok, payload = worker.ask(Command.RESET, 0)
    assert not ok and "deliberate failure in reset #1" in str(payload), (
        "the env raised in reset: expected (False, traceback naming the error)")


def test_keeps_serving_after_an_error(start_worker):
    worker = start_worker(faulty(fail_on="step", at=1))
    worker.ask(Command.RESET, 0)
    assert not worker.ask(Command.STEP, 0)[0]
    ok, payload = worker.ask(Command.RESET, 1)
    assert ok, (f"after reporting an error the worker should go on serving commands; RESET then "
                f"failed:\n{payload}")


def test_closes_its_env_on_close_and_when_the_parent_goes_away(start_worker, tmp_path):
    for how in ("CLOSE", "the parent closing its pipe"):
        marker = tmp_path / f"closed-{how[:5]}"
        worker = start_worker(lambda marker=marker: CloseRecorder(gym.make("CartPole-v1"), marker))
        worker.ask(Command.RESET, 0)
        if how == "CLOSE":
            worker.ask(Command.CLOSE)
        else:
            worker.pipe.close()  # the worker's recv() now raises EOFError
        worker.process.join(ANSWER_SECONDS)
        assert not worker.process.is_alive(), (
            f"after {how} the worker process is still running: leave the loop (on EOFError too)")
        assert marker.exists(), (
            f"after {how} the env was not closed: call env.close() in a finally block around the loop")
        if how != "CLOSE":
            assert worker.process.exitcode == 0, (
                f"after {how} the worker ended with exit code {worker.process.exitcode}: catch "
                "EOFError and return quietly")
