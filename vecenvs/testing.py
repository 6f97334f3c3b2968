"""A conformance checker for vector envs: run any backend through it to see if it is right.

The unit under test is a *backend*: a callable that builds a vector env from env factories,
``make_vector_env(env_fns, autoreset_mode=AutoresetMode.NEXT_STEP) -> VectorEnv``. Ours,
gymnasium's and a student's own all fit, for example::

    lambda fns, **kw: PoolVecEnv(fns, num_workers=2, **kw)
    gymnasium.vector.SyncVectorEnv

Each ``check_*`` function checks one thing and raises :class:`ConformanceError` (an
``AssertionError``, so it reads naturally in a pytest test) when the backend gets it wrong.
Every message says what was checked, what was expected, what came back, and a hint on what to
fix. :func:`check_vector_env` runs them all and reports every failure at once.

Example:
    >>> import gymnasium as gym
    >>> from vecenvs.testing import check_matches_sync
    >>> check_matches_sync(gym.vector.AsyncVectorEnv, "CartPole-v1")
    []

The reference for "right" is gymnasium's own :class:`gymnasium.vector.SyncVectorEnv`: given
the same envs, seeds and actions, a backend must return exactly what it returns, step by step.
"""

from __future__ import annotations

import contextlib
import copy
import re
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import psutil
from gymnasium import spaces
from gymnasium.error import ClosedEnvironmentError
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space

from vecenvs.factory import env_fns_for

__all__ = [
    "DEFAULT_ENV_IDS",
    "ConformanceError",
    "ConformanceWarning",
    "Failure",
    "check_api",
    "check_close",
    "check_error_propagation",
    "check_matches_sync",
    "check_vector_env",
]

#: A backend: builds a vector env from env factories and an autoreset mode.
MakeVectorEnv = Callable[..., VectorEnv]

#: The envs :func:`check_vector_env` runs by default: discrete and continuous actions, Box
#: observations of different sizes, a ``Dict`` observation, and episodes ending by termination
#: (CartPole, DictObs) and by truncation (Pendulum, Acrobot, DictObs).
DEFAULT_ENV_IDS = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "vecenvs/DictObs-v0")

#: The text every error raised by ``FaultyEnv(how="raise")`` contains.
_FAULTY_MESSAGE = "deliberate failure"
#: Which call of the failing phase the faulty env fails on, in check_error_propagation.
_FAIL_AT = 2
#: How long the children of a closed vector env get to exit, by default.
_CHILD_EXIT_SECONDS = 5.0
#: How long a close() may take before the checker stops waiting for it.
_CLOSE_SECONDS = 10.0
#: The attribute check_api sets on every env to test set_attr/get_attr/call.
_PROBE_ATTRIBUTE = "vecenvs_conformance_probe"


# --------------------------------------------------------------------------------------------
# Results: the error, the warning, and how a failure is worded.
# --------------------------------------------------------------------------------------------


class Failure(NamedTuple):
    """One failed check.

    Attributes:
        check: which check failed, e.g. ``"check_api[CartPole-v1, NextStep]"``.
        message: what was checked, what was expected, what came back, and a hint.
    """

    check: str
    message: str


class ConformanceError(AssertionError):
    """A vector env does not behave as the gymnasium ``VectorEnv`` API requires.

    An ``AssertionError``, so a failed check reads as a failed test in pytest.

    Attributes:
        failures: every failed check, as :class:`Failure` ``(check, message)`` pairs.
        passed: how many checks passed (only set by :func:`check_vector_env`).
    """

    def __init__(self, failures: Sequence[Failure], passed: int | None = None):
        self.failures = [Failure(*failure) for failure in failures]
        self.passed = passed
        super().__init__(self._describe())

    def _describe(self) -> str:
        if len(self.failures) == 1 and self.passed is None:
            check, message = self.failures[0]
            return f"{check} failed: {message}"
        header = f"{len(self.failures)} conformance check(s) failed"
        if self.passed is not None:
            header += f" ({self.passed} passed)"
        parts = [f"{header}:"]
        for number, (check, message) in enumerate(self.failures, start=1):
            parts.append(f"[{number}] {check} failed: {message}")
        return "\n\n".join(parts)


class ConformanceWarning(UserWarning):
    """Something a check accepted but that is worth knowing, e.g. an unusual exception type."""


class _Stop(Exception):
    """Raised inside a check to stop it after a problem that makes going on pointless."""


def _indent(text: str, prefix: str) -> str:
    """Indent every line but the first, so multi-line values line up under their label."""
    return text.replace("\n", "\n" + prefix)


def _format_problem(
    checked: str,
    expected: str,
    got: str,
    hint: str,
    where: Sequence[tuple[str, str]] = (),
    details: str | None = None,
) -> str:
    """Word one problem: the same layout everywhere, so students learn to read it once."""
    rows = [*where, ("expected", expected), ("got", got), ("hint", hint)]
    lines = [checked]
    for label, value in rows:
        lines.append(f"  {label + ':':<10}{_indent(str(value), ' ' * 12)}")
    if details:
        lines.append("  " + _indent(details.rstrip(), "  "))
    return "\n".join(lines)


class _CheckRun:
    """Collects the problems and notes of one check, then raises or returns them.

    Problems that leave the vector env usable are collected so one run reports them all;
    :meth:`stop` ends the check when going on would only report follow-on failures.
    """

    def __init__(self, name: str):
        self.name = name
        self.problems: list[str] = []
        self.notes: list[str] = []

    def problem(self, checked: str, expected: str, got: str, hint: str, **kwargs: Any) -> None:
        self.problems.append(_format_problem(checked, expected, got, hint, **kwargs))

    def stop(self, checked: str, expected: str, got: str, hint: str, **kwargs: Any) -> None:
        self.problem(checked, expected, got, hint, **kwargs)
        raise _Stop

    def note(self, text: str) -> None:
        self.notes.append(text)
        warnings.warn(ConformanceWarning(f"{self.name}: {text}"), stacklevel=3)

    def attempt(self, doing: str, action: Callable[[], Any], expected: str, hint: str) -> Any:
        """Run one call into the vector env; if it raises, record that and stop the check."""
        try:
            return action()
        except Exception as err:  # noqa: BLE001 - any exception from the backend is the finding
            self.stop(
                f"{doing} raised an exception",
                expected,
                _exception_summary(err),
                hint,
                details=_traceback_tail(err),
            )

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Run the body of a check; a :meth:`stop` ends the body but not the check."""
        try:
            yield
        except _Stop:
            pass

    def finish(self) -> list[str]:
        """Raise :class:`ConformanceError` if there were problems, else return the notes."""
        if self.problems:
            if len(self.problems) == 1:
                message = self.problems[0]
            else:
                message = f"{len(self.problems)} problems\n" + "\n".join(
                    f"({number}) {_indent(text, '    ')}"
                    for number, text in enumerate(self.problems, start=1)
                )
            raise ConformanceError([Failure(self.name, message)])
        return self.notes


def _exception_summary(err: BaseException) -> str:
    first_line = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first_line}" if first_line else type(err).__name__


def _traceback_tail(err: BaseException, lines: int = 30) -> str:
    """The last lines of ``err``'s traceback: where in the student's code it came from."""
    frames = err.__traceback__
    # Skip the checker's own frames: the student needs to see their code, not ours.
    while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
        frames = frames.tb_next
    text = "".join(traceback.format_exception(type(err), err, frames)).rstrip()
    kept = text.splitlines()[-lines:]
    return "traceback (last lines):\n" + "\n".join("  " + line for line in kept)


def _show(value: Any, limit: int = 600) -> str:
    """A readable, exact rendering of a value: floats printed with all their digits."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            body = repr(value.tolist())
        else:
            body = np.array2string(value, separator=", ", floatmode="unique", threshold=24)
        text = f"{body} (dtype={value.dtype}, shape={value.shape})"
    elif isinstance(value, np.generic):
        text = f"{value.item()!r} ({value.dtype})"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    return type(value).__name__


