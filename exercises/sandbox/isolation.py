"""Where a student's code runs: in a sandbox made by bubblewrap, as another user, by unshare, or none.

:func:`choose` takes the best kind that works on this machine:

- ``bwrap`` (`bubblewrap <https://github.com/containers/bubblewrap>`_, Flatpak's sandbox):
  a file system of its own, built from read-only views of what the student's process needs
  (``/usr``, Python and its packages, ``vecenvs``, the parts of ``exercises`` student files
  import) and one writable folder, a copy of that student's files. The checks, the solutions,
  the other students and the grader's reports are not in it at all. Also its own PID namespace
  (when the sandbox ends, the kernel kills every process in it), no network, no capabilities,
  no new user namespaces, a session of its own.
- ``user``: where no namespace can be made (a container that refuses them, as Gradescope's may)
  and the grader runs as root, the student's process runs as an unprivileged user (``nobody``,
  or ``$VECENVS_SANDBOX_USER``), the usual Gradescope hardening. It cannot read what only root
  may (the hidden checks, the policy with the course's seed, the solutions: the Gradescope
  autograder makes them so before grading, and this kind is refused while that user could read
  them), change the grader's files or signal its processes; a seccomp filter turns its network
  off (:mod:`~.network`). It still sees what every user may see of the file system.
- ``unshare`` (util-linux): its own PID namespace and network, so every process still ends with
  the sandbox; but the whole file system is visible, solutions included. A fallback, with a
  warning.
- ``none``: an ordinary child in a session of its own; the checks' process is a subreaper, so
  its descendants are still found and killed, and the seccomp filter turns its network off where
  it can. Enough to check one's own work; for grading, a warning says what is not protected.

The student's process starts in a *workspace*, a temporary folder holding ``lab/exercises``
(the parts of the package student files import, a copy), ``packages/vecenvs`` and
``submission/`` (a copy of the student's regular files, within limits).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import pwd
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXERCISES = Path(__file__).resolve().parent.parent
#: What a student's process sees of ``exercises/``: the scaffolding their files import, question
#: 5's data and this package. Never the checks or the solutions.
SHARED_WITH_STUDENTS = ("__init__.py", "pipe_env.py", "options.py", "data", "sandbox")
#: The workspace's parts; inside the bwrap sandbox, part ``x`` is at ``/x``.
PARTS = ("lab", "packages", "submission", "tmp")
#: Limits on what is copied from a student's folder.
MAX_FILES, MAX_BYTES = 500, 50 * 1024 * 1024
#: Best first (``user`` before ``unshare``: what it protects, the hidden checks and the seed,
#: is what a student would look for).
KINDS = ("bwrap", "user", "unshare", "none")
#: What only the instructor may read, in ``exercises/``: the ``user`` kind needs them unreadable
#: by its user.
SECRETS = ("checks/hidden", "policy.toml", "solutions")
#: The unprivileged user of the ``user`` kind, unless ``$VECENVS_SANDBOX_USER`` names another.
SANDBOX_USER = "nobody"

# Namespaces for bwrap, most isolated first: a user namespace of its own lets us forbid nested
# ones (--disable-userns, bubblewrap >= 0.8); the second works for root with an older bwrap.
_OWN = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
_BWRAP_VARIANTS = (("--unshare-user", "--disable-userns", *_OWN), _OWN)
# Always: no capabilities, a session of its own (no terminal tricks), and the whole sandbox
# killed by the kernel if the process that started it dies.
_BWRAP_ALWAYS = ("--cap-drop", "ALL", "--new-session", "--die-with-parent")
# Read only from the host's /etc: what the dynamic linker and a Python process may look at.
_ETC_FILES = "ld.so.cache ld.so.conf ld.so.conf.d localtime passwd group nsswitch.conf hosts"


@dataclass(frozen=True)
class Sandbox:
    """A way of running a student's process, and what it leaves unprotected."""

    kind: str  # one of KINDS
    bwrap_flags: tuple[str, ...] = ()  # the namespace flags that worked here (bwrap only)
    why_not_better: str = ""  # why a better kind could not be used
    user: str = ""  # the user student code runs as (user only)
    uid: int = -1
    gid: int = -1
    network: str = ""  # what holds of the network, where no namespace turns it off

    @property
    def description(self) -> str:
        """What runs the student's code, for the grader's log: ``"user (as nobody, uid 65534;
        network off (a seccomp filter))"``."""
        if self.kind in ("bwrap", "unshare"):
            return f"{self.kind} (namespaces of its own; network off)"
        who = f"as {self.user}, uid {self.uid}" if self.kind == "user" else "as the grader's user"
        return f"{self.kind} ({who}; network {self.network or 'on'})"

    @property
    def warning(self) -> str:
        """What an instructor should know about this kind ("" when nothing)."""
        if self.kind == "bwrap":
            return ""
        why = (
            f"The better sandboxes do not work here ({self.why_not_better})."
            if self.why_not_better
            else ""
        )
        network = (
            "its network is off (a seccomp filter)"
            if self.network.startswith("off")
            else f"its network is {self.network or 'on'}"
        )
        if self.kind == "user":
            return (
                f"{why} Student code runs as the unprivileged user {self.user} (uid {self.uid}): "
                "it cannot read the hidden checks, the policy (with the course's seed) or the "
                "solutions, readable by root only, nor signal the grader's processes; "
                f"{network}. It sees what any user may see of this machine, and shares its "
                f"process list. {_advice()}"
            ).strip()
        if self.kind == "unshare":
            return (
                f"{why} Student code runs in a PID namespace of its own (unshare), so nothing "
                "it starts survives it, but it can read and change every file this user can, "
                f"solutions and hidden checks included. {_advice()}"
            ).strip()
        where = (
            f"No sandbox could be made here ({self.why_not_better})."
            if self.why_not_better
            else "No sandbox (--sandbox none)."
        )
        return (
            f"{where} Student code runs as an "
            "ordinary process: it can read and change every file this user can (the hidden "
            f"checks and the policy included) and signal its processes; {network}; only what "
            f"it starts is still killed afterwards. {_advice()}"
        ).strip()

    def popen_options(self) -> dict[str, Any]:
        """What ``subprocess.Popen`` needs besides the command: the user and groups to run as."""
        if self.kind != "user":
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def hand_over(self, workspace: Path) -> None:
        """Makes a prepared workspace fit for this kind: with ``user``, its user may read the
        copies of the scaffolding and write only its own folders (the submission, its tmp)."""
        if self.kind != "user":
            return
        os.chmod(workspace, 0o711)
        for part in ("lab", "packages"):
            for root, _, files in os.walk(workspace / part):
                os.chmod(root, 0o755)
                for name in files:
                    os.chmod(os.path.join(root, name), 0o644)
        for part in ("submission", "tmp"):
            for root, folders, files in os.walk(workspace / part):
                for name in [*folders, *files, "."]:
                    os.chown(os.path.join(root, name), self.uid, self.gid, follow_symlinks=False)
            os.chmod(workspace / part, 0o700)

    def command(
        self, workspace: Path, program: list[str]
    ) -> tuple[list[str], dict[str, str], Path]:
        """The command line, environment and working folder that run ``program`` in here.

        ``program`` names paths as the student's process sees them (see :func:`paths`).
        """
        inside = paths(self, workspace)
        environment = {
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": inside["tmp"],
            "TMPDIR": inside["tmp"],
            "LANG": "C.UTF-8",
            "PYTHONPATH": f"{inside['lab']}:{inside['packages']}",
            # No bytecode written next to the copies, no user site-packages, and the working
            # folder (the student's) not put before our packages on sys.path.
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONSAFEPATH": "1",
            "VECENVS_SANDBOX": self.kind,
        }
        if self.kind in ("none", "user"):
            return program, environment, workspace / "submission"
        if self.kind == "unshare":
            return [*_unshare_prefix(), *program], environment, workspace / "submission"
        return (
            [*_bwrap_prefix(self.bwrap_flags), *_bwrap_binds(workspace), *program],
            environment,
            Path("/"),
        )


