"""check_vector_env: every check, with all failures reported together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from vecenvs.testing.api import check_api
from vecenvs.testing.close import check_close
from vecenvs.testing.equality import check_matches_sync
from vecenvs.testing.propagation import PHASES, check_error_propagation
from vecenvs.testing.report import ConformanceError, Failure, exception_summary, traceback_tail
from vecenvs.testing.running import MakeVectorEnv

#: The envs :func:`check_vector_env` runs by default: discrete and continuous actions, Box
#: observations of different sizes, a ``Dict`` observation, and episodes ending by termination
#: (CartPole, DictObs) and by truncation (Pendulum, Acrobot, DictObs).
DEFAULT_ENV_IDS = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "vecenvs/DictObs-v0")


def _steps_for(env_id: str) -> int:
    # Enough steps for check_matches_sync to see episodes end and envs reset.
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

    For each env id and autoreset mode, :func:`check_api` and :func:`check_matches_sync` (with
    enough steps to pass the env's time limit); then :func:`check_close` and, if
    ``check_errors``, :func:`check_error_propagation` for each phase.

    Returns ``(check name, status)`` for every check, the status ``"ok"`` followed by notes if
    there are any. Raises :class:`ConformanceError` listing every failed check.
    """
    report: list[tuple[str, str]] = []
    failures: list[Failure] = []

    def run(name: str, check: Callable[..., list[str]], *args: Any, **kwargs: Any) -> None:
        try:
            notes = check(make_vector_env, *args, **kwargs)
        except ConformanceError as err:
            failures.extend(err.failures)
        except Exception as err:
            message = f"the check could not run: {exception_summary(err)}\n{traceback_tail(err)}"
            failures.append(Failure(name, message))
        else:
            report.append((name, "ok" if not notes else "ok; notes: " + " | ".join(notes)))

    for env_id in env_ids:
        for mode in map(AutoresetMode, autoreset_modes):
            run(
                f"check_api[{env_id}, {mode.value}]",
                check_api,
                env_id,
                autoreset_mode=mode,
                require_context_manager=require_context_manager,
            )
            run(
                f"check_matches_sync[{env_id}, {mode.value}]",
                check_matches_sync,
                env_id,
                steps=_steps_for(env_id),
                autoreset_mode=mode,
            )
    run("check_close[CartPole-v1]", check_close)
    if check_errors:
        for phase in PHASES:
            run(f"check_error_propagation[{phase}]", check_error_propagation, phase)
    if failures:
        raise ConformanceError(failures, passed=len(report))
    return report