# --------------------------------------------------------------------------------------------
# Building, closing and timing out.
# --------------------------------------------------------------------------------------------


def _build(
    run: _CheckRun, make_vector_env: MakeVectorEnv, env_fns: list, mode: AutoresetMode
) -> Any:
    return run.attempt(
        f"make_vector_env(env_fns, autoreset_mode={mode})",
        lambda: make_vector_env(env_fns, autoreset_mode=mode),
        "a vector env",
        "the backend must accept a list of env factories and the keyword autoreset_mode "
        "(a gymnasium.vector.AutoresetMode); see the traceback for where it failed",
    )


def _in_thread(action: Callable[[], Any], timeout: float) -> tuple[bool, Any, BaseException | None]:
    """Run ``action`` in a daemon thread, waiting at most ``timeout`` seconds.

    A hung backend then fails the check instead of hanging it. The thread is a daemon so that
    one that never returns does not keep the interpreter alive at exit.

    Returns:
        ``(finished, result, error)``; ``error`` is what ``action`` raised, if it did.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = action()
        except BaseException as err:  # noqa: BLE001 - handed back to the caller to judge
            outcome["error"] = err

    thread = threading.Thread(target=target, name="vecenvs-conformance-check", daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive(), outcome.get("result"), outcome.get("error")


def _close_quietly(venv: Any) -> None:
    """Close a vector env, ignoring errors and giving up after a while (used in clean-up)."""
    if venv is not None:
        # venv.close is looked up inside the thread: a broken backend may not even have one.
        _in_thread(lambda: venv.close(), _CLOSE_SECONDS)


# --------------------------------------------------------------------------------------------
# Child processes: a closed vector env must not leave any behind.
# --------------------------------------------------------------------------------------------


def _child_pids() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _is_multiprocessing_helper(process: psutil.Process) -> bool:
    """The resource tracker and fork server: started once, meant to live as long as we do.

    Only our direct children count: processes forked *by* the fork server share its command
    line but are the vector env's workers, and must not be excused.
    """
    if process.ppid() != psutil.Process().pid:
        return False
    command = " ".join(process.cmdline())
    return any(name in command for name in ("resource_tracker", "semaphore_tracker", "forkserver"))


def _live_new_children(before: set[int]) -> list[psutil.Process]:
    """Children started since ``before`` was taken that are still running (zombies excluded)."""
    alive = []
    for child in psutil.Process().children(recursive=True):
        if child.pid in before:
            continue
        try:
            if child.status() == psutil.STATUS_ZOMBIE or _is_multiprocessing_helper(child):
                continue
            alive.append(child)
        except psutil.Error:  # it exited meanwhile, or we may not look at it: not ours to judge
            continue
    return alive


def _check_no_children_left(run: _CheckRun, before: set[int], after: str, wait: float) -> None:
    """Wait up to a few seconds for new children to exit; report and terminate any left over.

    The leftovers are terminated so that a leaking backend does not make the rest of a test
    session hang at exit (multiprocessing joins its non-daemon children then).
    """
    deadline = time.monotonic() + wait
    left = _live_new_children(before)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _live_new_children(before)
    if not left:
        return
    described = []
    for child in left:
        try:
            described.append(f"pid {child.pid} ({' '.join(child.cmdline())[:120]})")
        except psutil.Error:
            described.append(f"pid {child.pid}")
    _terminate(left)
    run.problem(
        f"no child process may still be running {wait:g} s {after}",
        "no new child processes",
        f"{len(left)} still running (the checker has now terminated them):\n"
        + "\n".join(described),
        "close() must stop every worker: send each a close command (or terminate it if it does "
        "not answer), then join() it. When construction or a call fails, close the workers "
        "that were already started before raising.",
    )


def _terminate(processes: list[psutil.Process]) -> None:
    """Terminate, then kill, the given processes, by pid; never waitpid() them ourselves.

    Reaping them here would take the exit status away from the multiprocessing objects that
    own them, so we only wait until they are gone or zombies.
    """
    for signal_them in ("terminate", "kill"):
        for process in processes:
            with contextlib.suppress(psutil.Error):
                getattr(process, signal_them)()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if not any(_is_running(process) for process in processes):
                return
            time.sleep(0.05)


def _is_running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# --------------------------------------------------------------------------------------------
# check_api
# --------------------------------------------------------------------------------------------


def _space_problem(space: gym.Space, value: Any, path: str) -> tuple[str, str, str] | None:
    """Why ``value`` is not a batch of ``space``: ``(where, expected, got)``, or ``None``.

    Walks ``Dict`` and ``Tuple`` spaces so the problem is named down to the exact key; array
    spaces are checked for type, dtype and shape first, as those are the usual mistakes, then
    ``space.contains`` catches values out of bounds.
    """
    if isinstance(space, spaces.Dict):
        if not isinstance(value, Mapping):
            return path, "a dict (the space is a Dict)", _type_name(value)
        if set(value) != set(space.spaces):
            return path, f"keys {sorted(space.spaces)}", f"keys {sorted(value)}"
        for key, subspace in space.spaces.items():
            found = _space_problem(subspace, value[key], f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, tuple) or len(value) != len(space.spaces):
            return path, f"a tuple of {len(space.spaces)} items", _show(value)
        for index, subspace in enumerate(space.spaces):
            found = _space_problem(subspace, value[index], f"{path}[{index}]")
            if found:
                return found
        return None
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        wanted = f"a numpy array of dtype {space.dtype} and shape {space.shape}"
        if not isinstance(value, np.ndarray):
            return path, wanted, f"a {_type_name(value)}"
        if value.dtype != space.dtype or value.shape != space.shape:
            return path, wanted, f"dtype {value.dtype}, shape {value.shape}"
    if not space.contains(value):
        return path, f"a value inside {space}", _show(value)
    return None


def _check_batch(run: _CheckRun, space: gym.Space, value: Any, what: str, space_name: str) -> None:
    found = _space_problem(space, value, what)
    if found:
        where, expected, got = found
        if expected.startswith("a value inside"):
            hint = ("the type, dtype and shape are right but a value is outside the space: check "
                    "that row i holds env i's observation exactly as the env returned it")
        else:
            hint = ("build the batch with gymnasium.vector.utils.create_empty_array("
                    "single_observation_space, n=num_envs) and fill it with "
                    "gymnasium.vector.utils.concatenate(single_observation_space, per_env_obs, out)")
        run.problem(f"{where} must be an element of {space_name}", expected, got, hint)


def _check_flags(
    run: _CheckRun, value: Any, name: str, dtype: type, num_envs: int, hint: str
) -> None:
    """``value`` must be a numpy array of ``dtype`` and shape ``(num_envs,)``."""
    expected = f"a numpy array of dtype {np.dtype(dtype)} and shape ({num_envs},)"
    if not isinstance(value, np.ndarray):
        run.problem(f"step() {name}", expected, f"a {_type_name(value)}: {_show(value)}", hint)
    elif value.dtype != dtype or value.shape != (num_envs,):
        run.problem(f"step() {name}", expected, f"dtype {value.dtype}, shape {value.shape}", hint)


def check_api(
    make_vector_env: MakeVectorEnv,
    env_id: str = "CartPole-v1",
    num_envs: int = 3,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    *,
    require_context_manager: bool = False,
) -> list[str]:
    """Check the shape of the API: attributes, spaces, return types, call/get_attr/set_attr.

    Checks that the backend builds a ``gymnasium.vector.VectorEnv`` with the right
    ``num_envs``, ``single_*`` spaces equal to the env's and batched spaces equal to
    ``batch_space(single, num_envs)``, ``metadata["autoreset_mode"]`` set to the mode asked
    for; that ``reset`` returns ``(observations, infos)`` and ``step`` a 5-tuple with
    observations in the space, float64 rewards and bool terminations/truncations of shape
    ``(num_envs,)`` and a dict of infos; that ``get_attr``, ``set_attr`` and ``call`` reach
    every env in order; and that a ``with`` block closes the vector env.

    gymnasium 1.x's own ``VectorEnv`` has no ``__enter__``/``__exit__``, so by default a
    vector env without them only earns a note; one that has them must close on leaving.

    Args:
        make_vector_env: the backend, called as ``make_vector_env(env_fns, autoreset_mode=...)``.
        env_id: a registered env id.
        num_envs: how many envs to build.
        autoreset_mode: the mode to build with; ``metadata["autoreset_mode"]`` must match it.
        require_context_manager: fail, rather than note, when ``with`` is not supported.

    Returns:
        Notes on things that passed but are worth knowing (also issued as
        :class:`ConformanceWarning`).

    Raises:
        ConformanceError: with every problem found.
    """
    mode = AutoresetMode(autoreset_mode)
    run = _CheckRun(f"check_api[{env_id}, {mode.value}]")
    single_env = gym.make(env_id)
    single_obs_space, single_act_space = single_env.observation_space, single_env.action_space
    single_env.close()

    venv = None
    with run.running():
        venv = _build(run, make_vector_env, env_fns_for(env_id, num_envs), mode)
        if not isinstance(venv, VectorEnv):
            run.stop(
                "the backend must build a gymnasium.vector.VectorEnv",
                "an instance of gymnasium.vector.VectorEnv",
                f"an instance of {type(venv).__module__}.{type(venv).__qualname__}",
                "subclass gymnasium.vector.VectorEnv, so gymnasium's vector wrappers and "
                "training code accept your vector env",
            )
        _check_attributes(run, venv, num_envs, mode, single_obs_space, single_act_space)
        _check_reset_and_step(run, venv, num_envs)
        _check_attr_methods(run, venv, env_id, num_envs)
    _close_quietly(venv)

    if venv is not None:  # if building failed, building again for `with` would only fail again
        with run.running():
            _check_with_block(run, make_vector_env, env_id, num_envs, mode, require_context_manager)
    return run.finish()


def _check_attributes(
    run: _CheckRun,
    venv: VectorEnv,
    num_envs: int,
    mode: AutoresetMode,
    single_obs_space: gym.Space,
    single_act_space: gym.Space,
) -> None:
    got_num_envs = getattr(venv, "num_envs", "<missing>")
    if got_num_envs != num_envs:
        run.stop(
            "num_envs must be the number of env factories given",
            str(num_envs),
            repr(got_num_envs),
            "set self.num_envs = len(env_fns) in __init__",
        )
    for kind, single in (("observation", single_obs_space), ("action", single_act_space)):
        got_single = getattr(venv, f"single_{kind}_space", "<missing>")
        if got_single != single:
            run.problem(
                f"single_{kind}_space must equal the env's {kind}_space",
                str(single),
                str(got_single),
                f"take it from one env: self.single_{kind}_space = env.{kind}_space (a worker "
                f"can send it back to the parent after making its envs)",
            )
            continue
        batched = batch_space(single, num_envs)
        got_batched = getattr(venv, f"{kind}_space", "<missing>")
        if got_batched != batched:
            run.problem(
                f"{kind}_space must be the single space batched num_envs times",
                str(batched),
                str(got_batched),
                f"set self.{kind}_space = gymnasium.vector.utils.batch_space("
                f"self.single_{kind}_space, self.num_envs)",
            )
    metadata = getattr(venv, "metadata", None)
    if isinstance(metadata, Mapping):
        got_mode = metadata.get("autoreset_mode", "<missing>")
    else:
        got_mode = f"no metadata dict (metadata is {metadata!r})"
    if got_mode is not mode:
        as_string = isinstance(got_mode, str) and got_mode == mode.value
        run.problem(
            'metadata["autoreset_mode"] must be the autoreset mode the env was built with',
            repr(mode),
            repr(got_mode),
            ("store the AutoresetMode member, not its string value: gymnasium's vector "
             "wrappers compare it with AutoresetMode.NEXT_STEP etc." if as_string else
             'set self.metadata = {**first_env.metadata, "autoreset_mode": autoreset_mode}, '
             "with autoreset_mode converted by AutoresetMode(autoreset_mode)"),
        )


def _check_reset_and_step(run: _CheckRun, venv: VectorEnv, num_envs: int) -> None:
    result = run.attempt(
        "reset(seed=0)",
        lambda: venv.reset(seed=0),
        "(observations, infos)",
        "reset must reset every env (env i with seed + i) and return (observations, infos)",
    )
    if not isinstance(result, tuple) or len(result) != 2:
        run.stop(
            "reset(seed=0) must return a 2-tuple (observations, infos)",
            "a tuple of 2 items",
            f"a {_type_name(result)}: {_show(result)}",
            "return observations, infos",
        )
    observations, infos = result
    _check_batch(
        run, venv.observation_space, observations, "reset() observations", "observation_space"
    )
    if not isinstance(infos, dict):
        run.problem(
            "reset() infos must be a dict",
            "a dict",
            f"a {_type_name(infos)}",
            "collect the per-env infos with infos = self._add_info(infos, env_info, i)",
        )

    action_space = copy.deepcopy(venv.action_space)
    action_space.seed(0)
    for step in range(1, 4):
        result = run.attempt(
            f"step(actions) (step {step} after reset)",
            lambda: venv.step(action_space.sample()),
            "(observations, rewards, terminations, truncations, infos)",
            "step(actions) must step env i with actions[i] and return the batched results",
        )
        if not isinstance(result, tuple) or len(result) != 5:
            run.stop(
                "step(actions) must return a 5-tuple",
                "(observations, rewards, terminations, truncations, infos)",
                f"a {_type_name(result)}: {_show(result, limit=200)}",
                "return observations, rewards, terminations, truncations, infos",
            )
        observations, rewards, terminations, truncations, infos = result
        problems_before = len(run.problems)
        _check_batch(
            run, venv.observation_space, observations, "step() observations", "observation_space"
        )
        _check_flags(
            run, rewards, "rewards", np.float64, num_envs,
            "gymnasium's vector envs return rewards as float64: build them with "
            "np.zeros(num_envs, dtype=np.float64) and fill in each env's reward",
        )
        for name, flags in (("terminations", terminations), ("truncations", truncations)):
            _check_flags(
                run, flags, name, np.bool_, num_envs,
                f"build {name} with np.zeros(num_envs, dtype=np.bool_) and fill in each env's flag",
            )
        if not isinstance(infos, dict):
            run.problem(
                "step() infos must be a dict",
                "a dict",
                f"a {_type_name(infos)}",
                "collect the per-env infos with infos = self._add_info(infos, env_info, i)",
            )
        if len(run.problems) > problems_before:
            return  # the same mistake would only be reported again on the next steps


def _check_attr_methods(run: _CheckRun, venv: VectorEnv, env_id: str, num_envs: int) -> None:
    def in_order(doing: str, result: Any, expected: tuple, hint: str) -> bool:
        if isinstance(result, (tuple, list)) and tuple(result) == expected:
            return True
        run.problem(
            f"{doing} must return one result per env, in env order",
            repr(expected),
            f"{_show(result)} ({_type_name(result)})",
            hint,
        )
        return False

    get_hint = (
        "get_attr(name) returns a tuple with env i's env.get_wrapper_attr(name) at position i"
    )
    specs = run.attempt(
        'get_attr("spec")', lambda: venv.get_attr("spec"), "a tuple of EnvSpec", get_hint
    )
    if isinstance(specs, (tuple, list)):
        specs = tuple(getattr(spec, "id", spec) for spec in specs)
    in_order('get_attr("spec") (compared by .id)', specs, (env_id,) * num_envs, get_hint)

    set_hint = (
        "set_attr(name, values): a list or tuple gives env i values[i], any other value is given "
        "to every env; use env.set_wrapper_attr(name, value) in each env"
    )
    values = tuple(100 + index for index in range(num_envs))
    run.attempt(
        f"set_attr({_PROBE_ATTRIBUTE!r}, {list(values)})",
        lambda: venv.set_attr(_PROBE_ATTRIBUTE, list(values)),
        "no exception",
        set_hint,
    )
    got = run.attempt(
        f"get_attr({_PROBE_ATTRIBUTE!r})",
        lambda: venv.get_attr(_PROBE_ATTRIBUTE),
        "the values set",
        get_hint,
    )
    doing = f"get_attr after set_attr({_PROBE_ATTRIBUTE!r}, {list(values)})"
    if not in_order(doing, got, values, set_hint):
        return

    call_hint = (
        "call(name, *args, **kwargs) must run env.get_wrapper_attr(name)(*args, **kwargs) in every "
        "env, passing the arguments on, and return the results as a tuple in env order"
    )
    got = run.attempt(
        f'call("get_wrapper_attr", {_PROBE_ATTRIBUTE!r})',
        lambda: venv.call("get_wrapper_attr", _PROBE_ATTRIBUTE),
        "the values set",
        call_hint,
    )
    doing = f'call("get_wrapper_attr", {_PROBE_ATTRIBUTE!r}) (a positional argument)'
    in_order(doing, got, values, call_hint)
    # A keyword argument: with force=False, set_wrapper_attr refuses to create an attribute and
    # returns False; a backend that drops keyword arguments gets the default force=True: True.
    got = run.attempt(
        'call("set_wrapper_attr", "vecenvs_absent_attribute", 1, force=False)',
        lambda: venv.call("set_wrapper_attr", "vecenvs_absent_attribute", 1, force=False),
        "False for every env",
        call_hint,
    )
    in_order('call("set_wrapper_attr", "vecenvs_absent_attribute", 1, force=False) (a keyword '
             "argument)", got, (False,) * num_envs, call_hint)

    run.attempt(
        f"set_attr({_PROBE_ATTRIBUTE!r}, 7)",
        lambda: venv.set_attr(_PROBE_ATTRIBUTE, 7),
        "no exception",
        set_hint,
    )
    got = run.attempt(
        f"get_attr({_PROBE_ATTRIBUTE!r})",
        lambda: venv.get_attr(_PROBE_ATTRIBUTE),
        "7 for every env",
        get_hint,
    )
    in_order(f"get_attr after set_attr({_PROBE_ATTRIBUTE!r}, 7) (one value for all envs)", got,
             (7,) * num_envs, set_hint)


def _check_with_block(
    run: _CheckRun,
    make_vector_env: MakeVectorEnv,
    env_id: str,
    num_envs: int,
    mode: AutoresetMode,
    required: bool,
) -> None:
    venv = _build(run, make_vector_env, env_fns_for(env_id, num_envs), mode)
    kind = type(venv)
    if not (hasattr(kind, "__enter__") and hasattr(kind, "__exit__")):
        _close_quietly(venv)
        wording = f"{kind.__qualname__} does not support `with` (no __enter__/__exit__)"
        hint = ("add __enter__ (return self) and __exit__ (call self.close() and return False) so "
                "students can write `with make_vec(...) as envs:`")
        if required:
            run.stop("`with make_vector_env(...) as envs:` must work", "__enter__ and __exit__",
                     wording, hint)
        run.note(f"{wording}; gymnasium's own VectorEnv does not either. Hint: {hint}")
        return
    try:
        with venv as entered:
            if entered is not venv:
                run.problem(
                    "`with venv as envs:` must bind the vector env itself",
                    "__enter__ returns self",
                    f"__enter__ returned {_show(entered)}",
                    "end __enter__ with `return self`",
                )
            venv.reset(seed=0)
    except Exception as err:  # noqa: BLE001 - the finding
        _close_quietly(venv)
        run.stop("a `with` block around reset(seed=0) raised", "no exception",
                 _exception_summary(err), "see the traceback", details=_traceback_tail(err))
    if getattr(venv, "closed", None) is not True:
        _close_quietly(venv)
        run.problem(
            "leaving a `with` block must close the vector env",
            "venv.closed is True after the block",
            f"venv.closed is {getattr(venv, 'closed', '<missing>')!r}",
            "__exit__ must call self.close(); close() must set self.closed = True (the "
            "base class VectorEnv.close does, then calls your close_extras)",
        )


# --------------------------------------------------------------------------------------------
# check_matches_sync: step by step against gymnasium's SyncVectorEnv.
# --------------------------------------------------------------------------------------------


@dataclass
class _Difference:
    """Where two results first differ.

    Attributes:
        path: the field, e.g. ``"infos['final_obs'][2]"``.
        problem: what differs: type, dtype, shape, keys or values.
        expected: the reference's value at ``path`` (the env's row, when one env is to blame).
        got: the backend's value there.
        env_index: the env whose result differs, if one can be named.
        expected_batch: for a per-env array, the reference's whole batch (used by the hints).
        got_batch: the backend's whole batch.
    """

    path: str
    problem: str
    expected: Any
    got: Any
    env_index: int | None = None
    expected_batch: np.ndarray | None = None
    got_batch: np.ndarray | None = None


def _arrays_equal(a: np.ndarray, b: np.ndarray) -> bool:
    # NaN equals NaN here: an env that returns NaN should not fail the comparison against itself.
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def _scalars_equal(a: Any, b: Any) -> bool:
    try:
        equal = a == b
        if isinstance(equal, np.ndarray):
            return bool(equal.all())
        if bool(equal):
            return True
    except Exception:  # noqa: BLE001 - uncomparable objects fall back to their repr
        return repr(a) == repr(b)
    # NaN is the one float that is not equal to itself.
    return isinstance(a, (float, np.floating)) and bool(np.isnan(a)) and bool(np.isnan(b))


def _find_difference(
    expected: Any, got: Any, path: str, env_index: int | None = None
) -> _Difference | None:
    """The first place where ``got`` differs from ``expected``, exactly, or ``None``.

    Dicts, tuples and lists are walked; numeric arrays must match in dtype, shape and every
    value; object arrays (like ``infos["final_obs"]``) are compared element by element. At the
    top level an array's first axis is the env index, so the first differing env is named.
    """
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return _Difference(path, "type differs", "a dict", f"a {_type_name(got)}", env_index)
        missing = [key for key in expected if key not in got]
        if missing:
            return _Difference(path, f"missing key(s) {missing}", sorted(map(str, expected)),
                               sorted(map(str, got)), env_index)
        extra = [key for key in got if key not in expected]
        if extra:
            return _Difference(path, f"unexpected key(s) {extra}", sorted(map(str, expected)),
                               sorted(map(str, got)), env_index)
        for key in expected:
            found = _find_difference(expected[key], got[key], f"{path}[{key!r}]", env_index)
            if found:
                return found
        return None
    if isinstance(expected, (tuple, list)):
        if type(got) is not type(expected):
            return _Difference(
                path, "type differs", f"a {_type_name(expected)}", f"a {_type_name(got)}", env_index
            )
        if len(got) != len(expected):
            return _Difference(path, "length differs", len(expected), len(got), env_index)
        for index, (want, have) in enumerate(zip(expected, got)):
            found = _find_difference(want, have, f"{path}[{index}]", env_index)
            if found:
                return found
        return None
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            return _Difference(
                path, "type differs", "a numpy array", f"{_type_name(got)} {_show(got)}", env_index
            )
        if got.dtype != expected.dtype:
            return _Difference(
                path, "dtype differs", str(expected.dtype), str(got.dtype), env_index
            )
        if got.shape != expected.shape:
            return _Difference(path, "shape differs", expected.shape, got.shape, env_index)
        if expected.dtype == object:
            for position in np.ndindex(expected.shape):
                owner = env_index if env_index is not None else (position[0] if position else None)
                label = f"{path}[{', '.join(map(str, position))}]"
                found = _find_difference(expected[position], got[position], label, owner)
                if found:
                    return found
            return None
        if _arrays_equal(expected, got):
            return None
        if env_index is None and expected.ndim >= 1:
            for index in range(expected.shape[0]):
                if not _arrays_equal(expected[index], got[index]):
                    return _Difference(
                        path, "values differ", expected[index], got[index], index, expected, got
                    )
        return _Difference(path, "values differ", expected, got, env_index)
    if type(got) is not type(expected):
        return _Difference(path, "type differs", f"{_type_name(expected)} {_show(expected)}",
                           f"{_type_name(got)} {_show(got)}", env_index)
    if not _scalars_equal(expected, got):
        return _Difference(path, "values differ", expected, got, env_index)
    return None


_SCALAR_FIELDS = ("rewards", "terminations", "truncations")


def _mismatch_hint(
    difference: _Difference,
    field: str,
    mode: AutoresetMode,
    ended_before: np.ndarray,
    ended_now: np.ndarray,
) -> str:
    """Guess the likely cause of a difference from what the reference envs were doing."""
    index = difference.env_index
    layout_problem = difference.problem in ("dtype differs", "shape differs", "type differs")
    if difference.problem == "dtype differs" and field in _SCALAR_FIELDS:
        dtype = "np.float64" if field == "rewards" else "np.bool_"
        return f"gymnasium returns {field} as {dtype}: build the array with dtype={dtype}"
    if layout_problem and field == "observations":
        return ("build observation batches with gymnasium.vector.utils.create_empty_array("
                "single_observation_space, n=num_envs) and fill them with "
                "gymnasium.vector.utils.concatenate, so dtypes and shapes follow the space")
    if index is not None and mode is AutoresetMode.NEXT_STEP and ended_before[index]:
        return (f"env {index}'s episode ended on the previous step. Check your autoreset: in "
                f"NEXT_STEP mode the step after termination or truncation must reset that env "
                f"(ignoring its action) and return the reset observation, reward 0, and "
                f"terminated=False, truncated=False")
    if index is not None and mode is AutoresetMode.NEXT_STEP and ended_now[index]:
        return (f"env {index}'s episode ends on this step. In NEXT_STEP mode this step returns the "
                f"episode's last observation and reward as the env gave them; the reset happens on "
                f"the next step, not now")
    swapped = _swapped_row(difference) if field == "observations" else None
    if swapped is not None:
        return (f"env {index}'s result is what env {swapped} should have returned: results are "
                f"written at the wrong index. Keep results in env order when gathering them from "
                f"the workers (worker w's envs are a fixed slice of the env indices)")
    if mode is AutoresetMode.SAME_STEP and (
        "final_" in difference.path + difference.problem or (index is not None and ended_now[index])
    ):
        return ("in SAME_STEP mode an env whose episode ends is reset within the same step: return "
                "the reset observation (and reset info), and put the episode's last observation "
                "in infos['final_obs'][i] and its last info in infos['final_info'] (add both with "
                "self._add_info(infos, {'final_obs': obs, 'final_info': info}, i), which also sets "
                "the '_final_obs'/'_final_info' masks)")
    if mode is AutoresetMode.DISABLED and field.startswith("reset"):
        return ("reset(options={'reset_mask': mask}) must reset exactly the envs where mask is "
                "True, leave the others untouched, and return their observations in place")
    if field.startswith("infos"):
        return ("infos must be built like VectorEnv._add_info does it: for every key an array of "
                "length num_envs and a bool mask '_key' saying which envs reported it; use "
                "self._add_info(infos, env_info, i) for each env in order")
    if index is not None:
        return (f"env {index} diverged from the reference: check that env i is stepped with "
                f"actions[i], exactly once per step, and that its result is written at index i")
    return "compare your step() with gymnasium.vector.SyncVectorEnv.step"


def _swapped_row(difference: _Difference) -> int | None:
    """If env i's row of the batch equals another env's expected row, that env's index."""
    expected, got, index = difference.expected_batch, difference.got_batch, difference.env_index
    # One number per env (rewards, a Discrete observation) matches another env's by chance too
    # often to mean anything; a whole row of floats does not.
    if expected is None or got is None or index is None or expected.ndim < 2:
        return None
    for other in range(expected.shape[0]):
        if other != index and _arrays_equal(expected[other], got[index]):
            return other
    return None


