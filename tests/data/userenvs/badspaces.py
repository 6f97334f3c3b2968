"""A user's env whose observation space is not a gymnasium space (a tuple of bounds)."""

import gymnasium
from gymnasium import spaces


class BadSpacesEnv(gymnasium.Env):
    def __init__(self):
        self.observation_space = (-1.0, 1.0)  # not a Space: gymnasium can't batch it
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0.0, {}

    def step(self, action):
        return 0.0, 0.0, False, False, {}


if "BadSpaces-v0" not in gymnasium.registry:
    gymnasium.register(id="BadSpaces-v0", entry_point="badspaces:BadSpacesEnv")
