"""Gradescope's autograder, built by ``python -m exercises.gradescope build`` and run in
Gradescope's layout: the zip unpacked at ``/autograder/source``, a submission at
``/autograder/submission``, ``run_autograder`` run from ``/autograder``, and its
``/autograder/results/results.json`` checked against Gradescope's documented fields. The layout
is a temporary folder bound at ``/autograder`` by bubblewrap, over a read-only view of this
machine; ``setup.sh``'s apt and pip steps are not run here (no network): the unpacked
source's ``.venv`` is this checkout's virtual environment.

Whether Gradescope's containers let a process create namespaces is not known, so the layout also
runs in a container that refuses them, as Docker's defaults do: an outer bubblewrap, as root with
Docker's default capabilities (no CAP_SYS_ADMIN) and a seccomp filter that refuses to create
namespaces, showing only what such a container holds (the system, Python, the venv; not this
checkout).
"""

from __future__ import annotations

import csv
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from exercises import gradescope
from exercises.grading import policy

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
POLICY = policy.load()

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

#: Gradescope's fields (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
TOP_FIELDS = {"score", "execution_time", "output", "visibility", "stdout_visibility"}
TOP_FIELDS |= {"extra_data", "tests", "leaderboard", "output_format", "test_output_format"}
TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number", "output"}
TEST_FIELDS |= {"output_format", "tags", "visibility", "extra_data"}
VISIBILITIES = {"visible", "hidden", "after_due_date", "after_published"}


def valid_results(path: Path) -> dict:
    """Reads a results.json and checks it against Gradescope's specification."""
    results = json.loads(path.read_text())
    assert set(results) <= TOP_FIELDS, set(results) - TOP_FIELDS
    assert isinstance(results["score"], (int, float))
    assert results["visibility"] in VISIBILITIES and results["stdout_visibility"] in VISIBILITIES
    for test in results["tests"]:
        assert set(test) <= TEST_FIELDS, set(test) - TEST_FIELDS
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], float)
        assert test.get("status", "passed") in ("passed", "failed")
        assert test["visibility"] in VISIBILITIES
    return results


def bwrap_or_skip() -> None:
    if shutil.which("bwrap") is None:
        message = "bubblewrap is needed to make Gradescope's /autograder layout"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def in_gradescope_layout(autograder: Path, marker: str) -> subprocess.CompletedProcess:
    """Runs ``/autograder/run_autograder`` with ``autograder`` bound at ``/autograder``, over a
    read-only view of this machine's top-level folders (a fresh /tmp, /dev and /proc)."""
    command = ["bwrap", "--die-with-parent", "--unshare-pid"]
    for entry in sorted(Path("/").iterdir()):
        if entry.name in ("proc", "dev", "tmp", "autograder"):
            continue
        if entry.is_symlink():
            command += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.is_dir():
            command += ["--ro-bind", str(entry), str(entry)]
    command += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # A checkout (and its .venv, which setup.sh's stands for) in /tmp stays visible, as one
    # anywhere else is through the read-only view above.
    for path in sorted({REPO.resolve(), Path(sys.prefix).resolve()}):
        if path.is_relative_to("/tmp"):
            command += ["--ro-bind", str(path), str(path)]
    command += ["--bind", str(autograder), "/autograder", "--chdir", "/autograder"]
    command += ["--setenv", "GRADE_TEST_MARKER", marker, "--", "/autograder/run_autograder"]
    return subprocess.run(command, capture_output=True, text=True, timeout=280, check=False)


#: Docker's default capabilities (no CAP_SYS_ADMIN: no namespace but a user namespace).
DOCKER_CAPABILITIES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
]
#: machine -> its audit arch, and unshare's, setns's, clone's and clone3's syscall numbers
SYSCALLS = {
    "x86_64": (0xC000003E, 272, 308, 56, 435),
    "aarch64": (0xC00000B7, 97, 268, 220, 435),
}
#: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET and NEWTIME together.
CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000
CLONE_NEW_ANY |= 0x40000000 | 0x00000080


def no_namespaces_filter() -> bytes:
    """A seccomp filter (classic BPF) refusing what Docker's default profile refuses a process
    without CAP_SYS_ADMIN: unshare, setns, clone with a namespace flag (EPERM), and clone3,
    whose flags it cannot read (ENOSYS: glibc falls back to clone)."""
    if platform.machine() not in SYSCALLS:
        pytest.skip(f"no namespace filter for {platform.machine()}")
    arch, unshare, setns, clone, clone3 = SYSCALLS[platform.machine()]

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    load, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    flags = 16 + (4 if sys.byteorder == "big" else 0)
    return b"".join(
        [
            op(load, 4),  # 0: ABI
            op(jeq, arch, jt=1),  # 1: ours -> 3
            op(ret, allow),  # 2
            op(load, 0),  # 3: the call
            op(jeq, unshare, jt=3),  # 4 -> 8
            op(jeq, setns, jt=2),  # 5 -> 8
            op(jeq, clone3, jt=3),  # 6 -> 10
            op(jeq, clone, jt=3, jf=1),  # 7 -> 11, else 9
            op(ret, eperm),  # 8
            op(ret, allow),  # 9
            op(ret, enosys),  # 10
            op(load, flags),  # 11: clone's flags
            op(jset, CLONE_NEW_ANY, jt=0, jf=1),  # 12: a namespace -> 13, else 14
            op(ret, eperm),  # 13
            op(ret, allow),  # 14
        ]
    )


