"""Your own env, named the ways gymnasium names envs, and checked once before anything runs.

Every command, page and function of the lab that takes an env takes it in one of these forms,
and this module is the one place that reads them:

- a **registered id**, ``"CartPole-v1"`` or ``"vecenvs/Costly-v0"``: ``gym.make`` makes it;
- gymnasium's **module:id** form, ``"mycart:MyCart-v0"``: the module is imported first (in
  this process and in every worker, so under ``spawn`` too), and importing it registers the id;
- an **entry point**, ``"mycart.env:MyCartEnv"``: a class or function of an importable module,
  called with the env's keyword arguments (``--env-kwarg`` on the command line);
- from Python only, a **factory**: any function that returns an env (a lambda, a closure).

gymnasium itself tells the last two forms apart the same way: after ``mycart`` is imported,
a name after the colon that is a registered id is that id; otherwise it must be a callable of
the module. Whatever the form, the envs are made by ``gym.make`` (an entry point or a factory
through a one-off ``EnvSpec``), so every env gets gymnasium's own wrappers.

Before measuring, :func:`check_env` makes one env, resets it, steps it and runs gymnasium's
env checker on it, within a deadline, and says what is wrong in one line (``EnvError``): an
import that fails with the module's own message, a space that is not a space, a step that
raises, an observation whose dtype, shape or values are not its space's (a vector env would
cast it silently, or fail mid-measure), a reward that is not a number, a flag that is not a
bool, or the phase (making, reset, step) that ran out of time. That is the message a user sees,
not a traceback from inside worker 3 of 16.

Example:
    >>> name = resolve_env("CartPole-v1")
    >>> name.kind, name.name
    ('registered', 'CartPole-v1')
    >>> check_env("CartPole-v1").kind
    'registered'
    >>> resolve_env("gymnasium.envs.classic_control.cartpole:CartPoleEnv").kind
    'entry point'
    >>> make_env("gymnasium.envs.classic_control.cartpole:CartPoleEnv").spec.id
    'gymnasium.envs.classic_control.cartpole:CartPoleEnv'
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import re
import signal
import sys
import sysconfig
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

import gymnasium as gym
import multiprocess
import multiprocess.connection
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec, parse_env_id
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from vecenvs.checks import check_seconds
from vecenvs.table import describe_kwargs
from vecenvs.workers import exit_when_orphaned

__all__ = [
    "CHECK_SECONDS",
    "ENTRY_POINT",
    "FACTORY",
    "MODULE_ID",
    "REGISTERED",
    "CheckProgress",
    "EnvError",
    "EnvName",
    "EnvSource",
    "check_env",
    "describe_env",
    "env_fns",
    "env_label",
    "make_env",
    "reporting_checks",
    "resolve_env",
    "space_mismatch",
]

#: What an env can be given as: a name (in one of the forms above) or a function making one.
EnvSource = str | Callable[..., gym.Env]

#: The kinds of :class:`EnvName`.
REGISTERED, MODULE_ID, ENTRY_POINT, FACTORY = "registered", "module:id", "entry point", "factory"

#: How long :func:`check_env` waits for one env to be made, reset, stepped and checked, by
#: default (``--check-timeout`` on the command line, the dashboard's "Check timeout").
CHECK_SECONDS = 30.0

#: How often :func:`check_env` tells its progress (:func:`reporting_checks`) while it waits.
PROGRESS_SECONDS = 0.5

#: Steps :func:`check_env` takes beyond gymnasium's checker (which steps once): a step that
#: raises only after a few is still caught before any worker starts.
CHECK_STEPS = 5

#: What a module path may look like (``mycart``, ``my_pkg.envs``): checked before importing.
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class EnvError(ValueError):
    """A user's env can't be used: the message is one line saying what is wrong."""


@dataclasses.dataclass(frozen=True)
class CheckProgress:
    """Where a :func:`check_env` stands, as it tells :func:`reporting_checks`' callback: when
    a phase starts and every ``PROGRESS_SECONDS`` while it lasts."""

    env: str  # the env and its arguments, as messages name them
    phase: str  # "making it", "reset(seed=0)", "step() number 2 after reset", ...
    phase_seconds: float  # how long this phase has taken so far
    elapsed_seconds: float  # how long the whole check has taken so far
    timeout: float  # the check's deadline, in seconds from its start

    def __str__(self) -> str:
        return (
            f"checking {self.env}: {self.phase} ({self.elapsed_seconds:.0f} s of at most "
            f"{self.timeout:g} s)"
        )


#: Who hears of every check's progress in this context (a command, a dashboard page).
_REPORT: ContextVar[Callable[[CheckProgress], None] | None] = ContextVar(
    "vecenvs_check_report", default=None
)


@contextmanager
def reporting_checks(callback: Callable[[CheckProgress], None]) -> Iterator[None]:
    """Within the ``with`` block, every :func:`check_env` tells ``callback`` its progress (a
    :class:`CheckProgress`), however deep the call that runs it (``validate_sweep``,
    ``autotune``, a job queue's ``submit_*``): the command line says what a slow env is doing,
    the dashboard shows it while the page waits."""
    token = _REPORT.set(callback)
    try:
        yield
    finally:
        _REPORT.reset(token)


@dataclasses.dataclass(frozen=True)
class EnvName:
    """What an env named by a user is, as the results store records it."""

    text: str  # as given: "mycart:MyCart-v0"; a factory: "<factory mymod.make_env>"
    kind: str  # REGISTERED, MODULE_ID, ENTRY_POINT or FACTORY
    module: str | None  # the module imported first (or the factory's), None for a registered id
    name: str  # the id, or the class or function of the module
    version: str | None = None  # its package's version, where known (describe_env sets it)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (what a results store records)."""
        return dataclasses.asdict(self)


def env_label(env: EnvSource) -> str:
    """How tables, charts and the store name ``env``: the text as given, or for a factory
    ``"<factory module.name>"`` (a label only: it can't be made again from it)."""
    if isinstance(env, str):
        return env
    module = getattr(env, "__module__", None) or "?"
    qualname = getattr(env, "__qualname__", None) or type(env).__name__
    return f"<factory {module}.{qualname}>"


def resolve_env(env: EnvSource) -> EnvName:
    """What ``env`` names, its module imported in this process: raises :class:`EnvError` with
    a one-line reason (a malformed name, an import that failed, an unknown id or attribute)."""
    if callable(env) and not isinstance(env, str):
        module = getattr(env, "__module__", None)
        return EnvName(env_label(env), FACTORY, module, getattr(env, "__qualname__", "?"))
    if not isinstance(env, str) or not env.strip():
        raise EnvError(
            f"env must be an env id such as 'CartPole-v1', 'module:EnvId' or "
            f"'package.module:Class', or a function making an env; got {env!r:.80}"
        )
    if ":" not in env:
        _spec(env, env)
        return EnvName(env, REGISTERED, None, env)
    module_name, _, name = env.partition(":")
    module = _import(module_name, env)
    if _registered(name):
        return EnvName(env, MODULE_ID, module_name, name)
    attribute = getattr(module, name, None) if name.isidentifier() else None
    if callable(attribute):
        return EnvName(env, ENTRY_POINT, module_name, name)
    if name.isidentifier():
        raise EnvError(
            f"env {env!r}: module {module_name!r} has no env class or function {name!r} and "
            f"registers no env id {name!r}"
        )
    _spec(name, env)  # gymnasium's own "did you mean" for the id the module did not register
    raise AssertionError("unreachable: _spec raised")


def describe_env(env: EnvSource) -> EnvName:
    """:func:`resolve_env`, with the version of the module's package where it says one: what a
    results store records of the env."""
    name = resolve_env(env)
    if name.module is None or name.kind == FACTORY:  # a script's function: no package
        return name
    return dataclasses.replace(name, version=_module_version(name.module))


def make_env(env: EnvSource, **env_kwargs: Any) -> gym.Env:
    """Make one env from any form :func:`resolve_env` reads, with gymnasium's wrappers.

    This is what every worker process calls (:func:`env_fns` gives them ``partial``\\ s of it):
    it imports a ``module:`` part itself, so a worker started with ``spawn`` needs nothing from
    its parent but the name.
    """
    if not isinstance(env, str):  # a factory: gymnasium's wrappers around what it returns
        return gym.make(EnvSpec(_safe_id(env_label(env)), entry_point=env), **env_kwargs)
    name = resolve_env(env)
    if name.kind == MODULE_ID:
        return gym.make(name.name, **env_kwargs)
    if name.kind == ENTRY_POINT:
        return gym.make(EnvSpec(_safe_id(env), entry_point=env), **env_kwargs)
    return gym.make(env, **env_kwargs)


def env_fns(env: EnvSource, num_envs: int, **env_kwargs: Any) -> list[Callable[[], gym.Env]]:
    """``num_envs`` factories of ``env``, for a vector env; the name is resolved here first, so
    a typo fails in this process with gymnasium's "did you mean", not in N workers."""
    resolve_env(env)
    return [partial(make_env, env, **env_kwargs) for _ in range(num_envs)]


def check_env(
    env: EnvSource,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    timeout: float = CHECK_SECONDS,
    on_progress: Callable[[CheckProgress], None] | None = None,
) -> EnvName:
    """Make one ``env``, reset and step it, compare what comes back with its spaces, run
    gymnasium's env checker on it, close it: all within ``timeout`` seconds, before any worker
    starts. Returns what the env is; raises :class:`EnvError` whose one line says what is wrong.

    What reset and step return must be what the spaces declare (:func:`space_mismatch`): a
    vector env copies each observation into a batch of the space's dtype and shape, and would
    otherwise cast it without a word (float64 into float32) or fail mid-measure. Rewards must
    be numbers, ``terminated`` and ``truncated`` bools, infos dicts.

    The name is resolved (its module imported) here; the env itself runs in a child process,
    so that an env that never returns, or ends its process (``os._exit``, a crash in C code),
    is reported in one line too, naming the phase it was in (making, reset or step), and the
    child is killed at the deadline. ``on_progress`` (else the callback of
    :func:`reporting_checks`, if any) hears where the check stands. A name that passed once,
    with the same arguments, is not checked again in this process.
    """
    timeout = check_seconds("timeout", timeout)
    name = resolve_env(env)
    what = name.text + describe_kwargs(env_kwargs or {})
    key = _checked_key(env, env_kwargs)
    if key is not None and key in _PASSED:
        return _PASSED[key]
    report = on_progress or _REPORT.get()
    # The default start method: fork on Linux, so the module imported above is there already;
    # under spawn the child imports it again (the name and sys.path are sent to it).
    context = multiprocess.get_context()
    parent_end, child_end = context.Pipe(duplex=False)
    process = context.Process(
        target=_check_in_child,
        args=(env, dict(env_kwargs or {}), child_end, os.getpid()),
        name=f"vecenvs check {name.text}",
        # daemon: if this process exits mid-check, multiprocess ends the child; if it is
        # killed, the child notices by itself (exit_when_orphaned).
        daemon=True,
    )
    started = time.monotonic()
    phase, phase_started = _STARTING, started
    process.start()
    child_end.close()  # the child's end lives in the child only
    reply, timed_out = None, False
    try:
        while reply is None:
            now = time.monotonic()
            if report is not None:
                report(CheckProgress(what, phase, now - phase_started, now - started, timeout))
            remaining = started + timeout - now
            if remaining <= 0:
                timed_out = True
                break
            ready = multiprocess.connection.wait(
                [parent_end, process.sentinel], min(remaining, PROGRESS_SECONDS)
            )
            if parent_end in ready or parent_end.poll():
                message = parent_end.recv()  # EOFError: the child ended without a word
                if message[0] == "phase":
                    phase, phase_started = message[1], time.monotonic()
                else:
                    reply = message[1:]
            elif process.sentinel in ready:
                break
    except EOFError:
        pass
    finally:
        parent_end.close()
        if process.is_alive():
            process.kill()
        process.join(5)
    if reply is None:
        if timed_out:
            raise EnvError(f"env {what}: {_ran_out(phase, timeout)}")
        raise EnvError(
            f"env {what}: the process checking it ended ({_exit_status(process.exitcode)}) "
            f"in {phase}, without an exception: the env ended its own process (os._exit, a "
            "crash in compiled code)"
        )
    making, line = reply
    if line is None:
        described = describe_env(env)
        if key is not None:
            _PASSED[key] = described
        return described
    if making:  # the env's own complaint, e.g. an unknown keyword argument
        raise EnvError(f"cannot make {what}: {line}")
    raise EnvError(f"env {what}: {line}")


#: The checks passed in this process: (name, arguments) -> what the env is. A command checks
#: its input, then the function it calls checks it again: the second is free.
_PASSED: dict[tuple[str, str], EnvName] = {}


def _checked_key(env: EnvSource, env_kwargs: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """How :data:`_PASSED` knows a check: a name and its arguments (a factory: never, it may
    close over anything)."""
    if not isinstance(env, str):
        return None
    return env, repr(sorted((env_kwargs or {}).items()))


#: The phases of a check, as progress and a deadline name them.
_STARTING = "starting the process that checks it"
_MAKING_PHASE = "making it"
_RESET_PHASE = "reset(seed=0)"
_CHECKER_PHASE = "gymnasium's env checker"


def _ran_out(phase: str, timeout: float) -> str:
    """What a check that ran out of time was doing, and what to do about it."""
    limit = f"took more than {timeout:g} s, the check's time limit"
    more = "raise the limit (--check-timeout SECONDS, or check_timeout= in Python)"
    if phase == _MAKING_PHASE:
        return f"making it {limit}; if it is only slow to build, {more}"
    if phase.startswith("step()"):
        return f"{phase} {limit} (a step that never returns?); if it is only slow, {more}"
    return f"{phase} {limit}; if it is only slow, {more}"


def _check_in_child(env: EnvSource, env_kwargs: dict[str, Any], pipe: Any, parent_pid: int) -> None:
    """The child's side of :func:`check_env`: ``("phase", what it starts)`` as it goes, then
    ``("done", making_failed, one line or None)``."""
    # Ctrl-C in a terminal reaches this process too: the parent stops the check (and kills
    # this process), and its reply must not be an env that "raised KeyboardInterrupt".
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_when_orphaned(parent_pid)
    try:
        _exercise(env, env_kwargs, lambda phase: pipe.send(("phase", phase)))
        pipe.send(("done", False, None))
    except _Failed as error:
        making = str(error) == _MAKING
        cause = error.__cause__ if making and error.__cause__ else error
        pipe.send(("done", making, _one_line(cause)))
    except BaseException as error:  # anything else, e.g. resolving the name again under spawn
        pipe.send(("done", False, _one_line(error)))
    finally:
        pipe.close()


def _exit_status(exitcode: int | None) -> str:
    """``"exit code 3"`` or ``"killed by SIGSEGV"``."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


#: What :class:`_Failed` says when making the env failed.
_MAKING = "making it raised"


class _Failed(Exception):
    """Which part of the check failed, and why (the original error is the cause)."""


def _exercise(env: EnvSource, env_kwargs: dict[str, Any], phase: Callable[[str], None]) -> None:
    """The check itself: make, spaces, reset, a few steps, each result against the spaces,
    gymnasium's checker, close. ``phase`` is told each part as it starts."""
    phase(_MAKING_PHASE)
    try:
        made = make_env(env, **env_kwargs)
    except Exception as error:
        raise _Failed(_MAKING) from error
    try:
        base = made.unwrapped
        for space in ("observation_space", "action_space"):
            value = getattr(base, space, None)
            if not isinstance(value, gym.spaces.Space):
                raise _Failed(
                    f"its {space} is {value!r:.60}, not a gymnasium.spaces.Space"
                ) from None
        observation_space = made.observation_space
        with warnings.catch_warnings():  # its advice (float32, bounds) is not a failure
            warnings.simplefilter("ignore")
            phase(_RESET_PHASE)
            try:
                reset = made.reset(seed=0)
            except Exception as error:
                raise _Failed("reset(seed=0) raised") from error
            _check_reset(reset, observation_space, "reset(seed=0)")
            made.action_space.seed(0)
            for step in range(CHECK_STEPS):
                call = f"step() number {step + 1} after reset"
                phase(call)
                try:
                    result = made.step(made.action_space.sample())
                except Exception as error:
                    raise _Failed(f"{call} raised") from error
                terminated, truncated = _check_step(result, observation_space, call)
                if terminated or truncated:
                    call = f"reset() after {call}"
                    phase(call)
                    try:
                        reset = made.reset()
                    except Exception as error:
                        raise _Failed(f"{call} raised") from error
                    _check_reset(reset, observation_space, call)
            spec = made.spec
            phase(_CHECKER_PHASE)
            try:  # not for an env registered without it (e.g. with spaces it can't sample)
                if spec is None or not spec.disable_env_checker:
                    gymnasium_check_env(base, skip_render_check=True, skip_close_check=True)
            except Exception as error:
                raise _Failed("gymnasium's env checker failed") from error
    finally:
        phase("close()")
        made.close()


def _check_reset(result: Any, observation_space: gym.Space, call: str) -> None:
    """``reset``'s result must be ``(observation, info)``, each as declared."""
    if not isinstance(result, tuple) or len(result) != 2:
        raise _Failed(
            f"{call} returned {_describe(result)}: expected a tuple (observation, info)"
        ) from None
    observation, info = result
    _check_observation(observation, observation_space, call)
    _check_info(info, call)


def _check_step(result: Any, observation_space: gym.Space, call: str) -> tuple[bool, bool]:
    """``step``'s result must be ``(observation, reward, terminated, truncated, info)``, each
    as declared: returns the two flags."""
    if not isinstance(result, tuple) or len(result) != 5:
        got = f"{len(result)} values" if isinstance(result, tuple) else _describe(result)
        raise _Failed(
            f"{call} returned {got}: expected 5 (observation, reward, terminated, truncated, info)"
        ) from None
    observation, reward, terminated, truncated, info = result
    _check_observation(observation, observation_space, call)
    if isinstance(reward, (bool, np.bool_)) or not isinstance(
        reward, (int, float, np.integer, np.floating)
    ):
        raise _Failed(
            f"{call} returned a reward that is not a number: expected a float or an int, got "
            f"{_describe(reward)}"
        ) from None
    if reward != reward:  # NaN: not a number either, and it spoils every sum it joins
        raise _Failed(f"{call} returned a reward of NaN: expected a number") from None
    for flag, value in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(value, (bool, np.bool_)):
            raise _Failed(
                f"{call} returned {flag} that is not a bool: expected True or False, got "
                f"{_describe(value)}"
            ) from None
    _check_info(info, call)
    return bool(terminated), bool(truncated)


def _check_observation(observation: Any, observation_space: gym.Space, call: str) -> None:
    mismatch = space_mismatch(observation_space, observation)
    if mismatch is not None:
        raise _Failed(
            f"{call} returned an observation that does not fit its observation_space: {mismatch}"
        ) from None


def _check_info(info: Any, call: str) -> None:
    if not isinstance(info, dict):
        raise _Failed(
            f"{call} returned an info that is not a dict: expected a dict, got {_describe(info)}"
        ) from None


def space_mismatch(space: gym.Space, value: Any) -> str | None:
    """How ``value`` does not fit ``space``, as ``"expected ..., got ..."`` (a Dict's or a
    Tuple's part named first, ``"at ['position']: ..."``), or None when it fits.

    Stricter than ``space.contains`` where a vector env would change the value without a word:
    a ``Box`` takes numpy arrays of exactly its dtype and shape (a Box of shape ``()`` also takes
    a Python number), with every value within its bounds where they are finite; ``Discrete``,
    ``MultiDiscrete`` and ``MultiBinary`` take integers within their range. Other spaces are
    asked (``contains``).

    Example:
        >>> box = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        >>> space_mismatch(box, np.zeros(2, dtype=np.float64))
        'expected float32 of shape (2,), got float64 of shape (2,)'
        >>> space_mismatch(box, np.array([0.5, 3.0], dtype=np.float32))
        "expected values within the space's bounds, got 3 at index (1,), outside [-1, 1]"
        >>> space_mismatch(box, np.zeros(2, dtype=np.float32)) is None
        True
    """
    return _mismatch(space, value, "")


def _mismatch(space: gym.Space, value: Any, at: str) -> str | None:
    where = f"at {at}: " if at else ""
    if isinstance(space, spaces.Box):
        mismatch = _box_mismatch(space, value)
    elif isinstance(space, spaces.Discrete):
        mismatch = _discrete_mismatch(space, value)
    elif isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
        mismatch = _integers_mismatch(space, value)
    elif isinstance(space, spaces.Dict):
        if not isinstance(value, Mapping):
            return f"{where}expected a dict with the keys {sorted(space.spaces)}, got {_describe(value)}"
        if set(value) != set(space.spaces):
            return f"{where}expected the keys {sorted(space.spaces)}, got {sorted(map(str, value))}"
        for key, part in space.spaces.items():
            found = _mismatch(part, value[key], f"{at}[{key!r}]")
            if found is not None:
                return found
        return None
    elif isinstance(space, spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
            return f"{where}expected a tuple of {len(space.spaces)}, got {_describe(value)}"
        for index, part in enumerate(space.spaces):
            found = _mismatch(part, value[index], f"{at}[{index}]")
            if found is not None:
                return found
        return None
    else:  # Text, Sequence, Graph, OneOf, a space of one's own: its own test
        try:
            fits = bool(space.contains(value))
        except Exception:
            fits = False
        mismatch = None if fits else f"expected a value of {space}, got {_describe(value)}"
    return None if mismatch is None else where + mismatch


def _box_mismatch(space: spaces.Box, value: Any) -> str | None:
    expected = f"{space.dtype} of shape {space.shape}"
    if not isinstance(value, np.ndarray):
        number = isinstance(value, (int, float, np.number, np.bool_))
        if not (space.shape == () and number):
            return f"expected a numpy array, {expected}, got {_describe(value)}"
        # A number for a Box of shape (): a Python number has no dtype to compare.
        value = np.asarray(value, dtype=None if isinstance(value, np.generic) else space.dtype)
    if value.dtype != space.dtype or value.shape != space.shape:
        return f"expected {expected}, got {value.dtype} of shape {value.shape}"
    low, high = space.low, space.high
    finite = np.issubdtype(space.dtype, np.floating)
    below = ~(value >= low) & (np.isfinite(low) if finite else True)
    above = ~(value <= high) & (np.isfinite(high) if finite else True)
    outside = np.argwhere(below | above)
    if len(outside) == 0:
        return None
    index = tuple(int(i) for i in outside[0])
    return (
        f"expected values within the space's bounds, got {_number(value[index])} at index "
        f"{index}, outside [{_number(low[index])}, {_number(high[index])}]"
    )


def _discrete_mismatch(space: spaces.Discrete, value: Any) -> str | None:
    first, last = int(space.start), int(space.start + space.n - 1)
    scalar = value.item() if isinstance(value, np.ndarray) and value.shape == () else value
    if isinstance(scalar, (bool, np.bool_)) or not isinstance(scalar, (int, np.integer)):
        return f"expected an integer from {first} to {last}, got {_describe(value)}"
    if not first <= int(scalar) <= last:
        return f"expected an integer from {first} to {last}, got {int(scalar)}"
    return None


def _integers_mismatch(space: spaces.MultiDiscrete | spaces.MultiBinary, value: Any) -> str | None:
    expected = f"integers of shape {space.shape}"
    if not isinstance(value, np.ndarray):
        return f"expected a numpy array of {expected}, got {_describe(value)}"
    integers = np.issubdtype(value.dtype, np.integer) or value.dtype == np.bool_
    if not integers or value.shape != space.shape:
        return f"expected {expected}, got {value.dtype} of shape {value.shape}"
    if not space.contains(value.astype(space.dtype) if value.dtype == np.bool_ else value):
        return f"expected values within {space}, got {np.array2string(value, threshold=8)}"
    return None


def _describe(value: Any) -> str:
    """``"a numpy array, float64 of shape (2,)"``, else its type and a short repr."""
    if isinstance(value, np.ndarray):
        return f"a numpy array, {value.dtype} of shape {value.shape}"
    text = " ".join(repr(value).split())
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def _number(value: Any) -> str:
    """A numpy scalar as a reader writes it: ``3``, ``-2.4``, ``True``."""
    item = value.item() if isinstance(value, np.generic) else value
    return f"{item:g}" if isinstance(item, float) else str(item)


def _one_line(error: BaseException) -> str:
    """``"step() raised ZeroDivisionError: division by zero (mycart/env.py:42)"``."""
    what = ""
    if isinstance(error, _Failed):
        what = f"{error} "
        error = error.__cause__ or error
        if isinstance(error, _Failed):
            return " ".join(str(error).split())
    message = " ".join(str(error).split()) or "(no message)"
    where = ""
    # The innermost frame of the env's own code: not gymnasium's checks, not ours.
    ours = (os.path.dirname(gym.__file__), os.path.dirname(__file__))
    frames = [
        f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(ours)
    ]
    if frames:
        where = f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return f"{what}{type(error).__name__}: {message}{where}".strip()


def _spec(env_id: str, label: str) -> None:
    """``gym.spec(env_id)``, its error one line (gymnasium's "did you mean" kept), and for a
    bare id, the ``module:EnvId`` form when a module of its name can be imported."""
    try:
        gym.spec(env_id)
    except gym.error.Error as error:
        hint = "" if ":" in label else _module_hint(env_id)
        raise EnvError(f"unknown env id {label!r}: {' '.join(str(error).split())}{hint}") from None


def _in_stdlib(origin: str | None) -> bool:
    """Whether a module found at ``origin`` is Python's own (not one in its site-packages)."""
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    path = os.path.realpath(origin or "")
    if os.path.commonpath([stdlib, path]) != stdlib:
        return False
    return os.path.relpath(path, stdlib).split(os.sep)[0] not in ("site-packages", "dist-packages")


def _module_hint(env_id: str) -> str:
    """``" Did you mean `robowalk:RoboWalk-v0`? ..."`` when ``RoboWalk-v0`` is not registered
    but a module named after it (``robowalk``, ``RoboWalk``, ``robo_walk``, or its namespace)
    can be imported: the id is most likely registered by importing that module, which only
    the ``module:EnvId`` form does. Only looked up, never imported: a name typed by a user
    does not get to run a module."""
    try:
        namespace, name, _ = parse_env_id(env_id)
    except gym.error.Error:
        return ""
    names = [name.lower(), name, re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()]
    names += [namespace, namespace.lower()] if namespace else []
    for module in dict.fromkeys(names):
        # Top-level only (find_spec imports a dotted name's parents), and not Python's own
        # (``Test-v0`` is not the standard library's ``test`` package).
        if not _MODULE.match(module) or "." in module or module in sys.stdlib_module_names:
            continue
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and not _in_stdlib(spec.origin):
            return (
                f" Did you mean `{module}:{env_id}`? (a module named {module!r} can be imported, "
                "and importing it first, as that form does, may register the id)"
            )
    return ""


def _registered(env_id: str) -> bool:
    try:
        gym.spec(env_id)
    except gym.error.Error:
        return False
    return True


def _import(module_name: str, label: str) -> Any:
    """Import ``module_name``; its own error, in one line, if that fails."""
    if not _MODULE.match(module_name):
        raise EnvError(
            f"env {label!r}: {module_name!r} is not a module name (expected e.g. 'mycart' or "
            "'my_pkg.envs' before the colon)"
        )
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # ImportError, or whatever the module raised while importing
        line = " ".join(str(error).split())
        raise EnvError(
            f"env {label!r}: importing {module_name!r} failed: {type(error).__name__}: {line}"
        ) from None


@functools.cache
def _module_version(module_name: str) -> str | None:
    """The version of the package ``module_name`` belongs to, where it says one: its
    ``__version__``, else that of an installed distribution of the same name (scanning every
    distribution for the one that holds the module takes a second: not worth it)."""
    top = module_name.partition(".")[0]
    version = getattr(sys.modules.get(top), "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return importlib.metadata.version(top)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def _safe_id(text: str) -> str:
    """An id gymnasium's ``EnvSpec`` accepts, for an entry point or a factory: its label with
    anything but letters, digits and ``_ : . -`` made ``_``."""
    return re.sub(r"[^\w:.-]", "_", text).strip("_") or "env"
