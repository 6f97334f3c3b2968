"""Teaching environments, registered with gymnasium under the ``vecenvs/`` namespace.

Importing this package (``import vecenvs`` does it) makes :data:`ENV_IDS` available to
``gymnasium.make``: ``"vecenvs/Costly-v0"`` (:class:`CostlyEnv`, a step cost you choose),
``"vecenvs/DictObs-v0"`` (:class:`DictObsEnv`, a ``Dict`` observation, 25-step time limit),
``"vecenvs/Faulty-v0"`` (:class:`FaultyEnv`, fails on purpose) and ``"vecenvs/Spaces-v0"``
(:class:`SpacesEnv`, observations and actions of any gymnasium space type).
"""

from __future__ import annotations

from typing import Any

import gymnasium

from vecenvs.envs.costly import CostlyEnv
from vecenvs.envs.dict_obs import DictObsEnv
from vecenvs.envs.faulty import FaultyEnv, faulty_env_fns
from vecenvs.envs.spaces import SPACES, SpacesEnv

__all__ = [
    "ENV_IDS",
    "SPACES",
    "CostlyEnv",
    "DictObsEnv",
    "FaultyEnv",
    "SpacesEnv",
    "faulty_env_fns",
]

#: Registered id -> keyword arguments of ``gymnasium.register``. Entry points are strings, so
#: gymnasium imports the module only when the env is first made.
_REGISTRATIONS: dict[str, dict[str, Any]] = {
    "vecenvs/Costly-v0": {"entry_point": "vecenvs.envs.costly:CostlyEnv"},
    "vecenvs/DictObs-v0": {
        "entry_point": "vecenvs.envs.dict_obs:DictObsEnv",
        "max_episode_steps": 25,
    },
    "vecenvs/Faulty-v0": {"entry_point": "vecenvs.envs.faulty:FaultyEnv"},
    # Its spaces include ones gymnasium's env checker cannot sample-check (Graph, a custom Space).
    "vecenvs/Spaces-v0": {
        "entry_point": "vecenvs.envs.spaces:SpacesEnv",
        "disable_env_checker": True,
    },
}

#: The ids this package registers.
ENV_IDS = tuple(_REGISTRATIONS)

# Registering an id twice makes gymnasium warn, and this module can be imported again (after a
# reload, say), so each id is checked first.
for _env_id, _kwargs in _REGISTRATIONS.items():
    if _env_id not in gymnasium.registry:
        gymnasium.register(id=_env_id, **_kwargs)