_RESET_HINT = (
    "reset(seed=s) must reset env i with seed s + i (gymnasium's convention; a list of seeds "
    "gives env i seeds[i]) and return the observations in env order"
)


def check_matches_sync(
    make_vector_env: MakeVectorEnv,
    env_id: str = "CartPole-v1",
    num_envs: int = 4,
    steps: int = 300,
    seed: int = 123,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
) -> list[str]:
    """Check the backend returns exactly what gymnasium's ``SyncVectorEnv`` returns.

    Both are built from the same factories (``gymnasium.make(env_id)``), reset with the same
    seed, and stepped ``steps`` times with the same actions (sampled from the batched action
    space seeded with ``seed``). Observations (nested too), rewards, terminations, truncations
    and infos (with their ``_key`` masks, and ``final_obs``/``final_info`` in SAME_STEP mode)
    must be identical, dtypes included. In DISABLED mode, ended envs are reset after each step
    with ``reset(options={"reset_mask": ...})``.

    Args:
        make_vector_env: the backend, called as ``make_vector_env(env_fns, autoreset_mode=...)``.
        env_id: a registered env id.
        num_envs: how many envs.
        steps: how many steps; enough for at least two episode ends (see Raises).
        seed: seeds the reset and the actions.
        autoreset_mode: the autoreset mode of both vector envs.

    Returns:
        Notes (none at present; kept for symmetry with the other checks).

    Raises:
        ConformanceError: at the first difference, naming the step, field and env, with both
            values and a hint.
        ValueError: the run saw fewer than two episode ends, so autoreset was not tested:
            ``steps`` is too small for this env.
    """
    mode = AutoresetMode(autoreset_mode)
    run = _CheckRun(f"check_matches_sync[{env_id}, {mode.value}]")
    env_fns = env_fns_for(env_id, num_envs)
    reference = SyncVectorEnv(env_fns, autoreset_mode=mode)
    venv = None
    episode_ends = 0
    try:
        with run.running():
            venv = _build(run, make_vector_env, env_fns, mode)
            episode_ends = _compare_runs(run, reference, venv, num_envs, steps, seed, mode)
    finally:
        _close_quietly(venv)
        reference.close()
    notes = run.finish()
    if episode_ends < 2:
        limit = gym.spec(env_id).max_episode_steps
        suggestion = (
            f" (episodes of {env_id} last at most {limit} steps: try steps={limit + 50})"
            if limit
            else ""
        )
        raise ValueError(
            f"check_matches_sync saw only {episode_ends} episode end(s) in {steps} steps of "
            f"{env_id}, so autoreset was not tested: steps={steps} is too small{suggestion}"
        )
    return notes


