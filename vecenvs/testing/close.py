"""check_close: close() is idempotent, refuses further use, and leaves no process behind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gymnasium.error import ClosedEnvironmentError
from gymnasium.vector import AutoresetMode

from vecenvs.factory import env_fns_for
from vecenvs.testing.report import CheckRun, exception_summary
from vecenvs.testing.running import (
    CHILD_EXIT_SECONDS,
    CLOSE_SECONDS,
    MakeVectorEnv,
    build,
    check_no_children_left,
    child_pids,
    close_quietly,
    in_thread,
    seeded_action_space,
)


def _check_raises_when_closed(run: CheckRun, doing: str, action: Callable[[], Any]) -> None:
    hint = (
        "start reset(), step() and the other methods with `if self.closed: raise "
        "gymnasium.error.ClosedEnvironmentError(...)`: a closed vector env must not quietly "
        "keep working (its workers are gone)"
    )
    finished, _, error = in_thread(action, CLOSE_SECONDS)
    if not finished:
        run.problem(
            f"{doing} after close() must raise at once",
            "gymnasium.error.ClosedEnvironmentError",
            f"no answer within {CLOSE_SECONDS:g} s (it is waiting on something)",
            hint,
        )
    elif error is None:
        run.problem(
            f"{doing} after close() must raise",
            "gymnasium.error.ClosedEnvironmentError",
            "it returned normally",
            hint,
        )
    elif not isinstance(error, ClosedEnvironmentError):
        run.note(
            f"{doing} after close() raised {exception_summary(error)}; this is accepted, but "
            f"gymnasium.error.ClosedEnvironmentError is what users catch"
        )


def check_close(
    make_vector_env: MakeVectorEnv,
    env_id: str = "CartPole-v1",
    num_envs: int = 2,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    child_exit_timeout: float = CHILD_EXIT_SECONDS,
) -> list[str]:
    """Check closing: twice is harmless, a closed env refuses work, no process is left behind.

    After ``close()``, ``closed`` must be True and ``reset``/``step`` must raise (preferably
    ``gymnasium.error.ClosedEnvironmentError``; another exception earns a note). Within
    ``child_exit_timeout`` seconds of ``close()`` no child process started by the vector env may
    still be running; the checker terminates any that are, after reporting them. Returns notes;
    raises :class:`ConformanceError` with every problem found.
    """
    mode = AutoresetMode(autoreset_mode)
    run = CheckRun(f"check_close[{env_id}]")
    before = child_pids()
    venv = None
    with run.running():
        venv = build(run, make_vector_env, env_fns_for(env_id, num_envs), mode)
        actions = seeded_action_space(venv).sample()
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
        run.attempt(
            "a second close()",
            venv.close,
            "nothing (closing twice is harmless)",
            "begin close() with `if self.closed: return`, as VectorEnv.close does",
        )
        _check_raises_when_closed(run, "reset()", lambda: venv.reset(seed=0))
        _check_raises_when_closed(run, "step(actions)", lambda: venv.step(actions))
    close_quietly(venv)
    check_no_children_left(run, before, "after close()", child_exit_timeout)
    return run.finish()
