"""Peers: the vector envs users would pick instead of ours, behind the same gymnasium API.

A speed means most next to the alternatives, measured in the same run on the same machine.
Stable-Baselines3's ``DummyVecEnv`` and ``SubprocVecEnv`` step the same gymnasium envs as ours
(like ``multi`` and ``subproc``): their rows are like-for-like. EnvPool's C++ thread pool steps
its *own* C++ envs (it only needs the env id): its row is a reference for what native code buys.

Each adapter is a ``gymnasium.vector.VectorEnv``, so the benchmark drives every backend with the
same calls; its time (with 64 CartPoles, ~5 µs of envpool's ~200 µs step, a few percent of
SB3's) is measured too, as in any program using the peer through gymnasium's API. Each peer can
autoreset in one mode only, which ``make_vec`` then uses and requires: SB3 in the step that ends
an episode (SAME_STEP), EnvPool on the next step (NEXT_STEP, whose reset-only step is counted
as an env step: about one in 20 with CartPole under random actions).

The libraries are optional (``pip install 'vecenvs[sb3]'``, ``'vecenvs[envpool]'``) and slow to
import (SB3 imports torch, ~2 s; envpool ~1.5 s): they are imported only when a peer is built.

Example:
    >>> import vecenvs
    >>> with vecenvs.make_vec("CartPole-v1", 4, backend="sb3-dummy") as envs:
    ...     observations, infos = envs.reset(seed=0)
    ...     envs.metadata["autoreset_mode"]
    <AutoresetMode.SAME_STEP: 'SameStep'>
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from vecenvs.checks import check_whole_number
from vecenvs.pool import workers_for

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = [
    "EnvPoolVecEnv",
    "SB3VecEnv",
    "envpool_id_for",
    "make_sb3_dummy",
    "make_sb3_subproc",
]


class _Adapter(VectorEnv):
    """What both adapters share: batched spaces from one env's, one autoreset mode, ``with``."""

    def _set_spaces(self, num_envs: int, observation: Any, action: Any, mode: AutoresetMode):
        self.num_envs = num_envs
        self.single_observation_space = observation
        self.single_action_space = action
        self.observation_space = batch_space(observation, num_envs)
        self.action_space = batch_space(action, num_envs)
        self.metadata = {"autoreset_mode": mode}
        self.render_mode = None

    def _check_open(self) -> None:
        # DummyVecEnv would go on stepping its closed envs: fail clearly instead.
        if self.closed:
            raise gym.error.ClosedEnvironmentError("this vector env is closed: make a new one")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def make_sb3_dummy(env_fns: Sequence[Callable[[], gym.Env]]) -> SB3VecEnv:
    """SB3's ``DummyVecEnv`` over ``env_fns``, as a gymnasium ``VectorEnv``."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    return SB3VecEnv(DummyVecEnv(list(env_fns)))


def make_sb3_subproc(
    env_fns: Sequence[Callable[[], gym.Env]], start_method: str | None = None
) -> SB3VecEnv:
    """SB3's ``SubprocVecEnv`` over ``env_fns``, as a gymnasium ``VectorEnv``.

    ``start_method`` None is Python's default, as for our ``subproc`` and ``pool``, not SB3's
    ``"forkserver"`` (its workers then import SB3 and torch: pass it to see what SB3 users get).
    """
    import multiprocessing

    from stable_baselines3.common.vec_env import SubprocVecEnv

    # The one set with multiprocessing.set_start_method, else the platform's default (listed
    # first). Plain get_start_method() would fix the default for the whole program.
    start_method = (
        start_method
        or multiprocessing.get_start_method(allow_none=True)
        or multiprocessing.get_all_start_methods()[0]
    )
    factories: list[Callable[[], gym.Env]] = [_RegisteringFactory(f) for f in env_fns]
    return SB3VecEnv(SubprocVecEnv(factories, start_method=start_method))


class _RegisteringFactory:
    """Calls ``env_fn``; unpickling it in an SB3 worker imports vecenvs, which registers the
    teaching envs, so they can be made under forkserver and spawn."""

    def __init__(self, env_fn: Callable[[], gym.Env]):
        self.env_fn = env_fn

    def __call__(self) -> gym.Env:
        return self.env_fn()


class SB3VecEnv(_Adapter):
    """Any Stable-Baselines3 ``VecEnv`` (closed with this adapter) behind gymnasium's API.

    SB3's ``"TimeLimit.truncated"`` info gives back gymnasium's flags: ``truncated = done and``
    it, ``terminated = done and not`` it (an episode both terminated and truncated is reported
    as terminated only: SB3 keeps no more). The infos are laid out as gymnasium's SAME_STEP
    mode does: ``final_obs`` (SB3's ``terminal_observation``) and ``final_info`` for an ended
    env, the reset's info in place of the step's. Rewards are float64, as gymnasium's
    (DummyVecEnv's are float32-rounded: exact for CartPole's 1.0).
    """

    def __init__(self, venv: Any):
        self.venv = venv
        # SB3 has exactly one autoreset behaviour, and it is gymnasium's SAME_STEP.
        self._set_spaces(
            venv.num_envs, venv.observation_space, venv.action_space, AutoresetMode.SAME_STEP
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env; with ``seed``, env i is reset with ``seed + i``."""
        self._check_open()
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise ValueError(
                    f"seed is {seed!r}: SB3's VecEnv.seed takes one int (env i gets seed + i) "
                    "or None"
                )
            self.venv.seed(int(seed))
        if options:
            self.venv.set_options(options)
        observations = self.venv.reset()
        infos: dict[str, Any] = {}
        for index, info in enumerate(self.venv.reset_infos):
            infos = self._add_info(infos, info, index)
        return observations, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every env; an env whose episode ends is reset in the same step (SAME_STEP)."""
        self._check_open()
        observations, rewards, dones, env_infos = self.venv.step(actions)
        # SB3 hands us fresh dicts every step (deep-copied or unpickled): ours to change.
        cut_by_time_limit = np.array([info.pop("TimeLimit.truncated", False) for info in env_infos])
        infos: dict[str, Any] = {}
        for index, (done, info) in enumerate(zip(dones.tolist(), env_infos)):
            if done:
                final = {"final_obs": info.pop("terminal_observation"), "final_info": info}
                infos = self._add_info(infos, final, index)
                info = self.venv.reset_infos[index]
            if info:  # most steps have none: skipping saves ~1 µs per env (a no-op otherwise)
                infos = self._add_info(infos, info, index)
        terminations = dones & ~cut_by_time_limit
        truncations = dones & cut_by_time_limit
        return observations, rewards.astype(np.float64), terminations, truncations, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``env.get_wrapper_attr(name)(*args, **kwargs)`` in every env, in env order."""
        return tuple(self.venv.env_method(name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """``env.get_wrapper_attr(name)`` of every env, in env order."""
        return tuple(self.venv.get_attr(name))

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set ``name`` in every env: ``values[i]`` in env i if a list or tuple, else ``values``."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} values, one per env, got {len(values)}")
        for index, value in enumerate(values):
            self.venv.env_method("set_wrapper_attr", name, value, indices=[index])

    def close_extras(self, **kwargs: Any) -> None:
        self.venv.close()  # SubprocVecEnv joins its worker processes


#: A few of the gymnasium ids envpool has its own C++ version of, to name in error messages.
_ENVPOOL_EXAMPLES = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Pendulum-v1",
    "LunarLander-v3",
    "HalfCheetah-v5",
    "HumanoidStandup-v5",
)


def envpool_id_for(env_id: str) -> str:
    """The id of envpool's own C++ version of the gymnasium env ``env_id``: ``env_id`` itself.

    envpool names its versions of gymnasium's envs by gymnasium's ids. Anything else is refused
    with a ``ValueError`` (naming ids it does have) rather than mapped to a look-alike:
    envpool's ``"Pong-v5"`` is not gymnasium's ``"ALE/Pong-v5"`` (it preprocesses frames).
    """
    import envpool

    if env_id in envpool.list_all_envs():
        return env_id
    if env_id.startswith("vecenvs/"):
        reason = (
            "it is one of vecenvs' own teaching envs, written in Python, and envpool can only "
            "run its own C++ envs"
        )
    else:
        reason = "envpool has no C++ version of it"
    shared = [name for name in envpool.list_all_envs() if name in gym.registry]
    examples = ", ".join(name for name in _ENVPOOL_EXAMPLES if name in shared)
    raise ValueError(
        f"backend 'envpool' cannot run {env_id!r}: {reason}. It has {len(shared)} of "
        f"gymnasium's env ids, e.g. {examples} (envpool.list_all_envs() lists them all)."
    )


class EnvPoolVecEnv(_Adapter):
    """EnvPool's C++ thread pool, stepping its own C++ envs, behind gymnasium's ``VectorEnv`` API.

    envpool fixes its seeds when the pool is built and ignores ``reset(seed=...)``: so each
    ``reset`` with a seed (and the first, drawing one) builds a new pool (about a millisecond
    for classic control), and the same seed gives the same episodes (env i gets ``seed + i``,
    but envpool's random numbers are not numpy's). Infos get ``_key`` masks, all True; rewards
    are float64 (envpool's are float32). Autoreset is NEXT_STEP, envpool's only mode: the step
    after an episode ends is that env's reset, with reward 0 and both flags False. ``num_workers``
    is envpool's ``num_threads`` (default: our pool's, one per CPU this process may use, at most
    ``num_envs``); the threads' CPU time counts as this process's. ``ValueError``: envpool has
    no such env, or ``num_workers`` is not in 1..num_envs.
    """

    def __init__(self, env_id: str, num_envs: int, *, num_workers: int | None = None):
        import envpool

        if num_workers is not None:
            check_whole_number("num_workers", num_workers, 1, num_envs)
        #: How many envs step at the same time: envpool's threads. Not told, we give it what our
        #: pool takes, one per CPU this process may use, at most N. envpool's own default counts
        #: every CPU of the host (std::thread::hardware_concurrency): in a container limited to
        #: 4 CPUs of a 64-CPU host it would start 64 threads that the quota stops and starts, and
        #: a comparison with our pool would no longer be like for like.
        self.num_workers = num_workers or workers_for(num_envs).count
        self.envpool_id = envpool_id_for(env_id)
        self._make_kwargs = {"num_envs": num_envs, "num_threads": self.num_workers}
        # The spec gives the spaces without building the pool (that waits for the seed).
        spec = envpool.make_spec(self.envpool_id, **self._make_kwargs)
        with _no_box_precision_warning():
            observation = spec.gymnasium_observation_space
            action = spec.gymnasium_action_space
        self._set_spaces(num_envs, observation, action, AutoresetMode.NEXT_STEP)
        self._pool: Any = None  # built by the first reset
        # One read-only all-True mask, shared by every info key: every env reports every key.
        self._every_env = np.ones(num_envs, dtype=np.bool_)
        self._every_env.flags.writeable = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env; with ``seed`` (or on the first reset) a new pool is built."""
        self._check_open()
        if options:
            raise ValueError(f"backend 'envpool' takes no reset options, got {options!r}")
        if seed is not None or self._pool is None:
            if seed is None:
                seed = int(np.random.default_rng().integers(2**31))
            elif isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise ValueError(f"seed is {seed!r}: envpool takes one int (env i gets seed + i)")
            elif not -(2**31) <= seed < 2**31:
                raise ValueError(f"seed is {seed}: envpool's seeds are 32-bit signed ints")
            self.close_extras()
            import envpool

            with _no_box_precision_warning():
                self._pool = envpool.make_gymnasium(
                    self.envpool_id, seed=int(seed), **self._make_kwargs
                )
                # envpool makes its spaces on first use, in reset: make them under the filter.
                _ = self._pool.observation_space
        observations, infos = self._pool.reset()
        return observations, self._with_masks(infos)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every env; an env whose episode ended on the last step is reset instead."""
        self._check_open()
        if self._pool is None:
            raise gym.error.ResetNeeded("call reset() before step(): the pool is built by reset")
        observations, rewards, terminations, truncations, infos = self._pool.step(actions)
        rewards = rewards.astype(np.float64)
        return observations, rewards, terminations, truncations, self._with_masks(infos)

    def _with_masks(self, infos: Mapping[str, Any]) -> dict[str, Any]:
        """envpool's infos (an array per key) with gymnasium's ``_key`` masks, all True."""
        masked: dict[str, Any] = {}
        for key, value in infos.items():
            masked[key] = self._with_masks(value) if isinstance(value, Mapping) else value
            masked[f"_{key}"] = self._every_env
        return masked

    def close_extras(self, **kwargs: Any) -> None:
        """Stop envpool's threads (also before :meth:`reset` builds a new pool)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()  # envpool's threads end when the pool object is freed, just below


@contextlib.contextmanager
def _no_box_precision_warning() -> Iterator[None]:
    """Silences gymnasium's warning that envpool's float64 Box bounds (of float32 observations)
    are cast to float32: the spaces are right, the warning would be noise in every table."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*precision lowered by casting to float32", category=UserWarning
        )
        yield
