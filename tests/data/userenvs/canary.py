"""A module no page may import unless its name was typed into a form: the dashboard tests look
for it in ``sys.modules`` after opening pages whose address names it."""

import gymnasium

if "Canary-v0" not in gymnasium.registry:
    gymnasium.register(id="Canary-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