def paths(sandbox: Sandbox, workspace: Path) -> dict[str, str]:
    """Where the workspace's parts are, as the student's process sees them."""
    return {
        part: f"/{part}" if sandbox.kind == "bwrap" else str(workspace / part) for part in PARTS
    }


def prepare_workspace(submission: Path, workspace: Path) -> None:
    """Fills ``workspace`` (an empty folder) for one student process."""
    lab = workspace / "lab" / "exercises"
    lab.mkdir(parents=True)
    for name in SHARED_WITH_STUDENTS:
        source = EXERCISES / name
        if source.is_dir():
            shutil.copytree(source, lab / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, lab / name)
    (workspace / "packages").mkdir()
    (workspace / "tmp").mkdir()
    (workspace / "packages" / "vecenvs").symlink_to(vecenvs_folder(), target_is_directory=True)
    copy_submission(submission, workspace / "submission")


def copy_submission(folder: Path, into: Path) -> list[str]:
    """Copies the regular files under ``folder`` into ``into``; returns a note per thing left
    out: links (one to the instructor's files would copy them), devices, pipes,
    hidden folders, ``__pycache__``, and what exceeds :data:`MAX_FILES` or :data:`MAX_BYTES`."""
    into.mkdir()
    notes: list[str] = []
    files = total = 0
    for root, folders, names in os.walk(folder, followlinks=False):
        folders[:] = sorted(
            name for name in folders if not name.startswith(".") and name != "__pycache__"
        )
        relative = Path(root).relative_to(folder)
        for name in sorted(names):
            source = Path(root) / name
            if source.is_symlink() or not source.is_file():
                notes.append(f"{relative / name}: not a regular file, left out")
                continue
            size = source.stat().st_size
            if files + 1 > MAX_FILES or total + size > MAX_BYTES:
                notes.append(
                    f"{relative / name}: over the limit of {MAX_FILES} files or "
                    f"{MAX_BYTES // 2**20} MiB, left out"
                )
                continue
            (into / relative).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, into / relative / name, follow_symlinks=False)
            files, total = files + 1, total + size
    return notes