def _compare_runs(
    run: _CheckRun,
    reference: SyncVectorEnv,
    venv: VectorEnv,
    num_envs: int,
    steps: int,
    seed: int,
    mode: AutoresetMode,
) -> int:
    """Drive both vector envs in lockstep; stop at the first difference. Returns episode ends."""
    no_ends = np.zeros(num_envs, dtype=bool)

    def compare(when: str, fields: Sequence[str], expected: tuple, got: Any,
                ended_before: np.ndarray, ended_now: np.ndarray) -> None:
        if not isinstance(got, tuple) or len(got) != len(fields):
            run.stop(
                f"{when} must return a {len(fields)}-tuple",
                f"({', '.join(fields)})",
                f"{_type_name(got)}: {_show(got)}",
                "return the same tuple as gymnasium's VectorEnv",
            )
        for field, want, have in zip(fields, expected, got):
            difference = _find_difference(want, have, field)
            if difference is None:
                continue
            if when.startswith("reset(seed") and field == "observations":
                hint = _RESET_HINT
            else:
                hint_field = "reset" if when.startswith("reset") else field
                hint = _mismatch_hint(difference, hint_field, mode, ended_before, ended_now)
            index = difference.env_index
            env = "not one env in particular" if index is None else str(index)
            run.stop(
                f"{when}: {difference.path} is not what gymnasium's SyncVectorEnv returned "
                f"({difference.problem})",
                _show(difference.expected),
                _show(difference.got),
                hint,
                where=[("when", when), ("field", difference.path), ("env", env)],
            )

    reset_fields = ("observations", "infos")
    step_fields = ("observations", "rewards", "terminations", "truncations", "infos")
    expected = reference.reset(seed=seed)
    got = run.attempt(
        f"reset(seed={seed})", lambda: venv.reset(seed=seed), "(observations, infos)", _RESET_HINT
    )
    compare(f"reset(seed={seed})", reset_fields, expected, got, no_ends, no_ends)

    action_space = batch_space(reference.single_action_space, num_envs)
    action_space.seed(seed)
    ended_before = no_ends
    episode_ends = 0
    for step in range(1, steps + 1):
        actions = action_space.sample()
        when = f"step {step} after reset(seed={seed})"
        # Each side gets its own copy: a backend that writes into the actions must not change
        # what the reference is given.
        expected = reference.step(copy.deepcopy(actions))
        got = run.attempt(when, lambda: venv.step(copy.deepcopy(actions)),
                          "(observations, rewards, terminations, truncations, infos)",
                          "see the traceback for where step() failed")
        ended_now = np.logical_or(expected[2], expected[3])
        compare(when, step_fields, expected, got, ended_before, ended_now)
        episode_ends += int(ended_now.sum())
        if mode is AutoresetMode.DISABLED and ended_now.any():
            # No autoreset: the caller resets the ended envs, as a training loop would.
            when = f"reset(options={{'reset_mask': {ended_now.tolist()}}}) after step {step}"
            expected = reference.reset(options={"reset_mask": ended_now.copy()})
            got = run.attempt(when, lambda: venv.reset(options={"reset_mask": ended_now.copy()}),
                              "(observations, infos)", "see the traceback for where reset() failed")
            compare(when, reset_fields, expected, got, no_ends, no_ends)
            ended_now = no_ends
        ended_before = ended_now
    return episode_ends


