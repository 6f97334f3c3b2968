"""``DictObsEnv``: a ball on a table, observed through a ``Dict`` space of mixed dtypes.

Most vector-env bugs hide in the unusual cases: dict observations of arrays with different
shapes and dtypes (a plain integer too), float actions, episodes ending by termination for some
envs and by truncation for others, info keys only some envs report. This env has all of them in
a few lines of deterministic dynamics. Registered as ``"vecenvs/DictObs-v0"`` with
``max_episode_steps=25``: with random actions both endings are common.
"""

from __future__ import annotations

import bisect
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["DictObsEnv"]

_TABLE_RADIUS = 2.0  # the ball falls off (terminated) beyond this distance from the centre
_RINGS = (1.0, 1.5)  # "mode" is 0 inside the first radius, 1 up to the second, 2 beyond
_FRICTION = 0.7  # share of the velocity kept from one step to the next
_PUSH = 0.3  # how strongly the action changes the velocity
_NOISE = 0.05  # standard deviation of the seeded jitter added to the velocity
_DT = 0.4  # how far the ball moves per unit of velocity in one step
# A step moves the ball at most 0.4 * sqrt(2) < 0.6 and the episode ends once it is past 2,
# so this bound is never reached.
_POSITION_BOUND = 3.0


class DictObsEnv(gym.Env):
    """A ball on a round table of radius 2; the action pushes it, it terminates falling off.

    Observation (``gymnasium.spaces.Dict``):
        * ``"position"``: ``Box((3,), float32)``: ``x``, ``y`` and the distance from the
          centre (the third entry only makes the shape differ from ``"velocity"``);
        * ``"velocity"``: ``Box((2,), float64)`` in ``[-1, 1]``;
        * ``"mode"``: ``Discrete(3)``: 0 near the centre, 1 in the middle ring, 2 near the rim.

    Action: ``Box((2,), float32)`` in ``[-1, 1]``, a push in ``x`` and ``y`` (clipped).
    Reward: ``1 - distance``. Truncation: only through the ``TimeLimit`` of ``gymnasium.make``.
    Infos: ``"distance"`` (float) and ``"steps"`` (int, in this episode) always;
    ``"mode_changed": True`` on steps where ``"mode"`` changed.
    """

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        bound = _POSITION_BOUND
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(
                    np.array([-bound, -bound, 0.0], dtype=np.float32),
                    np.array([bound, bound, 2 * bound], dtype=np.float32),
                    dtype=np.float32,
                ),
                "velocity": spaces.Box(-1.0, 1.0, (2,), dtype=np.float64),
                "mode": spaces.Discrete(3),
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self._position: np.ndarray | None = None  # x, y as float64; float32 only when observed
        self._velocity: np.ndarray | None = None
        self._mode = 0
        self._steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Put the ball at a random spot near the centre with a small random velocity."""
        super().reset(seed=seed)
        self._position = self.np_random.uniform(-0.7, 0.7, size=2)
        self._velocity = self.np_random.uniform(-0.1, 0.1, size=2)
        self._steps = 0
        distance = float(np.hypot(*self._position))
        self._mode = bisect.bisect_right(_RINGS, distance)
        return self._observation(distance), {"distance": distance, "steps": 0}

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Push the ball, let it roll one step; raises ``ResetNeeded`` before any reset."""
        if self._position is None or self._velocity is None:
            raise gym.error.ResetNeeded("DictObsEnv: call reset() before step()")
        push = np.clip(np.asarray(action, dtype=np.float64).reshape(2), -1.0, 1.0)
        jitter = self.np_random.normal(0.0, _NOISE, size=2)
        self._velocity = np.clip(_FRICTION * self._velocity + _PUSH * push + jitter, -1.0, 1.0)
        self._position = self._position + _DT * self._velocity
        self._steps += 1

        distance = float(np.hypot(*self._position))
        info: dict[str, Any] = {"distance": distance, "steps": self._steps}
        mode = bisect.bisect_right(_RINGS, distance)
        if mode != self._mode:
            info["mode_changed"] = True
        self._mode = mode
        terminated = distance > _TABLE_RADIUS
        return self._observation(distance), 1.0 - distance, terminated, False, info

    def _observation(self, distance: float) -> dict[str, Any]:
        """A fresh observation dict (new arrays every time: callers may keep them)."""
        assert self._position is not None and self._velocity is not None, "reset() came first"
        x, y = self._position
        return {
            "position": np.array([x, y, distance], dtype=np.float32),
            "velocity": self._velocity.copy(),
            "mode": np.int64(self._mode),
        }
