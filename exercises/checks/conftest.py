"""What every check shares: which submission to check, loading its files, hints, clean-up.

``pytest exercises/checks`` checks ``exercises/student``; ``--submission DIR`` checks another
folder holding the same ``q*.py`` files (a student's, or ``exercises/solutions``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pytest

EXERCISES = Path(__file__).resolve().parent.parent
# The exercise files import ``exercises.pipe_env``: the folder above ``exercises`` must be importable.
if str(EXERCISES.parent) not in sys.path:
    sys.path.insert(0, str(EXERCISES.parent))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--submission", default=str(EXERCISES / "student"),
                     help="folder with the q*.py files to check (default: exercises/student)")


@pytest.fixture(scope="session")
def submission(request: pytest.FixtureRequest) -> Path:
    """The folder being checked."""
    folder = Path(request.config.getoption("--submission")).resolve()
    if not folder.is_dir():
        pytest.fail(f"--submission {folder}: no such folder")
    return folder


def load(folder: Path, filename: str) -> ModuleType:
    """Imports ``folder/filename`` under a name of its own; a missing or broken file fails the
    check with a message saying so (never an error inside pytest)."""
    path = folder / filename
    if not path.is_file():
        pytest.fail(f"{filename} not found in {folder}: copy exercises/student/{filename} there "
                    "and fill it in", pytrace=False)
    name = f"submission_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - whatever a student's file raises, report it as a failed check
        pytest.fail(f"importing {filename} failed; fix this first:\n{traceback.format_exc(limit=-3)}",
                    pytrace=False)
    sys.modules[name] = module
    return module


def attribute(module: ModuleType, name: str) -> Any:
    """``module.name``, or a failed check saying it is missing."""
    if not hasattr(module, name):
        pytest.fail(f"{Path(module.__file__).name} has no {name!r}: did you rename or delete it?",
                    pytrace=False)
    return getattr(module, name)


def call(function: Callable, *args: Any, seconds: float = 10.0, **kwargs: Any) -> Any:
    """Calls a student's function with a deadline; "not done yet" and hangs become clear failures.

    The call runs in a helper thread, so a hang costs ``seconds``, not the whole check's timeout.
    Other exceptions propagate: checks that expect one catch it, and an unexpected one shows its
    traceback, which is what the student needs to see.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - handed to the main thread below
            outcome["error"] = error

    thread = threading.Thread(target=run, name=f"check-{function.__name__}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{function.__name__}() did not return within {seconds:g} s: is something "
                    "waiting forever (a recv() without a deadline, a loop that never ends)?",
                    pytrace=False)
    error = outcome.get("error")
    if isinstance(error, NotImplementedError):
        pytest.fail(f"not done yet: {error}", pytrace=False)
    if error is not None:
        raise error
    return outcome["value"]


@pytest.fixture(autouse=True)
def no_processes_left_behind():
    """Whatever a check started (a student's worker that never exits...) is killed after it, so
    one hung exercise cannot slow down the next."""
    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}
    yield
    leftovers = [child for child in me.children(recursive=True) if child.pid not in before]
    for child in leftovers:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(leftovers, timeout=3)
