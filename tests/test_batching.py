"""The helpers that put chunks of envs back together must agree with gymnasium's own batching."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.spaces import Box, Discrete
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array

from vecenvs.core import split_evenly
from vecenvs.multi_env import (
    ChunkInfos,
    batch_observations,
    expand_seeds,
    merge_infos,
    place_strays,
    split_reset_mask,
)


class _Batcher(VectorEnv):
    """Just enough of a VectorEnv to call gymnasium's ``_add_info``."""

    def __init__(self, num_envs: int):
        self.num_envs = num_envs

    def batch(self, env_infos: list[dict]) -> dict:
        infos: dict = {}
        for index, info in enumerate(env_infos):
            infos = self._add_info(infos, info, index)
        return infos


def _assert_infos_equal(got: dict, expected: dict, path: str = "infos") -> None:
    assert got.keys() == expected.keys(), f"{path}: keys {sorted(got)} != {sorted(expected)}"
    for key in expected:
        if isinstance(expected[key], dict):
            _assert_infos_equal(got[key], expected[key], f"{path}[{key!r}]")
        else:
            assert got[key].dtype == expected[key].dtype, f"{path}[{key!r}] dtype"
            assert got[key].shape == expected[key].shape, f"{path}[{key!r}] shape"
            assert all(
                np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
                for a, b in zip(got[key], expected[key])
            ), f"{path}[{key!r}]"


def _env_infos(num_envs: int) -> list[dict]:
    rng = np.random.default_rng(0)
    infos = []
    for index in range(num_envs):
        info: dict = {}
        if index % 3 == 2:  # a key only some envs have, first seen in a later chunk
            info["rare"] = float(index)
        if index % 2:
            info["count"] = index
            info["vector"] = rng.normal(size=3)
            info["final_obs"] = rng.normal(size=2)
            info["final_info"] = {"score": index * 1.5, "label": f"env{index}"}
        infos.append(info)
    return infos


@pytest.mark.parametrize(("num_envs", "lanes"), [(7, 3), (8, 2), (5, 5), (6, 1)])
def test_merged_chunk_infos_equal_gymnasiums_env_by_env_infos(num_envs, lanes):
    env_infos = _env_infos(num_envs)
    expected = _Batcher(num_envs).batch(env_infos)
    parts = [
        (chunk.start, _Batcher(len(chunk)).batch(env_infos[chunk.start : chunk.stop]))
        for chunk in split_evenly(num_envs, lanes)
    ]
    _assert_infos_equal(merge_infos([part for part in parts if part[1]], num_envs), expected)


#: Values whose types differ from env to env, but that gymnasium can cast into each other:
#: what a key holds in one env may be any of its family's (fractions, to see a truncation).
_FAMILIES = {
    "number": [
        lambda rng: float(rng.normal()),
        lambda rng: int(rng.integers(-3, 4)),
        lambda rng: bool(rng.integers(2)),
        lambda rng: np.float32(rng.normal()),
        lambda rng: np.int32(rng.integers(-3, 4)),
    ],
    "array": [
        lambda rng: rng.normal(size=2),
        lambda rng: rng.normal(size=2).astype(np.float32),
        lambda rng: rng.integers(-3, 4, size=2),
    ],
    "object": [lambda rng: f"s{rng.integers(9)}", lambda rng: None],
}


