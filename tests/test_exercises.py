"""The graded exercises: the grader scores the reference solutions, untouched student files and
broken ones correctly, prints hints for failures, ends within its deadlines without leaving
processes behind, and survives a class of hostile submissions with every score right.

Each grading runs ``python -m exercises.grade`` as a user would, over a temp folder of
submissions (one subfolder per student).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
QUESTIONS = ("q1", "q2", "q3", "q4", "q5")

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

# A student who got some things wrong: q1 drops the remainder, q3 returns lists and reads the
# pipes with no deadline (a hang) and ignores ok, q4 lets an env's exception kill the worker,
# q5 has the functions right and two answers wrong.
BROKEN = {
    "q1_chunks.py": """
        def split_envs(num_envs, num_workers):
            size = num_envs // num_workers
            return [range(w * size, (w + 1) * size) for w in range(num_workers)]
    """,
    "q3_step_wait.py": """
        from exercises.pipe_env import PipeVecEnv

        class MyPipeVecEnv(PipeVecEnv):
            def step_wait(self, timeout=None):
                payloads = [pipe.recv()[1] for pipe in self.parent_pipes]
                self.waiting = False
                observations, rewards, terminations, truncations, infos = zip(*payloads)
                return list(observations), list(rewards), list(terminations), list(truncations), list(infos)
    """,
    "q4_worker_errors.py": """
        from exercises.pipe_env import Command

        def careful_worker(pipe, env_fn):
            env = env_fn()
            while True:
                command, data = pipe.recv()
                if command is Command.CLOSE:
                    pipe.send((True, None))
                    break
                if command is Command.RESET:
                    pipe.send((True, env.reset(seed=data)))
                else:
                    pipe.send((True, env.step(data)))
            env.close()
    """,
}

# A student whose code hangs at import where no signal reaches it (SIGALRM blocked), after
# starting a child process of its own (MARKER is replaced by a marker the test looks for): only
# the grader's hard deadline ends it, sandbox and all.
HANGING_Q1 = """
    import signal
    import subprocess
    import sys
    import time

    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # MARKER"])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(600)