@functools.cache
def vecenvs_folder() -> Path:
    """The ``vecenvs`` package the checks themselves import (found without importing it)."""
    spec = importlib.util.find_spec("vecenvs")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the vecenvs package is not importable: install it (make install)")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _bwrap_prefix(flags: tuple[str, ...]) -> list[str]:
    own = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--hostname", "sandbox"]
    return ["bwrap", *flags, *_BWRAP_ALWAYS, *_system_binds(), *own]


def _system_binds() -> list[str]:
    """Read-only ``/usr`` and friends, as they are here (merged-/usr systems link /lib -> usr/lib)."""
    args = []
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in _ETC_FILES.split():
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _bwrap_binds(workspace: Path) -> list[str]:
    binds = [
        *(("--ro-bind", path, path) for path in python_folders()),
        ("--ro-bind", workspace / "lab", "/lab"),
        ("--ro-bind", vecenvs_folder(), "/packages/vecenvs"),
        ("--bind", workspace / "submission", "/submission"),
        ("--chdir", "/submission"),
    ]
    return [str(arg) for bind in binds for arg in bind]


@functools.cache
def python_folders() -> tuple[Path, ...]:
    """The folders this Python needs (installation, virtual environment, site-packages), shown
    read-only at the same paths inside the sandbox; never one that holds the exercises (a
    checkout with the solutions, on ``sys.path`` through an editable install)."""
    installed = sysconfig.get_paths()
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    candidates |= {*site.getsitepackages(), installed["stdlib"], installed["platstdlib"]}
    candidates |= {installed["purelib"], installed["platlib"]}
    # Each as given and resolved: a virtual environment reached through a link (.venv -> ...) is
    # run by the linked path, and its files live at the resolved one.
    found = {Path(os.path.abspath(c)) for c in candidates} | {Path(c).resolve() for c in candidates}
    folders = {
        path
        for path in found
        if path.is_dir()
        and path != Path("/")
        and not path.is_relative_to("/usr")  # shown whole
        and not EXERCISES.is_relative_to(path)  # would show the checks and the solutions
    }
    # A folder inside another one is shown with it.
    inner = {path for path in folders for other in folders - {path} if path.is_relative_to(other)}
    return tuple(sorted(folders - inner))


def _unshare_prefix() -> list[str]:
    # --kill-child: if unshare dies, its child (the namespace's first process) gets SIGKILL,
    # and with it every process of the namespace. Not root: a user namespace, mapped to root.
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    namespaces = ["--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--ipc", "--uts"]
    return ["unshare", *namespaces, *user]


def choose(requested: str = "auto") -> Sandbox:
    """The sandbox to use: ``requested`` if it works here, or with ``"auto"`` the best that does.
    Raises RuntimeError, saying why, when the requested kind does not work here."""
    if requested not in ("auto", *KINDS):
        raise ValueError(f"sandbox must be 'auto' or one of {KINDS}, got {requested!r}")
    reasons = []
    for kind in KINDS if requested == "auto" else (requested,):
        works, detail = _probe(kind)
        if works:
            why = "; ".join(reasons)
            if kind == "bwrap":
                return Sandbox(kind, bwrap_flags=detail, why_not_better=why)
            if kind == "user":
                name, uid, gid, network = detail
                return Sandbox(
                    kind, why_not_better=why, user=name, uid=uid, gid=gid, network=network
                )
            network = _network_probe() if kind == "none" else "off"
            return Sandbox(kind, why_not_better=why, network=network)
        if requested == kind:
            raise RuntimeError(f"the {kind} sandbox does not work here: {detail}")
        reasons.append(f"{kind}: {detail}")
    raise AssertionError("'none' always works")


