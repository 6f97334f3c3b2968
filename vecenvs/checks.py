"""Checking constructor arguments: one checker per kind of value, each naming the bad value.

Every backend checks what it is given before it starts a process or makes an env, so a typo
fails at once with a message that says what was expected, not as a hang or a traceback from
inside a worker. The checkers accept what Python users pass in practice (``numpy`` integers
where a whole number is expected) and refuse what is almost surely a mistake (``True`` as a
number of workers).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

__all__ = [
    "WrongType",
    "check_env_fns",
    "check_pipes_only",
    "check_seconds",
    "check_whole_number",
]


class WrongType(TypeError, ValueError):
    """A value of the wrong type: a TypeError, as Python raises, and a ValueError, so code that
    treats every bad input as one (the CLI, the job queue, the dashboard) reports it too."""


def check_whole_number(
    name: str, value: Any, minimum: int | None = 1, maximum: int | None = None
) -> int:
    """``value`` as an int, if it is a whole number (an int or a numpy integer, not a bool)
    in range (``minimum=None``: no lower bound); else :class:`WrongType` or ValueError."""
    if minimum is None:
        expected = "a whole number"
    elif maximum is None:
        expected = f"a whole number >= {minimum}"
    else:
        expected = f"a whole number from {minimum} to {maximum}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise WrongType(f"{name} is {value!r} ({type(value).__name__}): expected {expected}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} is {value}: expected {expected}")
    return value


def check_seconds(name: str, value: Any, *, zero_ok: bool = False) -> float:
    """``value`` as a float, if it is a finite number of seconds > 0 (>= 0 with ``zero_ok``);
    else :class:`WrongType` (not a real number) or ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise WrongType(
            f"{name} is {value!r} ({type(value).__name__}): expected a number of seconds"
        )
    seconds = float(value)
    if not (seconds >= 0 if zero_ok else seconds > 0) or seconds == float("inf"):
        raise ValueError(
            f"{name} is {value!r}: expected a finite number of seconds {'>= 0' if zero_ok else '> 0'}"
        )
    return seconds


def check_env_fns(env_fns: Any) -> list[Callable[[], Any]]:
    """The env factories as a list, or a TypeError/ValueError saying which one is wrong."""
    if isinstance(env_fns, (str, bytes)) or not hasattr(env_fns, "__iter__"):
        raise TypeError(
            f"env_fns must be a list of functions that each make an env, got {type(env_fns).__name__}"
        )
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


def check_pipes_only(vector_class: str, options: dict[str, Any]) -> None:
    """Refuses ``shared_memory=True`` for a vector env that talks over pipes only (gymnasium's
    ``AsyncVectorEnv`` takes it, so code moved from there may pass it): silently ignored, it
    would measure pipes while the caller believes it measured shared memory."""
    if options.get("shared_memory"):
        raise ValueError(
            f"{vector_class} sends everything pickled over pipes: shared_memory="
            f"{options['shared_memory']!r} is not one of its options (PoolVecEnv is the one with "
            "shared memory; PoolVecEnv(env_fns, num_workers=len(env_fns)) has a process per env)"
        )