"""


def make_submissions(root: Path, students: dict[str, dict[str, str]]) -> Path:
    """``root/<student>/``: the untouched student files, with some replaced."""
    for student, replaced in students.items():
        folder = root / student
        shutil.copytree(EXERCISES / "student", folder, ignore=shutil.ignore_patterns("__pycache__"))
        for filename, source in replaced.items():
            (folder / filename).write_text(textwrap.dedent(source))
    return root


def grade(
    submissions: Path, *options: str, marker: str = "", timeout: float = 150
) -> subprocess.CompletedProcess:
    environment = {**os.environ, "GRADE_TEST_MARKER": marker}
    return subprocess.run(
        [sys.executable, "-m", "exercises.grade", str(submissions), *options],
        check=False,
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def table_row(output: str, student: str) -> list[str]:
    for line in output.splitlines():
        if line.split()[:1] == [student]:
            return line.split()
    raise AssertionError(f"no row for {student} in the grader's table:\n{output}")


def leftover_processes(marker: str, since: float) -> list[psutil.Process]:
    """Processes of a grading that still run: the grader's and the judges' (``GRADE_TEST_MARKER``
    in their environment), any process of a student sandbox started since ``since``
    (``VECENVS_SANDBOX`` in theirs), and any with ``marker`` on its command line."""
    found = []
    for process in psutil.process_iter():
        try:
            environment = process.environ()
            if (
                environment.get("GRADE_TEST_MARKER") == marker
                or marker in " ".join(process.cmdline())
                or ("VECENVS_SANDBOX" in environment and process.create_time() >= since - 1)
            ) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_grader_scores_reference_untouched_and_broken_submissions(tmp_path):
    solutions = {path.name: path.read_text() for path in (EXERCISES / "solutions").glob("q*.py")}
    submissions = make_submissions(
        tmp_path / "class",
        {
            "alice": solutions,  # the reference solutions
            "bob": {},  # the untouched student files
            "carol": {
                **solutions,
                **BROKEN,
                "q5_read_profile.py": solutions["q5_read_profile.py"]
                .replace(
                    'SUBPROC_PARENT_MOSTLY = busiest(_PROFILES[SUBPROC], "parent")',
                    'SUBPROC_PARENT_MOSTLY = "pipe & shm I/O"',
                )
                .replace('WHY_SUBPROC_WORKERS_WAIT = "b"', 'WHY_SUBPROC_WORKERS_WAIT = "c"'),
            },
        },
    )
    marker, since = uuid.uuid4().hex, time.time()
    done = grade(
        submissions, "--csv", str(tmp_path / "scores.csv"), "--test-timeout", "20", marker=marker
    )
    output = done.stdout
    assert done.returncode == 0, done.stdout + done.stderr

    assert table_row(output, "alice") == [
        "alice",
        "3/3",
        "5/5",
        "5/5",
        "5/5",
        "5/5",
        "23/23",
        "ok",
    ], output
    assert table_row(output, "bob") == ["bob", "0/3", "0/5", "0/5", "0/5", "0/5", "0/23", "ok"], (
        output
    )
    assert table_row(output, "carol") == [
        "carol",
        "1/3",
        "5/5",
        "2/5",
        "1/5",
        "3/5",
        "12/23",
        "ok",
    ], output

    # The hints a student can act on, per failed check.
    assert "not done yet: Exercise 3: write step_wait" in output
    assert "observations is a list: expected a numpy array" in output  # carol's shapes
    assert "did not return within 8 s" in output  # carol's hang
    assert "died while answering STEP" in output  # carol's worker
    assert "SUBPROC_PARENT_MOSTLY = 'pipe & shm I/O': not where most of the time goes" in output
    assert "alice:" not in output, "the reference solutions should need no hint"

    with open(tmp_path / "scores.csv", newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert [rows["carol"][q] for q in QUESTIONS] == ["1", "5", "2", "1", "3"]
    assert rows["alice"]["total"] == rows["alice"]["out_of"] == "23"
    assert leftover_processes(marker, since) == []


def test_hard_deadline_kills_a_hung_student_and_everything_it_started(tmp_path):
    marker, since = uuid.uuid4().hex, time.time()
    submissions = make_submissions(
        tmp_path / "class", {"dave": {"q1_chunks.py": HANGING_Q1.replace("MARKER", marker)}}
    )
    done = grade(
        submissions, "--student-timeout", "6", "--test-timeout", "60", marker=marker, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert table_row(done.stdout, "dave") == [
        "dave",
        "0/3",
        "0/5",
        "0/5",
        "0/5",
        "0/5",
        "0/23",
        "timed",
        "out",
    ]
    assert "did not finish within 6 s" in done.stdout
    # The judge, the student's sandbox and the child its code started were all killed.
    assert leftover_processes(marker, since) == []


def test_reference_solutions_pass_when_checked_directly():
    """What a student runs on their own work: ``pytest exercises/checks --submission DIR``."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "exercises/checks",
            "-q",
            "--submission",
            "exercises/solutions",
        ],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "23 passed" in done.stdout


# ------------------------------------------------------------------------------------------------
# A hostile class: every trick a student could try, each with the score it must get.
# ------------------------------------------------------------------------------------------------

#: Every hostile file starts with this; its constants are filled in per test (``hostile()``).
PRELUDE = """
import glob
import os
import signal
import subprocess
import sys
from pathlib import Path


def attempt(action):
    # Each trick is tried quietly: a failed trick must not be what costs the points.
    try:
        action()
    except BaseException:
        pass
"""

# Kills its parent when imported; the rest of the file is the reference solution. Its parent
# is the sandbox's first process, which such a signal cannot kill, and the grader is not in view.
KILLER_PARENT = """
os.kill(os.getppid(), signal.SIGKILL)
"""

# Kills its own process group when imported (the rest is right): that question's checks fail
# with a message saying how the process ended, and only that question's.
KILLER_GROUP = """
os.kill(0, signal.SIGKILL)
"""

# Takes its answers from the solutions: by import, and by reading the file where it is on the
# grader's disk.
IMPORTER_Q1 = """
from exercises.solutions.q1_chunks import split_envs  # noqa: F401
"""
IMPORTER_Q2 = """
exec(compile(Path(REPO, "exercises", "solutions", "q2_overhead.py").read_text(), "q2_overhead", "exec"))
"""

