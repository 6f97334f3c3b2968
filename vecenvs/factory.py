"""``make_vec``: one call that builds any backend, ours, gymnasium's or a peer's, from an env id.

The benchmark, the notebooks and the dashboard all build their vector envs here, so that two
backends being compared are given exactly the same envs. :data:`BACKEND_INFO` is the one table
of backends: who wrote each, how it steps the envs, and what it needs installed.

Example:
    >>> import vecenvs
    >>> with vecenvs.make_vec("CartPole-v1", num_envs=8, backend="pool", num_workers=2) as envs:
    ...     observations, infos = envs.reset(seed=0)
    >>> observations.shape
    (8, 4)
    >>> describe_backend("envpool")
    'envpool (native C++ envs: a reference, not like-for-like)'
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from vecenvs.async_pool import AsyncPoolVecEnv
from vecenvs.checks import check_whole_number
from vecenvs.envspec import MODULE_ID, REGISTERED, EnvSource, env_fns, resolve_env
from vecenvs.multi_env import MultiEnv
from vecenvs.peers import EnvPoolVecEnv, envpool_id_for, make_sb3_dummy, make_sb3_subproc
from vecenvs.pool import PoolVecEnv
from vecenvs.ray_env import RayVecEnv
from vecenvs.subproc import SubprocVecEnv

__all__ = [
    "BACKENDS",
    "BACKEND_INFO",
    "NATIVE_BACKENDS",
    "ONE_PROCESS_PER_ENV",
    "WORKER_BACKENDS",
    "BackendInfo",
    "available_backends",
    "check_backend_available",
    "check_backend_can_run",
    "describe_backend",
    "env_fns_for",
    "install_hint",
    "make_vec",
]

#: Builds a backend: ``builder(env_id, num_envs, env_kwargs, autoreset_mode, **backend_kwargs)``.
Builder = Callable[..., VectorEnv]


def env_fns_for(env_id: EnvSource, num_envs: int, **env_kwargs: Any) -> list[Callable[[], gym.Env]]:
    """``num_envs`` factories for ``env_id`` made with ``env_kwargs``: any form
    :mod:`vecenvs.envspec` reads (a registered id, ``"module:EnvId"``, an entry point, a
    factory).

    The name is checked here, in this process, so a typo fails at once with gymnasium's own
    "did you mean" message (an ``EnvError``, a ValueError) rather than inside N worker processes.
    """
    return env_fns(env_id, num_envs, **env_kwargs)


# Ray, SB3 and envpool are optional and slow to import: the modules above import them only when
# one of their backends is built (ray_env.py, peers.py).


def _vector_class(
    vector_class: Callable[..., VectorEnv],
    env_id: str,
    num_envs: int,
    env_kwargs: dict[str, Any],
    autoreset_mode: AutoresetMode,
    **kwargs: Any,
) -> VectorEnv:
    """Builds ``vector_class``, a vector env class taking gymnasium's env factories."""
    env_fns = env_fns_for(env_id, num_envs, **env_kwargs)
    return vector_class(env_fns, autoreset_mode=autoreset_mode, **kwargs)


