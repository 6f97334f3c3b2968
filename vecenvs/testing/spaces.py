"""check_spaces: every gymnasium space type, as observation and as action, against SyncVectorEnv.

:func:`check_spaces` runs :func:`~vecenvs.testing.check_matches_sync` on
``"vecenvs/Spaces-v0"`` (:class:`~vecenvs.envs.spaces.SpacesEnv`) with one observation space and
one action space of :data:`~vecenvs.envs.spaces.SPACES`: observations must be batched exactly as
``SyncVectorEnv`` does (Graph and Sequence as tuples, Text as a tuple of strings, a Dict as a
dict of arrays...) and each env must get its action exactly as given.

Shared memory cannot hold every space: gymnasium's ``AsyncVectorEnv(shared_memory=True)``
refuses Graph and Sequence observations (a ``TypeError``) and spaces of one's own (a
``ValueError``) when it is built. A backend with shared memory may refuse them the same way,
at construction; it may not accept them and then return something else.

Example:
    >>> import gymnasium as gym
    >>> from vecenvs.testing.spaces import check_spaces
    >>> check_spaces(gym.vector.SyncVectorEnv, "graph", "text")
    []
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from vecenvs.envs.spaces import SPACES
from vecenvs.factory import env_fns_for
from vecenvs.testing.equality import check_matches_sync
from vecenvs.testing.running import MakeVectorEnv, close_quietly

__all__ = ["SHARED_MEMORY_CANNOT_HOLD", "check_spaces", "shared_memory_can_hold"]

#: The spaces of :data:`SPACES` that shared memory cannot hold (their size changes from sample to sample, or gymnasium does not know their layout).
SHARED_MEMORY_CANNOT_HOLD = ("sequence", "sequence-stacked", "graph", "graph-no-edges", "custom")


#: The spaces gymnasium lays out in shared memory; Graph, Sequence and spaces of one's own are not.
_FIXED_LAYOUT = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Text)


def shared_memory_can_hold(name: str) -> bool:
    """Whether gymnasium can lay out observations of the space ``name`` in shared memory."""
    return _fixed_layout(SPACES[name]())


def check_spaces(
    make_vector_env: MakeVectorEnv,
    observation: str,
    action: str = "discrete",
    num_envs: int = 3,
    steps: int = 40,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    *,
    may_refuse: bool = False,
    transform_actions: Callable[[Any], Any] | None = None,
) -> list[str]:
    """Check the backend against ``SyncVectorEnv`` on ``SpacesEnv(observation, action)``.

    The other arguments are :func:`~vecenvs.testing.check_matches_sync`'s. ``may_refuse``: the
    backend uses shared memory, and may refuse at construction, with gymnasium's error, an
    observation space shared memory cannot hold; it then returns ``["refused ..."]``.
    Raises :class:`ConformanceError` on a difference, or a refusal that was not allowed.
    """
    env_kwargs = {"observation": observation, "action": action}
    if may_refuse and not shared_memory_can_hold(observation):
        try:
            venv = make_vector_env(
                env_fns_for("vecenvs/Spaces-v0", num_envs, **env_kwargs),
                autoreset_mode=AutoresetMode(autoreset_mode),
            )
        except (TypeError, ValueError) as error:
            text = str(error)
            if "shared memory" not in text and "shared_memory" not in text:
                raise
            return [
                f"refused {observation!r} observations, as gymnasium does with shared memory: "
                f"{type(error).__name__}: {text.splitlines()[0][:160]}"
            ]
        close_quietly(venv)  # it took them: then what it returns must be right
    return check_matches_sync(
        make_vector_env,
        "vecenvs/Spaces-v0",
        num_envs,
        steps,
        autoreset_mode=autoreset_mode,
        env_kwargs=env_kwargs,
        transform_actions=transform_actions,
    )


def _fixed_layout(space: Any) -> bool:
    """Whether every space inside ``space`` (through Dict, Tuple and OneOf) is a fixed layout."""
    if isinstance(space, spaces.Dict):
        return all(_fixed_layout(sub) for sub in space.spaces.values())
    if isinstance(space, (spaces.Tuple, spaces.OneOf)):
        return all(_fixed_layout(sub) for sub in space.spaces)
    return isinstance(space, _FIXED_LAYOUT)