# Writes a JUnit report in which every check passed 40 times, wherever a report might be: on the
# command lines of the processes it can see, in the temp folders, at import and again at exit.
FORGER = """
import atexit

CASES = "".join(
    f'<testcase classname="exercises.checks.test_{question}_x" name="{name}" file="exercises/checks/test_{question}_x.py" time="0.1"/>'
    for question, names in CHECKS.items() for name in names for _ in range(40))
FORGED = f'<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="920">{CASES}</testsuite></testsuites>'


def forge():
    targets = set(glob.glob("/tmp/**/report.xml", recursive=True)) | set(glob.glob("/tmp/grade-*/report.xml"))
    for cmdline in glob.glob("/proc/*/cmdline"):
        try:
            for argument in Path(cmdline).read_bytes().split(b"\\0"):
                if argument.startswith(b"--junitxml="):
                    targets.add(argument.split(b"=", 1)[1].decode())
        except OSError:
            pass
    for target in targets:
        attempt(lambda target=target: Path(target).write_text(FORGED))


forge()
atexit.register(forge)
"""

# Appends a hook to the checks' conftest.py that would pass every check of every later student,
# and tries to change what the checks import.
EDITOR = """
import exercises

HOOK = '''
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.outcome = "passed"
    return report
'''
for conftest in (Path(exercises.__file__).parent / "checks" / "conftest.py",
                 Path(REPO, "exercises", "checks", "conftest.py")):
    attempt(lambda conftest=conftest: conftest.open("a").write(HOOK))
attempt(lambda: Path(exercises.__file__).with_name("pipe_env.py").write_text("raise SystemExit"))
attempt(lambda: Path(REPO, "exercises", "pipe_env.py").write_text("raise SystemExit"))
"""

# Copies its neighbour's answer (by reading the neighbour's folder), then overwrites every file
# of the neighbour's it can find, and any other q*.py it can reach outside its own copy.
VANDAL_Q1 = """
exec(compile(Path(CLASS, "07-victim", "q1_chunks.py").read_text(), "stolen", "exec"))
"""
VANDAL_Q5 = """
for path in glob.glob(str(Path(CLASS, "*", "q*.py"))) + glob.glob("/*/q*.py") + glob.glob("/*/*/q*.py"):
    if not path.startswith(os.getcwd()):
        attempt(lambda path=path: Path(path).write_text("raise SystemExit('vandalised')"))
"""

# Leaves 50 processes in sessions of their own, and a detached one that waits for the grader to
# write the CSV, then rewrites it and leaves a file in the class folder. Its answer to q1 is right.
ESCAPER = """
sleep = [program for program in ("/usr/bin/sleep", "/bin/sleep") if os.path.exists(program)][0]
for _ in range(50):
    subprocess.Popen([f"sleep-{MARKER}", "600"], executable=sleep, start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
LATER = f'''# {MARKER}
import time
from pathlib import Path
csv = Path({str(CSV)!r})
for _ in range(1200):  # two minutes at most: a test that fails must not leave it looping
    if csv.exists():
        break
    time.sleep(0.1)
time.sleep(0.2)
csv.write_text("student,total\\\\nescaper,999\\\\n")
Path({str(CLASS)!r}, "late-{MARKER}").write_text("still here")
'''
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", LATER])
    os._exit(0)
os.wait()
"""

# Ends its process as soon as it is imported: costs question 4, nothing else.
CRASHER = """
import os
os._exit(1)
"""

# Objects equal to everything, and stubs that return the right shapes or raise the right errors
# without doing the work: they passed 8 checks before the checks compared values from here.
CHEATER_Q1 = """
def split_envs(num_envs, num_workers):
    raise ValueError("I refuse everything")
"""
CHEATER_Q2 = """
class Yes(float):
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__


def throughput(num_envs, steps, seconds):
    return Yes(0)


predicted_speedup = t_os_from_speedup = break_even_num_envs = lambda *args, **kwargs: Yes(0)
"""
CHEATER_Q3 = """
import numpy as np

from exercises.pipe_env import PipeVecEnv, WorkerError, WorkerTimeout


class MyPipeVecEnv(PipeVecEnv):
    calls = 0

    def step_wait(self, timeout=None):
        self.waiting = False
        self.calls += 1
        if self.calls == 2:
            if timeout is not None:
                raise WorkerTimeout([2], timeout)
            raise WorkerError(1, "deliberate failure in step #2")
        return (np.zeros((self.num_envs, 5), np.float32), np.zeros(self.num_envs), np.zeros(self.num_envs, bool),
                np.zeros(self.num_envs, bool), [{}] * self.num_envs)
"""
CHEATER_Q4 = """
from exercises.pipe_env import Command


def careful_worker(pipe, env_fn):
    env = env_fn()
    try:
        while True:
            command, data = pipe.recv()
            if command is Command.CLOSE:
                pipe.send((True, None))
                return
            pipe.send((True, (0, {})) if command is Command.RESET else (True, (0, 0.0, False, False, {})))
    except EOFError:
        pass
    finally:
        env.close()
"""
CHEATER_Q5 = """
class Yes:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__


class YesNumber(float):
    def __eq__(self, other):
        return True
    def __sub__(self, other):
        return 0.0
    __hash__ = float.__hash__


def shares(rows, process):
    return Yes()


def busiest(rows, process):
    return Yes()


SUBPROC_PARENT_MOSTLY = SUBPROC_WORKERS_MOSTLY = POOL_WORKERS_MOSTLY = WHY_SUBPROC_WORKERS_WAIT = Yes()
SUBPROC_WORKERS_ENV_SHARE = YesNumber(0.0)
"""


