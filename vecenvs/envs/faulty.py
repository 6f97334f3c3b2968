"""``FaultyEnv``: an env that fails on purpose, when and how you tell it to.

A vector env running envs in worker processes has to survive an env raising, hanging, or taking
its whole worker process down. To test that you need an env that does exactly one of those at a
known moment. This one wraps a normal env (CartPole by default) and behaves exactly like it
until then.

When it fails (``fail_on``), counting calls from 1 (``at``):

* ``"make"``: the constructor (``at`` is ignored);
* ``"reset"`` / ``"step"``: the ``at``-th call of ``reset`` / ``step`` (across episodes);
* ``"call"``: the ``at``-th call of ``ping(value)``, which otherwise returns ``value`` (for
  testing ``VectorEnv.call``);
* ``"close"``: ``close()`` (``at`` is ignored).

How it fails (``how``):

* ``"raise"``: raises ``RuntimeError("FaultyEnv: deliberate failure in <phase> #<n>")``;
* ``"hang"``: never returns (it sleeps in a loop, so the process can still be killed);
* ``"exit"``: ends the process at once with ``os._exit(3)``, skipping all clean-up;
* ``"kill"``: the process sends itself ``SIGKILL``, as the out-of-memory killer would;
* ``"bad-observation"``: the ``reset`` or ``step`` returns an observation of the wrong shape
  (a vector env cannot batch it, and must say which env it came from).

Only the one call fails; with ``"raise"``, later calls work again.

Warning:
    ``"hang"``, ``"exit"`` and ``"kill"`` act on the process the env runs in. Run them in a
    worker process (or a subprocess, in tests), never in your own.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from vecenvs.checks import check_whole_number

__all__ = ["FAIL_HOWS", "FAIL_PHASES", "FaultyEnv", "faulty_env_fns"]

#: Values accepted for ``fail_on`` (``None`` means the env never fails).
FAIL_PHASES = (None, "make", "reset", "step", "call", "close")
#: Values accepted for ``how``.
FAIL_HOWS = ("raise", "hang", "exit", "kill", "bad-observation")


def _fail(phase: str, n: int, how: str) -> None:
    if how == "raise":
        raise RuntimeError(f"FaultyEnv: deliberate failure in {phase} #{n}")
    if how == "hang":
        # Short sleeps rather than one endless call: the process stays responsive to signals,
        # so whoever gives up waiting on it can still terminate or kill it.
        while True:
            time.sleep(0.1)
    if how == "exit":
        os._exit(3)  # no exception, no finally blocks, no atexit: the process just vanishes
    # how == "kill". SIGKILL cannot be caught; Windows has no SIGKILL, so fall back to SIGTERM.
    os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


class FaultyEnv(gym.Env):
    """Behaves like ``gymnasium.make(inner_id)``, spaces included, until it fails as configured.

    Raises:
        ValueError: a bad ``fail_on``, ``at`` or ``how``; the message names the bad value.
        RuntimeError: ``fail_on="make"`` and ``how="raise"``.
    """

    # No rendering: check_env would otherwise try to make the env with every render mode.
    metadata = {"render_modes": []}

    def __init__(
        self,
        fail_on: str | None = None,
        at: int = 3,
        how: str = "raise",
        inner_id: str = "CartPole-v1",
    ):
        if fail_on not in FAIL_PHASES:
            raise ValueError(f"fail_on must be one of {FAIL_PHASES}, got {fail_on!r}")
        check_whole_number("at", at)
        if how not in FAIL_HOWS:
            raise ValueError(f"how must be one of {FAIL_HOWS}, got {how!r}")
        if how == "bad-observation" and fail_on not in ("reset", "step"):
            raise ValueError(
                f"how='bad-observation' needs fail_on='reset' or 'step', got {fail_on!r}"
            )
        self.fail_on = fail_on
        self.at = at
        self.how = how
        self.inner_id = inner_id
        # How many times each phase has been entered so far.
        self.counts = {"reset": 0, "step": 0, "call": 0, "close": 0}

        if fail_on == "make":
            _fail("make", 1, how)  # before making the inner env, so nothing is left open
        self.inner = gym.make(inner_id)
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space

    def _count(self, phase: str) -> bool:
        """Count one more call of ``phase`` and fail if it is the chosen one.

        Returns True when this call must return a bad observation instead of failing here.
        """
        self.counts[phase] += 1
        if self.fail_on == phase and (self.counts[phase] == self.at or phase == "close"):
            if self.how == "bad-observation":
                return True
            _fail(phase, self.at, self.how)
        return False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        bad = self._count("reset")
        # Our own generator is unused, but gymnasium's env checker expects a seeded reset to
        # seed it, as every env's reset should.
        super().reset(seed=seed)
        observation, info = self.inner.reset(seed=seed, options=options)
        return (np.zeros(7, dtype=np.float32) if bad else observation), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        bad = self._count("step")
        observation, reward, terminated, truncated, info = self.inner.step(action)
        if bad:
            observation = np.zeros(7, dtype=np.float32)
        return observation, float(reward), terminated, truncated, info

    def ping(self, value: Any = None) -> Any:
        """Return ``value`` unchanged (or fail, on the chosen call): a target for ``call``."""
        self._count("call")
        return value

    def close(self) -> None:
        """Close the inner env (or fail, if closing is the chosen failure); safe to call twice."""
        inner = getattr(self, "inner", None)  # absent if __init__ failed
        if inner is not None:
            inner.close()
        super().close()
        if getattr(self, "counts", None) is not None:
            self._count("close")


def faulty_env_fns(
    num_envs: int, bad_index: int, **faulty_kwargs: Any
) -> list[Callable[[], gym.Env]]:
    """``num_envs`` env factories of which only number ``bad_index`` is faulty.

    ``faulty_kwargs`` are the faulty env's arguments; the others get the same ``inner_id`` and
    never fail. The factories are ``functools.partial`` objects, not lambdas, so the standard
    ``pickle`` can send them to worker processes.

    Raises:
        ValueError: ``num_envs`` or ``bad_index`` is out of range.
    """
    num_envs = check_whole_number("num_envs", num_envs)
    check_whole_number("bad_index", bad_index, 0, num_envs - 1)
    inner_id = faulty_kwargs.get("inner_id", "CartPole-v1")
    good = functools.partial(FaultyEnv, fail_on=None, inner_id=inner_id)
    bad = functools.partial(FaultyEnv, **faulty_kwargs)
    return [bad if index == bad_index else good for index in range(num_envs)]
