"""Small helpers shared by every backend: per-env seeds, reset masks, and nested arrays.

Observations can be nested (a Dict of Boxes, a Tuple...). gymnasium's ``vector.utils`` batches
spaces and lays out shared memory for them; the two functions here do the rest of what a pool
needs: take a slice of every array in a nested batch, and copy one nested batch into another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "StepBuffers",
    "check_env_fns",
    "expand_seeds",
    "merge_infos",
    "split_reset_mask",
    "tree_assign",
    "tree_copy",
    "tree_index",
    "tree_put",
    "tree_slice",
]


@dataclass
class StepBuffers:
    """Where a batch of step results is written: plain arrays, or views into shared memory."""

    observations: Any
    """The batched observations (an array, or a dict/tuple of arrays for nested spaces)."""
    rewards: np.ndarray
    """float64, shape (num_envs,)."""
    terminations: np.ndarray
    """bool, shape (num_envs,)."""
    truncations: np.ndarray
    """bool, shape (num_envs,)."""

    def slice(self, start: int, stop: int) -> StepBuffers:
        """Views of envs ``start:stop``: writing to them writes into these buffers."""
        return StepBuffers(
            tree_slice(self.observations, start, stop),
            self.rewards[start:stop],
            self.terminations[start:stop],
            self.truncations[start:stop],
        )


def tree_slice(tree: Any, start: int, stop: int) -> Any:
    """``tree[start:stop]`` for every array in a nested dict/tuple of arrays (views, not copies)."""
    if isinstance(tree, dict):
        return {key: tree_slice(value, start, stop) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_slice(value, start, stop) for value in tree)
    return tree[start:stop]


def tree_index(tree: Any, index: Any) -> Any:
    """``tree[index]`` for every array in a nested batch: one env's row (an int index), or the
    rows of several envs, copied (an array of indices), as the async pool's ``recv`` returns."""
    if isinstance(tree, dict):
        return {key: tree_index(value, index) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_index(value, index) for value in tree)
    return tree[index]


def tree_put(tree: Any, index: Any, values: Any) -> None:
    """``tree[index] = values`` for every array in a nested batch (the inverse of :func:`tree_index`)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            tree_put(value, index, values[key])
    elif isinstance(tree, tuple):
        for value, part in zip(tree, values):
            tree_put(value, index, part)
    else:
        tree[index] = values


def tree_copy(tree: Any) -> Any:
    """A copy of every array in a nested dict/tuple of arrays."""
    if isinstance(tree, dict):
        return {key: tree_copy(value) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_copy(value) for value in tree)
    return tree.copy()


def tree_assign(destination: Any, source: Any) -> None:
    """Copies ``source`` into ``destination``, array by array (same nesting, same shapes)."""
    if isinstance(destination, dict):
        for key, value in destination.items():
            tree_assign(value, source[key])
    elif isinstance(destination, tuple):
        for value, part in zip(destination, source):
            tree_assign(value, part)
    else:
        # "unsafe": the checker has already vetted the values; this only narrows e.g. float64 to float32
        np.copyto(destination, source, casting="unsafe")


def check_env_fns(env_fns: Any) -> list[Callable[[], Any]]:
    """The env factories as a list, or a TypeError/ValueError saying which one is wrong."""
    if isinstance(env_fns, (str, bytes)) or not hasattr(env_fns, "__iter__"):
        raise TypeError(f"env_fns must be a list of functions that each make an env, got {type(env_fns).__name__}")
    env_fns = list(env_fns)
    if not env_fns:
        raise ValueError("env_fns is empty: expected at least one function that makes an env")
    for index, env_fn in enumerate(env_fns):
        if not callable(env_fn):
            raise TypeError(
                f"env_fns[{index}] is {env_fn!r:.80} ({type(env_fn).__name__}), expected a function that "
                f"makes an env, e.g. lambda: gymnasium.make('CartPole-v1')"
            )
    return env_fns


def expand_seeds(seed: int | list[int | None] | None, num_envs: int) -> list[int | None]:
    """One seed per env, as gymnasium's vector envs do: ``seed`` gives ``[seed, seed+1, ...]``.

    Raises:
        ValueError: a list of the wrong length, or something that is not an int or None.
    """
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return [int(seed) + index for index in range(num_envs)]
    if isinstance(seed, (list, tuple, np.ndarray)):
        seeds = list(seed)
        if len(seeds) != num_envs:
            raise ValueError(f"seed: expected {num_envs} seeds (one per env), got {len(seeds)}")
        for index, value in enumerate(seeds):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                raise ValueError(f"seed[{index}] is {value!r}: expected an int or None")
        return [None if value is None else int(value) for value in seeds]
    raise ValueError(f"seed is {seed!r}: expected an int, a list of {num_envs} ints/None, or None")


def split_reset_mask(options: dict[str, Any] | None, num_envs: int) -> tuple[dict[str, Any] | None, np.ndarray | None]:
    """Takes gymnasium's ``options["reset_mask"]`` out of the options, checked.

    Returns the options for the envs (without the mask, and without changing the caller's dict)
    and the mask, or None when every env is reset.
    """
    if options is None or "reset_mask" not in options:
        return options, None
    options = dict(options)
    mask = options.pop("reset_mask")
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (num_envs,):
        got = f"{type(mask).__name__} {getattr(mask, 'dtype', '')} {getattr(mask, 'shape', '')}".strip()
        raise ValueError(f"options['reset_mask']: expected a numpy bool array of shape ({num_envs},), got {got}")
    if not mask.any():
        raise ValueError("options['reset_mask'] is all False: expected at least one env to reset")
    return options, mask


def merge_infos(parts: list[tuple[int, dict[str, Any]]], num_envs: int) -> dict[str, Any]:
    """Puts the infos of several chunks of envs side by side into the infos of all ``num_envs``.

    Each part is ``(index of the chunk's first env, the chunk's infos)``, the infos batched the
    way gymnasium does it (a dict of arrays, one row per env of the chunk, with ``_key`` masks,
    nested dicts for nested infos). Workers batch their own chunk's infos, so this, the only part
    left to the parent, is one array copy per key instead of a Python call per env and key.
    The result equals what ``VectorEnv._add_info`` builds env by env, given the parts in env order:
    each array takes the dtype of the first env that had the key.
    """
    merged: dict[str, Any] = {}
    for start, infos in parts:
        _merge_into(merged, infos, start, num_envs)
    return merged


def _merge_into(merged: dict[str, Any], infos: dict[str, Any], start: int, num_envs: int) -> None:
    for key, value in infos.items():
        if isinstance(value, dict):
            _merge_into(merged.setdefault(key, {}), value, start, num_envs)
            continue
        if key not in merged:
            if value.dtype == object:
                merged[key] = np.full(num_envs, None, dtype=object)
            else:
                merged[key] = np.zeros((num_envs, *value.shape[1:]), dtype=value.dtype)
        merged[key][start : start + len(value)] = value
