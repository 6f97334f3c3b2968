"""``SpacesEnv``: an env for every kind of gymnasium space, to check vector envs against.

A vector env has to batch observations of any space, pass each env its action unchanged and
batch infos of any shape, exactly as ``SyncVectorEnv`` does. This env's spaces are picked by
name from :data:`SPACES`: one example of each space type gymnasium has
(https://gymnasium.farama.org/api/spaces/) and one of our own (:class:`Parity`). Registered as
``"vecenvs/Spaces-v0"``::

    gymnasium.make("vecenvs/Spaces-v0", observation="graph", action="text")

Each step returns a sample of the observation space and a reward from its own seeded generator,
ends the episode now and then (termination, or truncation after ``max_steps``) and reports
infos of many kinds. It keeps every action as received in :attr:`actions_seen`: comparing that
list between two vector envs shows whether the actions arrived exactly as given.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["SPACES", "Parity", "SpacesEnv"]


class Parity(gym.Space):
    """A space of one's own: the even (or odd) integers from 0 to 98.

    It is not one of gymnasium's space classes, so gymnasium's vector utilities treat it as a
    custom space: batched as a tuple, never laid out in shared memory.
    """

    def __init__(self, odd: bool = False, seed: int | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.odd = odd

    def sample(self, mask: Any = None, probability: Any = None) -> int:
        return 2 * int(self.np_random.integers(0, 49)) + int(self.odd)

    def contains(self, x: Any) -> bool:
        return bool(isinstance(x, (int, np.integer)) and 0 <= x <= 98 and x % 2 == int(self.odd))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Parity) and other.odd == self.odd

    def __repr__(self) -> str:
        return f"Parity(odd={self.odd})"


#: Name -> a function making the space. Every space type gymnasium has, and one of our own.
SPACES: dict[str, Callable[[], gym.Space]] = {
    "box": lambda: spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32),
    "box-float64-unbounded": lambda: spaces.Box(-np.inf, np.inf, shape=(2, 2), dtype=np.float64),
    "box-image": lambda: spaces.Box(0, 255, shape=(4, 4, 3), dtype=np.uint8),
    "box-int": lambda: spaces.Box(-5, 5, shape=(2,), dtype=np.int32),
    "box-bool": lambda: spaces.Box(
        np.array([False, False, True]), np.array([True, False, True]), dtype=np.bool_
    ),
    "box-float16": lambda: spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float16),
    "discrete": lambda: spaces.Discrete(4),
    "discrete-start": lambda: spaces.Discrete(3, start=-1),
    "multi-discrete": lambda: spaces.MultiDiscrete(
        np.array([[2, 3], [4, 5]]), start=np.array([[0, 1], [-1, 0]])
    ),
    "multi-binary": lambda: spaces.MultiBinary([2, 3]),
    "text": lambda: spaces.Text(min_length=1, max_length=6, charset="abcdef"),
    "dict": lambda: spaces.Dict(
        {
            "position": spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32),
            "mode": spaces.Discrete(3),
            "inner": spaces.Dict(
                {
                    "flags": spaces.MultiBinary(2),
                    "level": spaces.Box(0, 9, shape=(), dtype=np.int64),
                }
            ),
        }
    ),
    "tuple": lambda: spaces.Tuple(
        (
            spaces.Discrete(2),
            spaces.Tuple((spaces.Box(0.0, 1.0, shape=(1,)), spaces.MultiDiscrete([3, 3]))),
        )
    ),
    "sequence": lambda: spaces.Sequence(spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)),
    "sequence-stacked": lambda: spaces.Sequence(spaces.Discrete(5), stack=True),
    "graph": lambda: spaces.Graph(
        node_space=spaces.Box(-1.0, 1.0, shape=(2,)), edge_space=spaces.Discrete(3)
    ),
    "graph-no-edges": lambda: spaces.Graph(node_space=spaces.Discrete(4), edge_space=None),
    "one-of": lambda: spaces.OneOf(
        (spaces.Discrete(3), spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32))
    ),
    "custom": lambda: Parity(),
}


class SpacesEnv(gym.Env):
    """Observations of the space named ``observation``, actions of the one named ``action``.

    Both names are keys of :data:`SPACES` (a ValueError lists them); the episode is truncated
    after ``max_steps`` steps, and may terminate sooner.
    """

    metadata = {"render_modes": []}

    def __init__(self, observation: str = "box", action: str = "discrete", max_steps: int = 12):
        for name in (observation, action):
            if name not in SPACES:
                raise ValueError(f"unknown space {name!r}: expected one of {sorted(SPACES)}")
        self.observation_space = SPACES[observation]()
        self.action_space = SPACES[action]()
        self.max_steps = max_steps
        self.steps = 0
        self.actions_seen: list[Any] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.steps = 0
        return self.observation_space.sample(), self._infos(reset=True)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.actions_seen.append(copy.deepcopy(action))  # as received: type, dtype and value
        self.steps += 1
        terminated = bool(self.np_random.random() < 0.1)
        truncated = self.steps >= self.max_steps
        reward = float(self.np_random.normal())
        return self.observation_space.sample(), reward, terminated, truncated, self._infos(False)

    def _infos(self, reset: bool) -> dict[str, Any]:
        """Infos of many kinds; which keys an env reports depends on its seeded generator."""
        roll = int(self.np_random.integers(0, 6))
        if roll == 0:
            return {}
        infos: dict[str, Any] = {"steps": self.steps, "reset": reset}
        if roll >= 2:
            infos["score"] = float(self.np_random.random())
            infos["level"] = np.int32(roll)
        if roll >= 3:
            infos["trace"] = self.np_random.random(2)
            infos["label"] = "abc"[: roll - 2]
        if roll >= 4:
            infos["nested"] = {"depth": roll, "ok": np.bool_(roll % 2)}
        if roll == 5:
            infos["maybe"] = None
        return infos