# --------------------------------------------------------------------------------------------
# check_close
# --------------------------------------------------------------------------------------------


def _check_raises_when_closed(run: _CheckRun, doing: str, action: Callable[[], Any]) -> None:
    hint = ("start reset(), step() and the other methods with `if self.closed: raise "
            "gymnasium.error.ClosedEnvironmentError(...)`: a closed vector env must not quietly "
            "keep working (its workers are gone)")
    finished, _, error = _in_thread(action, _CLOSE_SECONDS)
    if not finished:
        run.problem(
            f"{doing} after close() must raise at once",
            "gymnasium.error.ClosedEnvironmentError",
            f"no answer within {_CLOSE_SECONDS:g} s (it is waiting on something)",
            hint,
        )
    elif error is None:
        run.problem(f"{doing} after close() must raise", "gymnasium.error.ClosedEnvironmentError",
                    "it returned normally", hint)
    elif not isinstance(error, ClosedEnvironmentError):
        run.note(f"{doing} after close() raised {_exception_summary(error)}; this is accepted, but "
                 f"gymnasium.error.ClosedEnvironmentError is what users catch")


def check_close(
    make_vector_env: MakeVectorEnv,
    env_id: str = "CartPole-v1",
    num_envs: int = 2,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    child_exit_timeout: float = _CHILD_EXIT_SECONDS,
) -> list[str]:
    """Check closing: twice is harmless, a closed env refuses work, no process is left behind.

    After ``close()``, ``closed`` must be True and ``reset``/``step`` must raise (preferably
    ``gymnasium.error.ClosedEnvironmentError``; another exception earns a note). Within a few
    seconds of ``close()`` no child process started by the vector env may still be running;
    the checker terminates any that are, after reporting them.

    Args:
        make_vector_env: the backend.
        env_id: a registered env id.
        num_envs: how many envs.
        autoreset_mode: the autoreset mode to build with.
        child_exit_timeout: seconds the vector env's child processes get to exit after close.

    Returns:
        Notes on things that passed but are worth knowing.

    Raises:
        ConformanceError: with every problem found.
    """
    mode = AutoresetMode(autoreset_mode)
    run = _CheckRun(f"check_close[{env_id}]")
    before = _child_pids()
    venv = None
    with run.running():
        venv = _build(run, make_vector_env, env_fns_for(env_id, num_envs), mode)
        action_space = copy.deepcopy(venv.action_space)
        action_space.seed(0)
        actions = action_space.sample()
        hint = "see the traceback"
        run.attempt("reset(seed=0)", lambda: venv.reset(seed=0), "(observations, infos)", hint)
        run.attempt("step(actions)", lambda: venv.step(actions), "a 5-tuple", hint)
        run.attempt("close()", venv.close, "no exception", hint)
        if getattr(venv, "closed", None) is not True:
            run.problem(
                "closed must be True after close()",
                "True",
                repr(getattr(venv, "closed", "<missing>")),
                "VectorEnv.close() sets self.closed = True and calls close_extras(): put your "
                "clean-up in close_extras, or set self.closed = True yourself",
            )
        run.attempt("a second close()", venv.close, "nothing (closing twice is harmless)",
                    "begin close() with `if self.closed: return`, as VectorEnv.close does")
        _check_raises_when_closed(run, "reset()", lambda: venv.reset(seed=0))
        _check_raises_when_closed(run, "step(actions)", lambda: venv.step(actions))
    _close_quietly(venv)
    _check_no_children_left(run, before, "after close()", child_exit_timeout)
    return run.finish()


