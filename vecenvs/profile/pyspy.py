"""The py-spy executable: finding it, and understanding why it could not attach.

py-spy reads another process's memory to sample its Python stack, and the system has to allow
that (ptrace): as root on Linux, or with ``/proc/sys/kernel/yama/ptrace_scope`` at 0 for your
own processes; in Docker only with ``--cap-add SYS_PTRACE``; on macOS only with ``sudo``.
Where it is not allowed, py-spy says so on stderr in one of a few ways (see its
``src/main.rs``): :func:`is_permission_failure` recognises them, :func:`permission_message`
says what to do, and :func:`check_attach` tries in advance (the dashboard shows its answer).
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass

__all__ = [
    "PY_SPY_ENV_VAR",
    "AttachCheck",
    "ProfilerError",
    "PySpyNotFoundError",
    "PySpyPermissionError",
    "check_attach",
    "find_py_spy",
    "is_permission_failure",
    "permission_message",
]

#: Environment variable naming the py-spy executable to use, if not the one installed with
#: vecenvs (e.g. a py-spy built from source, or one installed system-wide).
PY_SPY_ENV_VAR = "VECENVS_PY_SPY"

#: What py-spy prints when the system will not let it read another process: "Permission
#: Denied: Try running again with elevated permissions...", its Docker hint about SYS_PTRACE,
#: "This program requires root on OSX", and the OS errors behind them.
_PERMISSION_PATTERN = re.compile(
    r"permission denied|operation not permitted|requires root|sys_ptrace|ptrace", re.IGNORECASE
)


class ProfilerError(RuntimeError):
    """Profiling failed: py-spy or the profiled process did not do its part."""


class PySpyNotFoundError(ProfilerError):
    """No py-spy executable was found."""


class PySpyPermissionError(ProfilerError):
    """py-spy is not allowed to read the profiled processes (no ptrace permission)."""


@dataclass(frozen=True)
class AttachCheck:
    """Whether ``py-spy dump`` could read a freshly started Python process here (``ok``), and
    one paragraph for a person: what was found and, if needed, what to do."""

    ok: bool
    message: str


def find_py_spy(py_spy: str | os.PathLike[str] | None = None) -> str:
    """The py-spy executable: ``py_spy`` if given, else ``$VECENVS_PY_SPY``, else the one next
    to this Python (installed with vecenvs), else the first on the ``PATH``.

    Raises PySpyNotFoundError, saying what to do, if there is none.
    """
    chosen = py_spy if py_spy is not None else os.environ.get(PY_SPY_ENV_VAR)
    if chosen is not None:
        found = shutil.which(os.fspath(chosen))
        if found is None:
            raise PySpyNotFoundError(
                f"py-spy executable {os.fspath(chosen)!r} not found or not executable"
                + (f" (from ${PY_SPY_ENV_VAR})" if py_spy is None else "")
            )
        return found
    # Next to sys.executable first: a virtualenv's scripts are there even when it is not
    # activated (a notebook kernel, the dashboard started by its full path).
    found = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
    if found is None:
        raise PySpyNotFoundError(
            "py-spy is not installed: install it with `pip install py-spy` (it is a dependency "
            f"of vecenvs), or set {PY_SPY_ENV_VAR} to its path"
        )
    return found


def is_permission_failure(said: str) -> bool:
    """Whether py-spy's output ``said`` means it was not allowed to read the process."""
    return _PERMISSION_PATTERN.search(said) is not None


def permission_message(said: str, pid: int | None) -> str:
    """What happened when py-spy may not attach, and what to do, for each system."""
    what = f"the profiled process (pid {pid})" if pid is not None else "a Python process"
    # py-spy's own words, kept short: its Docker hint spans a few lines, a backtrace many more.
    lines = [line.strip() for line in said.splitlines() if line.strip()][:6]
    return (
        f"py-spy is not allowed to read {what}: sampling another process's stack needs "
        "ptrace permission, and this system refused it.\n"
        "py-spy said:\n"
        + "".join(f"  {line}\n" for line in lines or ["(nothing)"])
        + "What to do:\n"
        '  Linux: run as root (e.g. sudo env "PATH=$PATH" python -m vecenvs profile ...), or '
        "let your user trace its own processes: "
        "echo 0 | sudo tee /proc/sys/kernel/yama/ptrace_scope\n"
        "  Docker: start the container with --cap-add SYS_PTRACE (Kubernetes: add SYS_PTRACE "
        "to the container's securityContext.capabilities)\n"
        "  macOS: run with sudo (py-spy always needs root there)"
    )


def check_attach(
    py_spy: str | os.PathLike[str] | None = None, timeout: float = 20.0
) -> AttachCheck:
    """Tell whether py-spy can attach to a process here, by trying on a tiny sleeping one
    (about a second)."""
    try:
        executable = find_py_spy(py_spy)
    except PySpyNotFoundError as error:
        return AttachCheck(False, str(error))
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(120)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        # py-spy can only read an interpreter that has started: wait for its first line (in a
        # thread: a pipe's readline has no timeout).
        lines: queue.Queue[str] = queue.Queue()
        stdout = sleeper.stdout
        assert stdout is not None
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            ready = lines.get(timeout=timeout)
        except queue.Empty:
            ready = ""
        if not ready:
            return AttachCheck(False, "could not start a Python process to try py-spy on")
        try:
            dump = [executable, "dump", "--pid", str(sleeper.pid)]
            result = subprocess.run(
                dump, check=False, capture_output=True, text=True, errors="replace", timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return AttachCheck(False, f"py-spy dump did not answer within {timeout:g} s")
        said = (result.stderr or "").strip() or (result.stdout or "").strip()
        if result.returncode == 0:
            return AttachCheck(True, f"py-spy ({executable}) can attach to processes here.")
        if is_permission_failure(said):
            return AttachCheck(False, permission_message(said, None))
        return AttachCheck(False, f"py-spy dump failed with exit code {result.returncode}: {said}")
    finally:
        sleeper.kill()
        sleeper.wait()
