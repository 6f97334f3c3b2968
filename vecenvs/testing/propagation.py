"""check_error_propagation: an env's crash reaches the caller with its index and traceback."""

from __future__ import annotations

import re
import traceback
from typing import Any

from gymnasium.vector import AutoresetMode

from vecenvs.testing.report import CheckRun, exception_summary
from vecenvs.testing.running import (
    CHILD_EXIT_SECONDS,
    MakeVectorEnv,
    check_no_children_left,
    child_pids,
    close_quietly,
    in_thread,
    seeded_action_space,
)

#: The text every error raised by ``FaultyEnv(how="raise")`` contains.
_FAULTY_MESSAGE = "deliberate failure"
#: Which call of the failing phase the faulty env fails on.
_FAIL_AT = 2
#: Phase -> (what the check does, when the faulty env fails), for the messages.
_WORDING = {
    "make": ("building the vector env", "while it is made"),
    "reset": ("calling reset()", f"on its reset() #{_FAIL_AT}"),
    "step": ("calling step()", f"on its step() #{_FAIL_AT}"),
    "call": ('calling call("ping", 1)', f"on its ping() #{_FAIL_AT}"),
}
PHASES = tuple(_WORDING)


def _drive_to_failure(
    make_vector_env: MakeVectorEnv,
    env_fns: list,
    mode: AutoresetMode,
    phase: str,
    built: dict[str, Any],
) -> None:
    """Build the vector env and use it until the faulty env's chosen call has been made.

    Two calls more than needed are made, so an off-by-one in counting still reaches it.
    """
    built["venv"] = make_vector_env(env_fns, autoreset_mode=mode)
    venv = built["venv"]
    if phase == "make":
        return  # building it was the call
    if phase == "step":
        venv.reset(seed=0)
        action_space = seeded_action_space(venv)
    for _ in range(_FAIL_AT + 2):
        if phase == "reset":
            venv.reset(seed=0)
        elif phase == "step":
            venv.step(action_space.sample())
        else:
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
    child_exit_timeout: float = CHILD_EXIT_SECONDS,
) -> list[str]:
    """Check an exception in one env reaches the caller, says which env, and keeps its message.

    Builds the backend with :func:`vecenvs.envs.faulty.faulty_env_fns`, env ``bad_index``
    raising ``RuntimeError("FaultyEnv: deliberate failure ...")`` on its second call of
    ``phase`` (one of :data:`PHASES`, else a ValueError): building, ``reset``, ``step`` or
    ``call("ping", 1)``, and drives it there in a daemon thread, so a backend that hangs fails
    the check. The error must arrive within ``timeout`` seconds, name the env (an
    ``env_index`` attribute equal to ``bad_index``, or ``"env <bad_index>"`` in its message)
    and carry the env's own message. Then the vector env is closed and no child process may be
    running ``child_exit_timeout`` seconds later. Returns notes; raises
    :class:`ConformanceError` with every problem found.
    """
    from vecenvs.envs.faulty import faulty_env_fns  # a test-support env, loaded only when used

    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    mode = AutoresetMode(autoreset_mode)
    run = CheckRun(f"check_error_propagation[{phase}]")
    env_fns = faulty_env_fns(num_envs, bad_index, fail_on=phase, at=_FAIL_AT, how="raise")
    before = child_pids()
    built: dict[str, Any] = {}
    error: BaseException | None = None
    doing, moment = _WORDING[phase]
    failure = f"env {bad_index} raises RuntimeError('FaultyEnv: {_FAULTY_MESSAGE} ...') {moment}"

    with run.running():
        finished, _, error = in_thread(
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
            run.crashed(
                f"building the vector env must work (env {bad_index} only fails in {phase})", error
            )
        names_it, said = _names_env(error, bad_index)
        if not names_it:
            run.problem(
                f"the error raised when {failure} must say which env failed",
                f'err.env_index == {bad_index}, or "env {bad_index}" in str(err)',
                f"{exception_summary(error)} ({said})",
                "catch the exception in the worker and raise one in the parent that names the "
                f"env: e.g. vecenvs.EnvCrashedError(env_index={bad_index}, ...), whose message "
                f'starts "env {bad_index} raised ..."',
            )
        if _FAULTY_MESSAGE not in _error_text(error):
            run.problem(
                f"the error raised when {failure} must carry the env's own message and traceback",
                f"{_FAULTY_MESSAGE!r} somewhere in the error's message or traceback",
                exception_summary(error),
                "format the traceback in the worker (traceback.format_exc()) and put it in the "
                "error raised in the parent, so the student sees what went wrong inside the env",
            )
        if isinstance(error, (EOFError, BrokenPipeError, ConnectionResetError)):
            run.note(
                f"the error was a bare {type(error).__name__}: the worker probably died "
                "instead of reporting the exception"
            )
    close_quietly(built.get("venv"))
    check_no_children_left(run, before, f"after the failed {phase} and close()", child_exit_timeout)
    if error is not None:
        # The error's traceback holds the half-built vector env of a failed construction in a
        # reference cycle. Free it now, in this process: left to the garbage collector, its
        # __del__ may run inside a worker forked by a later check, and fail noisily there.
        traceback.clear_frames(error.__traceback__)
    return run.finish()