def hostile(*parts: str, **constants: object) -> str:
    """A student file: the prelude, ``constants`` as assignments, then ``parts`` in order."""
    assignments = "".join(f"{name} = {value!r}\n" for name, value in constants.items())
    return (
        textwrap.dedent(PRELUDE)
        + assignments
        + "".join(textwrap.dedent(part) + "\n" for part in parts)
    )


def tree_contents(*folders: Path, leave_out: tuple[Path, ...] = ()) -> dict[Path, bytes]:
    """path -> contents of every file under ``folders`` (caches aside): what "nothing changed" means."""
    return {
        path: path.read_bytes()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path not in leave_out
    }


def restore(before: dict[Path, bytes], *folders: Path) -> list[str]:
    """Puts ``folders`` back as ``before`` had them; returns what had changed. (Should a sandbox
    ever fail, the hostile students must not leave this checkout damaged.)"""
    now = tree_contents(*folders)
    changed = sorted(
        str(path) for path in before.keys() | now.keys() if before.get(path) != now.get(path)
    )
    for path in now.keys() - before.keys():
        path.unlink()
    for path, contents in before.items():
        if now.get(path) != contents:
            path.write_bytes(contents)
    return changed


def bwrap_or_skip() -> None:
    from exercises.sandbox import isolation

    sandbox = isolation.choose()
    if sandbox.kind != "bwrap":
        message = f"bubblewrap is needed to grade hostile code: {sandbox.warning}"
        if os.environ.get("CI"):
            pytest.fail(message)  # .ci/run installs it: its absence in CI is a failure
        pytest.skip(message)


