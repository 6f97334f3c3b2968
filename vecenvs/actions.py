"""Checking a batch of actions before any env sees it.

A wrong action should fail in the caller's process with a message that says what was expected,
not as a cryptic error deep inside one env in another process (or, worse, as an action silently
cast into something else). :class:`ActionChecker` checks the count, shape, dtype and bounds of a
batch against the vector env's batched action space, and is cheap enough to run on every step
(a few numpy reductions, bounds computed once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["ActionChecker"]


class ActionChecker:
    """Validates batches of actions against a batched action space.

    Args:
        action_space: the vector env's batched action space (``batch_space(single, n)``).
        num_envs: the number of envs, for messages.

    Example:
        >>> from gymnasium.spaces import Discrete
        >>> from gymnasium.vector.utils import batch_space
        >>> check = ActionChecker(batch_space(Discrete(2), 3), num_envs=3)
        >>> check([0, 1, 1])
        array([0, 1, 1])
        >>> check([0, 1])
        Traceback (most recent call last):
        ...
        ValueError: actions: expected shape (3,) (one action of shape () for each of the 3 envs), got shape (2,)
    """

    def __init__(self, action_space: spaces.Space, num_envs: int):
        self.action_space = action_space
        self.num_envs = num_envs
        self._check = self._build(action_space, "actions")

    def __call__(self, actions: Any) -> Any:
        """Returns the actions as numpy arrays (nested like the space), or raises ValueError."""
        return self._check(actions)

    def _build(self, space: spaces.Space, where: str):
        """Returns a function checking one part of the action (recursing into Dict and Tuple)."""
        if isinstance(space, spaces.Dict):
            parts = {key: self._build(sub, f"{where}[{key!r}]") for key, sub in space.spaces.items()}

            def check_dict(actions: Any) -> dict[str, Any]:
                if not isinstance(actions, Mapping) or set(actions) != set(parts):
                    got = sorted(actions) if isinstance(actions, Mapping) else type(actions).__name__
                    raise ValueError(f"{where}: expected a dict with keys {sorted(parts)}, got {got}")
                return {key: check(actions[key]) for key, check in parts.items()}

            return check_dict
        if isinstance(space, spaces.Tuple):
            items = [self._build(sub, f"{where}[{i}]") for i, sub in enumerate(space.spaces)]

            def check_tuple(actions: Any) -> tuple[Any, ...]:
                if not isinstance(actions, Sequence) or len(actions) != len(items):
                    raise ValueError(f"{where}: expected a tuple of {len(items)} parts, got {actions!r:.80}")
                return tuple(check(part) for check, part in zip(items, actions))

            return check_tuple
        if isinstance(space, spaces.MultiDiscrete):  # a batch of Discrete actions
            return _BoundsCheck(where, space.shape, space.dtype, space.start, space.start + space.nvec - 1, self.num_envs)
        if isinstance(space, spaces.Box):  # a batch of Box, MultiDiscrete or MultiBinary actions
            return _BoundsCheck(where, space.shape, space.dtype, space.low, space.high, self.num_envs)

        def check_other(actions: Any) -> Any:
            if actions not in space:
                raise ValueError(f"{where}: {actions!r:.200} is not in the action space {space}")
            return actions

        return check_other


class _BoundsCheck:
    """Checks one array of actions: shape, dtype kind, then low <= action <= high."""

    def __init__(self, where, shape, dtype, low, high, num_envs):
        self.where, self.shape, self.dtype, self.num_envs = where, shape, np.dtype(dtype), num_envs
        self.low, self.high = np.asarray(low), np.asarray(high)
        self.integer = np.issubdtype(self.dtype, np.integer)
        # Floats may be given for a float space whatever their precision (a float64 policy output
        # for a float32 space is normal); integer spaces need integers: 0.7 is not a valid Discrete action.
        self.allowed_kinds = "iub" if self.integer else "iuf"

    def __call__(self, actions: Any) -> np.ndarray:
        array = np.asarray(actions)
        if array.shape != self.shape:
            raise ValueError(
                f"{self.where}: expected shape {self.shape} (one action of shape {self.shape[1:]} "
                f"for each of the {self.num_envs} envs), got shape {array.shape}"
            )
        if array.dtype.kind not in self.allowed_kinds:
            kind = "integers" if self.integer else "numbers"
            raise ValueError(f"{self.where}: expected {kind} (space dtype {self.dtype}), got dtype {array.dtype}")
        inside = (array >= self.low) & (array <= self.high)  # False for NaN as well
        if not inside.all():
            bad = tuple(int(i) for i in np.argwhere(~inside)[0])
            low = self.low[bad] if self.low.ndim else self.low
            high = self.high[bad] if self.high.ndim else self.high
            raise ValueError(
                f"{self.where}: action {array[bad].tolist()!r} for env {bad[0]} (at index {bad}) is outside the "
                f"action space: expected {low} <= action <= {high}"
            )
        return array
