"""``MultiEnv``: N environments stepped one after the other, in this process; and the batch rules.

The baseline every parallel design has to beat (no inter-process cost at all; one core does all
the work), and the reference for what every backend returns: exactly gymnasium's
``SyncVectorEnv`` results in every autoreset and observation mode, with two deliberate
differences every backend shares: a batch of actions is checked before any env sees it
(:class:`ActionChecker`), and an env's exception arrives as
:class:`~vecenvs.errors.EnvCrashedError` naming the env's index and carrying its traceback (still
an instance of the env's own exception class).

The batch rules every backend follows live here too, beside the loop they come from: actions
(:class:`ActionChecker`), seeds (:func:`expand_seeds`), ``options["reset_mask"]``
(:func:`split_reset_mask`) and the infos of several chunks side by side (:func:`merge_infos`).
A pool worker runs a ``MultiEnv`` over its chunk (see :mod:`vecenvs.workers`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy
from typing import Any, NoReturn, SupportsFloat, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import (
    batch_differing_spaces,
    batch_space,
    concatenate,
    create_empty_array,
    iterate,
)

from vecenvs.checks import check_env_fns
from vecenvs.errors import ClosedEnvironmentError, CrashReport

__all__ = [
    "ActionChecker",
    "ChunkInfos",
    "EnvsVectorEnv",
    "MultiEnv",
    "ResetResult",
    "StepResult",
    "batch_observations",
    "batched_spaces",
    "check_indices",
    "copy_batch",
    "expand_seeds",
    "merge_infos",
    "per_env_values",
    "place_strays",
    "split_reset_mask",
    "tree_map",
]

#: What ``reset`` returns: the batched observations and the infos.
ResetResult = tuple[Any, dict[str, Any]]
#: What ``step`` returns: observations, rewards, terminations, truncations (arrays of N) and infos.
StepResult = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]
_Self = TypeVar("_Self", bound="EnvsVectorEnv")


class EnvsVectorEnv(VectorEnv):
    """A VectorEnv of N gymnasium envs of its own: what every backend of this package shares.

    ``np_random_seed`` and ``np_random`` give one value per env, read from the envs, as
    gymnasium's own vector envs do (where VectorEnv's annotations say one of each).
    """

    autoreset_mode: AutoresetMode

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """Each env's seed (``np_random_seed``), read from the envs."""
        return self.get_attr("np_random_seed")

    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Each env's random generator (``np_random``), read from the envs."""
        return self.get_attr("np_random")

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every env."""
        return self.get_attr_at(range(self.num_envs), name)

    def get_attr_at(self, indices: Iterable[int], name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of the envs ``indices``."""
        raise NotImplementedError

    def set_attr(self, name: str, values: Any) -> None:
        """Sets attribute ``name`` of every env: to ``values[i]`` for a list/tuple, else to ``values``."""
        self.set_attr_at(range(self.num_envs), name, values)

    def set_attr_at(self, indices: Iterable[int], name: str, values: Any) -> None:
        """Like :meth:`set_attr`, in the envs ``indices`` only (one value each, or one for all)."""
        raise NotImplementedError

    def close(self, **kwargs: Any) -> None:
        """Closes the envs (idempotent); :attr:`closed` is True afterwards even if closing raised."""
        if self.closed:
            return
        try:
            self.close_extras(**kwargs)
        finally:
            self.closed = True

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(
                f"{type(self).__name__} is closed: make a new one to step again"
            )

    def _set_spaces(
        self,
        observation_spaces: list[gym.Space],
        action_spaces: list[gym.Space],
        observation_mode: Any,
        metadata: dict[str, Any],
        render_mode: str | None,
        first_index: int = 0,
    ) -> None:
        """Sets what every backend takes from its envs: spaces (checked), metadata, render mode."""
        (
            self.single_observation_space,
            self.observation_space,
            self.single_action_space,
            self.action_space,
        ) = batched_spaces(observation_spaces, action_spaces, observation_mode, first_index)
        self.metadata = {**metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = render_mode
        self.check_actions = ActionChecker(self.single_action_space, self.num_envs)

    def _make_batch(self) -> None:
        """The arrays a batch is built in: each env's latest observation, then them batched."""
        self._env_obs: list[Any] = [None] * self.num_envs
        self._observations: Any = create_empty_array(
            self.single_observation_space, n=self.num_envs, fn=np.zeros
        )
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terminations = np.zeros(self.num_envs, dtype=np.bool_)
        self._truncations = np.zeros(self.num_envs, dtype=np.bool_)


class MultiEnv(EnvsVectorEnv):
    """Steps N environments sequentially in the calling process.

    Args:
        env_fns: functions that each make one env (``lambda: gymnasium.make("CartPole-v1")``).
        copy: return copies of the observations (True), or the internal buffer, which the next
            step overwrites (False: faster, for callers that copy anyway).
        observation_mode: as gymnasium's: ``"same"`` (every env has the same observation
            space), ``"different"`` (same shapes and dtypes, different bounds) or a tuple
            ``(batched space, single space)``.
        autoreset_mode: gymnasium's ``AutoresetMode``: ``NEXT_STEP`` (default: the step after an
            episode ends resets that env), ``SAME_STEP`` (reset at once; the last observation
            and info go in ``infos["final_obs"]`` / ``infos["final_info"]``) or ``DISABLED``.
        first_index: index of the first of these envs in a larger vector env, so that error
            messages from a pool worker name the env the user knows.

    Not thread-safe, like ``SyncVectorEnv``: step it from one thread at a time.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import MultiEnv
        >>> with MultiEnv([lambda: gym.make("CartPole-v1") for _ in range(3)]) as envs:
        ...     observations, infos = envs.reset(seed=42)
        ...     observations, rewards, terminations, truncations, infos = envs.step([0, 1, 0])
        >>> rewards
        array([1., 1., 1.])
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        copy: bool = True,
        observation_mode: str | tuple[gym.Space, gym.Space] = "same",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        first_index: int = 0,
    ):
        env_fns = check_env_fns(env_fns)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self._next_step = self.autoreset_mode is AutoresetMode.NEXT_STEP
        self._same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        self.copy = copy
        self.first_index = first_index
        self.num_envs = len(env_fns)
        self.envs: list[gym.Env] = []
        try:
            for index, env_fn in enumerate(env_fns):
                try:
                    env = env_fn()
                except Exception as error:
                    raise CrashReport.of(first_index + index, "make", error).to_error() from error
                if any(env is made for made in self.envs):
                    raise ValueError(
                        f"env_fns[{index}] returned an env that an earlier factory returned too: each factory must "
                        f"make a new env (write [lambda: gym.make(...) for _ in range(n)], not [lambda: env] * n)"
                    )
                self.envs.append(env)
            self._set_spaces(
                [env.observation_space for env in self.envs],
                [env.action_space for env in self.envs],
                observation_mode,
                self.envs[0].metadata,
                self.envs[0].render_mode,
                first_index,
            )
        except BaseException:
            self.close_extras()  # the envs made so far
            raise
        self._make_batch()
        self._autoreset_envs = np.zeros(self.num_envs, dtype=np.bool_)  # NEXT_STEP: reset these
        self._chunk_infos: ChunkInfos | None = None  # (see keep_infos_in)

    @property
    def env_observations(self) -> list[Any]:
        """Each env's latest observation, as the env returned it (not batched)."""
        return self._env_obs

    def latest_results(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each env's latest reward, termination and truncation (0 and False after a reset).

        This MultiEnv's own arrays, not copies: the next step overwrites them.
        """
        return self._rewards, self._terminations, self._truncations

    def keep_results_in(
        self, rewards: np.ndarray, terminations: np.ndarray, truncations: np.ndarray
    ) -> None:
        """From now on each env's reward and flags go straight into these arrays (a pool
        worker's rows of shared memory, which then need no copy per step), which take the
        latest ones now."""
        for new, latest in zip((rewards, terminations, truncations), self.latest_results()):
            new[:] = latest
        self._rewards, self._terminations, self._truncations = rewards, terminations, truncations

    def keep_infos_in(self, rows: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """From now on these envs are a part of a larger vector env: :meth:`step_envs` writes
        each env's value of these infos into ``rows``, ``{key: (values, mask)}`` (a pool
        chunk's rows of shared memory, or ``{}``), as it comes, and returns only the other
        infos; steps and resets keep the values that their batch could not hold as they are
        (:attr:`strays`). See :class:`ChunkInfos`."""
        self._chunk_infos = ChunkInfos(rows, self._add_info, self.first_index)

    @property
    def strays(self) -> list[tuple[tuple[str, ...], int, Any]]:
        """The last batch's infos kept as they came (see :class:`ChunkInfos`)."""
        return [] if self._chunk_infos is None else self._chunk_infos.strays

    # ----------------------------------------------------------------- reset and step

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> ResetResult:
        """Resets the envs (all, or those in ``options["reset_mask"]``); returns observations and infos."""
        self._check_open()
        seeds = expand_seeds(seed, self.num_envs)
        options, mask = split_reset_mask(options, self.num_envs)
        indices = range(self.num_envs) if mask is None else np.flatnonzero(mask).tolist()
        for flags in (self._terminations, self._truncations, self._autoreset_envs):
            flags[indices] = False
        infos: dict[str, Any] = {}
        add_info, chunk_infos = self._add_info, self._chunk_infos
        if chunk_infos is not None:  # (see keep_infos_in)
            chunk_infos.clear(rows=False)
            add_info = chunk_infos.batch
        for index in indices:
            for info in self.reset_env(index, seeds[index], options):
                infos = add_info(infos, info, index)
        return self._batch_observations(), infos

    def step(self, actions: Any) -> StepResult:
        """Steps every env with its action; returns observations, rewards, terminations, truncations, infos."""
        self._check_open()
        self.check_actions(actions)
        return self.step_each(iterate(self.action_space, actions))

    def step_each(self, env_actions: Iterable[Any]) -> StepResult:
        """Steps env i with the i-th of ``env_actions`` (one action per env, unbatched, already checked).

        :meth:`step` without the check: :meth:`step_envs`, then the batch.
        """
        infos = self.step_envs(env_actions)
        return (
            self._batch_observations(),
            self._rewards.copy(),
            self._terminations.copy(),
            self._truncations.copy(),
            infos,
        )

    def step_envs(self, env_actions: Iterable[Any]) -> dict[str, Any]:
        """The hot loop: steps env i with the i-th of ``env_actions``; returns the batched infos
        (but those written into shared memory: see :meth:`keep_infos_in`).

        The results stay where they are, for the caller to batch where it wants them: each
        env's observation in :attr:`env_observations` (see :meth:`batch_into`), rewards and
        flags in :meth:`latest_results`. A pool worker calls it with the actions of its chunk.
        """
        if self.autoreset_mode is AutoresetMode.DISABLED and self._autoreset_envs.any():
            self._refuse_ended_envs()
        infos: dict[str, Any] = {}
        count, step_one, add_info = 0, self._step_one, self._add_info
        if (chunk_infos := self._chunk_infos) is not None:  # (see keep_infos_in)
            chunk_infos.clear()
            add_info = chunk_infos.add
        for index, action in enumerate(env_actions):
            for info in step_one(index, action):
                infos = add_info(infos, info, index)
            count += 1
        if count != self.num_envs:
            raise ValueError(
                f"step_each: expected {self.num_envs} actions (one per env), got {count}"
            )
        np.logical_or(self._terminations, self._truncations, out=self._autoreset_envs)
        return infos

    def _refuse_ended_envs(self) -> NoReturn:
        ended = (self.first_index + np.flatnonzero(self._autoreset_envs)).tolist()
        raise AssertionError(
            f"autoreset_mode=DISABLED and envs {ended} have ended their episodes: reset them "
            f"(reset(options={{'reset_mask': ...}})) before stepping again"
        )

    def step_env(self, index: int, action: Any) -> tuple[dict[str, Any], ...]:
        """Steps env ``index`` alone (autoreset included); returns the info dicts to batch for it.

        The results go into the env's row (:attr:`env_observations`, rewards, flags). The infos
        are usually ``(info,)``: with SAME_STEP, an episode's end adds
        ``{"final_obs": ..., "final_info": ...}`` first. Empty infos are left out.
        """
        infos = self._step_one(index, action)
        self._autoreset_envs[index] = self._terminations[index] or self._truncations[index]
        return infos

    def _step_one(self, index: int, action: Any) -> tuple[dict[str, Any], ...]:
        env, doing = self.envs[index], "step"
        try:
            if self._next_step and self._autoreset_envs[index]:
                doing = "reset (autoreset)"  # the previous step ended this env's episode
                observation, info = env.reset()
                reward: SupportsFloat = 0.0
                terminated, truncated, final = False, False, None
            else:
                observation, reward, terminated, truncated, info = env.step(action)
                final = None
                if self._same_step and (terminated or truncated):
                    final = {"final_obs": observation, "final_info": info}
                    doing = "reset (autoreset)"
                    observation, info = env.reset()
        except Exception as error:
            raise CrashReport.of(self.first_index + index, doing, error).to_error() from error
        self._env_obs[index] = observation
        self._rewards[index] = reward
        self._terminations[index] = terminated
        self._truncations[index] = truncated
        if final is not None:
            return (final, info) if info else (final,)
        return (info,) if info else ()

    def reset_env(
        self, index: int, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[dict[str, Any], ...]:
        """Resets env ``index`` alone (reward 0, flags False); returns its info dicts, like :meth:`step_env`."""
        self._env_obs[index], info = self._each(
            "reset", [index], lambda i: self.envs[i].reset(seed=seed, options=options)
        )[0]
        self._rewards[index] = 0.0
        self._terminations[index] = self._truncations[index] = self._autoreset_envs[index] = False
        return (info,) if info else ()

    # ----------------------------------------------------------------- calls and attributes

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls method ``name`` of every env (or reads the attribute if it is not callable)."""
        return self.call_at(range(self.num_envs), name, *args, **kwargs)

    def call_at(
        self, indices: Iterable[int], name: str, *args: Any, **kwargs: Any
    ) -> tuple[Any, ...]:
        """Like :meth:`call`, in the envs ``indices`` only (in that order)."""

        def call(index: int) -> Any:
            attribute = self.envs[index].get_wrapper_attr(name)
            return attribute(*args, **kwargs) if callable(attribute) else attribute

        self._check_open()
        return self._each(f"call({name!r})", check_indices(indices, self.num_envs), call)

    def get_attr_at(self, indices: Iterable[int], name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of the envs ``indices`` (through their wrappers)."""
        self._check_open()
        indices = check_indices(indices, self.num_envs)
        return self._each(
            f"get_attr({name!r})", indices, lambda i: self.envs[i].get_wrapper_attr(name)
        )

    def set_attr_at(self, indices: Iterable[int], name: str, values: Any) -> None:
        """Sets attribute ``name`` of the envs ``indices`` (one value each, or one for all)."""
        self._check_open()
        indices = check_indices(indices, self.num_envs)
        value_of = dict(zip(indices, per_env_values(values, len(indices))))
        self._each(
            f"set_attr({name!r})",
            value_of,
            lambda i: self.envs[i].set_wrapper_attr(name, value_of[i]),
        )

    def render(self) -> tuple[Any, ...]:
        """The frames rendered by every env."""
        self._check_open()
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        """Closes every env, even if some fail; raises :class:`EnvCrashedError` for the first that did."""
        first_failure = None
        for index, env in enumerate(getattr(self, "envs", [])):
            try:
                env.close()
            except Exception as error:
                first_failure = first_failure or CrashReport.of(
                    self.first_index + index, "close", error
                )
        if first_failure is not None:
            raise first_failure.to_error()

    # ----------------------------------------------------------------- helpers

    def _each(self, doing: str, indices: Iterable[int], function: Callable[[int], Any]) -> tuple:
        """``function(index)`` for each of ``indices``; an env's exception becomes its crash report."""
        results = []
        for index in indices:
            try:
                results.append(function(index))
            except Exception as error:
                report = CrashReport.of(self.first_index + index, doing, error)
                raise report.to_error() from error
        return tuple(results)

    def batch_into(self, out: Any = None) -> Any:
        """The envs' latest observations batched into ``out`` (default: this MultiEnv's own
        batch, which the next step overwrites); returns it.

        Raises:
            EnvCrashedError: an env's observation does not fit the space (that env is named).
        """
        if out is None:
            out = self._observations
        try:
            return batch_observations(self.single_observation_space, self._env_obs, out)
        except Exception as error:  # an env returned an observation that does not fit the space
            index = _misfit(self.single_observation_space, self._env_obs)
            raise CrashReport.of(
                self.first_index + index, "batching its observation", error
            ).to_error() from error

    def _batch_observations(self) -> Any:
        self._observations = self.batch_into()
        return copy_batch(self._observations) if self.copy else self._observations


def copy_batch(batch: Any) -> Any:
    """A copy of a batch of observations: ``deepcopy``, made quicker for arrays of numbers (and
    dicts of them), which are copied as they are."""
    if isinstance(batch, np.ndarray) and batch.dtype != object:
        return batch.copy()
    if isinstance(batch, dict):
        return {key: copy_batch(value) for key, value in batch.items()}
    return deepcopy(batch)


def batch_observations(space: gym.Space, items: list[Any], out: Any) -> Any:
    """gymnasium's ``concatenate(space, items, out)``, quicker for small observations (up to
    4 kB) of a Box (or Discrete, MultiDiscrete, MultiBinary) space, of its dtype: ``np.array``
    builds the batch in C (gymnasium's ``np.stack`` gives each observation an axis in Python)
    and one copy puts it in ``out``. Anything else (mixed dtypes, shapes that would broadcast)
    goes to gymnasium, which casts each by numpy's "same_kind" rule, or raises."""
    if type(space) in _ARRAY_SPACES and out.nbytes <= 4096 * len(items):
        batch = np.array(items)
        if batch.shape == out.shape and batch.dtype == out.dtype:
            out[...] = batch  # (numpy's copyto, without its Python wrapper: same shape and dtype)
            return out
    return concatenate(space, items, out)


#: The spaces gymnasium batches with np.stack (see batch_observations).
_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def _misfit(space: gym.Space, observations: list[Any]) -> int:
    """The first env whose observation cannot be batched alone (the one to blame), else 0."""
    for index, observation in enumerate(observations):
        try:
            empty: Any = create_empty_array(space, n=1, fn=np.zeros)
            concatenate(space, [observation], empty)
        except Exception:
            return index
    return 0


# ---------------------------------------------------------------------------------------------
# The batch rules every backend follows
# ---------------------------------------------------------------------------------------------


def batched_spaces(
    observation_spaces: list[gym.Space],
    action_spaces: list[gym.Space],
    observation_mode: str | tuple[gym.Space, gym.Space] = "same",
    first_index: int = 0,
) -> tuple[gym.Space, gym.Space, gym.Space, gym.Space]:
    """``(single obs space, batched obs space, single action space, batched action space)``, checked.

    Follows gymnasium's ``observation_mode`` (see :class:`MultiEnv`); every env must have the
    same action space.

    Raises:
        ValueError: an unknown ``observation_mode``.
        TypeError: a tuple ``observation_mode`` that is not two spaces.
        RuntimeError: envs whose spaces do not fit together (naming the env).
    """
    num_envs = len(observation_spaces)
    if isinstance(observation_mode, tuple) and len(observation_mode) == 2:
        if not all(isinstance(space, gym.Space) for space in observation_mode):
            raise TypeError(
                f"observation_mode: expected a tuple (batched space, single space), got {observation_mode!r}"
            )
        observation_space, single_observation_space = observation_mode
    elif isinstance(observation_mode, str) and observation_mode in ("same", "different"):
        single_observation_space = observation_spaces[0]
        if observation_mode == "same":
            observation_space = batch_space(single_observation_space, num_envs)
        else:
            observation_space = batch_differing_spaces(observation_spaces)
    else:
        raise ValueError(
            "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch "
            f"observation space, actual got {observation_mode}"
        )
    for index, (observation_space_i, action_space_i) in enumerate(
        zip(observation_spaces, action_spaces)
    ):
        if observation_mode == "same":
            if observation_space_i != single_observation_space:
                raise RuntimeError(
                    f"observation_mode='same' however the sub-environments observation spaces are not equivalent. "
                    f"env {first_index + index} has {observation_space_i} but env {first_index} has "
                    f"{single_observation_space}. If this is intentional, use `observation_mode='different'` instead."
                )
        elif not is_space_dtype_shape_equiv(observation_space_i, single_observation_space):
            raise RuntimeError(
                f"env {first_index + index} has observation space {observation_space_i}, which does not share a "
                f"shape and dtype with the single observation space {single_observation_space}"
            )
        if action_space_i != action_spaces[0]:
            raise RuntimeError(
                f"env {first_index + index} has action space {action_space_i} but env {first_index} has "
                f"{action_spaces[0]}: every env of a vector env must have the same action space"
            )
    return (
        single_observation_space,
        observation_space,
        action_spaces[0],
        batch_space(action_spaces[0], num_envs),
    )


class ActionChecker:
    """Checks a batch of actions before any env sees it; the actions themselves are not changed.

    The batch must have the structure of the batched action space (a dict with the space's
    keys, a tuple of its parts, one action per env); the actions of a Discrete or MultiDiscrete
    space must be integers (an index, as gymnasium's ``contains`` says: not a float, not a
    bool), a MultiBinary's integers or bools, a Box's any numbers (a float64 policy output for a
    float32 Box, as Stable-Baselines3 passes them); each must lie within the space's bounds.
    For spaces without bounds (Text, Graph, Sequence, OneOf, your own ``Space``) only the count
    is checked, as gymnasium does.

    Raises (from ``__call__``) TypeError for a batch of the wrong kind (a single number, a list
    for a Dict space, text for a numeric space), ValueError for the wrong number of actions or
    shape, or an action out of bounds.

    Example:
        >>> from gymnasium.spaces import Discrete
        >>> import numpy as np
        >>> check = ActionChecker(Discrete(2), num_envs=3)
        >>> check(np.array([0, 1, 1]))  # good, and int64 already: taken as it is
        True
        >>> check([0, 1, 1])  # good, but a list: converted before it is used
        False
        >>> check([0, 1])
        Traceback (most recent call last):
        ...
        ValueError: actions: expected shape (3,) (one action of shape () for each of the 3 envs), got shape (2,)
    """

    def __init__(self, single_action_space: gym.Space, num_envs: int):
        self.single_action_space = single_action_space
        self.num_envs = num_envs
        self._check = self._build(single_action_space, "actions")

    def __call__(self, actions: Any) -> bool:
        """Raises for a bad batch; returns whether it is arrays of the space's own dtypes (in its
        dicts and tuples), which arrays of those dtypes can take unchanged."""
        return self._check(actions)

    def _build(self, space: gym.Space, where: str) -> Callable[[Any], bool]:
        """A function checking one part of the batch (recursing into Dict and Tuple)."""
        if isinstance(space, spaces.Dict):
            parts = {
                key: self._build(sub, f"{where}[{key!r}]") for key, sub in space.spaces.items()
            }

            def check_dict(actions: Any) -> bool:
                if not isinstance(actions, Mapping):
                    raise TypeError(
                        f"{where}: expected a dict with keys {sorted(parts)}, got {type(actions).__name__}"
                    )
                if set(actions) != set(parts):
                    raise ValueError(
                        f"{where}: expected a dict with keys {sorted(parts)}, got keys {sorted(actions)}"
                    )
                exact = [check(actions[key]) for key, check in parts.items()]
                return isinstance(actions, dict) and all(exact)

            return check_dict
        if isinstance(space, spaces.Tuple):
            items = [self._build(sub, f"{where}[{i}]") for i, sub in enumerate(space.spaces)]
            return _sequence_check(where, len(items), "parts", items)
        if isinstance(space, tuple(_KINDS)):
            return _BoundsCheck(where, space, self.num_envs)
        what = f"actions (one per env) for the {type(space).__name__} space"
        return _sequence_check(where, self.num_envs, what, [])


def _sequence_check(
    where: str, length: int, what: str, items: list[Callable[[Any], bool]]
) -> Callable[[Any], bool]:
    def check_sequence(actions: Any) -> bool:
        if isinstance(actions, (str, bytes, Mapping)) or not isinstance(
            actions, (Sequence, np.ndarray)
        ):
            raise TypeError(
                f"{where}: expected a tuple or list of {length} {what}, got {type(actions).__name__}"
            )
        if len(actions) != length:
            raise ValueError(f"{where}: expected {length} {what}, got {len(actions)}")
        exact = [check(part) for check, part in zip(items, actions)]
        return bool(items) and isinstance(actions, tuple) and all(exact)

    return check_sequence


#: The dtype kinds (b(ool), i(nt), u(nsigned), f(loat)) accepted for the actions of each space.
_KINDS = {
    spaces.Discrete: ("iu", "integers"),
    spaces.MultiDiscrete: ("iu", "integers"),
    spaces.MultiBinary: ("biu", "integers or bools"),
    spaces.Box: ("biuf", "numbers"),
}


class _BoundsCheck:
    """Checks one array of actions of a Box/Discrete/MultiDiscrete/MultiBinary space: kind, shape, bounds."""

    def __init__(self, where: str, space: Any, num_envs: int):
        self.where, self.num_envs = where, num_envs
        self.shape = (num_envs, *(space.shape or ()))
        if isinstance(space, spaces.Discrete):
            low, high = space.start, space.start + space.n - 1
        elif isinstance(space, spaces.MultiDiscrete):
            low, high = space.start, space.start + space.nvec - 1
        elif isinstance(space, spaces.MultiBinary):
            low, high = 0, 1
        else:
            low, high = space.low, space.high
        self.low, self.high = np.asarray(low), np.asarray(high)
        self.kinds, self.kind_name = _KINDS.get(type(space), _KINDS[spaces.Box])
        self.dtype = space.dtype

    def __call__(self, actions: Any) -> bool:
        array = np.asarray(actions)
        if array.ndim == 0:
            raise TypeError(
                f"{self.where}: expected a batch of {self.num_envs} actions (one per env), got a single value {actions!r:.80}"
            )
        if array.dtype.kind not in self.kinds:
            raise TypeError(
                f"{self.where}: expected {self.kind_name}, got dtype {array.dtype} ({actions!r:.80})"
            )
        if array.shape != self.shape:
            raise ValueError(
                f"{self.where}: expected shape {self.shape} (one action of shape {self.shape[1:]} "
                f"for each of the {self.num_envs} envs), got shape {array.shape}"
            )
        inside = (array >= self.low) & (array <= self.high)  # False for NaN as well
        # (count_nonzero: ndarray.all() costs several times as much on a small batch)
        if np.count_nonzero(inside) != inside.size:
            self._refuse_outside(array, inside)
        return array is actions and array.dtype == self.dtype

    def _refuse_outside(self, array: np.ndarray, inside: np.ndarray) -> NoReturn:
        bad = tuple(int(i) for i in np.argwhere(~inside)[0])
        low = self.low[bad[1:]] if self.low.ndim else self.low
        high = self.high[bad[1:]] if self.high.ndim else self.high
        raise ValueError(
            f"{self.where}: action {array[bad].tolist()!r} for env {bad[0]} (at index {bad}) is outside the "
            f"action space: expected {low} <= action <= {high}"
        )


def expand_seeds(seed: Any, num_envs: int) -> list[int | None]:
    """One seed per env, as gymnasium's vector envs do: ``seed`` gives ``[seed, seed+1, ...]``.

    Raises:
        TypeError: not an int, a sequence of ints/None, or None.
        ValueError: a sequence of the wrong length.
    """
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return [int(seed) + index for index in range(num_envs)]
    if not isinstance(seed, (Sequence, np.ndarray)) or isinstance(seed, (str, bytes)):
        raise TypeError(
            f"seed is {seed!r:.80}: expected an int, a list of {num_envs} ints/None (one per env), or None"
        )
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(f"seed: expected {num_envs} seeds (one per env), got {len(seeds)}")
    for index, value in enumerate(seeds):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, np.integer))
        ):
            raise TypeError(f"seed[{index}] is {value!r}: expected an int or None")
    return [None if value is None else int(value) for value in seeds]


