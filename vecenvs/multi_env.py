"""``MultiEnv``: N environments stepped one after the other, in this process.

This is the baseline every parallel design has to beat. There is no inter-process overhead at
all, so for cheap envs (CartPole steps in a few microseconds) it is very hard to beat; its cost
grows linearly with N because one core does all the work.

It is also the building block of the pool: each ``PoolVecEnv`` worker process runs a
``MultiEnv`` over its chunk of envs, writing straight into shared memory (see ``buffers``).

It behaves exactly like ``gymnasium.vector.SyncVectorEnv`` (the tests check it step by step),
with two additions: actions are checked before any env sees them, and an exception in an env
comes back as :class:`~vecenvs.errors.EnvCrashedError` naming the env's index.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from vecenvs.actions import ActionChecker
from vecenvs.batching import (
    StepBuffers,
    check_env_fns,
    expand_seeds,
    split_reset_mask,
    tree_copy,
    tree_slice,
)
from vecenvs.errors import ClosedEnvironmentError, EnvCrashedError

__all__ = ["InfoRecords", "MultiEnv"]

#: The infos of one batch before they are batched: ``(env index, that env's info dict)`` for the
#: envs that returned a non-empty info, in env order. Worker processes send these, not batched
#: dicts, so the parent can batch the infos of all workers with the global env indices.
InfoRecords = list[tuple[int, dict[str, Any]]]


class MultiEnv(VectorEnv):
    """Steps N environments sequentially in the calling process.

    Args:
        env_fns: functions that each make one env (``lambda: gymnasium.make("CartPole-v1")``).
        autoreset_mode: gymnasium's ``AutoresetMode``: ``NEXT_STEP`` (default: the step after an
            episode ends resets that env), ``SAME_STEP`` (reset at once; the last observation
            and info go in ``infos["final_obs"]`` / ``infos["final_info"]``) or ``DISABLED``.
        copy: return copies of the observations (True), or the internal buffer, which the next
            step overwrites (False: faster, for callers that copy anyway).
        buffers: where to write results instead of arrays of its own. A pool worker passes views
            into shared memory here, so results reach the parent with no extra copy.
        first_index: index of the first of these envs in a larger vector env, so that error
            messages from a pool worker name the env the user knows.

    Example:
        >>> import gymnasium as gym
        >>> from vecenvs import MultiEnv
        >>> with MultiEnv([lambda: gym.make("CartPole-v1")] * 3) as envs:
        ...     observations, infos = envs.reset(seed=42)
        ...     observations, rewards, terminations, truncations, infos = envs.step([0, 1, 0])
        >>> rewards
        array([1., 1., 1.])
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        buffers: StepBuffers | None = None,
        first_index: int = 0,
    ):
        env_fns = check_env_fns(env_fns)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.copy = copy
        self.first_index = first_index
        self.num_envs = len(env_fns)

        self.envs: list[gym.Env] = []
        for index, env_fn in enumerate(env_fns):
            try:
                self.envs.append(env_fn())
            except Exception as error:
                self.close_extras()  # the envs made so far
                raise self._crashed(index, "make", error) from error

        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        for index, env in enumerate(self.envs):
            if env.observation_space != self.single_observation_space or env.action_space != self.single_action_space:
                self.close_extras()
                raise ValueError(
                    f"env {first_index + index} has spaces {env.observation_space}, {env.action_space} but "
                    f"env {first_index} has {self.single_observation_space}, {self.single_action_space}: "
                    f"every env of a vector env must have the same observation and action spaces"
                )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**first.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = first.render_mode
        self.check_actions = ActionChecker(self.action_space, self.num_envs)

        self.buffers = buffers or StepBuffers(
            observations=create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros),
            rewards=np.zeros(self.num_envs, dtype=np.float64),
            terminations=np.zeros(self.num_envs, dtype=np.bool_),
            truncations=np.zeros(self.num_envs, dtype=np.bool_),
        )
        self.env_observations: list[Any] = [None] * self.num_envs  # the latest observation of each env
        self.needs_reset = np.zeros(self.num_envs, dtype=np.bool_)  # NEXT_STEP: reset these on the next step

    # ----------------------------------------------------------------- the VectorEnv API

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Resets the envs (all, or those in ``options["reset_mask"]``); returns observations and infos."""
        self._check_open()
        seeds = expand_seeds(seed, self.num_envs)
        options, mask = split_reset_mask(options, self.num_envs)
        records = self.reset_into_buffers(seeds, options, mask)
        return self._observations_out(), self.batch_infos(records)

    def step(self, actions: Any):
        """Steps every env with its action; returns observations, rewards, terminations, truncations, infos."""
        self._check_open()
        records = self.step_into_buffers(self.check_actions(actions))
        buffers = self.buffers
        return (
            self._observations_out(),
            buffers.rewards.copy(),
            buffers.terminations.copy(),
            buffers.truncations.copy(),
            self.batch_infos(records),
        )

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls method ``name`` of every env (or reads the attribute if it is not callable)."""
        self._check_open()
        results = []
        for index, env in enumerate(self.envs):
            try:
                attribute = env.get_wrapper_attr(name)
                results.append(attribute(*args, **kwargs) if callable(attribute) else attribute)
            except Exception as error:
                raise self._crashed(index, f"call({name!r})", error) from error
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every env."""
        self._check_open()
        results = []
        for index, env in enumerate(self.envs):
            try:
                results.append(env.get_wrapper_attr(name))
            except Exception as error:
                raise self._crashed(index, f"get_attr({name!r})", error) from error
        return tuple(results)

    def set_attr(self, name: str, values: Any) -> None:
        """Sets attribute ``name`` of every env: to ``values[i]`` for a list/tuple, else to ``values``."""
        self._check_open()
        values = per_env_values(values, self.num_envs)
        for index, (env, value) in enumerate(zip(self.envs, values)):
            try:
                env.set_wrapper_attr(name, value)
            except Exception as error:
                raise self._crashed(index, f"set_attr({name!r})", error) from error

    def render(self) -> tuple[Any, ...]:
        """The frames rendered by every env."""
        self._check_open()
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        """Closes every env."""
        for env in getattr(self, "envs", []):
            env.close()

    def __enter__(self) -> MultiEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ----------------------------------------------------------------- the work, without copies

    def reset_into_buffers(self, seeds: list[int | None], options: dict[str, Any] | None, mask: np.ndarray | None) -> InfoRecords:
        """Resets envs, writing observations into ``self.buffers``; returns their info records."""
        buffers = self.buffers
        if mask is None:
            mask = np.ones(self.num_envs, dtype=np.bool_)
        buffers.terminations[mask] = False
        buffers.truncations[mask] = False
        self.needs_reset[mask] = False
        records: InfoRecords = []
        for index in np.flatnonzero(mask):
            try:
                self.env_observations[index], info = self.envs[index].reset(seed=seeds[index], options=options)
            except Exception as error:
                raise self._crashed(index, "reset", error) from error
            if info:
                records.append((int(index), info))
        concatenate(self.single_observation_space, self.env_observations, buffers.observations)
        return records

    def step_into_buffers(self, actions: Any) -> InfoRecords:
        """Steps every env, writing results into ``self.buffers``; returns the info records.

        ``actions`` is a batch that is already valid (see :attr:`check_actions`). A pool worker
        calls this directly on its view of the shared actions.
        """
        records = self.step_each(iterate(self.action_space, actions))
        concatenate(self.single_observation_space, self.env_observations, self.buffers.observations)
        return records

    def step_each(self, env_actions: Iterable[Any], indices: Iterable[int] | None = None) -> InfoRecords:
        """Steps env i with the i-th of ``env_actions`` (one action per env, already valid).

        This is the hot loop. Rewards and flags go into ``self.buffers``; observations stay
        unbatched in :attr:`env_observations` (SubprocVecEnv's workers send them as they are,
        so batching them here would be wasted work). Returns the info records.

        ``indices``: step only these envs, the k-th with the k-th action (default: every env).
        """
        env_observations, rewards = self.env_observations, self.buffers.rewards
        terminations, truncations = self.buffers.terminations, self.buffers.truncations
        mode = self.autoreset_mode
        records: InfoRecords = []
        index, doing = 0, "step"
        pairs = enumerate(env_actions) if indices is None else zip(indices, env_actions)
        try:
            for index, action in pairs:
                env = self.envs[index]
                if mode is AutoresetMode.NEXT_STEP and self.needs_reset[index]:
                    # The previous step ended this env's episode: this step only resets it.
                    doing = "reset (autoreset)"
                    env_observations[index], info = env.reset()
                    rewards[index], terminations[index], truncations[index] = 0.0, False, False
                else:
                    doing = "step"
                    (env_observations[index], rewards[index], terminations[index], truncations[index], info) = env.step(action)
                    if mode is AutoresetMode.SAME_STEP and (terminations[index] or truncations[index]):
                        records.append((index, {"final_obs": env_observations[index], "final_info": info}))
                        doing = "reset (autoreset)"
                        env_observations[index], info = env.reset()
                if info:
                    records.append((index, info))
        except Exception as error:
            raise self._crashed(index, doing, error) from error
        np.logical_or(terminations, truncations, out=self.needs_reset)
        return records

    def step_one(self, index: int, action: Any) -> InfoRecords:
        """Steps env ``index`` alone and writes its row of ``self.buffers``; returns its info records.

        The async pool's workers step envs one by one, each as soon as its action arrives, and
        report each as soon as it is done: this is their step.
        """
        records = self.step_each((action,), (index,))
        self._write_observation(index)
        return records

    def reset_one(self, index: int, seed: int | None, options: dict[str, Any] | None) -> InfoRecords:
        """Resets env ``index`` alone and writes its row of ``self.buffers`` (reward 0, flags False)."""
        buffers = self.buffers
        buffers.rewards[index] = 0.0
        buffers.terminations[index] = buffers.truncations[index] = False
        self.needs_reset[index] = False
        try:
            self.env_observations[index], info = self.envs[index].reset(seed=seed, options=options)
        except Exception as error:
            raise self._crashed(index, "reset", error) from error
        self._write_observation(index)
        return [(index, info)] if info else []

    def batch_infos(self, records: InfoRecords, offset: int = 0) -> dict[str, Any]:
        """Batches info records into gymnasium's dict of arrays with ``_key`` masks."""
        infos: dict[str, Any] = {}
        for index, info in records:
            infos = self._add_info(infos, info, index + offset)
        return infos

    # ----------------------------------------------------------------- helpers

    def _write_observation(self, index: int) -> None:
        """Copies env ``index``'s latest observation into its row of the batched buffer."""
        row = tree_slice(self.buffers.observations, index, index + 1)
        concatenate(self.single_observation_space, [self.env_observations[index]], row)

    def _observations_out(self) -> Any:
        return tree_copy(self.buffers.observations) if self.copy else self.buffers.observations

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(f"{type(self).__name__} is closed: make a new one to step again")

    def _crashed(self, index: int, doing: str, error: Exception) -> EnvCrashedError:
        return EnvCrashedError(self.first_index + int(index), doing, type(error).__name__, str(error), traceback.format_exc())


def per_env_values(values: Any, num_envs: int) -> list[Any]:
    """``set_attr`` values: a list/tuple gives one value per env; anything else goes to every env."""
    if not isinstance(values, (list, tuple)):
        return [values] * num_envs
    if len(values) != num_envs:
        raise ValueError(f"set_attr: expected {num_envs} values (one per env), got {len(values)}")
    return list(values)
