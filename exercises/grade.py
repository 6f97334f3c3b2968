"""Grade a class: run every check, public and hidden, on each student's work; write the scores.

    python -m exercises.grade submissions/ [--csv scores.csv]    # one subfolder per student

A student's folder holds their ``q*.py`` files (and ``q6_sweep.json``, and their notebooks), or
is a clone of their copy of the student release, with the work in ``exercises/student/`` and the
notebooks in ``notebooks/``. Points come from the policy file (``exercises/policy.toml``: points
per check, the parts graded by hand, the late penalty). One run writes, from the same numbers:
the table in the terminal, the gradebook CSV (``--csv``), and in ``--feedback`` (by default
``SUBMISSIONS/_feedback``) a folder per student with ``feedback.txt`` and Gradescope's
``results.json``, plus ``_manual-scores.csv`` (the sheet for the parts graded by hand: fill it in
and grade again with ``--manual``) and ``_manual-parts.txt`` (question 6's explanations and the
notebooks' predictions, to read).

Every submission is treated as hostile. The grader copies a student's regular files to a private
folder and runs the checks on the copy in a pytest process of its own, the *judge*, which never
imports a student's file: each question's code runs in a sandboxed process of its own
(``exercises/sandbox``) that sees only that copy, and answers with plain data. So a crash costs
one question, and nothing a submission does reaches the scores: the judge's JUnit report is where
no student process can see it, and the grader counts each known check at most once.

A check is stopped after ``--test-timeout`` seconds, a student's whole run after
``--student-timeout``; then everything that student's code started is killed (the sandbox's PID
namespace ends; the grader and the judge are subreapers, which catches what escaped its process
group) and what did not finish scores 0.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from exercises.grading import inputs, materials, policy, reports
from exercises.grading.policy import Check, Policy
from exercises.grading.scores import Grade, Outcome
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
#: In a clone of the student release: where the work and the notebooks are.
RELEASE_WORK, RELEASE_NOTEBOOKS = Path("exercises", "student"), Path("notebooks")


@dataclass
class StudentResult:
    """How the judge did on one student's folder. ``status``: ``"ok"``, ``"timed out"`` (killed
    at the deadline), ``"crashed"`` (no report), ``"tampered"`` (the checks changed while it was
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


def stage_submission(folder: Path, into: Path) -> list[str]:
    """Copies a student's work into ``into`` (regular files only, within limits): their folder,
    or from a clone of the release its ``exercises/student`` and ``notebooks``. Returns notes
    about what was left out."""
    work, notebooks = folder / RELEASE_WORK, folder / RELEASE_NOTEBOOKS
    links = [folder / "exercises", work, notebooks]
    if not work.is_dir() or any(path.is_symlink() for path in links):
        return isolation.copy_submission(folder, into)  # (links are never followed)
    notes = isolation.copy_submission(work, into)
    if notebooks.is_dir() and not (into / "notebooks").exists():
        notes += [
            f"notebooks/{note}" for note in isolation.copy_submission(notebooks, into / "notebooks")
        ]
    return notes


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
        help="CSV of the scores given by hand (_manual-scores.csv, filled in)",
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
        names = [folder.name for folder in folders]
        ids = inputs.read_roster(args.roster, names) if args.roster else {}
        known = {name: name for name in names} | {ids[name]: name for name in ids}
        submitted = inputs.read_submitted(args.submitted, known) if args.submitted else {}
        manual = inputs.read_manual(args.manual, known, rules) if args.manual else {}
        # Last, as it takes a few seconds: pytest lists the checks, which must match the policy.
        checks = collect_checks()
        rules.check_against(checks)
    except (policy.PolicyError, inputs.InputError) as error:
        parser.error(str(error))
    try:
        sandbox = isolation.choose(args.sandbox)
    except RuntimeError as error:
        parser.error(str(error))
    print(f"student code runs in: {sandbox.description}", file=sys.stderr)
    if sandbox.warning:
        print(f"WARNING: {sandbox.warning}", file=sys.stderr)
    # Orphans of the judges and of student code come here, to be killed after each student.
    processes.become_subreaper()
    # A sandbox that cannot start Python would fail every check of every student: say so now.
    with tempfile.TemporaryDirectory(prefix="grade-") as empty:
        probe = StudentProcess(Path(empty), sandbox)
        try:
            probe.start()
        except SandboxFailed as error:
            raise SystemExit(f"ERROR: {error}") from None
        finally:
            probe.stop()

    watched = (EXERCISES, isolation.vecenvs_folder())
    before = fingerprint(*watched, leave_out=submissions)
    grades: list[Grade] = []
    for folder in folders:
        student_id = ids.get(folder.name, folder.name)
        if grades and grades[-1].status == "tampered":
            skipped = StudentResult(folder.name, status="not graded")
            grades.append(to_grade(skipped, checks, rules, student_id))
            continue
        print(f"grading {reports.plain(folder.name)} ...", file=sys.stderr, flush=True)
        seed = rules.student_seed(student_id, args.seed)
        with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
            copy = Path(scratch, "submission")
            notes = [f"files: {note}" for note in stage_submission(folder.resolve(), copy)]
            result = grade_student(
                folder,
                checks,
                sandbox,
                args.test_timeout,
                args.student_timeout,
                copy,
                seed,
                student_id,
            )
            result.notes[:0] = notes
            grade = to_grade(result, checks, rules, student_id)
            if result.status in ("ok", "crashed"):
                grade.materials = materials.collect(copy, sandbox)
        grade.submitted = submitted.get(folder.name)
        grade.manual = manual.get(folder.name, {})
        # Only possible without bubblewrap: a student's code changed the checks (or what they
        # import), and every later score would be decided by its version of them.
        if fingerprint(*watched, leave_out=submissions) != before:
            tampered = StudentResult(folder.name, status="tampered")
            tampered.notes.append(
                "the checks or the files they import changed while this student was graded; "
                "grading stopped. Restore them (git checkout exercises vecenvs) and grade in a sandbox."
            )
            grade = to_grade(tampered, checks, rules, student_id)
        grade.seed = seed
        grades.append(grade)

    print(reports.format_class_table(grades, rules))
    if not args.no_hints:
        for grade in grades:
            failed = [o for o in grade.outcomes if not o.passed and o.hint != "did not run"]
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
    print(
        f"\nfeedback written to {feedback_dir}/<student>/ ({reports.FEEDBACK_FILE}, {reports.RESULTS_FILE})"
    )
    if args.csv:
        reports.write_gradebook(args.csv, grades, rules)
        print(f"gradebook written to {args.csv}")
    return 2 if any(grade.status == "tampered" for grade in grades) else 0


if __name__ == "__main__":
    sys.exit(main())