def _advice() -> str:
    """What to do for a better sandbox, from why bubblewrap's does not work here."""
    works, why = _probe("bwrap")
    if works:
        return "bubblewrap works here: leave --sandbox at auto to grade in its sandbox."
    if "not installed" in why:
        return "Install bubblewrap (apt-get install bubblewrap) to grade in a sandbox."
    if "cannot create namespaces" in why:
        return (
            "To grade in bubblewrap's sandbox, allow namespaces here (unprivileged user "
            "namespaces, or CAP_SYS_ADMIN): installing it again will not help."
            + ("" if os.geteuid() == 0 else " As root, student code would run as another user.")
        )
    return ""


@functools.cache
def _probe(kind: str):
    """(works, detail or why not) for one kind, by running ``true`` (or a probe) in it."""
    if kind == "none":
        return True, ()
    if kind == "user":
        return _probe_user()
    if kind == "unshare":
        if shutil.which("unshare") is None:
            return False, "the unshare command is not installed (Debian: util-linux)"
        return _runs([*_unshare_prefix(), "true"])
    if shutil.which("bwrap") is None:
        return False, "the bwrap command is not installed (Debian: apt-get install bubblewrap)"
    shown = [Path("/usr"), *python_folders()]
    if any(EXERCISES.is_relative_to(folder) for folder in shown):
        whole = ", ".join(map(str, shown))
        return False, f"{EXERCISES} lies inside a folder the sandbox shows whole ({whole})"
    error = ""
    for flags in _BWRAP_VARIANTS:
        ok, error = _runs([*_bwrap_prefix(flags), "true"])
        if ok:
            return True, flags
    return (
        False,
        f"installed, but it cannot create namespaces here ({error.removeprefix('bwrap: ')})",
    )


#: Run as the ``user`` kind's user: what it can read of what it needs and of the secrets, and
#: whether the network filter works (``network.py``, run by path: arguments are JSON).
_USER_PROBE = """
import json, os, sys
need, secrets, sandbox = json.loads(sys.argv[1])
sys.path.insert(0, sandbox)
import network
state = network.turn_off()
if state.startswith("off"):
    import socket
    try:
        socket.socket(socket.AF_INET).close()
        state = "on: the seccomp filter let a socket through"
    except PermissionError:
        pass
print(json.dumps({
    "unreadable": [path for path in need if not os.access(path, os.R_OK)],
    "readable": [path for path in secrets if os.access(path, os.R_OK)],
    "network": state,
}))
"""


def _probe_user():
    """(works, (user, uid, gid, network) or why not) for the ``user`` kind."""
    if os.geteuid() != 0:
        return False, "only root can run student code as another user"
    name = os.environ.get("VECENVS_SANDBOX_USER") or SANDBOX_USER
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return False, f"there is no user {name!r} to run student code as (useradd {name})"
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        return False, f"the user {name!r} is root, or in root's group"
    need = [sys.executable, str(vecenvs_folder() / "__init__.py"), str(EXERCISES / "sandbox")]
    secrets = [str(EXERCISES / secret) for secret in SECRETS if (EXERCISES / secret).exists()]
    argument = json.dumps([need, secrets, str(EXERCISES / "sandbox")])
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _USER_PROBE, argument],
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
        )
        found = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        return False, f"student code cannot run as {name} here ({error})"
    if done.returncode != 0 or not isinstance(found, dict):
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return False, f"Python cannot run as {name} here ({last})"
    if found.get("unreadable"):
        return (
            False,
            f"{name} cannot read {', '.join(found['unreadable'])}, which student code needs",
        )
    if found.get("readable"):
        return False, (
            f"{name} could read {', '.join(found['readable'])}: make them readable by root only "
            "(chmod -R go-rwx; the Gradescope autograder does it before grading)"
        )
    return True, (name, entry.pw_uid, entry.pw_gid, str(found.get("network", "on")))


@functools.cache
def _network_probe() -> str:
    """What the network filter does for student code run as the grader's user (``none``)."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", str(EXERCISES / "sandbox" / "network.py")],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"on: {error}"
    return (done.stdout.strip().splitlines() or ["on: the probe said nothing"])[-1]


def _runs(command: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as error:
        return False, str(error)
    last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return done.returncode == 0, last
