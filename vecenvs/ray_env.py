"""``RayVecEnv``: the pool's design with Ray actors instead of processes, so it can span machines.

A :class:`~vecenvs.pool.PoolVecEnv` runs K worker processes on this machine, each stepping a
chunk of N/K envs. ``RayVecEnv`` keeps that shape and changes who the workers are: K Ray
*actors* (a Ray actor is a Python object living in its own process, anywhere in a Ray cluster,
whose methods you call remotely). Each actor holds a :class:`~vecenvs.multi_env.MultiEnv` over
its chunk, exactly like a pool worker does. What changes is how messages travel:

- the pool wakes its workers through pipes and passes data through shared memory: about 50 µs
  of overhead per step on our VM;
- Ray sends every call through its own machinery (a scheduler, gRPC, an object store): on the
  same machine about a millisecond per round trip, but the actors can live on other machines.

So on one machine Ray pays a much larger ``t_os`` than the pool (see :mod:`vecenvs.bench.model`):
it only wins when each chunk's work dwarfs it, or when one machine has too few cores. The
benchmark's ``ray`` rows show how much.

One step, as in the pool: the caller checks the actions, sends each actor its chunk's slice
(``actor.step.remote(actions)`` returns at once with a *reference* to the future result), then
waits for all K results with a deadline and stitches them into one batch.

Errors reach the caller as with every other backend (:mod:`vecenvs.errors`): each actor method
answers ``(ok, payload)``, and an env's exception comes back as a report that becomes
:class:`~vecenvs.errors.EnvCrashedError` with the env's index and traceback; a dead actor
becomes :class:`~vecenvs.errors.WorkerDiedError`, a silent one
:class:`~vecenvs.errors.WorkerTimeoutError`. Every wait on Ray has a deadline.

Who starts and stops Ray (see :class:`RaySession`): if Ray is already initialised (you called
``ray.init`` yourself, e.g. to join a cluster), ``RayVecEnv`` uses it and never shuts it down.
Otherwise the first ``RayVecEnv`` starts a small local Ray (or joins ``address=...``), and the
last one to close shuts it down again, so that closing leaves no process behind. Starting Ray
takes 5-15 s on a small machine: to build many ``RayVecEnv`` one after the other (a benchmark
sweep, a test module), call ``ray.init()`` once yourself first.

Ray is optional: ``pip install 'vecenvs[ray]'``. It is imported only when a ``RayVecEnv`` is built.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import traceback
from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, create_empty_array

from vecenvs.actions import ActionChecker
from vecenvs.batching import (
    StepBuffers,
    check_env_fns,
    expand_seeds,
    merge_infos,
    split_reset_mask,
    tree_assign,
    tree_copy,
    tree_slice,
)
from vecenvs.errors import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    EnvCrashedError,
    NoAsyncCallError,
    VecEnvError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.multi_env import MultiEnv, per_env_values
from vecenvs.pool import check_num_workers, split_evenly
from vecenvs.process_env import available_cpus
from vecenvs.worker import CrashReport

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["EnvChunk", "RaySession", "RayVecEnv", "import_ray"]

logger = logging.getLogger(__name__)

#: How long close() waits for the actors to close their envs before killing them.
CLOSE_GRACE_SECONDS = 5.0


def import_ray() -> Any:
    """``import ray``, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as error:
        raise ImportError(
            "RayVecEnv needs Ray, which is not installed: pip install 'vecenvs[ray]' "
            "(or pip install ray)"
        ) from error
    return ray


# ------------------------------------------------------------------------------------------------
# The actor side: what each Ray actor runs
# ------------------------------------------------------------------------------------------------


