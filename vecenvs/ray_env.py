"""``RayVecEnv``: the pool's design with Ray actors instead of processes, so it can span machines.

Like :class:`~vecenvs.pool.PoolVecEnv` it runs the same core (:class:`~vecenvs.core.ChunkedVecEnv`)
over K workers each stepping a :class:`~vecenvs.workers.Chunk` of N/K envs, but its workers are
Ray *actors* (objects living in their own process, anywhere in a Ray cluster, whose methods are
called remotely). Where the pool's pipes and shared memory cost about 50 µs a step on our VM, a
Ray round trip costs about a millisecond on one machine: a much larger ``t_os`` (see
:mod:`vecenvs.bench.model`), worth paying for a chunk's work that dwarfs it or for more cores
than one machine has. Env errors, dead and silent actors raise the same errors as every backend
(:mod:`vecenvs.errors`).

Where the actors go: by default Ray's ``"SPREAD"`` scheduling strategy puts them on as many
nodes of the cluster as it can, evenly (K=2 on two nodes: one each; ``tests/test_ray_cluster.py``
checks it on a two-node cluster, and that losing a node is a WorkerDiedError naming the envs it
held). Ray's own default fills a node while it is lightly used (an actor needs no CPU once
made): on a two-node cluster it put both actors of K=2 on one node in one of our two tries, one
on each in the other. ``actor_options`` changes it
(``RayVecEnv``'s docstring has examples); :attr:`RayVecEnv.worker_nodes` says where each is.

Starting Ray takes 5-15 s on a small machine (see :class:`RaySession` for who starts and stops
it): to build many ``RayVecEnv`` one after the other, call ``ray.init()`` once yourself first.
Ray is optional (``pip install 'vecenvs[ray]'``) and imported only when a ``RayVecEnv`` is built.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from vecenvs.checks import check_env_fns, check_pipes_only
from vecenvs.core import ChunkedVecEnv
from vecenvs.cpus import available_cpus
from vecenvs.errors import (
    CrashReport,
    EnvCrashedError,
    VecEnvError,
    WorkerDiedError,
    WorkerTimeoutError,
)
from vecenvs.pool import check_num_workers
from vecenvs.threads import DEFAULT_WORKER_THREADS, cap_env_fns, check_worker_threads
from vecenvs.workers import Chunk, ChunkSpec, Command

__all__ = ["ChunkActor", "RaySession", "RayVecEnv", "RayWorker", "import_ray"]

logger = logging.getLogger(__name__)


def import_ray() -> Any:
    """``import ray``, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as error:
        raise ImportError(
            "RayVecEnv needs Ray, which is not installed: make peers (or pip install "
            "'vecenvs[ray]', or pip install ray)"
        ) from error
    return ray


