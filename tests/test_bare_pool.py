"""The bare pool (tests/bare_pool.py), the reference the pool is measured against, does the same
work: SyncVectorEnv's results step by step (in SAME_STEP mode, its way of resetting), and it
leaves no process behind."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from bare_pool import BarePool
from conftest import assert_same
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from vecenvs.factory import env_fns_for

pytestmark = [
    pytest.mark.usefixtures("no_leftover_processes"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bare pool forks"),
]


def test_the_bare_pool_steps_as_sync_vector_env_does():
    bare = BarePool("CartPole-v1", 5, num_workers=2)
    reference = SyncVectorEnv(env_fns_for("CartPole-v1", 5), autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        observations, _ = reference.reset(seed=0)  # env i gets seed i, as in the bare pool
        np.testing.assert_array_equal(bare.observations, observations)
        reference.action_space.seed(0)
        ended = 0
        for step in range(100):
            actions = reference.action_space.sample()
            expected = reference.step(actions)
            got = bare.step(actions)
            assert_same(got[:4], expected[:4], f"step {step}")
            ended += int(expected[2].sum() + expected[3].sum())
        assert ended > 0, "no episode ended: the resets were not compared"
    finally:
        bare.close()
        reference.close()


def test_the_step_breakdown_times_every_process_and_puts_the_methods_back():
    import step_breakdown
    from step_breakdown import CALLER_CLOCKS, COUNTERS, FIELDS, clocks

    from vecenvs import PoolVecEnv, workers

    serve, step = workers.Chunk.serve, PoolVecEnv.step
    with clocks(True):
        assert workers.Chunk.serve is not serve
        step_breakdown._zero()
        pool = PoolVecEnv(env_fns_for("CartPole-v1", 4), num_workers=2)
        try:
            pool.reset(seed=0)
            for _ in range(20):
                pool.step(np.zeros(4, dtype=np.int64))
        finally:
            pool.close()
    assert workers.Chunk.serve is serve and PoolVecEnv.step is step, "the clocks stayed on"
    rows = COUNTERS[COUNTERS[:, FIELDS.index("serves")] > 0]
    assert len(rows) == 2, f"expected the caller and one worker, got {rows[:, 0]}"
    for row in rows:
        values = dict(zip(FIELDS, row))
        assert values["serves"] >= 20, values  # (the reset is served too)
        assert values["serve"] > values["envs"] > 0, values  # the envs' steps inside the chunk's
    assert step_breakdown.ANNOUNCED[0] > 0, "the generation word's moves were not timed"
    caller = CALLER_CLOCKS
    assert caller["steps"] == 20, caller  # every step, and the parts of each inside it
    assert min(caller["before"], caller["own"], caller["after"]) > 0, caller
    assert caller["before"] + caller["own"] + caller["after"] <= caller["step"], caller
