"""Your own env: named as gymnasium names envs, checked once, measured like the built-in ones.

The example package ``examples/mycart`` (a pure-Python env registering ``MyCart-v0`` on
import) is put on the path here as a user would, and the broken envs of
``tests/data/userenvs`` (an import that fails, spaces that are not spaces, a step that raises
or never returns) must each be refused in one line before any worker starts.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest
from conftest import describe, press_ctrl_c, wait_gone
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Text, Tuple

from vecenvs import make_vec
from vecenvs.autotune import Candidate, autotune
from vecenvs.bench import QUICK, BenchConfig, SweepConfig, measure, run_sweep
from vecenvs.bench.store import ResultsStore
from vecenvs.envspec import (
    ENTRY_POINT,
    FACTORY,
    MODULE_ID,
    REGISTERED,
    CheckProgress,
    EnvError,
    check_env,
    env_label,
    make_env,
    reporting_checks,
    resolve_env,
    space_mismatch,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "mycart"
BROKEN = ROOT / "tests" / "data" / "userenvs"


@pytest.fixture
def on_path(monkeypatch):
    """The example and the broken envs importable in this process, the way a script's own
    folder is: on ``sys.path`` only (not PYTHONPATH), so a spawned worker finds them only if
    its parent passes its path on."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(BROKEN))