class ChunkActor:
    """One chunk of envs in a Ray actor (``ray.remote(ChunkActor)``): a :class:`~vecenvs.workers.Chunk`.

    Every method answers ``(ok, payload)``: env errors are sent back as data rather than raised,
    so they arrive with the env's index and traceback, not wrapped in Ray's exception types.
    The envs are made in :meth:`start`, not in ``__init__``: an exception in an actor's
    constructor kills the actor, and the caller would see a dead worker, not the env's error.
    """

    def __init__(self, spec: ChunkSpec):
        self.spec = spec
        self.first_index = spec.rows.start
        self.chunk: Chunk | None = None

    def start(self) -> tuple[bool, Any]:
        """Makes the envs; answers with the chunk's hello and where this actor runs."""
        return self._answer("make", self._start)

    def _start(self) -> tuple[Any, ...]:
        self.chunk = Chunk(self.spec)
        node = import_ray().get_runtime_context().get_node_id()
        return (*self.chunk.hello(), (socket.gethostname(), os.getpid(), node))

    def serve(self, command: Command, payload: Any) -> tuple[bool, Any]:
        """Carries out one command (see :meth:`Chunk.serve <vecenvs.workers.Chunk.serve>`)."""
        assert self.chunk is not None, "start() made the chunk"
        return self._answer(command.value, self.chunk.serve, command, payload)

    def _answer(self, doing: str, function: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        """``(True, function(*args))``, or ``(False, a report)`` of what it raised."""
        try:
            return True, function(*args)
        except EnvCrashedError as crash:
            return False, crash.report()
        except Exception as error:  # not one env's fault (differing spaces, a bad argument...)
            return False, CrashReport.of(self.first_index, doing, error)


class RaySession:
    """Starts Ray for the first RayVecEnv that needs it and shuts it down after the last one.

    Whoever started Ray stops it. If Ray is already initialised when a RayVecEnv is built (by
    your script to join a cluster, a test fixture, a Ray job), it is used and never shut down.
    If not, a small local Ray is started (or ``address=`` joined), the RayVecEnvs using it are
    counted, and the last to close calls ``ray.shutdown()``, so that no process is left behind.
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

        - ``address="local"`` and ``num_cpus``, the CPUs this process may use (Ray would count
          every CPU of the machine, ignoring taskset and container limits): a Ray of our own.
          Without ``"local"``, ``ray.init()`` joins any Ray another program started on this
          machine, and then refuses ``num_cpus``. With an address (ours, or ``RAY_ADDRESS`` set
          in the environment, which ``ray.init`` reads), no ``num_cpus``: a cluster knows its own.
        - ``include_dashboard=False``: Ray's dashboard is a web server and several processes.
        - ``log_to_driver=False``: what the actors print goes to Ray's log files
          (``/tmp/ray/session_latest/logs``), not into your output. Env errors come back as
          exceptions with their traceback anyway.
        - ``logging_level=WARNING``: no "Started a local Ray instance" banners.

        ``init_kwargs`` overrides any of these and is passed on as it is.
        """
        arguments: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": logging.WARNING,
        }
        if address is None and not os.environ.get("RAY_ADDRESS"):
            arguments.update(address="local", num_cpus=available_cpus())
        elif address is not None:
            arguments["address"] = address
        arguments.update(init_kwargs or {})
        return arguments


class RayWorker:
    """A Ray actor, as the core sees a worker: each command is a remote call, each answer a reference."""

    def __init__(self, index: int, spec: ChunkSpec, actor_class: Any):
        self.index, self.rows = index, spec.rows
        self.ray = import_ray()
        self.actor = actor_class.remote(spec)
        self.answers: deque[Any] = deque([self.actor.start.remote()])  # references, oldest first
        self.location: tuple[str, int] | None = None
        self.node: str | None = None  # the Ray node id of the actor's node

    @property
    def due(self) -> int:
        return len(self.answers)

    def hello(self, deadline: float, patience: float = math.inf) -> tuple[Any, ...]:
        """Waits for the actor to make its envs (one remote call: ``deadline`` does not move)."""
        *hello, (host, pid, self.node) = self.receive(deadline, Command.HELLO)
        self.location = (host, pid)
        return tuple(hello)

    def setup(self, area: Any) -> None:
        pass  # Ray moves the data: nothing to share

    def finish_setup(self, deadline: float) -> None:
        pass

    def post(self, command: Command, payload: Any) -> None:
        # Unlike a pipe, every call has its own reference to its own answer, and an actor runs
        # its calls in the order they were sent.
        self.answers.append(self.actor.serve.remote(command, payload))

    def receive(self, deadline: float, command: Command) -> Any:
        """``ray.get`` of the oldest answer due, with a deadline; Ray's errors turned into ours."""
        ray = self.ray
        try:
            ok, payload = ray.get(self.answers[0], timeout=max(0.0, deadline - time.perf_counter()))
        except ray.exceptions.GetTimeoutError:
            raise WorkerTimeoutError([self.index], list(self.rows), 0, command.value) from None
        except ray.exceptions.RayActorError as error:  # its process died (killed, node lost...)
            self.answers.clear()
            raise WorkerDiedError(self.index, list(self.rows), None, command.value) from error
        except ray.exceptions.RayError as error:  # e.g. a result that could not be unpickled here
            self.answers.clear()
            raise VecEnvError(
                f"worker {self.index} failed during {command.value}: {error}"
            ) from error
        self.answers.popleft()
        if not ok:
            raise payload.to_error()
        return payload

    def stop(self, deadline: float, terminate: bool) -> None:
        try:
            self.ray.kill(self.actor, no_restart=True)
        except Exception:
            logger.debug("ray.kill failed", exc_info=True)
        self.answers.clear()
        self.actor = None