# --------------------------------------------------------------------------------------------
# check_error_propagation
# --------------------------------------------------------------------------------------------

_PHASES = ("make", "reset", "step", "call")


def _drive_to_failure(make_vector_env: MakeVectorEnv, env_fns: list, mode: AutoresetMode,
                      phase: str, built: dict[str, Any]) -> None:
    """Build the vector env and use it until the faulty env's chosen call has been made.

    A few calls more than needed are made, so an off-by-one in counting still reaches it.
    """
    built["venv"] = make_vector_env(env_fns, autoreset_mode=mode)
    venv = built["venv"]
    if phase == "make":
        return
    calls = _FAIL_AT + 2
    if phase == "reset":
        for _ in range(calls):
            venv.reset(seed=0)
    elif phase == "step":
        venv.reset(seed=0)
        action_space = copy.deepcopy(venv.action_space)
        action_space.seed(0)
        for _ in range(calls):
            venv.step(action_space.sample())
    else:
        for _ in range(calls):
            venv.call("ping", 1)


def _error_text(err: BaseException) -> str:
    """All the text an error carries: messages and tracebacks of it and its causes."""
    parts = ["".join(traceback.format_exception(type(err), err, err.__traceback__))]
    parts += [str(getattr(err, name, "")) for name in ("remote_traceback", "traceback")]
    return "\n".join(parts)


