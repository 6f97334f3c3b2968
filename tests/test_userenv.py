"""Your own env: named as gymnasium names envs, checked once, measured like the built-in ones.

The example package ``examples/mycart`` (a pure-Python env registering ``MyCart-v0`` on
import) is put on the path here as a user would, and the broken envs of
``tests/data/userenvs`` (an import that fails, spaces that are not spaces, a step that raises
or never returns) must each be refused in one line before any worker starts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import psutil
import pytest
from conftest import describe, wait_gone

from vecenvs import make_vec
from vecenvs.autotune import Candidate, autotune
from vecenvs.bench import QUICK, BenchConfig, SweepConfig, measure, run_sweep
from vecenvs.bench.store import ResultsStore
from vecenvs.envspec import (
    ENTRY_POINT,
    FACTORY,
    MODULE_ID,
    REGISTERED,
    EnvError,
    check_env,
    env_label,
    make_env,
    resolve_env,
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
    with pytest.raises(EnvError, match=r"took more than 0.5 s \(a step that never returns\?\)"):
        check_env("raisingstep:HangingStep-v0", timeout=0.5)


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
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["env_id"] == "mycart:MyCart-v0"
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
