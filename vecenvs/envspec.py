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
raises. That is the message a user sees, not a traceback from inside worker 3 of 16.

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
import os
import re
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import gymnasium as gym
import multiprocess
import multiprocess.connection
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from vecenvs.table import describe_kwargs
from vecenvs.workers import exit_when_orphaned

__all__ = [
    "CHECK_SECONDS",
    "ENTRY_POINT",
    "FACTORY",
    "MODULE_ID",
    "REGISTERED",
    "EnvError",
    "EnvName",
    "EnvSource",
    "check_env",
    "describe_env",
    "env_fns",
    "env_label",
    "make_env",
    "resolve_env",
]

#: What an env can be given as: a name (in one of the forms above) or a function making one.
EnvSource = str | Callable[..., gym.Env]

#: The kinds of :class:`EnvName`.
REGISTERED, MODULE_ID, ENTRY_POINT, FACTORY = "registered", "module:id", "entry point", "factory"

#: How long :func:`check_env` waits for one env to be made, reset, stepped and checked.
CHECK_SECONDS = 30.0

#: Steps :func:`check_env` takes beyond gymnasium's checker (which steps once): a step that
#: raises only after a few is still caught before any worker starts.
CHECK_STEPS = 5

#: What a module path may look like (``mycart``, ``my_pkg.envs``): checked before importing.
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class EnvError(ValueError):
    """A user's env can't be used: the message is one line saying what is wrong."""


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
) -> EnvName:
    """Make one ``env``, reset and step it, run gymnasium's env checker on it, close it: all
    within ``timeout`` seconds, before any worker starts. Returns what the env is; raises
    :class:`EnvError` whose one line says what is wrong.

    The name is resolved (its module imported) here; the env itself runs in a child process,
    so that an env that never returns, or ends its process (``os._exit``, a crash in C code),
    is reported in one line too, and the child is killed at the deadline.
    """
    name = resolve_env(env)
    what = name.text + describe_kwargs(env_kwargs or {})
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
    process.start()
    child_end.close()  # the child's end lives in the child only
    try:
        ready = multiprocess.connection.wait([parent_end, process.sentinel], timeout)
        reply = parent_end.recv() if parent_end in ready or parent_end.poll() else None
    except EOFError:  # the child ended without a word
        reply = None
    finally:
        parent_end.close()
        if process.is_alive():
            process.kill()
        process.join(5)
    if reply is None:
        if process.exitcode is None or (process.exitcode == -signal.SIGKILL and not ready):
            raise EnvError(
                f"env {what}: making, resetting and stepping one env took more than "
                f"{timeout:g} s (a step that never returns?)"
            )
        raise EnvError(
            f"env {what}: the process checking it ended ({_exit_status(process.exitcode)}) "
            "while making, resetting or stepping it, without an exception: the env ended "
            "its own process (os._exit, a crash in compiled code)"
        )
    making, line = reply
    if line is None:
        return describe_env(env)
    if making:  # the env's own complaint, e.g. an unknown keyword argument
        raise EnvError(f"cannot make {what}: {line}")
    raise EnvError(f"env {what}: {line}")


def _check_in_child(env: EnvSource, env_kwargs: dict[str, Any], pipe: Any, parent_pid: int) -> None:
    """The child's side of :func:`check_env`: ``(making_failed, one line or None)``."""
    exit_when_orphaned(parent_pid)
    try:
        _exercise(env, env_kwargs)
        pipe.send((False, None))
    except _Failed as error:
        making = str(error) == _MAKING
        pipe.send((making, _one_line(error.__cause__ if making and error.__cause__ else error)))
    except BaseException as error:  # anything else, e.g. resolving the name again under spawn
        pipe.send((False, _one_line(error)))
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


def _exercise(env: EnvSource, env_kwargs: dict[str, Any]) -> None:
    """The check itself: make, spaces, reset, a few steps, gymnasium's checker, close."""
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
        with warnings.catch_warnings():  # its advice (float32, bounds) is not a failure
            warnings.simplefilter("ignore")
            try:
                made.reset(seed=0)
            except Exception as error:
                raise _Failed("reset(seed=0) raised") from error
            made.action_space.seed(0)
            for step in range(CHECK_STEPS):
                try:
                    _, _, terminated, truncated, _ = made.step(made.action_space.sample())
                except Exception as error:
                    raise _Failed(f"step() number {step + 1} after reset raised") from error
                if terminated or truncated:
                    made.reset()
            spec = made.spec
            try:  # not for an env registered without it (e.g. with spaces it can't sample)
                if spec is None or not spec.disable_env_checker:
                    gymnasium_check_env(base, skip_render_check=True, skip_close_check=True)
            except Exception as error:
                raise _Failed("gymnasium's env checker failed") from error
    finally:
        made.close()


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
    """``gym.spec(env_id)``, its error one line (gymnasium's "did you mean" kept)."""
    try:
        gym.spec(env_id)
    except gym.error.Error as error:
        raise EnvError(f"unknown env id {label!r}: {' '.join(str(error).split())}") from None


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