class EnvChunk:
    """One chunk of envs, stepped by a :class:`MultiEnv`: the object each Ray actor holds.

    A plain class: Ray turns it into an actor (``ray.remote(EnvChunk)``), and a test can use it
    directly. Every method answers ``(ok, payload)``, the worker protocol of
    :mod:`vecenvs.worker`: ``(True, result)`` or ``(False, CrashReport)``. Env errors are sent back
    as data rather than raised, so they arrive with the env's index and traceback instead of
    wrapped in Ray's own exception types.

    The envs are made in :meth:`start`, not in ``__init__``: an exception in an actor's
    constructor kills the actor, and the caller would see a dead worker instead of the env's error.

    Args:
        env_fns: the factories of this chunk's envs.
        first_index: index of the first of them in the whole vector env (for error messages).
        autoreset_mode: passed to the MultiEnv.
    """

    def __init__(self, env_fns: list[Callable[[], gym.Env]], first_index: int, autoreset_mode: AutoresetMode):
        self.env_fns = env_fns
        self.first_index = first_index
        self.autoreset_mode = autoreset_mode
        self.envs: MultiEnv | None = None

    def start(self) -> tuple[bool, Any]:
        """Makes the envs; answers with their spaces, metadata, and where this actor runs."""

        def make() -> Any:
            # copy=False: Ray serializes what a method returns as soon as it returns, before the
            # next call can touch the buffers, so the MultiEnv's own copy would be wasted.
            self.envs = MultiEnv(self.env_fns, autoreset_mode=self.autoreset_mode, copy=False, first_index=self.first_index)
            envs = self.envs
            where = (socket.gethostname(), os.getpid())
            return envs.single_observation_space, envs.single_action_space, envs.metadata, envs.render_mode, where

        return self._answer("make", make)

    def reset(self, seeds: list[int | None], options: dict[str, Any] | None, mask: np.ndarray | None) -> tuple[bool, Any]:
        """Resets the chunk's envs (those in ``mask``); answers with the chunk's results."""
        return self._answer("reset", lambda: self._results(self.envs.reset_into_buffers(seeds, options, mask)))

    def step(self, actions: Any) -> tuple[bool, Any]:
        """Steps the chunk's envs with their slice of the batch of actions."""
        return self._answer("step", lambda: self._results(self.envs.step_into_buffers(actions)))

    def call(self, name: str, args: tuple, kwargs: dict[str, Any]) -> tuple[bool, Any]:
        return self._answer(f"call({name!r})", lambda: self.envs.call(name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple[bool, Any]:
        return self._answer(f"get_attr({name!r})", lambda: self.envs.get_attr(name))

    def set_attr(self, name: str, values: list[Any]) -> tuple[bool, Any]:
        return self._answer(f"set_attr({name!r})", lambda: self.envs.set_attr(name, values))

    def close(self) -> tuple[bool, Any]:
        """Closes the envs (a MuJoCo renderer, say, may hold resources); the actor is killed next."""
        if self.envs is not None:
            envs, self.envs = self.envs, None
            return self._answer("close", envs.close)
        return True, None

    def _results(self, records: list) -> tuple[Any, ...]:
        # The chunk batches its own infos, in parallel with the other actors (as pool workers do).
        buffers = self.envs.buffers
        infos = self.envs.batch_infos(records)
        return buffers.observations, buffers.rewards, buffers.terminations, buffers.truncations, infos

    def _answer(self, doing: str, work: Callable[[], Any]) -> tuple[bool, Any]:
        try:
            return True, work()
        except EnvCrashedError as crash:  # MultiEnv names the env (with its index in the whole vector env)
            return False, CrashReport.from_crash(crash)
        except Exception as error:  # noqa: BLE001 - not one env's fault (a bad argument...): reported all the same
            return False, CrashReport(self.first_index, doing, type(error).__name__, str(error), traceback.format_exc())


# ------------------------------------------------------------------------------------------------
# Starting and stopping Ray
# ------------------------------------------------------------------------------------------------


class RaySession:
    """Starts Ray for the first RayVecEnv that needs it and shuts it down after the last one.

    The rule: whoever started Ray stops it. If Ray is already initialised when a RayVecEnv is
    built, its owner is someone else (your script, a test fixture, a Ray job) and we never shut
    it down. If not, we start it, count the RayVecEnvs using it, and call ``ray.shutdown()``
    when the count drops to zero, which ends the local Ray processes we started (GCS server,
    raylet, agents and idle workers). Ray also shuts itself down at interpreter exit.
    """

    _lock = threading.Lock()
    _users = 0  # RayVecEnvs open on a Ray that we started

    @classmethod
    def acquire(cls, address: str | None, init_kwargs: dict[str, Any] | None) -> bool:
        """Makes sure Ray is initialised; returns True if the caller must :meth:`release` it."""
        ray = import_ray()
        with cls._lock:
            if ray.is_initialized():
                if cls._users == 0:
                    return False  # someone else's Ray: use it, never shut it down
                cls._users += 1
                return True
            ray.init(**cls.init_arguments(address, init_kwargs))
            cls._users = 1
            return True

    @classmethod
    def release(cls) -> None:
        """One RayVecEnv fewer on our Ray; the last one shuts Ray down."""
        ray = import_ray()
        with cls._lock:
            cls._users = max(0, cls._users - 1)
            if cls._users == 0 and ray.is_initialized():
                ray.shutdown()

    @staticmethod
    def init_arguments(address: str | None, init_kwargs: dict[str, Any] | None) -> dict[str, Any]:
        """What ``ray.init`` is given: a small, quiet local Ray, or the cluster at ``address``.

        - ``num_cpus``: the CPUs this process may use (Ray would otherwise count every CPU of
          the machine, ignoring taskset and container limits). Not allowed with an address:
          a cluster knows its own CPUs.
        - ``include_dashboard=False``: Ray's dashboard is a web server and several processes;
          this lab has its own dashboard.
        - ``log_to_driver=False``: what the actors print goes to Ray's log files
          (``/tmp/ray/session_latest/logs``) instead of being interleaved with your output.
          Env errors do not need it: they come back as exceptions with their traceback.
        - ``logging_level=WARNING``: no "Started a local Ray instance" banners.

        ``init_kwargs`` overrides any of these, and is passed on as it is (e.g.
        ``{"log_to_driver": True}``, ``{"object_store_memory": 10**9}``).
        """
        arguments: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
        if address is None:
            arguments["num_cpus"] = available_cpus()
        else:
            arguments["address"] = address
        arguments.update(init_kwargs or {})
        return arguments


# ------------------------------------------------------------------------------------------------
# The caller side
# ------------------------------------------------------------------------------------------------


class State(Enum):
    """Where the RayVecEnv is in the command cycle."""

    IDLE = "idle"
    STEPPING = "stepping"  # step_async sent, step_wait not yet done


class RayVecEnv(VectorEnv):
    """Steps N envs in K Ray actors, N/K envs each.

    Args:
        env_fns: functions that each make one env. Ray pickles them with cloudpickle, so lambdas
            and notebook functions work; on a cluster, whatever they use (gymnasium, vecenvs,
            your env's package) must be installed on every node.
        num_workers: K, how many actors, from 1 to the number of envs. Default: one per CPU this
            process may use (on a cluster, pass it: it may have many more).
        autoreset_mode: gymnasium's ``AutoresetMode``: NEXT_STEP (default), SAME_STEP or DISABLED.
        address: a Ray cluster to join (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``) if
            Ray is not initialised yet. None: start a local Ray. Ignored when Ray is already
            initialised (see :class:`RaySession`).
        init_kwargs: extra ``ray.init`` arguments, over :meth:`RaySession.init_arguments`'s.
        actor_options: Ray's options for each actor (``ActorClass.options(**actor_options)``),
            e.g. ``{"num_cpus": 1}`` to reserve a CPU per actor so that a cluster spreads them
            over its nodes, or ``{"scheduling_strategy": "SPREAD"}``. Default: Ray's (an actor
            needs a CPU to be placed but holds none while it runs).
        timeout: seconds to wait for any answer from the actors.
        start_timeout: seconds to wait for Ray to start the actors and for them to make their envs.
        copy: return copies of the observations (False: a buffer the next step overwrites).

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs.ray_env import RayVecEnv
        >>> with RayVecEnv([lambda: gym.make("CartPole-v1")] * 8, num_workers=2) as envs:  # doctest: +SKIP
        ...     observations, infos = envs.reset(seed=0)
        ...     envs.chunks
        [range(0, 4), range(4, 8)]
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        address: str | None = None,
        init_kwargs: dict[str, Any] | None = None,
        actor_options: dict[str, Any] | None = None,
        timeout: float = 60.0,
        start_timeout: float = 180.0,
        copy: bool = True,
    ):
        # Everything is checked before Ray is started.
        env_fns = check_env_fns(env_fns)
        self.num_envs = len(env_fns)
        self.num_workers = check_num_workers(num_workers, self.num_envs)
        for name, value in (("timeout", timeout), ("start_timeout", start_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} is {value!r}: expected a number of seconds > 0")
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.chunks = split_evenly(self.num_envs, self.num_workers)
        self.timeout = float(timeout)
        self.copy = copy
        self.actors: list[Any] = []
        self.worker_locations: list[tuple[str, int]] = []  # (host name, pid) of each actor
        self._pending: dict[int, Any] = {}  # worker index -> reference to its answer still due
        self._state = State.IDLE
        self._closing = False

        self._ray = import_ray()
        self._owns_ray = RaySession.acquire(address, init_kwargs)
        try:
            self._start_actors(env_fns, actor_options or {}, start_timeout)
        except BaseException:
            self.close(terminate=True)
            raise

    # ----------------------------------------------------------------- starting

    def _start_actors(self, env_fns: list[Callable[[], gym.Env]], actor_options: dict[str, Any], start_timeout: float) -> None:
        # max_restarts=0 (Ray's default, said out loud): a restarted actor would have fresh envs
        # out of step with the others; better to report it dead.
        actor_class = self._ray.remote(EnvChunk).options(**{"max_restarts": 0, **actor_options})
        for chunk in self.chunks:
            self.actors.append(actor_class.remote([env_fns[i] for i in chunk], chunk.start, self.autoreset_mode))
        hello = self._ask_all("start", {w: () for w in range(self.num_workers)}, "start-up (making the envs)", start_timeout)
        observation_space, action_space, metadata, render_mode, _ = hello[0]
        for worker_index, (other_observation_space, other_action_space, *_rest) in hello.items():
            if other_observation_space != observation_space or other_action_space != action_space:
                raise ValueError(
                    f"the envs of worker {worker_index} (from env {self.chunks[worker_index].start}) have "
                    f"spaces {other_observation_space}, {other_action_space} but env 0 has "
                    f"{observation_space}, {action_space}: every env of a vector env must have the same spaces"
                )
        self.worker_locations = [hello[w][4] for w in range(self.num_workers)]
        self.single_observation_space, self.single_action_space = observation_space, action_space
        self.observation_space = batch_space(observation_space, self.num_envs)
        self.action_space = batch_space(action_space, self.num_envs)
        self.metadata = {**metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = render_mode
        self.check_actions = ActionChecker(self.action_space, self.num_envs)
        self.buffers = StepBuffers(
            create_empty_array(observation_space, n=self.num_envs, fn=np.zeros),
            np.zeros(self.num_envs, dtype=np.float64),
            np.zeros(self.num_envs, dtype=np.bool_),
            np.zeros(self.num_envs, dtype=np.bool_),
        )

    # ----------------------------------------------------------------- the VectorEnv API

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Resets the envs (all, or those in ``options["reset_mask"]``); returns observations and infos.

        A step still pending from :meth:`step_async` is collected and dropped first.
        """
        self._check_open()
        seeds = expand_seeds(seed, self.num_envs)
        options, mask = split_reset_mask(options, self.num_envs)
        if self._state is State.STEPPING:
            self._collect("reset (finishing the pending step first)", self.timeout, close_on_crash=True)
            self._state = State.IDLE
        payloads = {}
        for worker_index, chunk in enumerate(self.chunks):
            chunk_mask = None if mask is None else mask[chunk.start : chunk.stop]
            if chunk_mask is None or chunk_mask.any():  # actors with no env to reset are not asked
                payloads[worker_index] = ([seeds[i] for i in chunk], options, chunk_mask)
        replies = self._ask_all("reset", payloads, "reset", self.timeout, close_on_crash=True)
        observations, _, _, _, infos = self._gather(replies)
        return observations, infos

    def step(self, actions: Any):
        """Steps every env; returns observations, rewards, terminations, truncations, infos."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Sends each actor its slice of the actions and returns at once; collect with :meth:`step_wait`."""
        self._check_open()
        if self._state is State.STEPPING:
            raise AlreadyPendingCallError(
                "a step is already pending: call step_wait() to collect it (or reset() to drop it) before sending new actions",
                "step",
            )
        actions = self.check_actions(actions)
        self._send_all("step", {w: (tree_slice(actions, c.start, c.stop),) for w, c in enumerate(self.chunks)})
        self._state = State.STEPPING

    def step_wait(self, timeout: float | None = None):
        """Waits for the step sent by :meth:`step_async`; returns the 5-tuple of batched results.

        Args:
            timeout: seconds to wait for the actors; by default the constructor's ``timeout``.
        """
        self._check_open()
        if self._state is not State.STEPPING:
            raise NoAsyncCallError("no step is pending: call step_async(actions) before step_wait()", "step")
        replies = self._collect("step", timeout or self.timeout, close_on_crash=True)
        self._state = State.IDLE
        return self._gather(replies)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls method ``name`` of every env (or reads the attribute if it is not callable)."""
        return self._per_env("call", lambda chunk: (name, args, kwargs), f"call({name!r})")

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every env."""
        return self._per_env("get_attr", lambda chunk: (name,), f"get_attr({name!r})")

    def set_attr(self, name: str, values: Any) -> None:
        """Sets attribute ``name`` of every env: to ``values[i]`` for a list/tuple, else to ``values``."""
        self._check_open()
        values = per_env_values(values, self.num_envs)
        self._per_env("set_attr", lambda chunk: (name, values[chunk.start : chunk.stop]), f"set_attr({name!r})")

    def render(self) -> tuple[Any, ...]:
        """The frames rendered by every env."""
        return self.call("render")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Ray kills an actor once no handle to it is left, but not our share of a Ray we started.
        if not getattr(self, "closed", True) and hasattr(self, "_owns_ray"):
            self.close(terminate=True)

    # ----------------------------------------------------------------- closing

    def close_extras(self, terminate: bool = False, **kwargs: Any) -> None:
        """Closes the envs in the actors, kills the actors, and shuts Ray down if we started it.

        Args:
            terminate: kill the actors at once, without asking them to close their envs.
        """
        self._closing = True
        ray = self._ray
        if not terminate and self.actors:
            try:
                if self._pending:  # a step still running: let it finish before the envs close
                    self._collect("close (finishing what was pending)", CLOSE_GRACE_SECONDS)
                self._ask_all("close", {w: () for w in range(len(self.actors))}, "close", CLOSE_GRACE_SECONDS)
            except VecEnvError:
                pass  # a dead, stuck or failing actor: it is killed below all the same
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                logger.debug("ray.kill failed", exc_info=True)
        self.actors, self._pending = [], {}
        if self._owns_ray:
            self._owns_ray = False
            RaySession.release()

    # ----------------------------------------------------------------- talking to the actors

    def _per_env(self, method: str, payload_for: Callable[[range], tuple], doing: str) -> tuple[Any, ...]:
        """Runs call/get_attr/set_attr in every actor; returns the per-env results in env order.

        An env's exception here leaves the vector env usable (no env stepped out of turn).
        """
        self._check_open()
        if self._state is not State.IDLE:
            raise AlreadyPendingCallError(f"cannot {doing} while a step is pending: call step_wait() (or reset()) first", "step")
        replies = self._ask_all(method, {w: payload_for(chunk) for w, chunk in enumerate(self.chunks)}, doing, self.timeout)
        return tuple(result for w in sorted(replies) for result in (replies[w] or ()))

    def _ask_all(self, method: str, payloads: dict[int, tuple], doing: str, timeout: float, close_on_crash: bool = False) -> dict[int, Any]:
        """Calls ``method`` of the actors in ``payloads`` and waits for their answers."""
        self._send_all(method, payloads)
        return self._collect(doing, timeout, close_on_crash)

    def _send_all(self, method: str, payloads: dict[int, tuple]) -> None:
        """Starts ``actor.<method>(*payload)`` in each actor; returns at once (Ray queues the calls).

        Unlike a pipe, every call has its own reference to its own answer, and an actor runs its
        calls in the order they were sent: an answer left over from a call interrupted by Ctrl-C
        can never pass for the answer to this one, so there is nothing to drain first.
        """
        for worker_index, payload in payloads.items():
            self._pending[worker_index] = getattr(self.actors[worker_index], method).remote(*payload)

    def _collect(self, doing: str, timeout: float, close_on_crash: bool = False) -> dict[int, Any]:
        """Waits up to ``timeout`` s for every pending answer; returns ``{worker index: payload}``.

        Raises:
            EnvCrashedError: an env raised (the one with the lowest index, if several did). With
                ``close_on_crash`` (reset and step: the envs are now out of step) the vector env
                is closed first.
            WorkerDiedError: an actor died; the vector env is closed.
            WorkerTimeoutError: no answer in time; the vector env is closed.
        """
        ray = self._ray
        pending = self._pending
        references = list(pending.values())
        # ray.wait returns the references whose results (or errors) are ready, at most after timeout.
        _, not_ready = ray.wait(references, num_returns=len(references), timeout=timeout)
        if not_ready:
            late = set(not_ready)
            stuck = sorted(w for w, reference in pending.items() if reference in late)
            self._close_after_failure()
            raise WorkerTimeoutError(stuck, self._envs_of(stuck), timeout, doing)
        answers = {}
        for worker_index, reference in sorted(pending.items()):
            answers[worker_index] = self._get(worker_index, reference, doing, timeout)
        self._pending = {}
        failures = [payload for ok, payload in answers.values() if not ok]
        if failures:
            crash = min(failures, key=lambda report: report.env_index).to_error()
            if close_on_crash:
                self._close_after_failure()
                crash.args = (crash.args[0] + "\n\nThe vector env has been closed (its envs are out of step): make a new one.",)
            raise crash
        return {w: payload for w, (ok, payload) in answers.items()}

    def _get(self, worker_index: int, reference: Any, doing: str, timeout: float) -> Any:
        """``ray.get`` of one ready answer, Ray's errors turned into ours."""
        ray = self._ray
        try:
            return ray.get(reference, timeout=timeout)
        except ray.exceptions.RayActorError as error:  # the actor's process died (killed, crashed, node lost)
            self._close_after_failure()
            raise WorkerDiedError(worker_index, list(self.chunks[worker_index]), None, doing) from error
        except ray.exceptions.GetTimeoutError:
            self._close_after_failure()
            raise WorkerTimeoutError([worker_index], list(self.chunks[worker_index]), timeout, doing) from None
        except ray.exceptions.RayError as error:  # e.g. a result that could not be unpickled here
            self._close_after_failure()
            raise VecEnvError(f"worker {worker_index} failed during {doing}: {error}") from error

    # ----------------------------------------------------------------- results

    def _gather(self, replies: dict[int, Any]) -> tuple[Any, ...]:
        """Writes each actor's chunk into the batch; returns observations, rewards, ..., infos."""
        buffers = self.buffers
        chunk_infos = []
        for worker_index, (observations, rewards, terminations, truncations, infos) in sorted(replies.items()):
            chunk = self.chunks[worker_index]
            tree_assign(tree_slice(buffers.observations, chunk.start, chunk.stop), observations)
            buffers.rewards[chunk.start : chunk.stop] = rewards
            buffers.terminations[chunk.start : chunk.stop] = terminations
            buffers.truncations[chunk.start : chunk.stop] = truncations
            if infos:
                chunk_infos.append((chunk.start, infos))
        infos = merge_infos(chunk_infos, self.num_envs)
        observations = tree_copy(buffers.observations) if self.copy else buffers.observations
        return observations, buffers.rewards.copy(), buffers.terminations.copy(), buffers.truncations.copy(), infos

    # ----------------------------------------------------------------- helpers

    def _close_after_failure(self) -> None:
        if not self._closing:
            self.close(terminate=True)

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(f"{type(self).__name__} is closed: make a new one to step again")

    def _envs_of(self, workers: Sequence[int]) -> list[int]:
        return [index for w in workers for index in self.chunks[w]]