def _names_env(err: BaseException, index: int) -> tuple[bool, str]:
    """Does ``err`` say env ``index`` failed? Also returns what it said instead, if not."""
    env_index = getattr(err, "env_index", None)
    if env_index is not None:
        return env_index == index, f"err.env_index == {env_index!r}"
    cause: BaseException | None = err
    while cause is not None:  # a wrapper error may name the env while its cause has the traceback
        if re.search(rf"\benv(ironment)?[ _#]*(index[ =:]*)?{index}\b", str(cause), re.IGNORECASE):
            return True, ""
        cause = cause.__cause__
    return False, "no env_index attribute, and the message does not say which env failed"


def check_error_propagation(
    make_vector_env: MakeVectorEnv,
    phase: str = "step",
    num_envs: int = 3,
    bad_index: int = 1,
    timeout: float = 30.0,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    child_exit_timeout: float = _CHILD_EXIT_SECONDS,
) -> list[str]:
    """Check an exception in one env reaches the caller, says which env, and keeps its message.

    Builds the backend with :func:`vecenvs.envs.faulty.faulty_env_fns`, env ``bad_index``
    raising ``RuntimeError("FaultyEnv: deliberate failure ...")`` on its second call of
    ``phase``, and drives it there: ``"make"``: building raises; ``"reset"``: ``reset``
    twice; ``"step"``: ``reset``, then ``step``; ``"call"``: ``call("ping", 1)`` twice. The
    driving runs in a daemon thread, so a backend that hangs fails the check. The error must
    arrive within ``timeout`` seconds, name the env (an ``env_index`` attribute equal to
    ``bad_index``, or ``"env <bad_index>"`` in its message) and carry the env's own message.
    Afterwards the vector env is closed and no child process may be left running.

    Args:
        make_vector_env: the backend.
        phase: ``"make"``, ``"reset"``, ``"step"`` or ``"call"``.
        num_envs: how many envs.
        bad_index: which env fails.
        timeout: seconds to wait for the exception.
        autoreset_mode: the autoreset mode to build with.
        child_exit_timeout: seconds the vector env's child processes get to exit after close.

    Returns:
        Notes on things that passed but are worth knowing.

    Raises:
        ConformanceError: with every problem found.
        ValueError: unknown ``phase``.
    """
    from vecenvs.envs.faulty import faulty_env_fns  # a test-support env, loaded only when used

    if phase not in _PHASES:
        raise ValueError(f"phase must be one of {_PHASES}, got {phase!r}")
    mode = AutoresetMode(autoreset_mode)
    run = _CheckRun(f"check_error_propagation[{phase}]")
    env_fns = faulty_env_fns(num_envs, bad_index, fail_on=phase, at=_FAIL_AT, how="raise")
    before = _child_pids()
    built: dict[str, Any] = {}
    error: BaseException | None = None
    doing = {
        "make": "building the vector env",
        "reset": "calling reset()",
        "step": "calling step()",
        "call": 'calling call("ping", 1)',
    }[phase]
    moment = {
        "make": "while it is made",
        "reset": f"on its reset() #{_FAIL_AT}",
        "step": f"on its step() #{_FAIL_AT}",
        "call": f"on its ping() #{_FAIL_AT}",
    }[phase]
    failure = f"env {bad_index} raises RuntimeError('FaultyEnv: {_FAULTY_MESSAGE} ...') {moment}"

    with run.running():
        finished, _, error = _in_thread(
            lambda: _drive_to_failure(make_vector_env, env_fns, mode, phase, built), timeout
        )
        if not finished:
            run.stop(
                f"{doing} until {failure}: an exception must reach the caller",
                f"an exception within {timeout:g} s",
                f"still waiting after {timeout:g} s: the backend hangs",
                f"the parent is probably waiting forever for an answer from env {bad_index}. Catch "
                "exceptions around every env call in the worker and send them back as an error "
                "message instead of a result; and never wait on a pipe without a timeout or a "
                "check that the worker is still alive",
            )
        if error is None:
            run.stop(
                f"{doing} until {failure}: an exception must reach the caller",
                "an exception naming the env, with the env's message",
                "no exception: every call returned normally",
                "the env's exception was swallowed: send it from the worker to the parent and "
                "raise it there (e.g. as vecenvs.EnvCrashedError)",
            )
        if phase != "make" and "venv" not in built:
            run.stop(
                f"building the vector env must work (env {bad_index} only fails in {phase})",
                "no exception",
                _exception_summary(error),
                "see the traceback",
                details=_traceback_tail(error),
            )
        names_it, said = _names_env(error, bad_index)
        if not names_it:
            run.problem(
                f"the error raised when {failure} must say which env failed",
                f'err.env_index == {bad_index}, or "env {bad_index}" in str(err)',
                f"{_exception_summary(error)} ({said})",
                "catch the exception in the worker and raise one in the parent that names the "
                f"env: e.g. vecenvs.EnvCrashedError(env_index={bad_index}, ...), whose message "
                f'starts "env {bad_index} raised ..."',
            )
        if _FAULTY_MESSAGE not in _error_text(error):
            run.problem(
                f"the error raised when {failure} must carry the env's own message and traceback",
                f"{_FAULTY_MESSAGE!r} somewhere in the error's message or traceback",
                _exception_summary(error),
                "format the traceback in the worker (traceback.format_exc()) and put it in the "
                "error raised in the parent, so the student sees what went wrong inside the env",
            )
        if isinstance(error, (EOFError, BrokenPipeError, ConnectionResetError)):
            run.note(f"the error was a bare {type(error).__name__}: the worker probably died "
                     "instead of reporting the exception")
    _close_quietly(built.get("venv"))
    after = f"after the failed {phase} and close()"
    _check_no_children_left(run, before, after, child_exit_timeout)
    if error is not None:
        # The error's traceback holds the half-built vector env of a failed construction in a
        # reference cycle. Free it now, in this process: left to the garbage collector, its
        # __del__ may run inside a worker forked by a later check, and fail noisily there.
        traceback.clear_frames(error.__traceback__)
    return run.finish()


