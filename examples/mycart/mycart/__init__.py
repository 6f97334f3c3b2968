"""MyCart: a cart on a track, written in plain Python, whose step cost is a knob.

Importing the package registers ``MyCart-v0`` with gymnasium, which is what gymnasium's
``"mycart:MyCart-v0"`` form relies on: ``gym.make("mycart:MyCart-v0")`` imports ``mycart``
first, then makes the id.
"""

import gymnasium

from mycart.env import MyCartEnv, make_mycart

__all__ = ["MyCartEnv", "make_mycart"]
__version__ = "0.1.0"

# Importing the package twice (a reload) must not register the id twice: gymnasium warns.
if "MyCart-v0" not in gymnasium.registry:
    gymnasium.register(id="MyCart-v0", entry_point="mycart.env:MyCartEnv", max_episode_steps=200)
