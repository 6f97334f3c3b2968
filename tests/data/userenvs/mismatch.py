"""A user's env whose step returns something its spaces do not declare: each the way a real
one slips (numpy's float64 default, an observation grown by one value, a reward as an array).

``what`` picks the slip, from the first step on (reset is right): a vector env would cast the
first silently and fail mid-measure on the second, so the check must refuse both up front.
"""

import gymnasium
import numpy as np
from gymnasium import spaces


class MismatchEnv(gymnasium.Env):
    def __init__(self, what: str = "dtype"):
        self.what = what
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        observation, reward, terminated = np.zeros(2, dtype=np.float32), 0.0, False
        if self.what == "dtype":
            observation = np.zeros(2)  # float64: numpy's default
        elif self.what == "shape":
            observation = np.zeros(3, dtype=np.float32)
        elif self.what == "bounds":
            observation = np.array([0.5, 1.5], dtype=np.float32)
        elif self.what == "reward":
            reward = np.array([1.0])
        elif self.what == "flag":
            terminated = 0
        return observation, reward, terminated, False, {}


if "WrongDtype-v0" not in gymnasium.registry:
    gymnasium.register(
        id="WrongDtype-v0", entry_point="mismatch:MismatchEnv", kwargs={"what": "dtype"}
    )
    gymnasium.register(
        id="WrongShape-v0", entry_point="mismatch:MismatchEnv", kwargs={"what": "shape"}
    )
