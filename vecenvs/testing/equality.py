"""check_matches_sync: step by step against gymnasium's SyncVectorEnv under the same seeds and actions."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space

from vecenvs.factory import env_fns_for
from vecenvs.testing.report import CheckRun, show, type_name
from vecenvs.testing.running import RESET_RETURNS, STEP_RETURNS, MakeVectorEnv, build, close_quietly


@dataclass
class _Difference:
    """Where two results first differ."""

    path: str  # the field, e.g. "infos['final_obs'][2]"
    problem: str  # what differs: type, dtype, shape, keys or values
    expected: Any  # the reference's value at path (the env's row, when one env is to blame)
    got: Any
    env_index: int | None = None  # the env whose result differs, if one can be named
    # For a per-env array, both whole batches (the hints look at other envs' rows).
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
    except Exception:
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

    def differs(problem: str, want: Any, have: Any) -> _Difference:
        return _Difference(path, problem, want, have, env_index)

    children: Iterable[tuple[Any, Any, str, int | None]] = ()  # (expected, got, path, env)
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return differs("type differs", "a dict", f"a {type_name(got)}")
        for which, keys in (
            ("missing", [key for key in expected if key not in got]),
            ("unexpected", [key for key in got if key not in expected]),
        ):
            if keys:
                both = sorted(map(str, expected)), sorted(map(str, got))
                return differs(f"{which} key(s) {keys}", *both)
        children = ((expected[key], got[key], f"{path}[{key!r}]", env_index) for key in expected)
    elif isinstance(expected, (tuple, list)):
        if type(got) is not type(expected):
            return differs("type differs", f"a {type_name(expected)}", f"a {type_name(got)}")
        if len(got) != len(expected):
            return differs("length differs", len(expected), len(got))
        children = (
            (want, have, f"{path}[{index}]", env_index)
            for index, (want, have) in enumerate(zip(expected, got))
        )
    elif isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            return differs("type differs", "a numpy array", f"{type_name(got)} {show(got)}")
        if got.dtype != expected.dtype:
            return differs("dtype differs", str(expected.dtype), str(got.dtype))
        if got.shape != expected.shape:
            return differs("shape differs", expected.shape, got.shape)
        if expected.dtype == object:
            children = (
                (
                    expected[position],
                    got[position],
                    f"{path}[{', '.join(map(str, position))}]",
                    env_index if env_index is not None else (position[0] if position else None),
                )
                for position in np.ndindex(expected.shape)
            )
        elif not _arrays_equal(expected, got):
            rows = range(expected.shape[0]) if env_index is None and expected.ndim >= 1 else ()
            for index in rows:
                if not _arrays_equal(expected[index], got[index]):
                    want, have = expected[index], got[index]
                    return _Difference(path, "values differ", want, have, index, expected, got)
            return differs("values differ", expected, got)
    elif type(got) is not type(expected):
        return differs(
            "type differs",
            f"{type_name(expected)} {show(expected)}",
            f"{type_name(got)} {show(got)}",
        )
    elif not _scalars_equal(expected, got):
        return differs("values differ", expected, got)
    return next(filter(None, (_find_difference(*child) for child in children)), None)


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
        return (
            "build observation batches with gymnasium.vector.utils.create_empty_array("
            "single_observation_space, n=num_envs) and fill them with "
            "gymnasium.vector.utils.concatenate, so dtypes and shapes follow the space"
        )
    if index is not None and mode is AutoresetMode.NEXT_STEP and ended_before[index]:
        return (
            f"env {index}'s episode ended on the previous step. Check your autoreset: in "
            f"NEXT_STEP mode the step after termination or truncation must reset that env "
            f"(ignoring its action) and return the reset observation, reward 0, and "
            f"terminated=False, truncated=False"
        )
    if index is not None and mode is AutoresetMode.NEXT_STEP and ended_now[index]:
        return (
            f"env {index}'s episode ends on this step. In NEXT_STEP mode this step returns the "
            f"episode's last observation and reward as the env gave them; the reset happens on "
            f"the next step, not now"
        )
    swapped = _swapped_row(difference) if field == "observations" else None
    if swapped is not None:
        return (
            f"env {index}'s result is what env {swapped} should have returned: results are "
            f"written at the wrong index. Keep results in env order when gathering them from "
            f"the workers (worker w's envs are a fixed slice of the env indices)"
        )
    if mode is AutoresetMode.SAME_STEP and (
        "final_" in difference.path + difference.problem or (index is not None and ended_now[index])
    ):
        return (
            "in SAME_STEP mode an env whose episode ends is reset within the same step: return "
            "the reset observation (and reset info), and put the episode's last observation "
            "in infos['final_obs'][i] and its last info in infos['final_info'] (add both with "
            "self._add_info(infos, {'final_obs': obs, 'final_info': info}, i), which also sets "
            "the '_final_obs'/'_final_info' masks)"
        )
    if mode is AutoresetMode.DISABLED and field.startswith("reset"):
        return (
            "reset(options={'reset_mask': mask}) must reset exactly the envs where mask is "
            "True, leave the others untouched, and return their observations in place"
        )
    if field.startswith("infos"):
        return (
            "infos must be built like VectorEnv._add_info does it: for every key an array of "
            "length num_envs and a bool mask '_key' saying which envs reported it; use "
            "self._add_info(infos, env_info, i) for each env in order"
        )
    if index is not None:
        return (
            f"env {index} diverged from the reference: check that env i is stepped with "
            f"actions[i], exactly once per step, and that its result is written at index i"
        )
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
    *,
    env_kwargs: dict[str, Any] | None = None,
    transform_actions: Callable[[Any], Any] | None = None,
) -> list[str]:
    """Check the backend returns exactly what gymnasium's ``SyncVectorEnv`` returns.

    Both are built from the same factories (``gymnasium.make(env_id, **env_kwargs)``), reset
    with ``seed`` and stepped ``steps`` times with the same actions (sampled from the batched
    action space seeded with ``seed``, then passed through ``transform_actions`` if given, e.g.
    to give float64 actions for a float32 space). Observations, rewards, terminations,
    truncations and infos (``_key`` masks and SAME_STEP's ``final_obs``/``final_info``
    included) must be identical, dtypes too. In DISABLED mode, ended envs are reset after each
    step with ``reset(options={"reset_mask": ...})``. If the envs keep the actions they
    received (``actions_seen``, as :class:`~vecenvs.envs.spaces.SpacesEnv` does), those must be
    identical too, types included.

    Returns notes (none at present, for symmetry with the other checks). Raises
    :class:`ConformanceError` at the first difference, naming the step, field and env, with
    both values and a hint; ``ValueError`` if the run saw fewer than two episode ends, so
    autoreset was not tested: ``steps`` is too small for this env.
    """
    mode = AutoresetMode(autoreset_mode)
    label = env_id if not env_kwargs else f"{env_id} {env_kwargs}"
    run = CheckRun(f"check_matches_sync[{label}, {mode.value}]")
    env_fns = env_fns_for(env_id, num_envs, **(env_kwargs or {}))
    reference = SyncVectorEnv(env_fns, autoreset_mode=mode)
    venv = None
    episode_ends = 0
    try:
        with run.running():
            venv = build(run, make_vector_env, env_fns, mode)
            episode_ends = _compare_runs(
                run, reference, venv, num_envs, steps, seed, mode, transform_actions
            )
            if hasattr(reference.envs[0].unwrapped, "actions_seen"):
                _compare_actions_seen(run, reference, venv)
    finally:
        close_quietly(venv)
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


def _compare_actions_seen(run: CheckRun, reference: SyncVectorEnv, venv: Any) -> None:
    expected = reference.get_attr("actions_seen")
    got = run.attempt(
        "get_attr('actions_seen')",
        lambda: venv.get_attr("actions_seen"),
        "each env's actions",
        "get_attr must return each env's attribute, in env order",
    )
    difference = _find_difference(
        tuple(expected), tuple(got) if isinstance(got, (tuple, list)) else got, "actions_seen"
    )
    if difference is not None:
        run.stop(
            f"the actions each env received are not what SyncVectorEnv's envs received ({difference.problem})",
            show(difference.expected),
            show(difference.got),
            "pass each env its action exactly as given: the same object type and dtype, no cast into the "
            "space's dtype (a float64 action for a float32 Box stays float64), no view the next step changes",
            where=[("field", difference.path)],
        )


def _compare_runs(
    run: CheckRun,
    reference: SyncVectorEnv,
    venv: VectorEnv,
    num_envs: int,
    steps: int,
    seed: int,
    mode: AutoresetMode,
    transform_actions: Callable[[Any], Any] | None = None,
) -> int:
    """Drive both vector envs in lockstep; stop at the first difference. Returns episode ends."""
    no_ends = np.zeros(num_envs, dtype=bool)

    def lockstep(
        when: str,
        call: Callable[[Any], Any],
        fields: tuple[str, ...],
        hint: str,
        ended_before: np.ndarray = no_ends,
    ) -> np.ndarray:
        """Make ``call`` (a reset or a step, as ``fields`` says) on both; returns which envs'
        episodes ended."""
        is_step = fields is STEP_RETURNS
        expected = call(reference)
        got = run.attempt(when, functools.partial(call, venv), fields, hint)
        ended_now = np.logical_or(expected[2], expected[3]) if is_step else no_ends
        for field, want, have in zip(fields, expected, got):
            difference = _find_difference(want, have, field)
            if difference is None:
                continue
            if when.startswith("reset(seed") and field == "observations":
                advice = _RESET_HINT
            else:
                hint_field = field if is_step else "reset"
                advice = _mismatch_hint(difference, hint_field, mode, ended_before, ended_now)
            index = difference.env_index
            env = "not one env in particular" if index is None else str(index)
            run.stop(
                f"{when}: {difference.path} is not what gymnasium's SyncVectorEnv returned "
                f"({difference.problem})",
                show(difference.expected),
                show(difference.got),
                advice,
                where=[("when", when), ("field", difference.path), ("env", env)],
            )
        return ended_now

    lockstep(f"reset(seed={seed})", lambda env: env.reset(seed=seed), RESET_RETURNS, _RESET_HINT)
    action_space = batch_space(reference.single_action_space, num_envs)
    action_space.seed(seed)
    ended_before = no_ends
    episode_ends = 0
    for step in range(1, steps + 1):
        actions = action_space.sample()
        if transform_actions is not None:
            actions = transform_actions(actions)
        ended_now = lockstep(
            f"step {step} after reset(seed={seed})",
            functools.partial(_step_copy, actions=actions),
            STEP_RETURNS,
            "see the traceback for where step() failed",
            ended_before,
        )
        episode_ends += int(ended_now.sum())
        if mode is AutoresetMode.DISABLED and ended_now.any():
            # No autoreset: the caller resets the ended envs, as a training loop would.
            lockstep(
                f"reset(options={{'reset_mask': {ended_now.tolist()}}}) after step {step}",
                functools.partial(_reset_masked, mask=ended_now),
                RESET_RETURNS,
                "see the traceback for where reset() failed",
            )
            ended_now = no_ends
        ended_before = ended_now
    return episode_ends


def _step_copy(env: Any, actions: Any) -> Any:
    # Each side gets its own copy: a backend that writes into the actions must not change what
    # the reference is given.
    return env.step(copy.deepcopy(actions))


def _reset_masked(env: Any, mask: np.ndarray) -> Any:
    return env.reset(options={"reset_mask": mask.copy()})
