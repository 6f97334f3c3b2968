"""The package as a user gets it: the wheel and the sdist build and pass twine's checks, and the
wheel, installed into a fresh virtual environment outside the repository, steps a pool there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What the sdist carries besides the package (tests/ stays out: it needs the whole repository).
SDIST_FILES = ("LICENSE", "README.md", "CHANGELOG.md", "CITATION.cff", "CONTRIBUTING.md")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The wheel and the sdist, built from this checkout with the build frontend PyPI uses.

    Without build isolation: the project's own virtual environment has setuptools, and an
    isolated build would download it again (and need a network)."""
    pytest.importorskip("build", reason="`build` is in the test extra: make test installs it")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def built(dist: Path, pattern: str) -> Path:
    (path,) = dist.glob(pattern)
    return path


@pytest.mark.timeout(300)
def test_the_wheel_and_the_sdist_pass_twine_check(dist):
    pytest.importorskip("twine", reason="`twine` is in the test extra: make test installs it")
    files = [str(path) for path in sorted(dist.iterdir())]
    assert len(files) == 2, files
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


@pytest.mark.timeout(300)
def test_the_distributions_carry_the_license_and_the_project_files(dist):
    with tarfile.open(built(dist, "*.tar.gz")) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    missing = [name for name in (*SDIST_FILES, "vecenvs/pool.py") if name not in names]
    assert not missing, f"the sdist lacks {missing}"
    assert not any(name.startswith("tests/") for name in names), "the sdist's tests are partial"
    with zipfile.ZipFile(built(dist, "*.whl")) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not any(name.startswith(("tests/", "dashboard/", "exercises/")) for name in names)
    text = metadata.decode("utf-8")
    assert "License-Expression: MIT" in text
    assert "Classifier: Programming Language :: Python :: 3 :: Only" in text


@pytest.mark.timeout(300)
def test_the_wheel_steps_a_pool_outside_the_repository(dist, tmp_path):
    """A fresh venv in a temporary folder gets the wheel alone (``--no-deps``); its dependencies
    come from this environment's site-packages on PYTHONPATH, which holds no copy of vecenvs
    (``make test`` installs it editable: a .pth file, which PYTHONPATH entries do not read). The
    repository is neither the working folder nor on the path."""
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    # Nothing of the repository on pip's path either (a PYTHONPATH or a working folder holding
    # the checkout would show pip a vecenvs "already installed", and it would install nothing).
    bare = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
            "--no-index", "--no-cache-dir", str(built(dist, "*.whl")),
        ],
        cwd=tmp_path,
        env=bare,
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Successfully installed vecenvs-" in done.stdout, done.stdout
    dependencies = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    assert not any(Path(folder, "vecenvs").is_dir() for folder in dependencies)
    environment = {
        **bare,
        "PYTHONPATH": os.pathsep.join(sorted(dependencies)),
        "PYTHONNOUSERSITE": "1",
    }
    script = """
import gymnasium as gym, numpy as np, vecenvs
from vecenvs import PoolVecEnv

print(vecenvs.__file__)
with PoolVecEnv([lambda: gym.make("CartPole-v1")] * 8, num_workers=2) as envs:
    envs.reset(seed=0)
    for _ in range(50):
        envs.step(envs.action_space.sample())
    print("stepped", envs.num_envs, "envs in", envs.num_workers, "processes")
"""
    run = subprocess.run(
        [str(python), "-c", script],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    where, said = run.stdout.splitlines()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where
    assert not Path(where).resolve().is_relative_to(ROOT), where
    assert said == "stepped 8 envs in 2 processes", said
    # The console script the wheel declares runs too.
    cli = subprocess.run(
        [str(venv / "bin" / "vecenvs"), "--help"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0 and "bench" in cli.stdout, cli.stderr
