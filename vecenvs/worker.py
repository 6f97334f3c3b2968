"""The worker side: what runs inside each child process of SubprocVecEnv and PoolVecEnv.

A worker owns a :class:`~vecenvs.multi_env.MultiEnv` over its chunk of envs (one env for
SubprocVecEnv, N/K for PoolVecEnv) and serves commands from its parent over a pipe:

    parent  --(Command, payload)-->  worker      e.g. (Command.STEP, actions)
    parent  <--(ok, payload)-------  worker      e.g. (True, results) or (False, CrashReport)

Every reply says whether it succeeded before the parent unpacks it. Messages are pickled with
the standard (C) pickle, which is several times faster than dill for arrays and tuples; only what
pickle refuses (a lambda passed to ``call``, say) falls back to dill. The env factories themselves
travel with the process at start-up, pickled by ``multiprocess`` (dill), which is what lets a
lambda or a function defined in a notebook make the envs under every start method.

With shared memory (the pool), step results are written straight into shared buffers and a STEP
reply carries only the infos; without it (SubprocVecEnv), the reply carries everything.

Every command gets one reply, except the async pool's RESET_ENVS and STEP_ENVS: they name some
of the worker's envs, and the worker answers once per env, the moment that env is done, so the
parent can hand out the first envs ready without waiting for the slowest one.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import dill
from gymnasium.vector import AutoresetMode

from vecenvs.batching import tree_index, tree_slice
from vecenvs.errors import EnvCrashedError
from vecenvs.multi_env import MultiEnv
from vecenvs.shared_memory import SharedBuffers

__all__ = ["AdaptiveSpin", "Command", "CrashReport", "dumps", "loads", "run_worker", "spin_until_readable"]


class Command(Enum):
    """What the parent asks a worker to do."""

    RESET = "reset"
    STEP = "step"
    CALL = "call"
    GET_ATTR = "get_attr"
    SET_ATTR = "set_attr"
    CLOSE = "close"
    # The async pool's commands (see vecenvs.async_pool): one answer per env, not per command.
    RESET_ENVS = "reset some envs, one answer each"
    STEP_ENVS = "step some envs, one answer each"


@dataclass
class CrashReport:
    """Why a command failed, in plain data so it pickles whatever the env raised."""

    env_index: int
    doing: str
    error_type: str
    message: str
    traceback: str

    @classmethod
    def from_crash(cls, crash: EnvCrashedError) -> CrashReport:
        return cls(crash.env_index, crash.command, crash.error_type, crash.message, crash.remote_traceback)

    def to_error(self) -> EnvCrashedError:
        return EnvCrashedError(self.env_index, self.doing, self.error_type, self.message, self.traceback)


def dumps(message: Any) -> bytes:
    """Pickles a message: fast C pickle, or dill for what pickle cannot handle (lambdas...)."""
    try:
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return dill.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> Any:
    """Unpickles a message from :func:`dumps` (dill's output loads with plain pickle)."""
    return pickle.loads(data)


def spin_until_readable(file_descriptors: list[int], seconds: float) -> bool:
    """Polls, without sleeping, until every file descriptor has data, for at most ``seconds``.

    A short spin like this avoids the cost of being put to sleep and woken up again, which in
    some VMs is over 50 µs. It burns the CPU meanwhile: callers only spin when each process has
    a CPU of its own. Returns True if all became readable (or closed) in time.
    """
    if not hasattr(select, "poll"):
        return False  # no cheap non-blocking poll here (Windows): just block
    poller = select.poll()
    for file_descriptor in file_descriptors:
        poller.register(file_descriptor, select.POLLIN)
    pending = set(file_descriptors)
    deadline = time.perf_counter() + seconds
    while True:
        for file_descriptor, _ in poller.poll(0):
            pending.discard(file_descriptor)
            poller.unregister(file_descriptor)
        if not pending:
            return True
        if time.perf_counter() > deadline:
            return False


class AdaptiveSpin:
    """Spin before blocking only while spinning pays off.

    A spin that ends with the data there saved a sleep and a wake-up. A spin that runs out did
    nothing but burn a CPU for its whole length, and on a machine with no CPU to spare (another
    program busy, a browser drawing the dashboard) it burns the very CPU that the process we
    wait for needs. So after a spin that runs out, the next wait does without, after two in a
    row the next two, then four, ... up to :attr:`MAX_SKIPPED`; a spin that succeeds starts
    over. (The same idea as the adaptive spin locks of operating systems and databases.)

    Measured on our 2-core VM, the pool (K=2) on CartPole, speed-up over the sequential loop,
    always spinning / adaptive / never spinning: quiet machine, N=4 0.59-0.62x / 0.53-0.69x /
    0.24x and N=64 1.38-1.47x / 1.29-1.52x / ~1.0x; with one busy-looping program beside it,
    N=4 0.08x / 0.21x / 0.32x and N=64 0.26x / 0.68x / 0.81x.

    Args:
        seconds: the length of one spin; 0 never spins.
    """

    #: The most waits skipped in a row after spins that ran out.
    MAX_SKIPPED = 64

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._skip = 0  # waits still to do without a spin
        self._penalty = 1  # how many to skip after the next spin that runs out

    def wait(self, file_descriptors: list[int]) -> bool:
        """Spin until every file descriptor is readable, unless backing off; True if they are."""
        if not self.seconds:
            return False
        if self._skip:
            self._skip -= 1
            return False
        if spin_until_readable(file_descriptors, self.seconds):
            self._penalty = 1
            return True
        self._skip = self._penalty
        self._penalty = min(2 * self._penalty, self.MAX_SKIPPED)
        return False


def run_worker(
    worker_index: int,
    env_fns: list[Callable[[], Any]],
    first_index: int,
    autoreset_mode: AutoresetMode,
    pipe: Any,
    shared: SharedBuffers | None,
    spin_seconds: float = 0.0,
) -> None:
    """The main function of a worker process: make the envs, then serve commands until CLOSE.

    Args:
        worker_index: this worker's number, for messages.
        env_fns: the factories of this worker's envs.
        first_index: index of the first of them in the whole vector env.
        autoreset_mode: passed to the MultiEnv.
        pipe: this worker's end of its pipe to the parent.
        shared: the pool's shared buffers, or None to send results over the pipe.
        spin_seconds: after each answer, poll this long for the next command before blocking.
    """
    # Without this the worker would inherit the notebook's SIGINT handler, and a Ctrl-C meant to
    # interrupt the parent would kill every worker mid-step. The parent decides what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_when_orphaned()

    envs: MultiEnv | None = None
    actions = None
    try:
        try:
            buffers = None
            if shared is not None:
                chunk = slice(first_index, first_index + len(env_fns))
                buffers = shared.step_buffers().slice(chunk.start, chunk.stop)
                actions = tree_slice(shared.actions(), chunk.start, chunk.stop)
            envs = MultiEnv(env_fns, autoreset_mode=autoreset_mode, copy=False, buffers=buffers, first_index=first_index)
        except EnvCrashedError as crash:
            pipe.send_bytes(dumps((False, CrashReport.from_crash(crash))))
            return
        except Exception as error:  # e.g. spaces that differ between envs
            pipe.send_bytes(dumps((False, _worker_failure(first_index, "make", error))))
            return
        pipe.send_bytes(dumps((True, (envs.single_observation_space, envs.single_action_space, envs.metadata, envs.render_mode))))

        last_wait = 0.0  # how long the previous command took to come after our answer
        spin = AdaptiveSpin(spin_seconds)
        while True:
            # Spin only while commands come quickly (a benchmark, a fast policy): when the
            # parent thinks for much longer between steps, a spin would only burn a core it may
            # need. (The margin is wide because a wait without a spin also counts the wake-up,
            # which on a busy VM can take most of a millisecond.)
            answered = time.perf_counter()
            if last_wait < 4 * spin_seconds:
                spin.wait([pipe.fileno()])
            command, payload = loads(pipe.recv_bytes())
            last_wait = time.perf_counter() - answered
            if command is Command.CLOSE:
                pipe.send_bytes(dumps((True, None)))
                return
            try:
                if command in _PER_ENV_HANDLERS:
                    for result in _PER_ENV_HANDLERS[command](envs, payload, actions, shared is not None):
                        pipe.send_bytes(dumps((True, result)))
                    continue  # every answer is sent
                result = _HANDLERS[command](envs, payload, actions, shared is not None)
            except EnvCrashedError as crash:
                reply = (False, CrashReport.from_crash(crash))
            except Exception as error:  # not an env's fault: a bad argument, or a bug here
                reply = (False, _worker_failure(first_index, command.value, error))
            else:
                reply = (True, result)
            pipe.send_bytes(dumps(reply))
    except (EOFError, OSError):
        pass  # the parent closed its end or died: there is nobody left to answer
    finally:
        if envs is not None:
            envs.close()


def _worker_failure(first_index: int, doing: str, error: Exception) -> CrashReport:
    return CrashReport(first_index, doing, type(error).__name__, str(error), traceback.format_exc())


# ---------------------------------------------------------------------- command handlers
# Each takes (envs, payload, shared actions view, whether results travel by shared memory).


def _results(envs: MultiEnv, records: list, shared: bool) -> Any:
    # The worker batches its chunk's infos itself: in parallel with the other workers, rather
    # than leaving a Python loop over every env's info to the parent.
    infos = envs.batch_infos(records)
    if shared:
        return infos  # observations, rewards... are already in shared memory
    buffers = envs.buffers
    # Lists of Python scalars pickle faster than small numpy arrays.
    return envs.env_observations, buffers.rewards.tolist(), buffers.terminations.tolist(), buffers.truncations.tolist(), infos


def _reset(envs: MultiEnv, payload: Any, actions: Any, shared: bool) -> Any:
    seeds, options, mask = payload
    return _results(envs, envs.reset_into_buffers(seeds, options, mask), shared)


def _step(envs: MultiEnv, payload: Any, actions: Any, shared: bool) -> Any:
    # No payload: the actions are in shared memory. Otherwise: one action per env, unbatched.
    records = envs.step_into_buffers(actions) if payload is None else envs.step_each(payload)
    return _results(envs, records, shared)


def _call(envs: MultiEnv, payload: Any, actions: Any, shared: bool) -> Any:
    name, args, kwargs = payload
    return envs.call(name, *args, **kwargs)


def _get_attr(envs: MultiEnv, payload: Any, actions: Any, shared: bool) -> Any:
    return envs.get_attr(payload)


def _set_attr(envs: MultiEnv, payload: Any, actions: Any, shared: bool) -> Any:
    name, values = payload
    return envs.set_attr(name, values)


_HANDLERS = {
    Command.RESET: _reset,
    Command.STEP: _step,
    Command.CALL: _call,
    Command.GET_ATTR: _get_attr,
    Command.SET_ATTR: _set_attr,
}


# ---------------------------------------------------------------------- per-env handlers
# The async pool's commands. Each is a generator yielding one answer per env, in the order the
# envs were named; the loop above sends each answer as soon as it is yielded.


def _one_env_result(envs: MultiEnv, index: int, records: list, shared: bool) -> tuple[Any, ...]:
    """One env's answer: its index in the whole vector env and its info dicts (usually none),
    then, without shared memory, its observation, reward and flags."""
    infos = [info for _, info in records]
    env_index = envs.first_index + index
    if shared:
        return env_index, infos
    buffers = envs.buffers
    return (env_index, infos, envs.env_observations[index], float(buffers.rewards[index]),
            bool(buffers.terminations[index]), bool(buffers.truncations[index]))


def _reset_envs(envs: MultiEnv, payload: Any, actions: Any, shared: bool) -> Iterator[tuple[Any, ...]]:
    indices, seeds, options = payload  # indices within this worker's chunk, one seed each
    for index, seed in zip(indices, seeds):
        yield _one_env_result(envs, index, envs.reset_one(index, seed, options), shared)


def _step_envs(envs: MultiEnv, payload: Any, actions: Any, shared: bool) -> Iterator[tuple[Any, ...]]:
    indices, env_actions = payload  # env_actions is None when the actions are in shared memory
    for position, index in enumerate(indices):
        action = tree_index(actions, index) if env_actions is None else env_actions[position]
        yield _one_env_result(envs, index, envs.step_one(index, action), shared)


_PER_ENV_HANDLERS = {
    Command.RESET_ENVS: _reset_envs,
    Command.STEP_ENVS: _step_envs,
}


def _exit_when_orphaned(check_seconds: float = 1.0) -> None:
    """Exits this process if its parent dies, even while an env is stuck in a long step.

    A worker blocked on its pipe notices a dead parent by itself (EOF); one inside a hung env
    would not, and would live on as an orphan. A daemon thread polls the parent's pid instead.
    """
    parent_pid = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(check_seconds)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="vecenvs-orphan-watch", daemon=True).start()