def split_reset_mask(
    options: dict[str, Any] | None, num_envs: int
) -> tuple[dict[str, Any] | None, np.ndarray | None]:
    """Takes gymnasium's ``options["reset_mask"]`` out of the options, checked as gymnasium checks it.

    Returns the options for the envs (without the mask; the caller's dict is not changed) and
    the mask, or None when every env is reset.
    """
    if options is None or "reset_mask" not in options:
        return options, None
    options = dict(options)
    mask = options.pop("reset_mask")
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
    if mask.shape != (num_envs,):
        raise ValueError(
            f"`options['reset_mask']` must have shape `({num_envs},)`, got {mask.shape}"
        )
    if mask.dtype != np.bool_:
        raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
    if not mask.any():
        raise ValueError(
            f"`options['reset_mask']` must contain a boolean array with at least one True value, got reset_mask={mask}"
        )
    return options, mask


def check_indices(indices: Iterable[int], num_envs: int) -> list[int]:
    """Env indices for ``call_at`` & co., as ints from 0 to ``num_envs - 1`` (negative ones count
    from the end, as in a list: -1 is the last env)."""
    if (
        isinstance(indices, range)
        and indices.step == 1
        and indices.start >= 0
        and indices.stop <= num_envs
    ):
        return list(indices)
    checked = []
    for index in np.asarray(list(indices)).reshape(-1).tolist():
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not -num_envs <= index < num_envs
        ):
            raise ValueError(
                f"env index {index!r}: expected a whole number from {-num_envs} to {num_envs - 1}"
            )
        checked.append(index % num_envs)
    return checked


