"""The pool's shared-memory buffers: observations, rewards, terminations, truncations, actions.

The parent allocates them before starting the workers, and the workers inherit them. Each worker
writes the results of its chunk of envs into its own slice and reads its actions from its own
slice, so the pipes only carry a tiny "step" command and the (usually empty) infos: no
observation is ever pickled.

gymnasium's ``create_shared_memory`` / ``read_from_shared_memory`` lay out the nested spaces;
this class only adds the reward/termination/truncation arrays and hands out numpy views.
"""

from __future__ import annotations

import ctypes
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import Space
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory

from vecenvs.batching import StepBuffers

__all__ = ["SharedBuffers"]


class SharedBuffers:
    """Shared memory for ``num_envs`` envs' step results and actions.

    Pass the object to the worker processes when they start (it pickles as handles to the
    shared memory, not as data); call :meth:`step_buffers` and :meth:`actions` in each process to
    get numpy views of it.
    """

    def __init__(self, single_observation_space: Space, single_action_space: Space, num_envs: int, context: ModuleType):
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.num_envs = num_envs
        self._observations = create_shared_memory(single_observation_space, n=num_envs, ctx=context)
        self._actions = create_shared_memory(single_action_space, n=num_envs, ctx=context)
        self._rewards = context.RawArray(ctypes.c_double, num_envs)
        self._terminations = context.RawArray(ctypes.c_bool, num_envs)
        self._truncations = context.RawArray(ctypes.c_bool, num_envs)

    def step_buffers(self) -> StepBuffers:
        """Numpy views of the results of all envs (take ``.slice(start, stop)`` for a chunk)."""
        return StepBuffers(
            observations=read_from_shared_memory(self.single_observation_space, self._observations, n=self.num_envs),
            rewards=np.frombuffer(self._rewards, dtype=np.float64),
            terminations=np.frombuffer(self._terminations, dtype=np.bool_),
            truncations=np.frombuffer(self._truncations, dtype=np.bool_),
        )

    def actions(self) -> Any:
        """Numpy view(s) of the actions of all envs, nested like the action space."""
        return read_from_shared_memory(self.single_action_space, self._actions, n=self.num_envs)
