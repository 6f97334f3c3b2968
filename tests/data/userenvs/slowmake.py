"""A user's env that takes a while to build (a simulator loading its assets), then runs fine."""

import time

import gymnasium
import numpy as np
from gymnasium import spaces


class SlowMakeEnv(gymnasium.Env):
    def __init__(self, make_seconds: float = 3.0):
        time.sleep(make_seconds)
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 0.0, False, False, {}


if "SlowMake-v0" not in gymnasium.registry:
    gymnasium.register(id="SlowMake-v0", entry_point="slowmake:SlowMakeEnv")
