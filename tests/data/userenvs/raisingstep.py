"""A user's env whose step raises on the third call after a reset."""

import gymnasium
import numpy as np
from gymnasium import spaces


class RaisingStepEnv(gymnasium.Env):
    def __init__(self, raise_at: int = 3):
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.raise_at = raise_at
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps == self.raise_at:
            raise ZeroDivisionError("the cart's mass came out as zero")
        return np.zeros(2, dtype=np.float32), 0.0, False, False, {}


class HangingStepEnv(RaisingStepEnv):
    def step(self, action):
        import time

        time.sleep(3600)  # a step that never returns (a simulator waiting on a dead socket)


if "RaisingStep-v0" not in gymnasium.registry:
    gymnasium.register(id="RaisingStep-v0", entry_point="raisingstep:RaisingStepEnv")
    gymnasium.register(id="HangingStep-v0", entry_point="raisingstep:HangingStepEnv")
