"""``FaultyEnv``: an env that fails on purpose, when and how you tell it to.

A vector env that runs envs in worker processes has to survive its envs misbehaving: raising an
exception, hanging forever, or taking the whole worker process down with them. To test that,
you need an env that does exactly one of those things at exactly a known moment, which is what
this is. It wraps a normal env (CartPole by default) and behaves exactly like it until the
failure.

The phases it can fail in (``fail_on``) and what counts:

* ``"make"``: the constructor fails (there is only one construction, so ``at`` is ignored);
* ``"reset"``: the ``at``-th call of ``reset``, counting from 1;
* ``"step"``: the ``at``-th call of ``step``, counting from 1 across episodes;
* ``"call"``: the ``at``-th call of ``ping(value)``, a method that otherwise returns ``value``
  (for testing ``VectorEnv.call``);
* ``"close"``: ``close()`` (there is one close, so ``at`` is ignored).

How it fails (``how``):

* ``"raise"``: raises ``RuntimeError("FaultyEnv: deliberate failure in <phase> #<n>")``;
* ``"hang"``: never returns (it sleeps in a loop, so the process can still be killed);
* ``"exit"``: ends the process at once with ``os._exit(3)``, skipping all clean-up;
* ``"kill"``: the process sends itself ``SIGKILL``, as the out-of-memory killer would;
* ``"bad-observation"``: the ``reset`` or ``step`` returns, instead of its observation, one of
  the wrong shape (a vector env cannot batch it, and must say which env it came from).

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
    """Fail the way ``how`` says, for the ``n``-th call of ``phase``."""
    if how == "raise":
        raise RuntimeError(f"FaultyEnv: deliberate failure in {phase} #{n}")
    if how == "hang":
        # Short sleeps in a loop rather than one endless call: the process stays responsive to
        # signals, so whoever gives up waiting on it can still terminate or kill it.
        while True:
            time.sleep(0.1)
    if how == "exit":
        os._exit(3)  # no exception, no finally blocks, no atexit: the process just vanishes
    # how == "kill". SIGKILL cannot be caught; Windows has no SIGKILL, so fall back to SIGTERM.
    os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


class FaultyEnv(gym.Env):
    """Behaves like ``gymnasium.make(inner_id)`` until it fails as configured.

    Args:
        fail_on: the phase to fail in: ``None`` (never), ``"make"``, ``"reset"``, ``"step"``
            or ``"call"`` (see the module docstring).
        at: which call of that phase fails, counting from 1.
        how: ``"raise"``, ``"hang"``, ``"exit"`` or ``"kill"``.
        inner_id: id of the wrapped env; its observation and action spaces become ours.

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
        """Reset the inner env (or fail, on the chosen reset).

        Args:
            seed: passed to the inner env, and seeds our own ``np_random`` too.
            options: passed to the inner env.

        Returns:
            The inner env's ``(observation, info)``.
        """
        bad = self._count("reset")
        # Our own generator is unused, but gymnasium's env checker expects a seeded reset to
        # seed it, as every env's reset should.
        super().reset(seed=seed)
        observation, info = self.inner.reset(seed=seed, options=options)
        return (np.zeros(7, dtype=np.float32) if bad else observation), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the inner env (or fail, on the chosen step).

        Args:
            action: an action of the inner env.

        Returns:
            The inner env's ``(observation, reward, terminated, truncated, info)``.
        """
        bad = self._count("step")
        observation, reward, terminated, truncated, info = self.inner.step(action)
        if bad:
            observation = np.zeros(7, dtype=np.float32)
        return observation, float(reward), terminated, truncated, info

    def ping(self, value: Any = None) -> Any:
        """Return ``value`` unchanged (or fail, on the chosen call): a target for ``call``.

        Args:
            value: anything.

        Returns:
            ``value``.
        """
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
    """Env factories for a vector env in which exactly one env is faulty.

    The factories are ``functools.partial`` objects of :class:`FaultyEnv`, not lambdas, so the
    standard ``pickle`` can send them to worker processes.

    Args:
        num_envs: how many factories to return.
        bad_index: index of the faulty env, ``0 <= bad_index < num_envs``.
        **faulty_kwargs: arguments of the faulty env (``fail_on``, ``at``, ``how``,
            ``inner_id``); the others get the same ``inner_id`` and never fail.

    Returns:
        A list of ``num_envs`` zero-argument callables, each making a :class:`FaultyEnv`.

    Raises:
        ValueError: ``num_envs`` or ``bad_index`` is out of range.
    """
    num_envs = check_whole_number("num_envs", num_envs)
    check_whole_number("bad_index", bad_index, 0, num_envs - 1)
    inner_id = faulty_kwargs.get("inner_id", "CartPole-v1")
    good = functools.partial(FaultyEnv, fail_on=None, inner_id=inner_id)
    bad = functools.partial(FaultyEnv, **faulty_kwargs)
    return [bad if index == bad_index else good for index in range(num_envs)]