def in_a_container_without_namespaces(
    autograder: Path, seccomp: Path
) -> subprocess.CompletedProcess:
    """Runs ``/autograder/run_autograder`` as root in a container that refuses namespaces
    (module docstring): it shows the system folders, /etc, this Python and the venv, and
    ``autograder`` at ``/autograder``, with /tmp a fresh tmpfs anyone may write to."""
    command = ["bwrap", "--die-with-parent", "--unshare-pid", "--cap-drop", "ALL"]
    for capability in DOCKER_CAPABILITIES:
        command += ["--cap-add", f"CAP_{capability}"]
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"):
        path = Path("/") / name
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            command += ["--ro-bind", str(path), str(path)]
    # A fresh /tmp first: a venv in /tmp (a checkout there) is bound into it below, not hidden.
    command += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
    # A Python under a folder others cannot enter (pyenv's in /root) is shown through a fresh
    # folder that they can, as a system's Python is.
    for folder in sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}):
        top = Path("/", folder.parts[1])
        if not top.stat().st_mode & 0o001:
            command += ["--perms", "0755", "--tmpfs", str(top)]
        for above in reversed(folder.parents[:-2]):  # (bubblewrap would make them 0700)
            command += ["--perms", "0755", "--dir", str(above)]
        command += ["--ro-bind", str(folder), str(folder)]
    command += ["--bind", str(autograder), "/autograder", "--chdir", "/autograder"]
    with open(seccomp, "rb") as rules:
        command += ["--seccomp", str(rules.fileno()), "--", "/autograder/run_autograder"]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=280,
            check=False,
            pass_fds=(rules.fileno(),),
        )


def build(out: Path, *options: str) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "exercises.gradescope", "build", str(out), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("gradescope") / "autograder.zip")


