"""check_api: the VectorEnv API, spaces and dtypes, and the attribute methods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from vecenvs.factory import env_fns_for
from vecenvs.testing.report import CheckRun, show, type_name
from vecenvs.testing.running import (
    RESET_RETURNS,
    STEP_RETURNS,
    MakeVectorEnv,
    build,
    close_quietly,
    seeded_action_space,
)

#: The attribute check_api sets on every env to test set_attr/get_attr/call.
_PROBE_ATTRIBUTE = "vecenvs_conformance_probe"


def _space_problem(space: gym.Space, value: Any, path: str) -> tuple[str, str, str] | None:
    """Why ``value`` is not a batch of ``space``: ``(where, expected, got)``, or ``None``.

    Walks ``Dict`` and ``Tuple`` spaces to name the exact key; checks type, dtype and shape
    first, the usual mistakes, then ``space.contains`` catches values out of bounds.
    """
    if isinstance(space, spaces.Dict):
        if not isinstance(value, Mapping):
            return path, "a dict (the space is a Dict)", type_name(value)
        if set(value) != set(space.spaces):
            return path, f"keys {sorted(space.spaces)}", f"keys {sorted(value)}"
        for key, subspace in space.spaces.items():
            found = _space_problem(subspace, value[key], f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, tuple) or len(value) != len(space.spaces):
            return path, f"a tuple of {len(space.spaces)} items", show(value)
        for index, subspace in enumerate(space.spaces):
            found = _space_problem(subspace, value[index], f"{path}[{index}]")
            if found:
                return found
        return None
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        wanted = f"a numpy array of dtype {space.dtype} and shape {space.shape}"
        if not isinstance(value, np.ndarray):
            return path, wanted, f"a {type_name(value)}"
        if value.dtype != space.dtype or value.shape != space.shape:
            return path, wanted, f"dtype {value.dtype}, shape {value.shape}"
    if not space.contains(value):
        return path, f"a value inside {space}", show(value)
    return None


def _check_observations(run: CheckRun, venv: Any, observations: Any, call: str) -> None:
    found = _space_problem(venv.observation_space, observations, f"{call} observations")
    if found:
        where, expected, got = found
        if expected.startswith("a value inside"):
            hint = (
                "the type, dtype and shape are right but a value is outside the space: check "
                "that row i holds env i's observation exactly as the env returned it"
            )
        else:
            hint = (
                "build the batch with gymnasium.vector.utils.create_empty_array("
                "single_observation_space, n=num_envs) and fill it with "
                "gymnasium.vector.utils.concatenate(single_observation_space, per_env_obs, out)"
            )
        run.problem(f"{where} must be an element of observation_space", expected, got, hint)


def _check_flags(run: CheckRun, value: Any, name: str, dtype: type, num_envs: int) -> None:
    """``value`` must be a numpy array of ``dtype`` and shape ``(num_envs,)``, as gymnasium's."""
    expected = f"a numpy array of dtype {np.dtype(dtype)} and shape ({num_envs},)"
    hint = (
        f"gymnasium's vector envs return {name} as {np.dtype(dtype)}: build them with "
        f"np.zeros(num_envs, dtype=np.{dtype.__name__}) and fill in each env's value"
    )
    if not isinstance(value, np.ndarray):
        run.problem(f"step() {name}", expected, f"a {type_name(value)}: {show(value)}", hint)
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

    The backend must build a ``gymnasium.vector.VectorEnv`` with the right ``num_envs``,
    ``single_*`` spaces equal to the env's, batched spaces equal to ``batch_space(single,
    num_envs)`` and ``metadata["autoreset_mode"]`` the mode asked for; ``reset`` must return
    ``(observations, infos)`` and ``step`` a 5-tuple with observations in the space, float64
    rewards, bool terminations/truncations of shape ``(num_envs,)`` and a dict of infos;
    ``get_attr``, ``set_attr`` and ``call`` must reach every env in order; and a ``with`` block
    must close the vector env. gymnasium 1.x's own ``VectorEnv`` has no ``__enter__``/
    ``__exit__``, so lacking them only earns a note unless ``require_context_manager``.

    Returns the notes on things that passed but are worth knowing (also issued as
    :class:`ConformanceWarning`); raises :class:`ConformanceError` with every problem found.
    """
    mode = AutoresetMode(autoreset_mode)
    run = CheckRun(f"check_api[{env_id}, {mode.value}]")
    single_env = gym.make(env_id)
    single_obs_space, single_act_space = single_env.observation_space, single_env.action_space
    single_env.close()

    venv = None
    with run.running():
        venv = build(run, make_vector_env, env_fns_for(env_id, num_envs), mode)
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
    close_quietly(venv)

    if venv is not None:  # if building failed, building again for `with` would only fail again
        with run.running():
            _check_with_block(run, make_vector_env, env_id, num_envs, mode, require_context_manager)
    return run.finish()


def _check_attributes(
    run: CheckRun,
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
        for name, expected, meaning, hint in (
            (
                f"single_{kind}_space",
                single,
                f"equal the env's {kind}_space",
                f"take it from one env: self.single_{kind}_space = env.{kind}_space (a worker "
                f"can send it back to the parent after making its envs)",
            ),
            (
                f"{kind}_space",
                batch_space(single, num_envs),
                "be the single space batched num_envs times",
                f"set self.{kind}_space = gymnasium.vector.utils.batch_space("
                f"self.single_{kind}_space, self.num_envs)",
            ),
        ):
            got = getattr(venv, name, "<missing>")
            if got != expected:
                run.problem(f"{name} must {meaning}", str(expected), str(got), hint)
                break  # the batched space of a wrong single space is wrong too
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
            (
                "store the AutoresetMode member, not its string value: gymnasium's vector "
                "wrappers compare it with AutoresetMode.NEXT_STEP etc."
                if as_string
                else 'set self.metadata = {**first_env.metadata, "autoreset_mode": autoreset_mode}, '
                "with autoreset_mode converted by AutoresetMode(autoreset_mode)"
            ),
        )


def _check_reset_and_step(run: CheckRun, venv: Any, num_envs: int) -> None:
    observations, infos = run.attempt(
        "reset(seed=0)",
        lambda: venv.reset(seed=0),
        RESET_RETURNS,
        "reset must reset every env (env i with seed + i) and return (observations, infos)",
    )
    _check_observations(run, venv, observations, "reset()")
    _check_infos(run, infos, "reset()")

    action_space = seeded_action_space(venv)
    for step in range(1, 4):
        observations, rewards, terminations, truncations, infos = run.attempt(
            f"step(actions) (step {step} after reset)",
            lambda: venv.step(action_space.sample()),
            STEP_RETURNS,
            "step(actions) must step env i with actions[i] and return the batched results",
        )
        problems_before = len(run.problems)
        _check_observations(run, venv, observations, "step()")
        for name, flags, dtype in (
            ("rewards", rewards, np.float64),
            ("terminations", terminations, np.bool_),
            ("truncations", truncations, np.bool_),
        ):
            _check_flags(run, flags, name, dtype, num_envs)
        _check_infos(run, infos, "step()")
        if len(run.problems) > problems_before:
            return  # the same mistake would only be reported again on the next steps


def _check_infos(run: CheckRun, infos: Any, call: str) -> None:
    if not isinstance(infos, dict):
        run.problem(
            f"{call} infos must be a dict",
            "a dict",
            f"a {type_name(infos)}",
            "collect the per-env infos with infos = self._add_info(infos, env_info, i)",
        )


def _check_attr_methods(run: CheckRun, venv: Any, env_id: str, num_envs: int) -> None:
    probe, values = _PROBE_ATTRIBUTE, tuple(100 + index for index in range(num_envs))

    def per_env(call: str, action: Any, expected: tuple, hint: str, about: str = "") -> bool:
        """Make ``call``; it must return ``expected``, env i's result at position i (a spec by
        its id); ``about`` says more about the call where it failed."""
        result = run.attempt(call, action, f"{show(expected)}, one result per env", hint)
        if isinstance(result, (tuple, list)):
            result = tuple(getattr(item, "id", item) for item in result)
            if result == expected:
                return True
        run.problem(
            f"{call}{about} must return one result per env, in env order",
            repr(expected),
            f"{show(result)} ({type_name(result)})",
            hint,
        )
        return False

    get_hint = (
        "get_attr(name) returns a tuple with env i's env.get_wrapper_attr(name) at position i"
    )
    spec_ids = (env_id,) * num_envs
    per_env(
        'get_attr("spec")', lambda: venv.get_attr("spec"), spec_ids, get_hint, " (compared by .id)"
    )

    set_hint = (
        "set_attr(name, values): a list or tuple gives env i values[i], any other value is given "
        "to every env; use env.set_wrapper_attr(name, value) in each env"
    )

    def set_then_get(given: Any, expected: tuple, about: str = "") -> bool:
        setting = f"set_attr({probe!r}, {given!r})"
        run.attempt(setting, lambda: venv.set_attr(probe, given), "no exception", set_hint)
        getting = f"get_attr({probe!r})"
        return per_env(
            getting, lambda: venv.get_attr(probe), expected, set_hint, f" after {setting}{about}"
        )

    if not set_then_get(list(values), values):
        return

    call_hint = (
        "call(name, *args, **kwargs) must run env.get_wrapper_attr(name)(*args, **kwargs) in every "
        "env, passing the arguments on, and return the results as a tuple in env order"
    )
    per_env(
        f'call("get_wrapper_attr", {probe!r})',
        lambda: venv.call("get_wrapper_attr", probe),
        values,
        call_hint,
        " (a positional argument)",
    )
    # A keyword argument: with force=False, set_wrapper_attr refuses to create an attribute and
    # returns False; a backend that drops keyword arguments gets the default force=True: True.
    per_env(
        'call("set_wrapper_attr", "vecenvs_absent_attribute", 1, force=False)',
        lambda: venv.call("set_wrapper_attr", "vecenvs_absent_attribute", 1, force=False),
        (False,) * num_envs,
        call_hint,
        " (a keyword argument)",
    )

    set_then_get(7, (7,) * num_envs, " (one value for all envs)")


def _check_with_block(
    run: CheckRun,
    make_vector_env: MakeVectorEnv,
    env_id: str,
    num_envs: int,
    mode: AutoresetMode,
    required: bool,
) -> None:
    venv = build(run, make_vector_env, env_fns_for(env_id, num_envs), mode)
    kind = type(venv)
    if not (hasattr(kind, "__enter__") and hasattr(kind, "__exit__")):
        close_quietly(venv)
        wording = f"{kind.__qualname__} does not support `with` (no __enter__/__exit__)"
        hint = (
            "add __enter__ (return self) and __exit__ (call self.close() and return False) so "
            "students can write `with make_vec(...) as envs:`"
        )
        if required:
            run.stop(
                "`with make_vector_env(...) as envs:` must work",
                "__enter__ and __exit__",
                wording,
                hint,
            )
        run.note(f"{wording}; gymnasium's own VectorEnv does not either. Hint: {hint}")
        return
    try:
        with venv as entered:
            if entered is not venv:
                run.problem(
                    "`with venv as envs:` must bind the vector env itself",
                    "__enter__ returns self",
                    f"__enter__ returned {show(entered)}",
                    "end __enter__ with `return self`",
                )
            venv.reset(seed=0)
    except Exception as err:
        close_quietly(venv)
        run.crashed("a `with` block around reset(seed=0) raised", err)
    if getattr(venv, "closed", None) is not True:
        close_quietly(venv)
        run.problem(
            "leaving a `with` block must close the vector env",
            "venv.closed is True after the block",
            f"venv.closed is {getattr(venv, 'closed', '<missing>')!r}",
            "__exit__ must call self.close(); close() must set self.closed = True (the "
            "base class VectorEnv.close does, then calls your close_extras)",
        )
