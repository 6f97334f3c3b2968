"""A user's package that registers its env on import: ``RoboWalk-v0`` exists only after
``import robowalk``, so the bare id must be answered with the ``robowalk:RoboWalk-v0`` form."""

import gymnasium

if "RoboWalk-v0" not in gymnasium.registry:
    gymnasium.register(id="RoboWalk-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
