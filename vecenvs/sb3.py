"""Train Stable-Baselines3 on our vector envs: any gymnasium ``VectorEnv`` behind SB3's ``VecEnv`` API.

(The other direction, SB3's vec envs behind gymnasium's API, is :class:`vecenvs.peers.SB3VecEnv`.)

Example:
    >>> import vecenvs
    >>> from stable_baselines3 import PPO
    >>> from vecenvs.sb3 import to_sb3
    >>> envs = vecenvs.make_vec("CartPole-v1", 8, backend="pool", num_workers=2, autoreset_mode="SameStep")
    >>> model = PPO("MlpPolicy", to_sb3(envs), n_steps=64, device="cpu")
    >>> model = model.learn(total_timesteps=1024)  # doctest: +SKIP
    >>> model.env.close()

SB3 sets seeds and options *before* ``reset()`` (env i gets seed ``s + i``; envs given different
options are reset in groups, one masked reset each), which returns only the observations. Its
``step`` returns ``dones = terminated or truncated``, float32 rewards and one info dict per env
(gymnasium's batched values come back as numpy scalars), with ``"TimeLimit.truncated"`` =
``truncated and not terminated`` (PPO then bootstraps the last state's value) and, for an ended
env, ``"terminal_observation"``: the observation returned is already the next episode's first.

Each ended episode's return and length are in its info, ``info["episode"] = {"r": return,
"l": length, "t": seconds since the adapter was made}``, as SB3's ``VecMonitor`` records them
(and ``make_vec_env`` does, with a ``Monitor`` on each env): so PPO logs ``ep_rew_mean`` and
``ep_len_mean``, and ``evaluate_policy`` counts whole episodes. ``to_sb3(envs, monitor=False)``
leaves them out. Wrapped in a ``VecMonitor`` anyway, the adapter says it is monitored
(``env_is_wrapped(Monitor)``), so SB3 warns that its statistics replace these: each episode is
still counted once.

That is gymnasium's SAME_STEP autoreset mode, SB3's only one. In NEXT_STEP (our backends'
default) or DISABLED mode the adapter resets the ended envs itself, with a masked
``reset(options={"reset_mask": dones})``: the same results (tested step by step against SB3's
DummyVecEnv), but a second round trip in every step where an episode ends. It warns.

SB3 is optional (``pip install 'vecenvs[sb3]'``) and imports torch, so this module imports it at
once: import ``vecenvs.sb3`` only when you train.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Mapping, Sequence
from copy import deepcopy
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array

from vecenvs.multi_env import tree_map

try:
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.preprocessing import check_for_nested_spaces
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import (
        VecEnvIndices,
        VecEnvStepReturn,
    )
except ImportError as error:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "vecenvs.sb3 needs Stable-Baselines3, which is not installed: make peers (or pip "
        "install 'vecenvs[sb3]' -c constraints.txt, which pins torch)"
    ) from error

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["VectorEnvAsSB3", "to_sb3", "unbatch_infos"]


def to_sb3(vector_env: VectorEnv, *, monitor: bool = True) -> VectorEnvAsSB3:
    """``vector_env`` as a Stable-Baselines3 ``VecEnv``: ``PPO("MlpPolicy", to_sb3(envs))``.

    Build ``vector_env`` with ``autoreset_mode="SameStep"`` when you can: it is SB3's own mode
    and saves a reset round trip on every step in which an episode ends (see the module's
    docstring). ``monitor``: record each episode's return and length in its info, as SB3's
    ``VecMonitor`` does, so that training logs ``ep_rew_mean`` (False: leave them out). Closing
    the adapter closes ``vector_env``.
    """
    return VectorEnvAsSB3(vector_env, monitor=monitor)


class VectorEnvAsSB3(VecEnv):
    """A gymnasium ``VectorEnv`` behind Stable-Baselines3's ``VecEnv`` API (see the module docstring).

    ``vector_env`` autoresets as its ``metadata["autoreset_mode"]`` says (NEXT_STEP, gymnasium's
    default, if it does not say): that mode is :attr:`autoreset_mode`. With ``monitor`` each
    ended episode's ``info["episode"]`` holds its return and length (:attr:`episode_returns`
    and :attr:`episode_lengths` are the running ones).
    """

    def __init__(self, vector_env: VectorEnv, *, monitor: bool = True):
        # Nested spaces are refused, as SB3's own vec envs refuse them.
        check_for_nested_spaces(vector_env.single_observation_space)
        # Any: besides VectorEnv's API, call/get_attr/set_attr and maybe step_async/step_wait.
        self.vector_env: Any = vector_env
        self.autoreset_mode = AutoresetMode(
            vector_env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        )
        if self.autoreset_mode is not AutoresetMode.SAME_STEP:
            warnings.warn(
                f"{type(vector_env).__name__} autoresets in {self.autoreset_mode.value} mode; SB3 needs an ended "
                "env reset in the same step, so the adapter resets ended envs itself, at the cost of a second "
                "round trip in every step where an episode ends. Build it with autoreset_mode='SameStep' instead.",
                stacklevel=2,
            )
        # SB3 keeps the observations it is given (PPO stores them in its rollout buffer after the
        # next step): a buffer the next step overwrites must be copied.
        self._copy_observations = getattr(vector_env, "copy", True) is False
        self._actions: Any = None
        # SB3's constructor asks every env for its render_mode, through get_attr below.
        super().__init__(
            vector_env.num_envs, vector_env.single_observation_space, vector_env.single_action_space
        )
        # Episode statistics, kept as SB3's VecMonitor keeps them (float32 returns).
        self.monitor = bool(monitor)
        self.started_at = time.time()
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        self.episode_count = 0

    def reset(self) -> Any:
        """Resets every env with the seeds and options set beforehand; returns the observations.

        SB3 keeps one options dict per env, gymnasium's ``reset`` takes one for all: one masked
        reset per distinct options.
        """
        seeds = self._seeds if any(seed is not None for seed in self._seeds) else None
        groups: list[tuple[dict[str, Any], list[int]]] = []
        for index, options in enumerate(self._options):
            for group_options, members in groups:
                if group_options == options:
                    members.append(index)
                    break
            else:
                groups.append((options, [index]))
        if len(groups) == 1:
            observations, infos = self.vector_env.reset(seed=seeds, options=groups[0][0] or None)
            self.reset_infos = unbatch_infos(infos, self.num_envs)
        else:
            self.reset_infos = [{} for _ in range(self.num_envs)]
            for options, members in groups:
                mask = np.isin(np.arange(self.num_envs), members)
                observations, infos = self.vector_env.reset(
                    seed=seeds, options={**options, "reset_mask": mask}
                )
                for index, info in enumerate(unbatch_infos(infos, self.num_envs)):
                    if mask[index]:
                        self.reset_infos[index] = info
        self.episode_returns[:] = 0  # every episode starts again
        self.episode_lengths[:] = 0
        # As in SB3's own vec envs, seeds and options are used once.
        self._reset_seeds()
        self._reset_options()
        return deepcopy(observations) if self._copy_observations else observations

    def step_async(self, actions: np.ndarray) -> None:
        """Sends the actions; a vector env with its own ``step_async`` starts stepping now.

        For a Dict or Tuple action space SB3 passes a *list* of each env's action: batched here.
        """
        if (
            isinstance(self.action_space, (spaces.Dict, spaces.Tuple))
            and isinstance(actions, list)
            and len(actions) == self.num_envs
        ) and (
            isinstance(self.action_space, spaces.Tuple)
            or all(isinstance(action, Mapping) for action in actions)
        ):
            actions = concatenate(
                self.action_space,
                actions,
                create_empty_array(self.action_space, n=self.num_envs),
            )
        step_async = getattr(self.vector_env, "step_async", None)
        if step_async is not None:
            step_async(actions)
        else:
            self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if getattr(self.vector_env, "step_async", None) is not None:
            results = self.vector_env.step_wait()
        else:
            actions, self._actions = self._actions, None
            results = self.vector_env.step(actions)
        observations, rewards, terminations, truncations, infos = results
        dones = np.logical_or(terminations, truncations)
        infos = dict(infos)  # ours to change: the final_* keys are taken out below
        final_observations = infos.pop("final_obs", None)
        final_infos = infos.pop("final_info", {})
        for key in ("_final_obs", "_final_info"):
            infos.pop(key, None)
        env_infos = unbatch_infos(infos, self.num_envs)
        if dones.any():
            if self.autoreset_mode is AutoresetMode.SAME_STEP:
                # The ended envs are already reset: the step's info (final_info) goes to SB3's
                # infos, the reset's to reset_infos.
                final_infos = unbatch_infos(final_infos, self.num_envs)
                for ended in np.flatnonzero(dones):
                    self.reset_infos[ended] = env_infos[ended]
                    env_infos[ended] = final_infos[ended]
                    # A copy: SB3's wrappers change it in place (VecFrameStack stacks into a dict
                    # observation), and an env in this process may have returned its own object.
                    env_infos[ended]["terminal_observation"] = deepcopy(final_observations[ended])
            else:
                observations = self._reset_ended_envs(dones, env_infos, observations)
        for index, info in enumerate(env_infos):
            info["TimeLimit.truncated"] = bool(truncations[index] and not terminations[index])
        rewards = rewards.astype(np.float32)
        if self.monitor:
            self._record_episodes(rewards, dones, env_infos)
        if self._copy_observations:
            observations = deepcopy(observations)
        return observations, rewards, dones, env_infos

    def _record_episodes(
        self, rewards: np.ndarray, dones: np.ndarray, env_infos: list[dict[str, Any]]
    ) -> None:
        """Add the step to each env's episode; an ended episode's return, length and time go in
        its info as ``"episode"`` (what SB3's logger and ``evaluate_policy`` read)."""
        self.episode_returns += rewards
        self.episode_lengths += 1
        for index in np.flatnonzero(dones):
            env_infos[index]["episode"] = {
                "r": self.episode_returns[index],
                "l": self.episode_lengths[index],
                "t": round(time.time() - self.started_at, 6),
            }
            self.episode_returns[index] = 0
            self.episode_lengths[index] = 0
            self.episode_count += 1

    def _reset_ended_envs(
        self, dones: np.ndarray, env_infos: list[dict[str, Any]], observations: Any
    ) -> Any:
        """NEXT_STEP or DISABLED: resets the ended envs now; returns the observations, theirs replaced."""
        for index in np.flatnonzero(dones).tolist():
            row = tree_map(lambda leaf, index=index: np.array(leaf[index]), observations)
            env_infos[index]["terminal_observation"] = row  # a copy: SB3 may keep it
        reset_observations, reset_infos = self.vector_env.reset(
            options={"reset_mask": dones.copy()}
        )
        for index, info in enumerate(unbatch_infos(reset_infos, self.num_envs)):
            if dones[index]:
                self.reset_infos[index] = info

        def ended_reset(reset: np.ndarray, current: np.ndarray) -> np.ndarray:
            batch = np.array(current)  # a new batch: the ended envs' rows are their reset's
            batch[dones] = reset[dones]
            return batch

        return tree_map(ended_reset, reset_observations, observations)

    @property
    def envs(self) -> list[gym.Env]:
        """The env objects, like ``DummyVecEnv.envs``, where they live in this process."""
        envs = getattr(self.vector_env, "envs", None)
        if envs is None:
            raise AttributeError(
                f"{type(self.vector_env).__name__}'s envs live in other processes: there is no list of env objects "
                "here. Use get_attr / set_attr / env_method, which reach them."
            )
        return envs

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Calls ``method_name`` of the envs in ``indices`` (default: all); returns their results.

        A vector env with only gymnasium's ``call`` (not ours, not ``SyncVectorEnv``) calls every
        env: the others' results are dropped.
        """
        indices = list(self._get_indices(indices))
        venv = self.vector_env
        if hasattr(venv, "call_at"):
            return list(venv.call_at(indices, method_name, *method_args, **method_kwargs))
        if isinstance(venv, gym.vector.SyncVectorEnv):
            return [
                _call(venv.envs[index], method_name, method_args, method_kwargs)
                for index in indices
            ]
        results = venv.call(method_name, *method_args, **method_kwargs)
        return [results[index] for index in indices]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """``attr_name`` of the envs in ``indices``; ``AttributeError`` if an env has none, as SB3's
        ``has_attr`` expects (our backends' ``EnvCrashedError`` for it is one)."""
        indices = list(self._get_indices(indices))
        venv = self.vector_env
        if hasattr(venv, "get_attr_at"):
            return list(venv.get_attr_at(indices, attr_name))
        if isinstance(venv, gym.vector.SyncVectorEnv):
            return [venv.envs[index].get_wrapper_attr(attr_name) for index in indices]
        values = venv.get_attr(attr_name)
        return [values[index] for index in indices]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Sets ``attr_name`` to ``value`` in the envs in ``indices``, and only those."""
        indices = list(self._get_indices(indices))
        venv = self.vector_env
        if hasattr(venv, "set_attr_at"):
            # A list: one value each, even when the value is a list.
            venv.set_attr_at(indices, attr_name, [value] * len(indices))
        elif isinstance(venv, gym.vector.SyncVectorEnv):
            for index in indices:
                venv.envs[index].set_wrapper_attr(attr_name, value)
        elif sorted(indices) == list(range(self.num_envs)):
            venv.set_attr(attr_name, [value] * self.num_envs)
        else:
            raise NotImplementedError(
                f"{type(venv).__name__} can set an attribute only in every env (gymnasium's set_attr): "
                f"indices={indices} needs one of vecenvs' backends or SyncVectorEnv"
            )

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Whether the envs in ``indices`` are wrapped in ``wrapper_class`` (e.g. SB3's ``Monitor``).

        The envs may live in other processes, where only a method's name can reach them: so each
        env's ``str(env)`` (``<Monitor<TimeLimit<...>>>``) is searched for the class's name. (A
        subclass of ``wrapper_class`` is not recognised, unlike ``isinstance``.) With
        ``monitor``, every env counts as wrapped in SB3's ``Monitor``: its episodes are recorded
        as a Monitor records them (SB3's ``VecMonitor`` then warns that it replaces them, and
        ``evaluate_policy`` reads them).
        """
        if self.monitor and wrapper_class is Monitor:
            return [True for _ in self._get_indices(indices)]
        descriptions = self.vector_env.call("__str__")
        return [
            wrapper_class.__name__ in re.findall(r"<(\w+)", descriptions[index])
            for index in self._get_indices(indices)
        ]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Each env's frame, for SB3's ``render()`` (envs made with ``render_mode="rgb_array"``)."""
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"render_mode is {self.render_mode!r}: get_images needs 'rgb_array'", stacklevel=2
            )
            return [None] * self.num_envs
        return list(self.vector_env.call("render"))

    def close(self) -> None:
        self.vector_env.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _call(env: gym.Env, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
    attribute = env.get_wrapper_attr(name)
    return attribute(*args, **kwargs) if callable(attribute) else attribute


def unbatch_infos(infos: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """gymnasium's batched infos (a dict of arrays with ``_key`` masks) -> one dict per env.

    Env i's dict has the keys whose mask is True at i; nested dicts are unbatched in turn.

    Example:
        >>> import numpy as np
        >>> unbatch_infos({"lives": np.array([3, 0]), "_lives": np.array([True, False])}, 2)
        [{'lives': np.int64(3)}, {}]
    """
    per_env: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, values in infos.items():
        if key.startswith("_") and key[1:] in infos:
            continue  # a mask: used with its key
        mask = infos.get(f"_{key}", np.ones(num_envs, dtype=np.bool_))
        if isinstance(values, dict):
            values = unbatch_infos(values, num_envs)
        for index in np.flatnonzero(mask):
            per_env[index][key] = values[index]
    return per_env