def per_env_values(values: Any, count: int) -> list[Any]:
    """``set_attr`` values: a list/tuple gives one value per env; anything else goes to every env."""
    if not isinstance(values, (list, tuple)):
        return [values] * count
    if len(values) != count:
        raise ValueError(f"set_attr: expected {count} values (one per env), got {len(values)}")
    return list(values)


def merge_infos(parts: list[tuple[int, dict[str, Any]]], num_envs: int) -> dict[str, Any]:
    """Puts the infos of several chunks of envs side by side: the infos of all ``num_envs``.

    Each part is ``(index of the chunk's first env, the chunk's infos)``, batched by gymnasium's
    ``VectorEnv._add_info`` within the chunk. The result equals what ``_add_info`` builds env by
    env over all the envs (the tests check it on random infos): an array takes the dtype of the
    first env that had the key, rows of envs without the key are zeros or None, masks ``_key``
    say which envs had it, nested dicts are merged the same way. Workers batch their own chunk's
    infos, in parallel, so that what is left to the parent is one array copy per key and chunk.
    """
    merged: dict[str, Any] = {}
    for start, infos in parts:
        _merge_into(merged, infos, start, num_envs)
    return merged


def _merge_into(merged: dict[str, Any], infos: dict[str, Any], start: int, num_envs: int) -> None:
    for key, value in infos.items():
        if isinstance(value, dict):
            _merge_into(merged.setdefault(key, {}), value, start, num_envs)
            continue
        rows = slice(start, start + len(value))
        if key not in merged:  # this chunk is the first with the key: its dtype decides
            if value.dtype == object:
                merged[key] = np.full(num_envs, None, dtype=object)
            else:
                merged[key] = np.zeros((num_envs, *value.shape[1:]), dtype=value.dtype)
        target = merged[key]
        if target.dtype == value.dtype:
            target[rows] = value
        else:  # another dtype than the first chunk's: copy only this chunk's envs with the key, as _add_info would
            mask = infos.get(f"_{key}")
            for row in np.flatnonzero(mask) if mask is not None else range(len(value)):
                target[start + row] = value[row]


