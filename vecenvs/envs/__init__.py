"""Teaching environments, registered with gymnasium under the ``vecenvs/`` namespace.

Importing this package (``import vecenvs`` does it) makes four ids available to
``gymnasium.make``:

* ``"vecenvs/Costly-v0"``: :class:`CostlyEnv`, a toy env whose step cost is a knob;
* ``"vecenvs/DictObs-v0"``: :class:`DictObsEnv`, a ``Dict`` observation and a float action,
  with a 25-step time limit;
* ``"vecenvs/Faulty-v0"``: :class:`FaultyEnv`, which fails on purpose, for testing failures;
* ``"vecenvs/Spaces-v0"``: :class:`SpacesEnv`, observations and actions of any gymnasium space
  type, for checking that a vector env batches them exactly as gymnasium does.

Example:
    >>> import gymnasium as gym
    >>> import vecenvs
    >>> env = gym.make("vecenvs/Costly-v0", step_seconds=1e-3, cost_kind="sleep")
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


def _register_all() -> None:
    """Register every env not registered yet.

    Registering an id twice makes gymnasium warn, and this module can be imported again in a
    fresh worker process or after a reload, so each id is checked first.
    """
    for env_id, kwargs in _REGISTRATIONS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, **kwargs)


_register_all()
