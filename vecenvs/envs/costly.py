"""``CostlyEnv``: a toy environment whose cost per step is a knob you turn.

Whether stepping many envs in parallel pays off depends mostly on how long one step takes and on
whether that time is spent computing (a physics engine) or waiting (a game server, a robot):
this env lets you set both, and how often a much slower "straggler" step comes. A step can also
do a matrix product (``matmul_size``), which numpy hands to its BLAS library: the kind of work
that starts threads of its own in every process (see :mod:`vecenvs.threads`). Everything
random, the drawn costs included, comes from ``self.np_random``: two envs reset with the same
seed and given the same actions return identical results and spend the same (nominal) time.

Example:
    >>> import gymnasium as gym
    >>> import vecenvs  # registers the env
    >>> env = gym.make("vecenvs/Costly-v0", step_seconds=1e-3, cost_kind="sleep")
    >>> observation, info = env.reset(seed=0)
    >>> observation.shape
    (4,)
"""

from __future__ import annotations

import math
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from vecenvs.checks import check_whole_number

__all__ = ["COST_KINDS", "CostlyEnv", "busy_wait"]

#: The ways a step can spend its time: computing ("busy") or waiting ("sleep").
COST_KINDS = ("busy", "sleep")

# Constants of the toy dynamics, as float32 so the state never silently becomes float64.
_DECAY = np.float32(0.9)
_PUSH = np.float32(0.1)
_NOISE = np.float32(0.05)
_BOUND = np.float32(1.0)


def busy_wait(seconds: float) -> None:
    """Keep one CPU core busy for ``seconds`` (``time.perf_counter``), like a real simulator.

    Unlike ``time.sleep`` it holds the core: two processes doing this on one core take twice
    as long.
    """
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def _check_number(name: str, value: Any, low: float, high: float = math.inf) -> float:
    """``value`` as a float if it is a finite number in ``[low, high]``, else a ValueError."""
    # bool is an int subclass, but ``step_seconds=True`` is certainly a mistake.
    is_number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )
    if not is_number or not math.isfinite(value) or not low <= value <= high:
        expected = f">= {low}" if high == math.inf else f"between {low} and {high}"
        raise ValueError(f"{name} must be a finite number {expected}, got {value!r}")
    return float(value)


