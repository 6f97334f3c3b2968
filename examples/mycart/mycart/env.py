"""The env: a cart pushed left or right along a track, trying to stay near the middle.

The physics is a few lines of plain Python floats, as many hand-written research envs are.
``physics_steps`` sub-steps per action is the knob: 1 is nearly free (what the vector env
itself costs then shows), a few thousand make the step cost what a small simulator does.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

TRACK = 2.4  # the cart leaves the track beyond +-TRACK metres: the episode ends
FORCE = 10.0  # newtons per push
MASS = 1.0  # kg
FRICTION = 0.1  # velocity lost per second, as a fraction


class MyCartEnv(gym.Env):
    """Observation: position and velocity (float32); action: 0 pushes left, 1 right.
    Reward: 1 for every step on the track, minus how far from the middle it is."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, physics_steps: int = 10, dt: float = 0.02):
        if not isinstance(physics_steps, int) or physics_steps < 1:
            raise ValueError(f"physics_steps must be a whole number >= 1, got {physics_steps!r}")
        self.physics_steps = physics_steps
        self.dt = float(dt)
        high = np.array([TRACK, np.inf], dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.position = self.velocity = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.position, self.velocity = (float(x) for x in self.np_random.uniform(-0.05, 0.05, 2))
        return self._observation(), {}

    def step(self, action):
        force = FORCE if int(action) == 1 else -FORCE
        h = self.dt / self.physics_steps
        position, velocity = self.position, self.velocity
        for _ in range(self.physics_steps):  # the cost knob: plain Python arithmetic
            velocity += h * (force / MASS - FRICTION * velocity)
            position += h * velocity
        self.position, self.velocity = position, velocity
        terminated = abs(position) > TRACK
        reward = 0.0 if terminated else 1.0 - abs(position) / TRACK
        return self._observation(), reward, terminated, False, {}

    def _observation(self) -> np.ndarray:
        position = min(max(self.position, -TRACK), TRACK)
        return np.array([position, self.velocity], dtype=np.float32)


def make_mycart(physics_steps: int = 10) -> gym.Env:
    """A factory, for the entry-point form ``mycart.env:make_mycart``."""
    return MyCartEnv(physics_steps=physics_steps)
