"""Grade a class: run every check, public and hidden, on each student's work; write the scores.

    python -m exercises.grade submissions/ [--csv scores.csv] [--jobs 4]   # a subfolder a student
    python -m exercises.grade submissions/ --student s-017        # grade one student again
    python -m exercises.grade submissions/ --manual hand.csv      # add the hand scores: no check runs

A student's folder holds their ``q*.py`` files (and ``q6_sweep.json``, and their notebooks), or
is a clone of their copy of the student release, with the work in ``exercises/student/`` and the
notebooks in ``notebooks/``; either may sit inside one folder of the submission (as uploaded).
Points come from the policy file (``exercises/policy.toml``: points per check, the parts graded
by hand, the late penalty). One run writes, from the same numbers: the table in the terminal,
the gradebook CSV (``--csv``), and in ``--feedback`` (by default ``SUBMISSIONS/_feedback``) a
folder per student with ``feedback.txt`` and Gradescope's ``results.json``, plus
``_manual-scores.csv`` (the sheet for the parts graded by hand: fill it in and give it back with
``--manual``), ``_manual-parts.txt`` (question 6's explanations and the notebooks' predictions,
to read) and ``_grading.json`` (what each student's checks found, for the next run).

Every submission is treated as hostile. The grader copies a student's regular files to a private
folder and runs the checks on the copy in a pytest process of its own, the *judge*, which never
imports a student's file: each question's code runs in a sandboxed process of its own
(``exercises/sandbox``) that sees only that copy, and answers with plain data. So a crash costs
one question, and nothing a submission does reaches the scores: the judge's JUnit report is where
no student process can see it, and the grader counts each known check at most once.

A check is stopped after ``--test-timeout`` seconds, a student's whole run after
``--student-timeout``; then everything that student's code started is killed (the sandbox's PID
namespace ends; the grader and the judge are subreapers, which catches what escaped its process
group) and what did not finish scores 0. With ``--jobs N``, N students are graded at once, each
by a worker process of its own that is the subreaper of that student's processes alone.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from xml.etree import ElementTree

import psutil

from exercises.grading import inputs, materials, policy, reports, saved
from exercises.grading.inputs import RELEASE_NOTEBOOKS, RELEASE_WORK  # noqa: F401  (re-exported)
from exercises.grading.materials import Materials
from exercises.grading.policy import Check, Policy
from exercises.grading.scores import Grade, ManualScore, Outcome
from exercises.sandbox import isolation, processes
from exercises.sandbox.client import SandboxFailed, StudentProcess

EXERCISES = Path(__file__).resolve().parent
CHECKS = EXERCISES / "checks"
REPO = EXERCISES.parent

#: A check's question, from its file name: ``test_q3_step_wait.py`` -> ``q3``.
QUESTION = re.compile(r"test_(q\d+)_")
#: pytest over the checks, as the grader runs it (options follow; reports in JUnit's xunit1).
PYTEST = [sys.executable, "-m", "pytest", str(CHECKS), "-q", "-p", "no:cacheprovider"]
PYTEST += ["-o", "junit_family=xunit1"]
#: What judges a student's files: when any of it changes, results saved before are out of date.
JUDGING_CODE = (CHECKS, EXERCISES / "sandbox", EXERCISES / "pipe_env.py", EXERCISES / "data")
#: The most students graded at once (``--jobs``).
MAX_JOBS = 256


@dataclass
class StudentResult:
    """How the judge did on one student's folder. ``status``: ``"ok"``, ``"timed out"`` (killed
    at the deadline), ``"crashed"`` (no report), ``"refused"`` (no work found in it, see
    :func:`exercises.grading.inputs.find_work`), ``"tampered"`` (the checks changed while it was
    graded) or ``"not graded"``. ``passed``: the checks that passed; ``hints``: check -> the
    first line of its failure; ``notes``: about the whole submission."""

    student: str
    passed: set[Check] = field(default_factory=set)
    hints: dict[Check, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    status: str = "ok"
    output: str = ""  # the judge's own output, for when the report is missing


def check_of(nodeid: str) -> Check | None:
    """The check a pytest node id or JUnit class name names (``checks/hidden/test_q1_x.py::
    test_a`` or ``checks.hidden.test_q1_x``), or None for anything else."""
    path, _, name = nodeid.partition("::")
    parts = re.split(r"[/.]", path.removesuffix(".py"))
    match = QUESTION.match(parts[-1]) if parts else None
    if not match:
        return None
    return Check(match.group(1), name, hidden="hidden" in parts[:-1])


def collect_checks() -> list[Check]:
    """Every check, public and hidden, by asking pytest what it would run."""
    listing = subprocess.run(
        [*PYTEST, "--collect-only"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    found = [check_of(line.strip()) for line in listing.stdout.splitlines() if "::" in line]
    checks = sorted({check for check in found if check is not None and check.name})
    if not checks:
        raise SystemExit(f"no checks found in {CHECKS}:\n{listing.stdout}{listing.stderr}")
    return checks


def grade_student(
    folder: Path,
    checks: list[Check],
    sandbox: isolation.Sandbox,
    test_timeout: float,
    student_timeout: float,
    copy: Path,
    seed: int,
    student_id: str = "",
) -> StudentResult:
    """Runs every check on ``copy`` (the staged copy of ``folder``), within the deadlines; the
    random cases come from ``seed``, Part B's letters from ``student_id`` (exercises/options.py)."""
    result = StudentResult(folder.name)
    # Private to the grader: the student's processes never see this folder (with bwrap), and
    # the judge only reads the copy.
    with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
        report, output = Path(scratch, "report.xml"), Path(scratch, "log")
        command = [*PYTEST, f"--submission={copy}", f"--sandbox={sandbox.kind}", f"--seed={seed}"]
        command += [f"--timeout={test_timeout:g}", f"--junitxml={report}"]
        command += [f"--student={student_id}"]
        with open(output, "w+", encoding="utf-8", errors="replace") as log:
            # A session of its own: the process group that the deadline kills.
            judge = subprocess.Popen(
                command,
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            try:
                judge.wait(timeout=student_timeout)
            except subprocess.TimeoutExpired:
                result.status = "timed out"
            finally:
                # Also after a normal exit: anything left behind goes too, wherever it went.
                processes.end_group(judge)
            log.seek(0)
            result.output = log.read()[-20_000:]
        if result.status == "timed out":
            result.notes.append(
                f"the checks did not finish within {student_timeout:g} s and were stopped; "
                "does your code hang somewhere no check can interrupt?"
            )
        elif not report.exists():
            result.status = "crashed"
            result.notes.append("the checks did not run:\n" + result.output[-2000:])
        else:
            read_report(report, checks, result)
    return result


def read_report(report: Path, checks: list[Check], result: StudentResult) -> None:
    """Fills ``result`` from a JUnit report: each known check that passed, counted once, so no
    question can score more than its checks' points whatever the report says."""
    known = set(checks)
    try:
        cases = list(ElementTree.parse(report).iter("testcase"))
    except ElementTree.ParseError as error:
        result.status = "crashed"
        result.notes.append(f"the checks' report could not be read ({error})")
        cases = []
    failed: set[Check] = set()
    for case in cases:
        check = check_of(f"{case.get('classname', '')}::{case.get('name', '')}")
        if check not in known:
            continue  # not one of the checks we collected
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None and case.find("skipped") is None:
            result.passed.add(check)
        else:  # failed (or skipped) once is failed, however often it is also said to pass
            failed.add(check)
            result.hints[check] = "skipped" if problem is None else _hint(problem)
    result.passed -= failed


def _hint(problem: ElementTree.Element) -> str:
    """The first line of a failure's message (and its last, when it has several)."""
    message = (problem.get("message") or problem.text or "").strip()
    if re.search(r"\[\+\d+ more lines?; full report in element text\]$", message):
        # pytest keeps only the first line in the attribute; the text has all of it: a message
        # of ours whole, or a traceback whose error lines start with "E ".
        text = problem.text or message
        errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
        message = "\n".join(errors) if errors else text.strip()
    setup = re.match(r'^failed on (setup|teardown) with "(.*)"$', message, re.DOTALL)
    message = setup.group(2) if setup else message
    message = re.sub(r"^(Failed|AssertionError): ", "", message)  # pytest's prefixes
    lines = [line.strip() for line in message.splitlines() if line.strip()] or ["failed"]
    # Keep the check's own message, not pytest's rewrite of the assert statement below it.
    cut = next((i for i, line in enumerate(lines) if i and line.startswith("assert ")), len(lines))
    lines = lines[:cut]
    hint = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    return hint[:300]


def fingerprint(*folders: Path, leave_out: Path | None = None) -> str:
    """A hash of every file under ``folders`` (not caches): the checks and what they import."""
    digest = hashlib.sha256()
    for path in sorted(path for folder in folders for path in folder.rglob("*")):
        left_out = leave_out is not None and path.is_relative_to(leave_out)
        if path.is_file() and "__pycache__" not in path.parts and not left_out:
            digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------------
# One student, and a class of them, serially or N at once
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """What grading one student needs: picklable, for a worker process."""

    folder: Path  # resolved
    checks: tuple[Check, ...]
    sandbox: isolation.Sandbox
    test_timeout: float
    student_timeout: float
    seed: int
    student_id: str = ""  # (Part B's letters are lettered for it: exercises/options.py)


@dataclass
class Graded:
    """One student graded: what the judge found, what was collected for grading by hand, and a
    hash of the files it was graded on."""

    result: StudentResult
    collected: Materials | None = None
    submission: str = ""


def grade_one(job: Job) -> Graded:
    """Stages ``job.folder``, runs the checks on the copy, collects the parts graded by hand;
    then kills and reaps whatever the student's code left behind (this process is a subreaper:
    orphans come here). Messages never name the grader's private folders."""
    before = {child.pid for child in psutil.Process().children()}
    print(f"grading {reports.plain(job.folder.name)} ...", file=sys.stderr, flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
            copy = Path(scratch, "submission")
            staged, refused = inputs.stage(job.folder, copy)
            notes = [f"files: {note}" for note in staged]
            if refused:
                result = StudentResult(job.folder.name, status="refused", notes=[refused])
            else:
                result = grade_student(
                    job.folder,
                    list(job.checks),
                    job.sandbox,
                    job.test_timeout,
                    job.student_timeout,
                    copy,
                    job.seed,
                    job.student_id,
                )
            result.notes[:0] = notes
            collected = None
            if result.status in ("ok", "crashed", "refused"):
                collected = materials.collect(copy, job.sandbox)
            _hide_paths(result, collected, copy)
            return Graded(result, collected, inputs.files_digest(copy))
    finally:
        processes.kill_descendants(spare=before)
        processes.reap_zombies(spare=before)


def _hide_paths(result: StudentResult, collected: Materials | None, copy: Path) -> None:
    """The grader's private copy, named in a message, as the student knows it."""

    def hidden(text: str) -> str:
        return text.replace(f"{copy}/", "").replace(str(copy), "your submission")

    result.hints = {check: hidden(hint) for check, hint in result.hints.items()}
    result.notes = [hidden(note) for note in result.notes]
    result.output = hidden(result.output)
    if collected is not None:
        collected.problems = [hidden(problem) for problem in collected.problems]


def _tampered(folder: str, alone: bool) -> Graded:
    result = StudentResult(folder, status="tampered")
    who = "this student" if alone else "this student, or another graded at the same time,"
    result.notes.append(
        f"the checks or the files they import changed while {who} was graded; grading stopped. "
        "Restore them (git checkout exercises vecenvs) and grade in a sandbox."
    )
    return Graded(result)


def grade_serially(jobs: list[Job], unchanged: Callable[[], bool]) -> Iterator[tuple[Job, Graded]]:
    """Grades each job in turn in this process; after a student during whom ``unchanged()``
    became false, that student is "tampered" and the rest "not graded"."""
    stopped = False
    for job in jobs:
        if stopped:
            yield job, Graded(StudentResult(job.folder.name, status="not graded"))
            continue
        graded = grade_one(job)
        if not unchanged():
            stopped, graded = True, _tampered(job.folder.name, alone=True)
        yield job, graded


def grade_in_parallel(
    jobs: list[Job], workers: int, unchanged: Callable[[], bool]
) -> Iterator[tuple[Job, Graded]]:
    """Grades ``workers`` jobs at once, each in a worker process (started afresh, not forked
    from this one) that is the subreaper of its own student's processes. When ``unchanged()``
    becomes false, every student graded since the last time it was true is "tampered", those
    not started are "not graded"."""
    before = {child.pid for child in psutil.Process().children()}
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, context, initializer=processes.become_subreaper)
    futures: dict[Future[Graded], Job] = {}
    try:
        futures = {pool.submit(grade_one, job): job for job in jobs}
        pending, stopped = set(futures), False
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            if not stopped and not unchanged():
                stopped = True
                for future in pending:
                    future.cancel()  # (those already handed to a worker run on)
            for future in done:
                job = futures[future]
                if future.cancelled():
                    yield job, Graded(StudentResult(job.folder.name, status="not graded"))
                elif stopped:
                    yield job, _tampered(job.folder.name, alone=False)
                elif future.exception() is not None:  # the grader's fault, not the student's
                    failed = StudentResult(job.folder.name, status="not graded")
                    failed.notes.append(f"the grader's worker failed: {future.exception()!r}")
                    yield job, Graded(failed)
                else:
                    yield job, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        processes.reap_zombies(spare=before)


# ------------------------------------------------------------------------------------------------
# The gradebook: results saved, reused, and turned into grades
# ------------------------------------------------------------------------------------------------


def to_grade(result: StudentResult, checks: list[Check], rules: Policy, student_id: str) -> Grade:
    """The judge's result as a grade: an outcome for every check (one that did not run failed)."""
    not_run = {"ok": "did not run"}.get(result.status, f"did not run ({result.status})")
    outcomes = [  # in the policy's order: question by question, public checks first
        Outcome(check, True)
        if check in result.passed
        else Outcome(check, False, result.hints.get(check, not_run))
        for check in rules.checks()
        if check in set(checks)
    ]
    return Grade(
        result.student, student_id, rules, outcomes, status=result.status, notes=list(result.notes)
    )


def record_of(
    graded: Graded,
    student_id: str,
    seed: int,
    judged_by: str,
    submitted: datetime | None,
    manual: dict[str, ManualScore],
) -> saved.Record:
    """What is saved of a student just graded (with the inputs their grade used)."""
    result = graded.result
    return saved.Record(
        folder=result.student,
        student_id=student_id,
        status=result.status,
        passed=sorted(check.key for check in result.passed),
        hints={check.key: hint for check, hint in sorted(result.hints.items())},
        notes=list(result.notes),
        materials=graded.collected,
        seed=seed,
        submission=graded.submission,
        judged_by=judged_by,
        graded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        submitted=submitted,
        manual=manual,
    )


def grade_of(record: saved.Record, checks: list[Check], rules: Policy) -> Grade:
    """A saved record as a grade under ``rules`` (today's points and late penalty)."""
    result = StudentResult(
        record.folder,
        passed=record.passed_checks(checks),
        hints=record.hints_of(checks),
        notes=list(record.notes),
        status=record.status,
    )
    grade = to_grade(result, checks, rules, record.student_id)
    grade.materials = record.materials
    grade.submitted = record.submitted
    grade.manual = dict(record.manual)
    grade.seed = record.seed
    return grade


def out_of_date(record: saved.Record | None, folder: Path, seed: int, judged_by: str) -> str:
    """Why a saved record cannot stand for ``folder`` now ("" when it can)."""
    if record is None:
        return "not graded before"
    if record.status in ("tampered", "not graded"):
        return f"{record.status} last time"
    if record.seed != seed:
        return "its seed changed (another student id or --seed)"
    if record.judged_by != judged_by:
        return "the checks changed since"
    with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
        inputs.stage(folder, Path(scratch, "copy"))
        if inputs.files_digest(Path(scratch, "copy")) != record.submission:
            return "its files changed since"
    return ""


# ------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exercises.grade", description=__doc__.split("\n\n")[0]
    )
    add = parser.add_argument
    add("submissions", type=Path, help="a folder with one subfolder per student")
    add("--csv", type=Path, help="also write the gradebook (one row per student) to this CSV file")
    add(
        "--policy",
        type=Path,
        default=policy.DEFAULT,
        help="the points and policy (default: %(default)s)",
    )
    add(
        "--feedback", type=Path, help="where the feedback files go (default: SUBMISSIONS/_feedback)"
    )
    add("--roster", type=Path, help="GitHub Classroom's roster CSV: the student id of each folder")
    add("--submitted", type=Path, help="CSV of student,submitted_at, for the late penalty")
    add(
        "--manual",
        type=Path,
        help="CSV of the scores given by hand (_manual-scores.csv, filled in): merged into the "
        "last run's results, running the checks only for students whose files or checks changed",
    )
    add(
        "--student",
        action="append",
        metavar="ID",
        help="grade only this student (a folder's name or a student id; may be repeated): the "
        "others keep their last results",
    )
    add(
        "--jobs",
        type=int,
        default=1,
        help="grade this many students at once, each in its own sandbox (default: %(default)s)",
    )
    seconds = "seconds %s may take (default %%(default)g)"
    add("--test-timeout", type=float, default=30.0, help=seconds % "one check")
    add("--student-timeout", type=float, default=300.0, help=seconds % "one student's checks")
    where = "where student code runs: the best this machine has (default), or one kind, refusing"
    where += " to grade without it"
    add("--sandbox", default="auto", choices=("auto", *isolation.KINDS), help=where)
    add(
        "--seed",
        help="draw the hidden checks' random cases from this and each student's id (default: "
        "the policy's [course] seed; the same seed and student draw the same cases)",
    )
    add("--no-hints", action="store_true", help="print the table only")
    args = parser.parse_args(argv)

    # Everything given is checked before any student is graded.
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    folders = sorted(
        path
        for path in args.submissions.iterdir()
        if path.is_dir() and not path.name.startswith((".", "_"))
    )
    if not folders:
        parser.error(f"{args.submissions} has no student subfolders")
    for name in ("test_timeout", "student_timeout"):
        if not 0 < getattr(args, name) < 86_400:
            parser.error(
                f"--{name.replace('_', '-')} {getattr(args, name)}: expected seconds above 0"
            )
    if not 1 <= args.jobs <= MAX_JOBS:
        parser.error(f"--jobs {args.jobs}: expected a whole number from 1 to {MAX_JOBS}")
    feedback_dir = (args.feedback or args.submissions / "_feedback").resolve()
    submissions = args.submissions.resolve()
    inside = feedback_dir.is_relative_to(submissions)
    if inside and (feedback_dir.parent != submissions or not feedback_dir.name.startswith("_")):
        parser.error(
            f"--feedback {feedback_dir}: inside the submissions, it would mix with the students' "
            "folders; use a folder elsewhere, or one directly in SUBMISSIONS named _something"
        )
    try:
        rules = policy.load(args.policy)
        last = saved.load(feedback_dir)
        names = [folder.name for folder in folders]
        # The inputs the last run used stand unless given again.
        if args.roster:
            roster = inputs.read_roster(args.roster, names)
            ids = {name: roster.get(name, name) for name in names}
        else:
            ids = {name: last[name].student_id if name in last else name for name in names}
        known = {name: name for name in names} | {ids[name]: name for name in names}
        if args.submitted:
            submitted = inputs.read_submitted(args.submitted, known)
        else:
            submitted = {name: last[name].submitted for name in names if name in last}
        if args.manual:
            manual = inputs.read_manual(args.manual, known, rules)
        else:
            manual = {name: last[name].manual for name in names if name in last}
        chosen = [inputs.student_folder(name, known, "--student") for name in args.student or []]
        # Last, as it takes a few seconds: pytest lists the checks, which must match the policy.
        checks = collect_checks()
        rules.check_against(checks)
    except (policy.PolicyError, inputs.InputError, saved.SavedError) as error:
        parser.error(str(error))

    judged_by = saved.code_digest(*JUDGING_CODE, isolation.vecenvs_folder())
    seeds = {name: rules.student_seed(ids[name], args.seed) for name in names}
    if chosen:
        to_do = [folder for folder in folders if folder.name in chosen]
    elif args.manual:  # merge: grade only those whose saved results do not stand
        to_do = []
        for folder in folders:
            why = out_of_date(last.get(folder.name), folder, seeds[folder.name], judged_by)
            if why:
                print(f"{reports.plain(folder.name)}: to grade ({why})", file=sys.stderr)
                to_do.append(folder)
    else:
        to_do = list(folders)

    records = {name: last[name] for name in names if name in last}
    tampered = False
    if to_do:
        try:
            sandbox = isolation.choose(args.sandbox)
        except RuntimeError as error:
            parser.error(str(error))
        print(f"student code runs in: {sandbox.description}", file=sys.stderr)
        if sandbox.warning:
            print(f"WARNING: {sandbox.warning}", file=sys.stderr)
        # Orphans of the judges and of student code come here (or to the worker grading that
        # student), to be killed after each student.
        processes.become_subreaper()
        # A sandbox that cannot start Python would fail every check of every student: say so now.
        before_probe = {child.pid for child in psutil.Process().children()}
        with tempfile.TemporaryDirectory(prefix="grade-") as empty:
            probe = StudentProcess(Path(empty), sandbox)
            try:
                probe.start()
            except SandboxFailed as error:
                raise SystemExit(f"ERROR: {error}") from None
            finally:
                probe.stop()
        processes.reap_zombies(spare=before_probe)

        watched = (EXERCISES, isolation.vecenvs_folder())
        before = fingerprint(*watched, leave_out=submissions)

        def unchanged() -> bool:
            # Only possible without bubblewrap: a student's code changed the checks (or what
            # they import), and every later score would be decided by its version of them.
            return fingerprint(*watched, leave_out=submissions) == before

        jobs = [
            Job(
                folder.resolve(),
                tuple(checks),
                sandbox,
                args.test_timeout,
                args.student_timeout,
                seeds[folder.name],
                ids[folder.name],
            )
            for folder in to_do
        ]
        start = time.perf_counter()
        if args.jobs > 1 and sandbox.kind == "user":
            print(
                f"--jobs {args.jobs}: graded one at a time all the same: in the {sandbox.kind} "
                "sandbox every student runs as the same user, so two at once could read or signal "
                "each other's processes",
                file=sys.stderr,
            )
        if args.jobs == 1 or len(jobs) == 1 or sandbox.kind == "user":
            graded = grade_serially(jobs, unchanged)
        else:
            graded = grade_in_parallel(jobs, min(args.jobs, len(jobs)), unchanged)
        for job, outcome in graded:
            name = job.folder.name
            tampered |= outcome.result.status == "tampered"
            records[name] = record_of(
                outcome, ids[name], job.seed, judged_by, submitted.get(name), manual.get(name, {})
            )
        took = time.perf_counter() - start
        print(
            f"graded {len(jobs)} student(s) in {took:.1f} s (--jobs {args.jobs})",
            file=sys.stderr,
        )
    for name in names:  # the inputs given now, for those not graded now
        record = records.get(name)
        if record is None:
            record = saved.Record(name, ids[name], "not graded", seed=seeds[name])
            record.notes.append(
                f"not graded yet: grade the class, or this student (--student {name})"
            )
            records[name] = record
        record.student_id, record.submitted = ids[name], submitted.get(name)
        record.manual = manual.get(name, {})
    kept = [records[name] for name in names]
    if to_do != folders:
        reused = len(folders) - len(to_do)
        print(
            f"{reused} student(s) keep the results of an earlier run (no check ran for them)",
            file=sys.stderr,
        )

    grades = [grade_of(record, checks, rules) for record in kept]
    graded_now = {folder.name for folder in to_do}
    print(reports.format_class_table(grades, rules))
    if not args.no_hints:
        for grade in grades:
            if grade.folder not in graded_now:
                continue
            failed = [
                o for o in grade.outcomes if not o.passed and not o.hint.startswith("did not run")
            ]
            if failed or grade.notes:
                print(f"\n{reports.plain(grade.folder)}:")
                for note in grade.notes:
                    print("  " + reports.plain(note).replace("\n", "\n    "))
                for outcome in failed:
                    where = f"{outcome.check.question}{' hidden' * outcome.check.hidden}"
                    line = f"{where} {outcome.check.name}: {outcome.hint}"
                    print("  " + reports.plain(line).replace("\n", "\n    "))
    for grade in grades:
        reports.write_student_files(grade, feedback_dir)
    reports.write_class_files(feedback_dir, grades, rules)
    saved.save(feedback_dir, kept)
    print(
        f"\nfeedback written to {feedback_dir}/<student>/ ({reports.FEEDBACK_FILE}, {reports.RESULTS_FILE})"
    )
    if args.csv:
        reports.write_gradebook(args.csv, grades, rules)
        print(f"gradebook written to {args.csv}")
    return 2 if tampered else 0


if __name__ == "__main__":
    sys.exit(main())