class ChunkInfos:
    """How a chunk's envs' infos are batched when the chunk is a part of a larger vector env (a
    pool worker's): straight into the chunk's rows of shared memory where they can go, through
    gymnasium's ``_add_info`` where not, and never cast into a type that is only the chunk's.

    Each env's value of a shared key is written into its row as it comes (:meth:`add`), where
    ``_add_info`` would batch it: the batched infos are then the same, without building arrays
    to copy. A key the layout does not share is batched by ``_add_info`` into the infos that
    travel pickled (:meth:`batch`), and so is a shared key for a step where the chunk's first
    value of it is not of the learnt type (an int for a float, say): ``_add_info``'s batch
    takes the type of its first value.

    A value of another type than the chunk's first of its key (an int after floats, float64
    after float32) is a *stray*. Gymnasium casts it into the dtype of the first env over the
    whole vector env, which may be another chunk's: casting it into this chunk's batch could
    truncate it (an int batch) or round it (float32) where gymnasium's would not. So its mask
    is set, its row left at zero, and the value itself is kept in :attr:`strays`, ``(path of
    keys, env index in the vector env, value)``, for the caller to put into the merged infos
    (:func:`place_strays`).

    Args:
        rows: ``{key: (values, mask)}``, the chunk's rows of
            :meth:`~vecenvs.shm.SharedArea.info_arrays` (``{}`` before they are shared).
        add_info: gymnasium's ``VectorEnv._add_info`` of the chunk's envs.
        first_index: the index of the chunk's first env in the vector env.
    """

    def __init__(
        self,
        rows: dict[str, tuple[np.ndarray, np.ndarray]],
        add_info: Callable[..., Any],
        first_index: int,
    ):
        self.add_info, self.first_index = add_info, first_index
        self.rows = {
            key: (values, mask, _batched_as(values.dtype, values.shape[1:]), values.dtype, values.shape[1:])
            for key, (values, mask) in rows.items()
        }  # fmt: skip
        #: The kind (:func:`_kind`) of the chunk's first batched value of each key, by the path
        #: of the dicts it is in (``()`` for the top level) and then by key. A shared key found
        #: here had a first value of another type this step: it is batched, not written.
        self.firsts: dict[tuple[str, ...], dict[str, Any]] = {}
        self.strays: list[tuple[tuple[str, ...], int, Any]] = []

    def clear(self, rows: bool = True) -> None:
        """Before a step (without ``rows``: a reset's, whose infos are all batched)."""
        if rows:
            for values, mask, *_ in self.rows.values():
                values[...], mask[...] = 0, False
        self.firsts.clear()
        self.strays = []  # (the last step's list may still be on its way to the caller)

    def add(
        self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int
    ) -> dict[str, Any]:
        """``_add_info`` (with its arguments), the shared keys' values written into their rows."""
        rows = self.rows
        if not rows:  # (none shared yet)
            return self.batch(vector_infos, env_info, env_num)
        batched, others = self.firsts.setdefault((), {}), {}
        for key, value in env_info.items():
            row = rows.get(key)
            if row is not None and key not in batched:
                values, mask, types, dtype, shape = row
                kind = type(value)
                if kind in types or (
                    kind is np.ndarray and value.shape == shape and value.dtype == dtype
                ):
                    values[env_num], mask[env_num] = value, True
                    continue
                if mask.any():  # not the chunk's first: a stray
                    mask[env_num] = True
                    self.strays.append(((key,), self.first_index + env_num, value))
                    continue
            others[key] = value  # (a shared key's first of another type: batched this step)
        return self.batch(vector_infos, others, env_num) if others else vector_infos

    def batch(
        self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int
    ) -> dict[str, Any]:
        """``_add_info``, but for the strays: those are kept as they are, their masks set."""
        strays: list[tuple[tuple[str, ...], Any]] = []
        vector_infos = self.add_info(
            vector_infos, self._without_strays(env_info, (), strays), env_num
        )
        for path, value in strays:
            node = vector_infos
            for key in path[:-1]:
                node = node[key]
            node[f"_{path[-1]}"][env_num] = True
            self.strays.append((path, self.first_index + env_num, value))
        return vector_infos

    def _without_strays(
        self, env_info: dict[str, Any], path: tuple[str, ...], strays: list[Any]
    ) -> dict[str, Any]:
        """``env_info`` (nested dicts too) without its strays, which go into ``strays`` as
        ``(path, value)``; ``env_info`` itself where it has none. A key's first value gives
        the kind the later ones must have."""
        firsts, kept = self.firsts.setdefault(path, {}), env_info
        for key, value in env_info.items():
            if key == "final_obs":  # (a batch of objects: anything goes in as it is)
                continue
            if isinstance(value, dict):
                inner = self._without_strays(value, (*path, key), strays)
                if inner is not value:
                    kept = dict(kept) if kept is env_info else kept
                    kept[key] = inner
                continue
            kind = _kind(value)
            first = firsts.setdefault(key, kind)
            if kind != first and first is not None:  # (None: a batch of objects)
                kept = dict(kept) if kept is env_info else kept
                del kept[key]
                strays.append(((*path, key), value))
        return kept