def _mixed_infos(num_envs: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    keys = {"a": "number", "b": "number", "c": "array", "d": "object"}
    infos = []
    for _ in range(num_envs):
        info: dict = {}
        for key, family in keys.items():
            if rng.random() < 0.8:
                kinds = _FAMILIES[family]
                info[key] = kinds[rng.integers(len(kinds))](rng)
        if rng.random() < 0.5:
            kinds = _FAMILIES["number"]
            info["episode"] = {"r": kinds[rng.integers(len(kinds))](rng), "l": 3}
        infos.append(info)
    return infos


@pytest.mark.parametrize("seed", range(40))
def test_chunks_whose_envs_disagree_on_types_merge_into_gymnasiums_infos(seed):
    """Each chunk batches its envs' infos as a pool worker does (:class:`ChunkInfos`, nothing
    shared): a value of another type than the chunk's first of its key is kept as it came,
    and the caller casts it into the merged infos, which then equal gymnasium's, env by env,
    dtypes included."""
    num_envs = 7
    env_infos = _mixed_infos(num_envs, seed)
    expected = _Batcher(num_envs).batch(env_infos)
    for lanes in (2, 3):
        parts, strays = [], []
        for chunk in split_evenly(num_envs, lanes):
            chunk_infos = ChunkInfos({}, _Batcher(len(chunk))._add_info, chunk.start)
            infos: dict = {}
            for env_num, info in enumerate(env_infos[chunk.start : chunk.stop]):
                infos = chunk_infos.add(infos, info, env_num)
            parts.append((chunk.start, infos))
            strays += chunk_infos.strays
        merged = merge_infos([part for part in parts if part[1]], num_envs)
        place_strays(merged, strays)
        _assert_infos_equal(merged, expected)


def test_expand_seeds():
    assert expand_seeds(3, 3) == [3, 4, 5]
    assert expand_seeds(None, 2) == [None, None]
    assert expand_seeds([1, None], 2) == [1, None]
    with pytest.raises(ValueError, match="expected 3 seeds"):
        expand_seeds([1, 2], 3)
    with pytest.raises(TypeError, match=r"seed\[1\] is 'x'"):
        expand_seeds([1, "x"], 2)
    assert expand_seeds(np.int64(7), 2) == [7, 8]


def test_split_reset_mask_leaves_the_callers_options_alone():
    options = {"reset_mask": np.array([True, False]), "other": 1}
    env_options, mask = split_reset_mask(options, 2)
    assert env_options == {"other": 1} and mask.tolist() == [True, False]
    assert "reset_mask" in options
    with pytest.raises(ValueError, match="at least one True value"):
        split_reset_mask({"reset_mask": np.zeros(2, dtype=bool)}, 2)


_BOX = Box(-10, 10, (4,), np.float32)
_OBSERVATIONS = {
    "float32": [np.arange(4, dtype=np.float32) + i for i in range(3)],
    "one float64": [np.ones(4, np.float32), np.full(4, 0.1), np.ones(4, np.float32)],
    "ints": [np.arange(4) * 2**25 + 1 for _ in range(3)],  # above float32's exact integers
    "ints and floats": [np.arange(4) * 2**25 + 1, np.ones(4, np.float32), np.ones(4)],
    "lists": [[0.5, 1.5, 2.5, 3.5]] * 3,
    "one too short": [np.ones(4, np.float32), np.ones(1, np.float32), np.ones(4, np.float32)],
    "all too long": [np.ones(5, np.float32)] * 3,
    "would broadcast": [np.ones(1, np.float32)] * 3,
    "text": [np.array(["a", "b", "c", "d"])] * 3,
}


@pytest.mark.parametrize("case", list(_OBSERVATIONS))
def test_batch_observations_gives_what_gymnasiums_concatenate_gives(case):
    items = _OBSERVATIONS[case]
    ours, theirs = (create_empty_array(_BOX, n=3, fn=np.zeros) for _ in range(2))
    try:
        expected = concatenate(_BOX, items, theirs)
    except (ValueError, TypeError) as error:
        with pytest.raises(type(error)):
            batch_observations(_BOX, items, ours)
        return
    got = batch_observations(_BOX, items, ours)
    assert got is ours and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_batch_observations_of_a_discrete_space():
    space = Discrete(5)
    items = [np.int64(i) for i in (4, 0, 2)]
    ours, theirs = (create_empty_array(space, n=3, fn=np.zeros) for _ in range(2))
    np.testing.assert_array_equal(
        batch_observations(space, items, ours), concatenate(space, items, theirs)
    )