class RayVecEnv(ChunkedVecEnv):
    """Steps N envs in K Ray actors, N/K envs each.

    Args:
        env_fns: pickled by Ray with cloudpickle, so lambdas and notebook functions work; on a
            cluster, whatever they use must be installed on every node.
        num_workers: K, from 1 to N. Default: one per CPU this process may use (on a cluster,
            pass it).
        address: a Ray cluster to join (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``) if
            Ray is not initialised yet; None starts a local Ray (see :class:`RaySession`).
        init_kwargs: extra ``ray.init`` arguments, over :meth:`RaySession.init_arguments`'s.
        actor_options: ``ActorClass.options(**actor_options)``, over the defaults: Ray's
            ``"SPREAD"`` scheduling strategy, which puts the actors on as many nodes as it
            can, evenly (Ray's own ``"DEFAULT"`` fills a node while it is lightly used: on a
            two-node cluster it put both actors of K=2 on one node in one of our two tries). E.g. ``{"num_cpus": 1}`` to reserve a CPU per actor (no
            node gets more actors than CPUs); ``{"resources": {"envs": 1}, "num_cpus": 0}``
            for only the nodes started with that custom resource
            (``ray start --resources='{"envs": 8}'``; an actor given a custom resource also
            holds a CPU unless ``num_cpus`` says otherwise); or a ``scheduling_strategy`` of
            your own (a placement group's, a node's).
        worker_threads: the BLAS, OpenMP and torch threads each actor's envs may use
            (default 1); None leaves them as Ray sets them (``OMP_NUM_THREADS`` = the actor's
            ``num_cpus``, 1 when not given). See :mod:`vecenvs.threads`.
        **kwargs: see :class:`~vecenvs.core.ChunkedVecEnv` (``start_timeout`` defaults to
            180 s here: Ray is slow to start).

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs.ray_env import RayVecEnv
        >>> with RayVecEnv([lambda: gym.make("CartPole-v1") for _ in range(8)], num_workers=2) as envs:  # doctest: +SKIP
        ...     observations, infos = envs.reset(seed=0)
        ...     envs.chunks
        [range(0, 4), range(4, 8)]
    """

    workers: list[RayWorker]  # type: ignore[assignment]  # (every worker is an actor)

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        *,
        address: str | None = None,
        init_kwargs: dict[str, Any] | None = None,
        actor_options: dict[str, Any] | None = None,
        worker_threads: int | None = DEFAULT_WORKER_THREADS,
        start_timeout: float = 180.0,
        **kwargs: Any,
    ):
        # Everything is checked before Ray is started.
        env_fns = check_env_fns(env_fns)
        check_pipes_only(type(self).__name__, kwargs)
        num_workers = check_num_workers(num_workers, len(env_fns))
        self.worker_threads = check_worker_threads(worker_threads)
        self._owns_ray = False  # close_extras reads it, should starting Ray fail
        self._ray = import_ray()
        self._actor_options = actor_options or {}
        self._owns_ray = RaySession.acquire(address, init_kwargs)
        super().__init__(env_fns, num_workers, start_timeout=start_timeout, **kwargs)

    def _start_workers(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        # max_restarts=0 (Ray's default, said out loud): a restarted actor would have fresh envs
        # out of step with the others; better to report it dead.
        defaults = {"max_restarts": 0, "scheduling_strategy": "SPREAD"}
        actor_class = self._ray.remote(ChunkActor).options(**{**defaults, **self._actor_options})
        env_fns = cap_env_fns(env_fns, self.worker_threads)
        for index, rows in enumerate(self.chunks):
            self.workers.append(RayWorker(index, self.spec_of(rows, env_fns), actor_class))

    @property
    def actors(self) -> list[Any]:
        """The Ray actors still running (none once closed)."""
        return [worker.actor for worker in self.workers if worker.actor is not None]

    @property
    def worker_locations(self) -> list[tuple[str, int] | None]:
        """(host name, pid) of each actor."""
        return [worker.location for worker in self.workers]

    @property
    def worker_nodes(self) -> list[str | None]:
        """The Ray node id of each actor's node (``ray.nodes()`` lists them): where Ray put it.
        Two nodes on one machine share a host name, so this, not the host, tells them apart."""
        return [worker.node for worker in self.workers]

    def close_extras(
        self, timeout: float | None = None, terminate: bool = False, **kwargs: Any
    ) -> None:
        """Closes the envs in the actors, kills the actors, and shuts Ray down if we started it."""
        try:
            super().close_extras(timeout=timeout, terminate=terminate, **kwargs)
        finally:
            if self._owns_ray:
                self._owns_ray = False
                RaySession.release()