def _kind(value: Any) -> Any:
    """What decides how ``_add_info`` batches ``value`` and what its row then holds: a
    number's type, an array's dtype and shape, or None for anything batched as an object."""
    kind = type(value)
    if _is_number(kind):
        return kind
    if kind is np.ndarray:
        return value.dtype, value.shape
    return None


def place_strays(infos: dict[str, Any], strays: Iterable[tuple[tuple[str, ...], int, Any]]) -> None:
    """Puts into the merged ``infos`` each value a chunk kept as it was (see
    :class:`ChunkInfos`): cast into the merged batch, as gymnasium's ``_add_info`` casts it."""
    for path, env, value in strays:
        node = infos
        for key in path[:-1]:
            node = node[key]
        batch = node[path[-1]]
        try:
            batch[env] = value
        except (TypeError, ValueError) as error:  # gymnasium's _add_info fails here too
            name = "".join(f"[{key!r}]" for key in path)
            raise type(error)(
                f"env {env}'s info{name} is a {type(value).__name__}, which does not fit the "
                f"batch of the first env's type ({batch.dtype}, {batch.shape[1:]}): {error}"
            ) from error


def _batched_as(dtype: np.dtype, shape: tuple[int, ...]) -> frozenset[type]:
    """The types of one env's value, other than an array of ``dtype`` and ``shape``, that
    ``_add_info`` batches into an array of ``dtype`` (a number's own type: ``int``, ``float``,
    ``bool`` or a numpy number)."""
    if shape:
        return frozenset()
    kinds = (int, float, bool, dtype.type)
    return frozenset(kind for kind in kinds if _is_number(kind) and np.dtype(kind) == dtype)


def _is_number(kind: type) -> bool:
    """Whether ``_add_info`` batches a value of this type into an array of the type's dtype
    (not into an array of objects)."""
    return kind is float or kind is int or kind is bool or issubclass(kind, np.number)


def tree_map(function: Callable[..., Any], *trees: Any) -> Any:
    """``function`` applied to the leaves of nested dicts/tuples of arrays (the first tree's shape)."""
    first = trees[0]
    if isinstance(first, dict):
        return {key: tree_map(function, *(tree[key] for tree in trees)) for key in first}
    if isinstance(first, tuple):
        return tuple(tree_map(function, *parts) for parts in zip(*trees))
    return function(*trees)