def test_the_zip_has_gradescopes_two_scripts_at_its_root_and_no_solution(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as archive:
        names = set(archive.namelist())
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    assert {"setup.sh", "run_autograder"} <= names
    assert all(modes[name] & 0o111 for name in ("setup.sh", "run_autograder"))
    for needed in [
        "exercises/grade.py",
        "exercises/policy.toml",
        "exercises/checks/hidden/test_q1_hidden.py",
        "exercises/sandbox/runner.py",
        "vecenvs/__init__.py",
        "pyproject.toml",
    ]:
        assert needed in names, needed
    assert not any(name.startswith("exercises/solutions") for name in names)
    assert not any(name.startswith(("tests/", ".git")) for name in names)


def test_a_path_that_is_no_zip_is_refused(tmp_path):
    with pytest.raises(gradescope.GradescopeError, match="ending in .zip"):
        gradescope.build(tmp_path / "autograder.tar")


def test_the_students_id_and_time_come_from_gradescopes_metadata():
    metadata = {
        "created_at": "2026-12-19T10:00:00.0+00:00",
        "users": [{"email": "ann@uni.example", "id": 7, "name": "Ann", "sid": ""}],
    }
    assert gradescope.student_of(metadata) == ("ann@uni.example", metadata["created_at"])
    assert gradescope.student_of({"users": "nonsense"}) == ("student", None)
    assert gradescope.folder_name("../_evil name\n") == "evil-name-"
    assert gradescope.folder_name("...") == "student"


@pytest.mark.timeout(900)
def test_run_autograder_in_gradescopes_layout_grades_a_perfect_a_blank_and_a_hostile_submission(
    autograder_zip, tmp_path
):
    """Each submission graded as Gradescope would: the perfect one scores every check, the
    blank one none, and the hostile one (the solutions, plus a q1 that writes a forged
    results.json and reads the hidden checks) scores its checks and nothing it forged."""
    bwrap_or_skip()
    solutions = {
        path.name: path.read_text()
        for path in [
            *(EXERCISES / "solutions").glob("q*.py"),
            EXERCISES / "solutions/q6_sweep.json",
        ]
    }
    forged = json.dumps({"score": 1000, "tests": []})
    hostile_q1 = solutions["q1_chunks.py"] + (
        "\nimport contextlib, pathlib\n"
        "with contextlib.suppress(OSError):\n"
        "    pathlib.Path('/autograder/results').mkdir(parents=True, exist_ok=True)\n"
        f"    pathlib.Path('/autograder/results/results.json').write_text({forged!r})\n"
        "with contextlib.suppress(OSError):\n"
        "    LEAKED = pathlib.Path('/autograder/source/exercises/policy.toml').read_text()\n"
    )
    blank = {path.name: path.read_text() for path in (EXERCISES / "student").glob("q*.py")}
    submissions = {
        "perfect": solutions,
        "blank": blank,
        "hostile": {**solutions, "q1_chunks.py": hostile_q1},
    }
    expected_automatic = sum(question.max_points for question in POLICY.questions.values())
    expected = {"perfect": expected_automatic, "blank": 0.0, "hostile": expected_automatic}
    for name, files in submissions.items():
        results, log = grade_in_layout(autograder_zip, tmp_path / name, name, files)
        assert results["score"] == expected[name], log
        assert "student code runs in: bwrap" in log
    # Without a sandbox (as where bubblewrap cannot run), the hostile code's forged results.json
    # does not survive either: the grader writes the real one after its processes are gone.
    unsandboxed = build(tmp_path / "none.zip", "--sandbox", "none")
    results, log = grade_in_layout(
        unsandboxed, tmp_path / "none", "hostile", submissions["hostile"]
    )
    assert "student code runs in: none" in log
    assert results["score"] == expected_automatic, log


def grade_in_layout(
    zip_file: Path, autograder: Path, name: str, files: dict, seccomp: Path | None = None
) -> tuple[dict, str]:
    """Unpacks the zip as Gradescope's image build does, puts ``files`` in the submission, runs
    ``run_autograder`` in the layout (in a container without namespaces, given its ``seccomp``
    filter); returns the checked results.json and the log."""
    with zipfile.ZipFile(zip_file) as archive:
        archive.extractall(autograder / "source")
    for script in ("setup.sh", "run_autograder"):  # (zipfile does not keep modes)
        (autograder / "source" / script).chmod(0o755)
    # What Gradescope's image build does: setup.sh's venv (here, this checkout's), and the
    # run_autograder it copies to /autograder.
    (autograder / "source" / ".venv").symlink_to(Path(sys.prefix).resolve())  # (not via /tmp)
    shutil.copy2(autograder / "source" / "run_autograder", autograder / "run_autograder")
    (autograder / "submission").mkdir()
    for filename, text in files.items():
        (autograder / "submission" / filename).write_text(text)
    metadata = {"users": [{"email": f"{name}@uni.example", "sid": f"s-{name}"}]}
    (autograder / "submission_metadata.json").write_text(json.dumps(metadata))
    autograder.chmod(0o755)  # (Gradescope's /autograder: anyone may enter it)
    if seccomp is None:
        done = in_gradescope_layout(autograder, uuid.uuid4().hex)
    else:
        done = in_a_container_without_namespaces(autograder, seccomp)
    log = f"{name}:\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, log
    results = valid_results(autograder / "results" / "results.json")
    assert results["extra_data"]["seed"] == POLICY.student_seed(f"s-{name}")
    assert [part["part"] for part in results["extra_data"]["pending"]] == list(POLICY.manual)
    assert "Traceback" not in results["output"]
    return results, log


@pytest.mark.timeout(600)
def test_one_late_rule_on_gradescope_and_make_grade(tmp_path):
    """A submission two days late, graded by ``gradescope run`` (as in Gradescope's container)
    and by ``make grade`` with the same time: the autograder's score plus the hand scores (which
    Gradescope adds) is make grade's total once the hand scores are merged in. The penalty takes
    its share of the checks' points, never of the hand scores, on both paths."""
    from datetime import timedelta

    late = POLICY.late.due + POLICY.late.grace + timedelta(days=1, hours=3)  # 2 started days
    share = POLICY.late.penalty(late)
    assert 0 < share < 1
    files = {
        path.name: path.read_text()
        for path in [*(EXERCISES / "student").glob("q*.py")]
        + [EXERCISES / "solutions" / name for name in ("q1_chunks.py", "q2_overhead.py")]
    }
    checks = POLICY.questions["q1"].max_points + POLICY.questions["q2"].max_points
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    metadata = {"created_at": late.isoformat(), "users": [{"sid": "s-late", "email": "x@y"}]}
    (root / "submission_metadata.json").write_text(json.dumps(metadata))
    done = subprocess.run(
        [sys.executable, "-m", "exercises.gradescope", "run", "--root", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = valid_results(root / "results" / "results.json")
    assert results["score"] == round(checks * (1 - share), 2), results["output"]
    penalty = next(test for test in results["tests"] if test["name"].startswith("late penalty"))
    assert penalty["score"] == -round(checks * share, 2)

    # make grade: the same files and time, then the hand scores merged in.
    folder = tmp_path / "class" / "s-late"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    (tmp_path / "times.csv").write_text(f"student,submitted_at\ns-late,{late.isoformat()}\n")
    hand = {part.id: part.points / 2 for part in POLICY.manual.values()}
    (tmp_path / "hand.csv").write_text(
        "student,part,points\n" + "".join(f"s-late,{p},{v}\n" for p, v in hand.items())
    )
    grading = [sys.executable, "-m", "exercises.grade", str(tmp_path / "class")]
    grading += ["--csv", str(tmp_path / "scores.csv"), "--no-hints"]
    for options in (
        ["--submitted", str(tmp_path / "times.csv")],
        ["--manual", str(tmp_path / "hand.csv")],
    ):
        done = subprocess.run(
            [*grading, *options], cwd=REPO, capture_output=True, text=True, timeout=280, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "scores.csv", newline="") as file:
        row = next(iter(csv.DictReader(file)))
    assert float(row["total"]) == round(results["score"] + sum(hand.values()), 2)
    assert float(row["late_penalty"]) == -penalty["score"]


#: What a hostile q1 tries to show through a public check (the failure message of
#: test_covers_every_env_once_in_consecutive_chunks, which the student sees): the hidden checks'
#: names, the course's seed, anything else under /autograder it can read, and what refused it.
PEEKER = """
import os
import re

SEEN = []
for path in ("/autograder/source/exercises/policy.toml", "/autograder/submission_metadata.json"):
    try:
        SEEN += re.findall(r"seed\\s*=\\s*(\\S+)", open(path).read()) or ["read " + path]
    except OSError as error:
        SEEN.append(f"{os.path.basename(path)}: {type(error).__name__}")
hidden = "/autograder/source/exercises/checks/hidden"
try:
    for name in sorted(os.listdir(hidden)):
        SEEN.append(name)
        SEEN += re.findall(r"def (test_\\w+)", open(os.path.join(hidden, name)).read())
except OSError as error:
    SEEN.append(f"hidden: {type(error).__name__}")
for pid in os.listdir("/proc"):  # other processes' environments (the grader's is root's)
    try:
        SEEN += re.findall(r"seed\\S*", open(f"/proc/{pid}/environ").read())[:2]
    except OSError:
        pass


def split_by_cost(costs, num_workers):
    raise ValueError("LEAK " + " ".join(SEEN))
"""


@pytest.mark.timeout(900)
def test_where_no_namespace_can_be_made_student_code_runs_as_another_user_and_sees_nothing_hidden(
    autograder_zip, tmp_path
):
    """In a container that refuses namespaces (bubblewrap installed, and useless there), the
    log names the sandbox that ran, the unprivileged user, and does not advise installing
    bubblewrap; a q1 that tries to show the hidden checks' names and the course's seed through
    a public check shows only what refused it; the reference solutions score in full. Without
    that user (--sandbox none), the same q1 does show them: what keeps them hidden is the user."""
    bwrap_or_skip()
    seccomp = tmp_path / "no-namespaces.bpf"
    seccomp.write_bytes(no_namespaces_filter())
    hidden_names = {
        name
        for path in (EXERCISES / "checks" / "hidden").glob("test_*.py")
        for name in [path.name, *re.findall(r"def (test_\w+)", path.read_text())]
    }
    blank = {path.name: path.read_text() for path in (EXERCISES / "student").glob("q*.py")}
    peeker = {**blank, "q1_chunks.py": PEEKER}

    results, log = grade_in_layout(autograder_zip, tmp_path / "peeker", "peeker", peeker, seccomp)
    assert "student code runs in: user (as nobody, uid 65534; network off" in log, log
    assert "bwrap: installed, but it cannot create namespaces here" in log, log
    assert "Install bubblewrap" not in log, log
    shown = json.dumps(results)
    assert "LEAK policy.toml: PermissionError" in shown, shown  # it ran, and was refused
    assert "hidden: PermissionError" in shown, shown
    assert POLICY.seed not in shown and not any(name in shown for name in hidden_names), shown

    solutions = {
        path.name: path.read_text()
        for path in [
            *(EXERCISES / "solutions").glob("q*.py"),
            EXERCISES / "solutions/q6_sweep.json",
        ]
    }
    results, log = grade_in_layout(
        autograder_zip, tmp_path / "perfect", "perfect", solutions, seccomp
    )
    assert "student code runs in: user" in log
    assert results["score"] == sum(q.max_points for q in POLICY.questions.values()), log

    # The control: as root (--sandbox none), the same code reads them and shows them.
    unprotected = build(tmp_path / "none.zip", "--sandbox", "none")
    results, log = grade_in_layout(unprotected, tmp_path / "none", "peeker", peeker, seccomp)
    assert "student code runs in: none" in log, log
    assert POLICY.seed in json.dumps(results), results