def user_env() -> dict[str, str]:
    """A child process's environment with the example and the broken envs on PYTHONPATH."""
    paths = [str(ROOT), str(EXAMPLE), str(BROKEN), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def vecenvs_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m vecenvs ...`` in a fresh interpreter, started from a folder of its own."""
    return subprocess.run(
        [sys.executable, "-m", "vecenvs", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=user_env(),
        cwd=ROOT,
    )


def make_cart(physics_steps: int = 3) -> gym.Env:
    """A factory, as a user's script would define one."""
    from mycart import MyCartEnv

    return MyCartEnv(physics_steps=physics_steps)


# --- naming: one place reads every form --------------------------------------------------


def test_every_form_gymnasium_knows_is_read(on_path):
    assert resolve_env("CartPole-v1").kind == REGISTERED
    module_id = resolve_env("mycart:MyCart-v0")
    assert (module_id.kind, module_id.module, module_id.name) == (MODULE_ID, "mycart", "MyCart-v0")
    entry = resolve_env("mycart.env:MyCartEnv")
    assert (entry.kind, entry.module, entry.name) == (ENTRY_POINT, "mycart.env", "MyCartEnv")
    assert resolve_env("mycart.env:make_mycart").kind == ENTRY_POINT
    assert resolve_env(make_cart).kind == FACTORY
    assert env_label(make_cart) == "<factory test_userenv.make_cart>" or env_label(
        make_cart
    ).endswith("test_userenv.make_cart>")
    # The entry point takes the env's keyword arguments, and gets gymnasium's wrappers.
    env = make_env("mycart.env:MyCartEnv", physics_steps=7)
    assert env.unwrapped.physics_steps == 7 and env.spec.id == "mycart.env:MyCartEnv"
    env.close()


def test_check_records_the_module_version(on_path):
    # The example's __version__ (also its pyproject's): what the results store keeps.
    assert check_env("mycart:MyCart-v0").version == "0.1.0"
    assert check_env("CartPole-v1").version is None


@pytest.mark.parametrize(
    "env, expected",
    [
        ("CartPol-v1", r"^unknown env id 'CartPol-v1': .*Did you mean: `CartPole`"),
        (
            "brokenimport:BrokenImport-v0",
            r"^env 'brokenimport:BrokenImport-v0': importing 'brokenimport' failed: "
            r"ModuleNotFoundError: No module named 'a_dependency_that_is_not_installed'$",
        ),
        ("mycart:Nope-v0", r"^unknown env id 'mycart:Nope-v0': Environment `Nope` doesn't exist"),
        ("mycart:nope", r"module 'mycart' has no env class or function 'nope'"),
        ("my cart:MyCart-v0", r"'my cart' is not a module name"),
        (
            "badspaces:BadSpaces-v0",
            r"^cannot make badspaces:BadSpaces-v0: TypeError: observation space does not "
            r"inherit from `gymnasium.spaces.Space`",
        ),
        (
            "raisingstep:RaisingStep-v0",
            r"^env raisingstep:RaisingStep-v0: step\(\) number 3 after reset raised "
            r"ZeroDivisionError: the cart's mass came out as zero \(at .*raisingstep.py:\d+\)$",
        ),
        (42, r"^env must be an env id such as 'CartPole-v1'"),
    ],
)
def test_a_broken_env_gets_one_line_saying_what_is_wrong(on_path, env, expected):
    with pytest.raises(EnvError) as raised:
        check_env(env)
    message = str(raised.value)
    assert "\n" not in message and re.search(expected, message), message


def test_a_step_that_never_returns_is_given_up_on_at_the_deadline(on_path):
    with pytest.raises(EnvError) as raised:
        check_env("raisingstep:HangingStep-v0", timeout=0.5)
    assert str(raised.value).startswith(
        "env raisingstep:HangingStep-v0: step() number 1 after reset took more than 0.5 s, the "
        "check's time limit (a step that never returns?); if it is only slow, raise the limit "
        "(--check-timeout SECONDS"
    ), raised.value


def test_a_slow_constructor_is_named_as_such_and_passes_with_more_time(on_path):
    with pytest.raises(EnvError) as raised:
        check_env("slowmake:SlowMake-v0", {"make_seconds": 2.0}, timeout=0.5)
    message = str(raised.value)
    assert message.startswith(
        "env slowmake:SlowMake-v0 (make_seconds=2.0): making it took more than 0.5 s"
    ), message
    assert "step" not in message and "\n" not in message
    # Told where it stands as it goes: each phase, in order, while the caller waits.
    seen: list[CheckProgress] = []
    with reporting_checks(seen.append):
        assert check_env("slowmake:SlowMake-v0", {"make_seconds": 1.0}, timeout=20).kind
    phases = list(dict.fromkeys(progress.phase for progress in seen))
    assert phases[1:4] == ["making it", "reset(seed=0)", "step() number 1 after reset"], phases
    assert "gymnasium's env checker" in phases
    making = [progress for progress in seen if progress.phase == "making it"]
    assert len(making) >= 2, "the page is told again while a phase lasts"
    assert max(progress.phase_seconds for progress in making) > 0.4
    assert all(progress.timeout == 20 for progress in seen)


@pytest.mark.parametrize(
    "what, expected",
    [
        (
            "dtype",
            "an observation that does not fit its observation_space: expected float32 "
            "of shape (2,), got float64 of shape (2,)",
        ),
        (
            "shape",
            "an observation that does not fit its observation_space: expected float32 "
            "of shape (2,), got float32 of shape (3,)",
        ),
        (
            "bounds",
            "an observation that does not fit its observation_space: expected values "
            "within the space's bounds, got 1.5 at index (1,), outside [-1, 1]",
        ),
        (
            "reward",
            "a reward that is not a number: expected a float or an int, got a numpy "
            "array, float64 of shape (1,)",
        ),
        ("flag", "terminated that is not a bool: expected True or False, got int 0"),
    ],
)
def test_what_a_step_returns_is_compared_with_the_spaces(on_path, what, expected):
    # A vector env would cast the first silently and fail mid-measure on the second: both are
    # refused before any worker starts, saying what was expected and what came.
    with pytest.raises(EnvError) as raised:
        check_env("mismatch:MismatchEnv", {"what": what})
    assert str(raised.value) == (
        f"env mismatch:MismatchEnv (what={what}): step() number 1 after reset returned {expected}"
    )
    assert check_env("mismatch:MismatchEnv", {"what": "nothing"}).kind == ENTRY_POINT


@pytest.mark.parametrize(
    "space, value, expected",
    [
        (
            Dict({"position": Box(-1, 1, (2,))}),
            {"position": np.zeros(2)},
            "at ['position']: expected float32 of shape (2,), got float64 of shape (2,)",
        ),
        (Dict({"a": Discrete(2)}), {"b": 0}, "expected the keys ['a'], got ['b']"),
        (
            Tuple((Discrete(2), Discrete(3))),
            (1, 3),
            "at [1]: expected an integer from 0 to 2, got 3",
        ),
        (Discrete(3, start=-1), True, "expected an integer from -1 to 1, got bool True"),
        (
            Box(-1.0, 1.0, (2,)),
            [0.0, 0.0],
            "expected a numpy array, float32 of shape (2,), got list [0.0, 0.0]",
        ),
        (
            Box(-1.0, 1.0, (2,)),
            np.array([np.nan, 0.0], dtype=np.float32),
            "expected values within the space's bounds, got nan at index (0,), outside [-1, 1]",
        ),
        (MultiBinary(3), np.array([0, 2, 1]), "expected values within MultiBinary(3), got [0 2 1]"),
        (
            MultiDiscrete([2, 2]),
            np.zeros(2),
            "expected integers of shape (2,), got float64 of shape (2,)",
        ),
    ],
)
def test_a_mismatch_names_the_part_and_what_was_expected(space, value, expected):
    assert space_mismatch(space, value) == expected


@pytest.mark.parametrize(
    "space, value",
    [
        (Box(-np.inf, np.inf, (2,), dtype=np.float64), np.array([1e300, -np.inf])),
        (Box(0, 255, (2,), dtype=np.uint8), np.array([0, 255], dtype=np.uint8)),
        (Box(-1.0, 1.0, ()), 0.5),  # a number for a Box of shape ()
        (Discrete(4), np.int64(3)),
        (MultiBinary(2), np.array([True, False])),
        (Dict({"a": Discrete(2), "b": Box(0, 1, (1,))}), {"a": 1, "b": np.ones(1, np.float32)}),
        (Text(5), "abc"),
    ],
)
def test_what_fits_is_not_refused(space, value):
    assert space_mismatch(space, value) is None


def test_a_missing_id_whose_module_can_be_imported_gets_the_module_id_form(on_path):
    with pytest.raises(EnvError) as raised:
        resolve_env("RoboWalk-v0")
    assert str(raised.value) == (
        "unknown env id 'RoboWalk-v0': Environment `RoboWalk` doesn't exist. Did you mean "
        "`robowalk:RoboWalk-v0`? (a module named 'robowalk' can be imported, and importing it "
        "first, as that form does, may register the id)"
    )
    assert "robowalk" not in sys.modules, "looked up, never imported"
    assert resolve_env("robowalk:RoboWalk-v0").kind == MODULE_ID
    # Python's own modules are never the user's (``test`` is the standard library's).
    with pytest.raises(EnvError) as raised:
        resolve_env("Test-v0")
    assert "Did you mean" not in str(raised.value)


@pytest.mark.parametrize("how, status", [("exit", "exit code 3"), ("kill", "killed by SIGKILL")])
def test_an_env_that_ends_its_process_is_reported_and_this_one_lives_on(how, status):
    # The check runs the env in a child process: this (test) process survives to say so.
    with pytest.raises(EnvError, match=rf"the process checking it ended \({status}\)"):
        check_env("vecenvs/Faulty-v0", {"fail_on": "step", "at": 2, "how": how})


# --- the Python API: names and factories, under every start method ------------------------


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize(
    "env, env_kwargs",
    [
        ("mycart:MyCart-v0", {"physics_steps": 4}),
        ("mycart.env:MyCartEnv", {"physics_steps": 4}),
        (make_cart, {"physics_steps": 4}),
        (lambda physics_steps: make_cart(physics_steps), {"physics_steps": 4}),
    ],
    ids=["module-id", "entry-point", "factory", "lambda"],
)
def test_make_vec_builds_a_user_env_in_workers(on_path, start_method, env, env_kwargs):
    with make_vec(
        env, 4, "pool", num_workers=2, start_method=start_method, env_kwargs=env_kwargs
    ) as envs:
        observations, _ = envs.reset(seed=0)
        envs.step(envs.action_space.sample())
        assert observations.shape == (4, 2)
        # Every env, the workers' too, was made with the keyword arguments.
        assert list(envs.get_attr("physics_steps")) == [4] * 4


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_the_bench_engine_measures_a_factory_and_records_what_it_was(on_path, start_method):
    config = BenchConfig(
        make_cart, 4, "subproc", backend_kwargs={"start_method": start_method}, **QUICK
    )
    result = measure(config)
    assert result.throughput > 0
    assert result.env["kind"] == FACTORY
    assert result.to_dict()["config"]["env_id"].startswith("<factory ")


def test_autotune_takes_an_entry_point_and_answers_with_lines_to_paste(on_path):
    result = autotune(
        "mycart.env:MyCartEnv",
        4,
        budget_seconds=4,
        env_kwargs={"physics_steps": 5},
        candidates_to_try=[Candidate("multi"), Candidate("pool-async", {"num_workers": 2})],
    )
    text = result.format_recommendation()
    assert "use on this machine" in text and "make_vec(" in text
    code = result.use_code()
    assert f'"{result.best.backend}"' in code and 'env_kwargs={"physics_steps": 5}' in code
    # SB3 trains only on lock-step backends: never the async pool.
    assert '"pool-async"' not in result.use_code(sb3=True)
    assert "to_sb3(make_vec(" in result.use_code(sb3=True)
    # The pasted lines run, and make what was measured.
    namespace: dict = {}
    exec(code, namespace)
    with namespace["envs"] as envs:
        assert envs.num_envs == 4


def test_a_sweep_refuses_a_raising_step_before_any_worker_starts(on_path):
    config = SweepConfig(["raisingstep:RaisingStep-v0"], [4], ["subproc"], **QUICK)
    with pytest.raises(EnvError, match="step\\(\\) number 3 after reset raised"):
        run_sweep(config)


# --- the commands, as a user types them ---------------------------------------------------


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_cli_bench_measures_a_module_env_and_the_store_records_it(tmp_path, start_method):
    store = tmp_path / "results.sqlite"
    done = vecenvs_cli(
        "bench",
        "--quick",
        "--env",
        "mycart:MyCart-v0",
        "--env-kwarg",
        "physics_steps=20",
        "--num-envs",
        "4",
        "--backend",
        "pool",
        "--start-method",
        start_method,
        "--store",
        str(store),
    )
    assert done.returncode == 0, done.stderr
    assert "mycart:MyCart-v0" in done.stdout
    with ResultsStore(store) as results:
        rows = results.measurements()
    assert {row["env_id"] for row in rows} == {"mycart:MyCart-v0"}
    recorded = [row["data"]["env"] for row in rows]
    assert all(
        env
        == {
            "text": "mycart:MyCart-v0",
            "kind": MODULE_ID,
            "module": "mycart",
            "name": "MyCart-v0",
            "version": "0.1.0",
        }
        for env in recorded
    ), recorded
    assert all(row["env_kwargs"] == {"physics_steps": 20} for row in rows)


def test_cli_bench_measures_an_entry_point_with_keyword_arguments():
    done = vecenvs_cli(
        "bench",
        "--quick",
        "--no-store",
        "--env",
        "mycart.env:make_mycart",
        "--env-kwarg",
        "physics_steps=20",
        "--num-envs",
        "2",
        "--backend",
        "subproc",
    )
    assert done.returncode == 0, done.stderr
    assert "mycart.env:make_mycart" in done.stdout


@pytest.mark.parametrize(
    "env, reason",
    [
        ("brokenimport:BrokenImport-v0", "No module named 'a_dependency_that_is_not_installed'"),
        ("badspaces:BadSpaces-v0", "observation space does not inherit"),
        ("raisingstep:RaisingStep-v0", "step() number 3 after reset raised ZeroDivisionError"),
    ],
)
@pytest.mark.parametrize("command", ["bench", "autotune", "profile"])
def test_cli_refuses_a_broken_env_in_one_line_before_any_worker(tmp_path, command, env, reason):
    args = ["--env", env, "--num-envs", "2"]
    extra = {
        "bench": ["--quick", "--backend", "subproc", "--no-store"],
        "autotune": ["--budget", "2", "--no-store"],
        "profile": ["--quick", "--out", str(tmp_path / "out")],
    }[command]
    done = vecenvs_cli(command, *args, *extra)
    # 2: bad input, refused before anything ran (a failure inside a worker would exit 1).
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and reason in lines[0], done.stderr
    assert "Traceback" not in done.stderr and "worker" not in done.stderr


@pytest.mark.parametrize("env", ["mismatch:WrongDtype-v0", "mismatch:WrongShape-v0"])
def test_cli_bench_refuses_a_step_its_spaces_do_not_declare(env):
    # Before: float64 was cast without a word (exit 0), a wrong shape failed mid-measure with
    # "The vector env has been closed (its envs are out of step)" (exit 1).
    done = vecenvs_cli("bench", "--quick", "--no-store", "--env", env, "--num-envs", "2")
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    got = "float64 of shape (2,)" if "Dtype" in env else "float32 of shape (3,)"
    assert line == (
        f"vecenvs bench: error: env {env}: step() number 1 after reset returned an observation "
        f"that does not fit its observation_space: expected float32 of shape (2,), got {got}"
    )


@pytest.mark.parametrize("command", ["bench", "autotune", "profile"])
def test_cli_check_timeout_sets_the_checks_limit_and_the_phase_is_named(tmp_path, command):
    extra = {
        "bench": ["--quick", "--backend", "multi", "--no-store"],
        "autotune": ["--budget", "2", "--no-store"],
        "profile": ["--quick", "--out", str(tmp_path / "out")],
    }[command]
    env = ["--env", "slowmake:SlowMake-v0", "--env-kwarg", "make_seconds=2", "--num-envs", "1"]
    done = vecenvs_cli(command, *env, *extra, "--check-timeout", "0.5")
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(
        f"vecenvs {command}: error: env slowmake:SlowMake-v0 (make_seconds=2): making it took "
        "more than 0.5 s, the check's time limit; if it is only slow to build, raise the limit"
    ), line


def test_cli_autotune_starts_its_workers_as_told(tmp_path):
    done = vecenvs_cli(
        "autotune",
        "--env",
        "mycart:MyCart-v0",
        "--num-envs",
        "2",
        "--budget",
        "8",
        "--start-method",
        "spawn",
        "--json",
        str(tmp_path / "autotune.json"),
        "--no-store",
    )
    assert done.returncode == 0, done.stderr
    saved = json.loads((tmp_path / "autotune.json").read_text())
    kwargs = {m["config"]["backend"]: m["config"]["backend_kwargs"] for m in saved["measurements"]}
    assert kwargs.get("multi") == {}, "the loop starts no process"
    started = [kw for backend, kw in kwargs.items() if backend != "multi"]
    assert started and all(kw["start_method"] == "spawn" for kw in started), kwargs
    if saved["best"]["backend"] != "multi":  # the lines to paste say how it was measured
        assert 'start_method="spawn"' in saved["use_code"], saved["use_code"]


def test_cli_autotune_ends_with_the_lines_to_paste_and_they_run(tmp_path):
    done = vecenvs_cli(
        "autotune",
        "--env",
        "mycart:MyCart-v0",
        "--env-kwarg",
        "physics_steps=50",
        "--num-envs",
        "4",
        "--budget",
        "4",
        "--json",
        str(tmp_path / "autotune.json"),
        "--no-store",
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(
        r"^use on this machine \(\d+ CPUs, N=4\): .+, K=\d+ x \d+ envs; paste:$", out, re.M
    )
    assert 'envs = make_vec("mycart:MyCart-v0", 4, ' in out
    assert "vec_env = to_sb3(make_vec(" in out and 'autoreset_mode="SameStep"' in out
    saved = json.loads((tmp_path / "autotune.json").read_text())
    assert saved["env_source"]["kind"] == MODULE_ID
    assert all(line in out for line in saved["use_code"].splitlines()), "what it printed"
    # What it says to paste runs as a user's script would, in a process of its own.
    script = (
        saved["use_code"] + "\nenvs.reset(seed=0)\nprint('made', envs.num_envs)\nenvs.close()\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=user_env()
    )
    assert ran.returncode == 0 and "made 4" in ran.stdout, ran.stderr


def test_cli_profile_profiles_a_user_env(tmp_path):
    from vecenvs.profile import check_attach

    if not (attach := check_attach()).ok:
        pytest.skip(f"py-spy cannot attach here, so no real profile can run: {attach.message}")
    out = tmp_path / "out"
    done = vecenvs_cli(
        "profile",
        "--quick",
        "--env",
        "mycart:MyCart-v0",
        "--env-kwarg",
        "physics_steps=200",
        "--backend",
        "pool",
        "--workers",
        "2",
        "--num-envs",
        "4",
        "--start-method",
        "spawn",  # the workers import mycart themselves, from its name
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["env_id"] == "mycart:MyCart-v0"
    assert summary["config"]["backend_kwargs"] == {"num_workers": 2, "start_method": "spawn"}
    # The env's own code shows in the worker's stacks: it ran there, by name.
    assert "mycart/env.py" in (out / "stacks.collapsed.txt").read_text()


def test_the_example_installs_as_a_package(tmp_path):
    """``pip install`` of the example (no dependencies, no network) into a throwaway folder:
    its pyproject.toml is a working one, and the installed copy is what gets measured."""
    if importlib.util.find_spec("setuptools") is None:  # venvs of Python 3.12+ have none
        pytest.skip("setuptools, the example's build backend, is not installed (no network here)")
    target = tmp_path / "site"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(EXAMPLE),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    if installed.returncode != 0 and "No module named pip" in installed.stderr:
        pytest.skip("this Python has no pip")
    assert installed.returncode == 0, installed.stderr
    assert (target / "mycart" / "env.py").is_file()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(target)])}
    probe = (
        "from vecenvs.envspec import check_env; n = check_env('mycart:MyCart-v0'); print(n.version)"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=env
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "0.1.0", ran.stderr


def test_the_lines_to_paste_name_a_factory_the_way_a_script_can():
    from vecenvs.bench.snippets import use_code

    def code(env) -> str:
        named = {"text": env_label(env), "kind": FACTORY}
        return use_code(named, 4, "pool", {"num_workers": 2}, {})

    # Defined in the script or notebook itself: its name, nothing to import.
    defined_here = type("MyEnv", (), {"__module__": "__main__", "__qualname__": "MyEnv"})
    assert code(defined_here).splitlines()[-1] == 'envs = make_vec(MyEnv, 4, "pool", num_workers=2)'
    # A module's function: imported from its module.
    assert f"from {make_cart.__module__} import make_cart" in code(make_cart)
    # A lambda has no name: the lines say where yours goes.
    assert "from my_code import make_env  # your function" in code(lambda: make_cart())


def test_the_lines_to_paste_write_every_string_in_one_quote_style():
    # A CI run where the pool won wrote start_method='spawn' beside "pool": both are Python,
    # but lines a user pastes should read as one hand wrote them, whichever backend wins.
    from vecenvs.bench.snippets import use_code

    env = {"text": "CartPole-v1", "kind": "id"}
    kwargs = {"num_workers": 2, "start_method": "spawn", "worker_threads": None}
    odd = {"mode": 'say "hi"', "names": ["a", "b"], "pair": ("x",), "it's": 1.5}
    code = use_code(env, 4, "pool", kwargs, odd)
    call = code.splitlines()[-1]
    assert 'start_method="spawn"' in call and "'" not in call.replace("it's", ""), call
    # What it wrote is the very values it was given, quotes and all.
    tree = ast.parse(code)
    made = next(node for node in ast.walk(tree) if isinstance(node, ast.Call))
    given = {k.arg: ast.literal_eval(k.value) for k in made.keywords}
    assert given == {**kwargs, "env_kwargs": odd}


def test_the_child_checking_an_env_exits_when_the_process_that_asked_is_killed():
    # kill -9 runs no clean-up (multiprocess ends daemon children only at a normal exit): the
    # child, stuck in a step that never returns, must notice by itself that its parent is gone.
    code = "from vecenvs.envspec import check_env; check_env('raisingstep:HangingStep-v0')"
    asking = subprocess.Popen([sys.executable, "-c", code], env=user_env())
    try:
        parent = psutil.Process(asking.pid)
        deadline = time.monotonic() + 60
        while not (children := parent.children()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert children, "no child checking the env within 60 s"
    finally:
        asking.kill()
        asking.wait(10)
    alive = wait_gone(children, timeout=30)
    assert alive == [], f"the checking child outlived its parent: {describe(alive)}"


SLOW = ["--env-kwarg", "make_seconds=60", "--no-store"]


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_while_the_env_is_checked_says_interrupted_and_ends_the_check(tmp_path):
    command = subprocess.Popen(
        [sys.executable, "-m", "vecenvs", "bench", "--env", "slowmake:SlowMake-v0", *SLOW],
        stderr=subprocess.PIPE,
        text=True,
        env=user_env(),
        cwd=ROOT,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        parent = psutil.Process(command.pid)
        deadline = time.monotonic() + 60
        while not parent.children() and time.monotonic() < deadline:  # the checking child
            time.sleep(0.05)
        time.sleep(0.5)  # ... in the env's constructor, which Ctrl-C reaches too
        processes = press_ctrl_c(command)
        _, errors = command.communicate(timeout=30)
    finally:
        if command.poll() is None:
            command.kill()
    assert len(processes) == 2, describe(processes)
    assert command.returncode == 130 and errors.strip() == "vecenvs bench: interrupted", errors
    assert wait_gone(processes, timeout=10) == []