def _pool_async(env_id, num_envs, env_kwargs, autoreset_mode, batch_size=None, **kwargs):
    # Default: half the envs per recv(); all of them would be the lock-step pool again. (The
    # class itself defaults to all, so that without batch_size it is the pool.)
    if batch_size is None:
        batch_size = max(1, num_envs // 2)
    return _vector_class(
        AsyncPoolVecEnv,
        env_id,
        num_envs,
        env_kwargs,
        autoreset_mode,
        batch_size=batch_size,
        **kwargs,
    )


def _sb3(env_id, num_envs, env_kwargs, autoreset_mode, subprocesses, **kwargs):
    env_fns = env_fns_for(env_id, num_envs, **env_kwargs)
    # autoreset_mode is always SAME_STEP here, SB3's only mode: make_vec checked it.
    return make_sb3_subproc(env_fns, **kwargs) if subprocesses else make_sb3_dummy(env_fns)


def _envpool(env_id, num_envs, env_kwargs, autoreset_mode, **kwargs):
    _check_envpool_runs(env_id, env_kwargs)
    # autoreset_mode is always NEXT_STEP here, envpool's only mode: make_vec checked it.
    return EnvPoolVecEnv(env_id, num_envs, **kwargs)


def _check_envpool_runs(env_id, env_kwargs):
    """envpool runs its own C++ version of the env: there must be one, and no env_kwargs."""
    name = resolve_env(
        env_id
    )  # an unknown id fails with gymnasium's "did you mean", as for the others
    if name.kind not in (REGISTERED, MODULE_ID):
        raise ValueError(
            f"backend 'envpool' cannot run {name.text!r}: it runs only its own C++ versions of "
            "registered gymnasium ids, not an entry point or a factory"
        )
    if env_kwargs:
        raise ValueError(
            f"backend 'envpool' takes no env_kwargs (got {env_kwargs!r} for {env_id!r}): it runs "
            "envpool's own C++ version of the env, not gymnasium.make(env_id, **env_kwargs)"
        )
    envpool_id_for(env_id)


@dataclass(frozen=True)
class BackendInfo:
    """One backend: how to build it, who wrote it, and how to label it in tables and figures."""

    name: str  # what make_vec and --backend take, e.g. "pool"
    family: str  # who wrote it: "ours", "gymnasium", "sb3" or "envpool"
    build: Builder
    description: str  # one line: how it steps the envs
    #: Steps its own C++ envs, not gymnasium's: its speed is a reference, not like-for-like.
    native: bool = False
    #: The pip extra that installs its library, and the module that must then be importable;
    #: None if always installed.
    extra: str | None = None
    module: str | None = None
    #: The only autoreset mode it can do; None if it does every mode gymnasium defines.
    autoreset_mode: AutoresetMode | None = None
    #: ``check_env(env_id, env_kwargs)`` raises ``ValueError`` for an env it can't run.
    check_env: Callable[[EnvSource, dict[str, Any]], None] | None = None
    #: The processes it starts: "none", "per-env" or "workers" (K = num_workers, each stepping
    #: N/K envs; K > N is refused).
    processes: str = "none"
    #: The keyword that takes a start method ("fork", "spawn"...); None if it starts none.
    start_method_kwarg: str | None = None
    #: Whether SB3 can train on it (ours through vecenvs.sb3.to_sb3): every env in lock-step.
    trainable: bool = True
    #: Its colour in figures: the sequential loops blue, one process per env orange and red,
    #: the pools green, the native peer purple.
    color: str = "#7f7f7f"

    @property
    def label(self) -> str:
        """The name to show in tables, figures and the dashboard, with a warning if native."""
        native = " (native C++ envs: a reference, not like-for-like)" if self.native else ""
        return self.name + native


_TABLE = (
    BackendInfo(
        "multi",
        "ours",
        partial(_vector_class, MultiEnv),
        "every env in this process, one after the other",
        color="#1f77b4",
    ),
    BackendInfo(
        "subproc",
        "ours",
        partial(_vector_class, SubprocVecEnv),
        "a process per env, pickled messages over pipes",
        processes="per-env",
        start_method_kwarg="start_method",
        color="#ff7f0e",
    ),
    BackendInfo(
        "pool",
        "ours",
        partial(_vector_class, PoolVecEnv),
        "K processes x N/K envs each, shared-memory buffers",
        processes="workers",
        start_method_kwarg="start_method",
        color="#2ca02c",
    ),
    BackendInfo(
        "pool-async",
        "ours",
        _pool_async,
        "the pool, EnvPool-style: send()/recv() of the first batch_size envs ready",
        processes="workers",
        start_method_kwarg="start_method",
        trainable=False,
        color="#98df8a",  # the pool's light green: the same processes, stepped async
    ),
    BackendInfo(
        "ray",
        "ours",
        partial(_vector_class, RayVecEnv),
        "K Ray actors x N/K envs each: the pool's design, across machines",
        extra="ray",
        module="ray",
        processes="workers",
        color="#8c6d31",  # ochre: the pool's design on Ray actors
    ),
    BackendInfo(
        "gym-sync",
        "gymnasium",
        partial(_vector_class, SyncVectorEnv),
        "gymnasium's SyncVectorEnv: every env in this process (the reference)",
        color="#4d4d4d",
    ),
    BackendInfo(
        "gym-async",
        "gymnasium",
        partial(_vector_class, AsyncVectorEnv, shared_memory=False),
        "gymnasium's AsyncVectorEnv: a process per env, pickled over pipes",
        processes="per-env",
        start_method_kwarg="context",  # gymnasium's name for it
        color="#d62728",
    ),
    BackendInfo(
        "gym-async-shm",
        "gymnasium",
        partial(_vector_class, AsyncVectorEnv, shared_memory=True),
        "gymnasium's AsyncVectorEnv: a process per env, observations in shared memory",
        processes="per-env",
        start_method_kwarg="context",
        color="#e377c2",
    ),
    BackendInfo(
        "sb3-dummy",
        "sb3",
        partial(_sb3, subprocesses=False),
        "Stable-Baselines3's DummyVecEnv: every env in this process",
        extra="sb3",
        module="stable_baselines3",
        autoreset_mode=AutoresetMode.SAME_STEP,
        color="#17becf",
    ),
    BackendInfo(
        "sb3-subproc",
        "sb3",
        partial(_sb3, subprocesses=True),
        "Stable-Baselines3's SubprocVecEnv: a process per env, pickled over pipes",
        extra="sb3",
        module="stable_baselines3",
        autoreset_mode=AutoresetMode.SAME_STEP,
        processes="per-env",
        start_method_kwarg="start_method",
        color="#8c564b",
    ),
    BackendInfo(
        "envpool",
        "envpool",
        _envpool,
        "EnvPool: a C++ thread pool stepping envpool's own C++ envs",
        native=True,
        extra="envpool",
        module="envpool",
        autoreset_mode=AutoresetMode.NEXT_STEP,
        check_env=_check_envpool_runs,
        trainable=False,
        color="#9467bd",
    ),
)

#: Backend name -> what it is. Ours first, then gymnasium's own (``gym-sync`` is the
#: reference the benchmark compares with), then the peers, which need an optional extra.
BACKEND_INFO: dict[str, BackendInfo] = {info.name: info for info in _TABLE}

#: Backend name -> its builder, installed or not (see :func:`available_backends`).
BACKENDS: dict[str, Builder] = {info.name: info.build for info in _TABLE}

#: Backends that run their own C++ envs: label their rows with :func:`describe_backend`.
NATIVE_BACKENDS = frozenset(info.name for info in _TABLE if info.native)

#: Backends that split their N envs over ``num_workers`` workers, each needing at least one env.
WORKER_BACKENDS = frozenset(info.name for info in _TABLE if info.processes == "workers")

#: Backends that start one process per env: worth a warning when N is large.
ONE_PROCESS_PER_ENV = frozenset(info.name for info in _TABLE if info.processes == "per-env")


def describe_backend(name: str) -> str:
    """The label for ``name`` in tables, figures and the dashboard.

    Example:
        >>> describe_backend("pool"), describe_backend("envpool")
        ('pool', 'envpool (native C++ envs: a reference, not like-for-like)')
    """
    return _info(name).label


def available_backends() -> list[str]:
    """The backends whose libraries are installed, in :data:`BACKENDS` order.

    Checked with ``importlib.util.find_spec``, which finds a package without importing it
    (importing SB3 imports torch, which takes seconds).
    """
    return [info.name for info in _TABLE if _installed(info)]


def install_hint(name: str) -> str:
    """How to install the library backend ``name`` needs: the peers' one step in a checkout,
    or its own extra.

    Example:
        >>> install_hint("ray")
        "make peers (or pip install 'vecenvs[ray]')"
    """
    return f"make peers (or pip install 'vecenvs[{_info(name).extra}]')"


def check_backend_available(name: str) -> None:
    """Raise a ``ValueError`` for an unknown backend, or one whose library is not installed
    (saying how to install it)."""
    info = _info(name)
    if not _installed(info):
        raise ValueError(
            f"backend {name!r} needs the {info.module!r} package, which is not installed: "
            + install_hint(name)
        )


def check_backend_can_run(
    name: str, env_id: EnvSource, env_kwargs: dict[str, Any] | None = None
) -> None:
    """Raise now, before anything is built, if ``make_vec`` would refuse this backend and env.

    For checking a whole grid of runs before measuring any: the backend must be installed, and
    envpool must have a C++ version of ``env_id`` and be given no ``env_kwargs``. Raises
    ``ValueError`` saying what is wrong, or gymnasium's ``UnregisteredEnv`` for an unknown id.
    """
    check_backend_available(name)
    check_env = BACKEND_INFO[name].check_env
    if check_env is not None:
        check_env(env_id, dict(env_kwargs or {}))


def _info(name: str) -> BackendInfo:
    if name not in BACKEND_INFO:
        raise ValueError(f"unknown backend {name!r}; expected one of {sorted(BACKENDS)}")
    return BACKEND_INFO[name]


def _installed(info: BackendInfo) -> bool:
    return info.module is None or importlib.util.find_spec(info.module) is not None


def make_vec(
    env_id: EnvSource,
    num_envs: int,
    backend: str = "pool",
    *,
    autoreset_mode: AutoresetMode | str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    **backend_kwargs: Any,
) -> VectorEnv:
    """Build ``num_envs`` copies of ``env_id`` stepped by ``backend``.

    Args:
        env_id: the env, in any form :mod:`vecenvs.envspec` reads: a registered id
            (``"CartPole-v1"``), gymnasium's ``"module:EnvId"`` (``"mycart:MyCart-v0"``: the
            module is imported first, in every worker too), an entry point
            (``"mycart.env:MyCartEnv"``, called with ``env_kwargs``) or a function that makes
            an env (a lambda or closure works under every start method: workers unpickle it
            with dill).
        num_envs: how many copies of the env, N (a whole number, at least 1).
        backend: one of :data:`BACKENDS` (see :data:`BACKEND_INFO` for what each does).
        autoreset_mode: gymnasium's ``AutoresetMode`` (or its string value). None: the
            backend's own, which is NEXT_STEP except for the peers that can do only one mode
            (SB3: SAME_STEP; envpool: NEXT_STEP). Asking a peer for a mode it can't do is an
            error.
        env_kwargs: keyword arguments for the env (``gym.make``'s), e.g. ``{"step_seconds": 1e-3}``.
        **backend_kwargs: passed to the backend, e.g. ``num_workers=2`` for the pool, ray or
            envpool (its threads), ``start_method="spawn"`` for ``subproc``, ``pool`` and
            ``sb3-subproc``, ``batch_size`` for ``pool-async`` (default N/2), ``address`` for
            ``ray``.

    Raises:
        ValueError: unknown backend, a backend whose library is not installed, an autoreset
            mode it can't do, or ``num_envs`` < 1.
        TypeError: ``num_envs`` is not a whole number (numpy integers are).
        vecenvs.envspec.EnvError: (a ValueError) an unknown env id, a module that fails to
            import, a name the module does not have; one line saying which.

    Example:
        >>> import vecenvs
        >>> with vecenvs.make_vec("CartPole-v1", num_envs=8, backend="pool", num_workers=2) as envs:
        ...     observations, infos = envs.reset(seed=0)
        ...     actions = envs.action_space.sample()
        ...     observations, rewards, terminations, truncations, infos = envs.step(actions)
        >>> observations.shape, rewards.shape
        ((8, 4), (8,))

        In a script, build the envs under ``if __name__ == "__main__":``: with the ``spawn``
        or ``forkserver`` start method each worker imports the script again.
    """
    check_backend_available(backend)
    info = BACKEND_INFO[backend]
    num_envs = check_whole_number("num_envs", num_envs)
    if autoreset_mode is None:
        mode = info.autoreset_mode or AutoresetMode.NEXT_STEP
    else:
        mode = AutoresetMode(autoreset_mode)
    if info.autoreset_mode is not None and mode is not info.autoreset_mode:
        raise ValueError(
            f"backend {backend!r} can only autoreset in {info.autoreset_mode.value} mode, not "
            f"{mode.value}; leave autoreset_mode out to get it (see vecenvs.peers)"
        )
    return info.build(env_id, num_envs, dict(env_kwargs or {}), mode, **backend_kwargs)