class CostlyEnv(gym.Env):
    """A toy env whose step and reset costs (time, CPU or waiting, stragglers) are knobs.

    The dynamics are deliberately trivial: a float32 vector in ``[-1, 1]`` decays towards zero,
    is pushed one way or the other by the action (0 or 1), and jitters with seeded noise, just
    so that observations depend on the actions and the seed. The reward is
    ``-abs(observation[0])``; an episode terminates after exactly ``episode_steps`` steps, so
    vector envs autoreset at a predictable rate, and is never truncated.

    A step's info is empty unless its cost is random (``step_spread > 0`` or
    ``straggler_probability > 0``); then it holds ``"step_cost"`` (the seconds asked for) and,
    on straggler steps only, ``"straggler": True``, a key that exercises the ``_key`` masks of
    vector-env infos. Reset infos are empty. With ``step_seconds=0`` a step is little more than
    one small numpy update: what you want when measuring the overhead of a vector env.

    Args:
        step_seconds: mean time one step takes, in seconds.
        step_spread: standard deviation / mean of a step's cost, drawn per step from a
            lognormal distribution (never negative); 0: every step costs ``step_seconds``.
        cost_kind: ``"busy"`` burns CPU until the time has passed, ``"sleep"`` waits.
        straggler_probability: chance that a step is a straggler.
        straggler_factor: a straggler step costs this many times its drawn cost.
        reset_seconds: time one reset takes (no spread, no stragglers).
        obs_size: length of the observation vector.
        episode_steps: number of steps after which the episode terminates.
        matmul_size: each step also multiplies two fixed ``matmul_size`` x ``matmul_size``
            float64 matrices (and throws the product away: it is there for its cost), a fixed
            amount of work rather than a time; BLAS may split it over several threads. 0: none.

    Raises:
        ValueError: a knob is out of range; the message names the knob and the bad value.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        step_seconds: float = 1e-4,
        step_spread: float = 0.0,
        cost_kind: str = "busy",
        straggler_probability: float = 0.0,
        straggler_factor: float = 10.0,
        reset_seconds: float = 0.0,
        obs_size: int = 4,
        episode_steps: int = 200,
        matmul_size: int = 0,
    ):
        self.step_seconds = _check_number("step_seconds", step_seconds, 0.0)
        self.step_spread = _check_number("step_spread", step_spread, 0.0)
        if cost_kind not in COST_KINDS:
            raise ValueError(f"cost_kind must be one of {COST_KINDS}, got {cost_kind!r}")
        self.cost_kind = cost_kind
        self.straggler_probability = _check_number(
            "straggler_probability", straggler_probability, 0.0, 1.0
        )
        self.straggler_factor = _check_number("straggler_factor", straggler_factor, 1.0)
        self.reset_seconds = _check_number("reset_seconds", reset_seconds, 0.0)
        self.obs_size = check_whole_number("obs_size", obs_size)
        self.episode_steps = check_whole_number("episode_steps", episode_steps)
        self.matmul_size = check_whole_number("matmul_size", matmul_size, minimum=0)
        # Fixed numbers from a generator of its own, so that the env's own random stream (and
        # so its results) is the same with or without the product.
        self._matrix = np.random.default_rng(0).random((self.matmul_size, self.matmul_size))
        self._product = np.empty_like(self._matrix)

        self.observation_space = spaces.Box(-_BOUND, _BOUND, (self.obs_size,), np.float32)
        self.action_space = spaces.Discrete(2)

        self._spend = busy_wait if cost_kind == "busy" else time.sleep
        # Lognormal parameters giving the drawn cost mean step_seconds and standard deviation
        # step_spread * step_seconds. A zero mean has no lognormal: no spread then.
        self._draws_spread = self.step_seconds > 0 and self.step_spread > 0
        if self._draws_spread:
            self._sigma = math.sqrt(math.log1p(self.step_spread**2))
            self._mu = math.log(self.step_seconds) - self._sigma**2 / 2
        self._reports_cost = self._draws_spread or self.straggler_probability > 0

        # The push of each action, precomputed; alternating signs make the components differ.
        signs = np.where(np.arange(self.obs_size) % 2 == 0, 1, -1).astype(np.float32)
        self._pushes = {0: -_PUSH * signs, 1: _PUSH * signs}

        self._state: np.ndarray | None = None
        self._steps = 0

    def thread_limits(self) -> dict[str, int]:
        """The threads the BLAS, OpenMP and torch pools of the process stepping this env may use
        (:func:`vecenvs.threads.thread_limits`): ``envs.call("thread_limits")`` shows them."""
        from vecenvs.threads import thread_limits

        return thread_limits()

    @property
    def mean_step_seconds(self) -> float:
        """Expected cost of one step, stragglers included: the work a benchmark should expect."""
        extra = self.straggler_probability * (self.straggler_factor - 1.0)
        return self.step_seconds * (1.0 + extra)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode in a small random state near zero; takes ``reset_seconds``."""
        super().reset(seed=seed)
        self._state = (self.np_random.random(self.obs_size, dtype=np.float32) - 0.5) * _PUSH
        self._steps = 0
        if self.reset_seconds > 0:
            self._spend(self.reset_seconds)
        return self._state.copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Advance the toy dynamics by one step, spending the step's drawn cost.

        Raises:
            ValueError: the action is not 0 or 1.
            gymnasium.error.ResetNeeded: ``reset`` was never called.
        """
        if self._state is None:
            raise gym.error.ResetNeeded("CostlyEnv: call reset() before step()")
        try:
            push = self._pushes[action]  # numpy integers hash like ints, so they work too
        except (KeyError, TypeError):
            raise ValueError(f"CostlyEnv: action must be 0 or 1, got {action!r}") from None

        noise = self.np_random.standard_normal(self.obs_size, dtype=np.float32)
        # The arithmetic builds a new array, so observations already handed out never change;
        # clipping that new array in place is about twice as fast as np.clip on tiny arrays.
        state = _DECAY * self._state + push + _NOISE * noise
        self._state = state.clip(-_BOUND, _BOUND, out=state)
        self._steps += 1

        # With fixed costs the RNG is left alone and the step stays as cheap as possible.
        cost = self.step_seconds
        info: dict[str, Any] = {}
        if self._draws_spread:
            cost = float(self.np_random.lognormal(self._mu, self._sigma))
        if self.straggler_probability > 0 and self.np_random.random() < self.straggler_probability:
            cost *= self.straggler_factor
            info["straggler"] = True
        if self._reports_cost:
            info["step_cost"] = cost
        if cost > 0:
            self._spend(cost)
        if self.matmul_size:
            np.matmul(self._matrix, self._matrix, out=self._product)  # for its cost only

        reward = -abs(float(self._state[0]))
        terminated = self._steps >= self.episode_steps
        return self._state.copy(), reward, terminated, False, info