# --------------------------------------------------------------------------------------------
# check_vector_env: all of the above.
# --------------------------------------------------------------------------------------------


def _steps_for(env_id: str) -> int:
    """Enough steps for check_matches_sync to see episodes end and envs reset."""
    limit = gym.spec(env_id).max_episode_steps
    return max(300, limit + 50) if limit else 300


def check_vector_env(
    make_vector_env: MakeVectorEnv,
    env_ids: Sequence[str] = DEFAULT_ENV_IDS,
    autoreset_modes: Sequence[AutoresetMode | str] = (
        AutoresetMode.NEXT_STEP,
        AutoresetMode.SAME_STEP,
    ),
    check_errors: bool = True,
    *,
    require_context_manager: bool = False,
) -> list[tuple[str, str]]:
    """Run every check and report all failures together.

    For each env id and autoreset mode: :func:`check_api` and :func:`check_matches_sync`
    (with enough steps to pass the env's time limit). Then :func:`check_close`, and, if
    ``check_errors``, :func:`check_error_propagation` for each phase.

    Args:
        make_vector_env: the backend, called as ``make_vector_env(env_fns, autoreset_mode=...)``.
        env_ids: the envs to run.
        autoreset_modes: the autoreset modes to run.
        check_errors: also check errors raised by an env reach the caller.
        require_context_manager: see :func:`check_api`.

    Returns:
        ``(check name, status)`` for every check; the status is ``"ok"``, followed by notes
        if there are any.

    Raises:
        ConformanceError: listing every failed check with its message.
    """
    report: list[tuple[str, str]] = []
    failures: list[Failure] = []

    def run(name: str, check: Callable[..., list[str]], *args: Any, **kwargs: Any) -> None:
        try:
            notes = check(make_vector_env, *args, **kwargs)
        except ConformanceError as err:
            failures.extend(err.failures)
        except Exception as err:  # noqa: BLE001 - a check that cannot run is a failure too
            failures.append(Failure(name, f"the check could not run: {_exception_summary(err)}\n"
                                          f"{_traceback_tail(err)}"))
        else:
            report.append((name, "ok" if not notes else "ok; notes: " + " | ".join(notes)))

    for env_id in env_ids:
        for mode in map(AutoresetMode, autoreset_modes):
            run(f"check_api[{env_id}, {mode.value}]", check_api, env_id, autoreset_mode=mode,
                require_context_manager=require_context_manager)
            run(f"check_matches_sync[{env_id}, {mode.value}]", check_matches_sync, env_id,
                steps=_steps_for(env_id), autoreset_mode=mode)
    run("check_close[CartPole-v1]", check_close)
    if check_errors:
        for phase in _PHASES:
            run(f"check_error_propagation[{phase}]", check_error_propagation, phase)
    if failures:
        raise ConformanceError(failures, passed=len(report))
    return report