# The grader is given 400 s below (a class of five on a loaded machine); pytest-timeout's
# default 120 s would stop the test before the grader's own deadline.
@pytest.mark.timeout(450)
def test_a_class_of_hostile_submissions_scores_exactly_and_harms_nothing(tmp_path):
    bwrap_or_skip()
    marker, since = uuid.uuid4().hex, time.time()
    class_dir, scores = tmp_path / "class", tmp_path / "class" / "scores.csv"
    solutions = {path.name: path.read_text() for path in (EXERCISES / "solutions").glob("q*.py")}
    from exercises.grade import collect_checks

    checks = collect_checks()  # the forger writes a report with the real check names
    constants = {
        "MARKER": marker,
        "CLASS": str(class_dir),
        "REPO": str(REPO),
        "CSV": str(scores),
        "CHECKS": checks,
    }

    def with_solution(filename: str, *parts: str) -> str:
        return solutions[filename] + hostile(*parts, **constants)

    make_submissions(
        class_dir,
        {
            "01-killer": {
                "q1_chunks.py": with_solution("q1_chunks.py", KILLER_PARENT),
                "q5_read_profile.py": with_solution("q5_read_profile.py", KILLER_GROUP),
            },
            "02-importer": {
                "q1_chunks.py": hostile(IMPORTER_Q1, **constants),
                "q2_overhead.py": hostile(IMPORTER_Q2, **constants),
            },
            "03-forger": {"q1_chunks.py": hostile(FORGER, **constants)},
            "04-editor": {
                "q1_chunks.py": hostile(EDITOR, **constants),
                "q2_overhead.py": solutions["q2_overhead.py"],
            },
            "05-blank": {},
            "06-vandal": {
                "q1_chunks.py": hostile(VANDAL_Q1, **constants),
                "q5_read_profile.py": with_solution("q5_read_profile.py", VANDAL_Q5),
            },
            "07-victim": {name: solutions[name] for name in ("q1_chunks.py", "q5_read_profile.py")},
            "08-escaper": {"q1_chunks.py": with_solution("q1_chunks.py", ESCAPER)},
            "09-crasher": {
                "q3_step_wait.py": solutions["q3_step_wait.py"],
                "q4_worker_errors.py": CRASHER,
            },
            "10-cheater": {
                "q1_chunks.py": CHEATER_Q1,
                "q2_overhead.py": CHEATER_Q2,
                "q3_step_wait.py": CHEATER_Q3,
                "q4_worker_errors.py": CHEATER_Q4,
                "q5_read_profile.py": CHEATER_Q5,
            },
        },
    )
    checkout = (EXERCISES, REPO / "vecenvs")
    before = tree_contents(class_dir, *checkout)
    try:
        done = grade(
            class_dir, "--csv", str(scores), "--test-timeout", "20", marker=marker, timeout=400
        )
    finally:
        changed_in_checkout = restore(
            {
                path: contents
                for path, contents in before.items()
                if not path.is_relative_to(class_dir)
            },
            *checkout,
        )
    assert changed_in_checkout == [], "student code changed the checkout (now restored)"
    output = done.stdout
    assert done.returncode == 0, output + done.stderr
    expected = {  # q1 q2 q3 q4 q5 total
        "01-killer": [
            "3/3",
            "0/5",
            "0/5",
            "0/5",
            "0/5",
            "3/23",
        ],  # its parent survives; q5 ended itself
        "02-importer": ["0/3", "0/5", "0/5", "0/5", "0/5", "0/23"],  # no solutions in reach
        "03-forger": ["0/3", "0/5", "0/5", "0/5", "0/5", "0/23"],  # no report in reach
        "04-editor": ["0/3", "5/5", "0/5", "0/5", "0/5", "5/23"],  # its own work only
        "05-blank": ["0/3", "0/5", "0/5", "0/5", "0/5", "0/23"],  # unaffected by the editor
        "06-vandal": ["0/3", "0/5", "0/5", "0/5", "5/5", "5/23"],  # copying failed, vandalism too
        "07-victim": ["3/3", "0/5", "0/5", "0/5", "5/5", "8/23"],  # unharmed
        "08-escaper": ["3/3", "0/5", "0/5", "0/5", "0/5", "3/23"],
        "09-crasher": ["0/3", "0/5", "5/5", "0/5", "0/5", "5/23"],  # the crash cost q4 only
        "10-cheater": ["0/3", "0/5", "0/5", "0/5", "0/5", "0/23"],  # lies and stubs earn nothing
    }
    for student, cells in expected.items():
        assert table_row(output, student) == [student, *cells, "ok"], output

    # Why each lost what it lost, as the student reads it.
    for reason in [
        "the process running your code ended (killed by signal SIGKILL) during importing q5_read_profile.py",
        "No module named 'exercises.solutions'",
        f"No such file or directory: '{REPO}/exercises/solutions/q2_overhead.py'",
        f"No such file or directory: '{class_dir}/07-victim/q1_chunks.py'",
        "the process running your code ended (exit code 1) during importing q4_worker_errors.py",
        "throughput(8 envs, 100 steps, 0.5 s) = 0.0: expected 1600",  # a number, not a liar
        "busiest(rows of 'subproc, CartPole-v1, N=8', 'parent') = <submission_q5_read_profile.Yes object",
        "split_envs(4, 2) raised ValueError: I refuse everything",
        "step 1 (before env 2 hangs), env 0: your results differ from stepping env 0 by hand",
        "RESET's payload (0, {}) does not start with the env's observation",
    ]:
        assert reason in output, f"{reason!r} not in:\n{output}"

    # No process of the grading survives it; and had the detached one survived, it would have
    # rewritten the CSV within this second.
    assert leftover_processes(marker, since) == []
    csv_text = scores.read_text()
    time.sleep(1)
    assert leftover_processes(marker, since) == []
    assert scores.read_text() == csv_text
    with open(scores, newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert {student: rows[student]["total"] for student in expected} == {
        student: cells[-1].split("/")[0] for student, cells in expected.items()
    }
    assert all(row["out_of"] == "23" for row in rows.values())

    # Nothing outside each student's own copy changed: the other students' folders (and, above,
    # the checks, the solutions, the package); and no file appeared.
    assert tree_contents(class_dir, leave_out=(scores,)) == {
        path: contents for path, contents in before.items() if path.is_relative_to(class_dir)
    }


def test_the_grader_counts_each_check_once_whatever_the_report_says(tmp_path):
    """A report forged to list each check 40 times, and checks that do not exist, still gives
    each question at most its number of checks."""
    from exercises.grade import StudentResult, read_report

    checks = {"q1": ["test_a", "test_b"], "q2": ["test_c"]}
    cases = "".join(
        f'<testcase classname="exercises.checks.test_{question}_x" name="{name}"/>'
        for question, names in checks.items()
        for name in names
        for _ in range(40)
    )
    cases += '<testcase classname="exercises.checks.test_q1_x" name="test_free_points"/>'
    cases += '<testcase classname="exercises.checks.test_q9_x" name="test_a"/>'
    cases += '<testcase classname="exercises.checks.test_q2_x" name="test_c"><failure message="no"/></testcase>'
    report = tmp_path / "report.xml"
    report.write_text(
        f'<?xml version="1.0"?><testsuites><testsuite>{cases}</testsuite></testsuites>'
    )
    result = StudentResult("forger")
    read_report(report, checks, result)
    assert result.passed == {"q1": 2, "q2": 1}
    report.write_text("<testsuites><testsuite><testcase")  # cut short
    result = StudentResult("forger")
    read_report(report, checks, result)
    assert result.passed == {"q1": 0, "q2": 0} and result.status == "crashed"


@pytest.mark.parametrize("kind", ["unshare", "none"])
def test_without_bubblewrap_the_grader_warns_scores_right_and_leaves_nothing_running(
    tmp_path, kind
):
    """The fallbacks cannot hide the machine's files from a student, and say so; but they still
    score right and end every process a student starts, setsid or not."""
    from exercises.sandbox import isolation

    try:
        isolation.choose(kind)
    except RuntimeError as error:
        pytest.skip(str(error))
    marker, since = uuid.uuid4().hex, time.time()
    class_dir = tmp_path / "class"
    solutions = {path.name: path.read_text() for path in (EXERCISES / "solutions").glob("q*.py")}
    constants = {"MARKER": marker, "CLASS": str(class_dir), "CSV": str(tmp_path / "elsewhere.csv")}
    make_submissions(
        class_dir,
        {
            "escaper": {
                "q1_chunks.py": solutions["q1_chunks.py"] + hostile(ESCAPER, **constants),
                "q2_overhead.py": solutions["q2_overhead.py"],
            }
        },
    )
    done = grade(class_dir, "--sandbox", kind, marker=marker)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"student code runs in: {kind}" in done.stderr
    assert "WARNING:" in done.stderr and "apt-get install bubblewrap" in done.stderr
    assert table_row(done.stdout, "escaper") == [
        "escaper",
        "3/3",
        "5/5",
        "0/5",
        "0/5",
        "0/5",
        "8/23",
        "ok",
    ]
    assert leftover_processes(marker, since) == []


def test_the_grader_notices_when_the_checks_change(tmp_path):
    """What stops grading when a student's code changed the checks (possible only without
    bubblewrap): a fingerprint of every file but caches and the submissions."""
    from exercises.grade import fingerprint

    checks, submissions = tmp_path / "checks", tmp_path / "checks" / "submissions"
    (checks / "__pycache__").mkdir(parents=True)
    submissions.mkdir()
    (checks / "conftest.py").write_text("# the checks\n")
    before = fingerprint(checks, leave_out=submissions)
    (checks / "__pycache__" / "conftest.pyc").write_bytes(b"cache")
    (submissions / "scores.csv").write_text("student,total\n")
    assert fingerprint(checks, leave_out=submissions) == before
    with open(checks / "conftest.py", "a") as file:
        file.write("def pytest_runtest_makereport(item, call): ...\n")
    assert fingerprint(checks, leave_out=submissions) != before


def test_a_sandbox_that_cannot_start_is_not_blamed_on_the_student(tmp_path, monkeypatch):
    """Python hidden from the sandbox: the checks say the sandbox failed, before any student
    code ran, instead of telling every student that their code crashed."""
    bwrap_or_skip()
    from exercises.sandbox import client, isolation

    monkeypatch.setattr(isolation, "python_folders", lambda: ())
    student = client.StudentProcess(EXERCISES / "solutions", isolation.choose("bwrap"))
    try:
        with pytest.raises(client.SandboxFailed, match="bwrap sandbox could not start Python"):
            student.module("q1_chunks.py").get("split_envs")
    finally:
        student.stop()
