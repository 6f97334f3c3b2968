"""Grade a class: run the exercise checks on every student's folder and print a score table.

    python -m exercises.grade submissions/ [--csv scores.csv]    # one subfolder per student

Every submission is treated as hostile. The grader copies a student's regular files to a private
folder and runs the checks on the copy in a pytest process of its own, the *judge*, which never
imports a student's file: each question's code runs in a sandboxed process of its own
(``exercises/sandbox``) that sees only that copy, and answers with plain data. So a crash costs
one question, and nothing a submission does reaches the scores: the judge's JUnit report is where
no student process can see it, and the grader counts each known check at most once.

A check is stopped after ``--test-timeout`` seconds, a student's whole run after
``--student-timeout``; then everything that student's code started is killed (the sandbox's PID
namespace ends; the grader and the judge are subreapers, which catches what escaped its process
group) and what did not finish scores 0. A check is one point: the table shows, per student, the
checks passed per question and in total; below it, the first line of each failure's hint.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from exercises.sandbox import isolation, processes
from exercises.sandbox.client import SandboxFailed, StudentProcess
from vecenvs.table import format_table as format_columns

EXERCISES = Path(__file__).resolve().parent
CHECKS = EXERCISES / "checks"
REPO = EXERCISES.parent

#: A check's question, from its file name: ``test_q3_step_wait.py`` -> ``q3``.
QUESTION = re.compile(r"test_(q\d+)_")
#: pytest over the checks, as the grader runs it (options follow; reports in JUnit's xunit1).
PYTEST = [sys.executable, "-m", "pytest", str(CHECKS), "-q", "-p", "no:cacheprovider"]
PYTEST += ["-o", "junit_family=xunit1"]


@dataclass
class StudentResult:
    """How one student's folder did. ``status``: ``"ok"``, ``"timed out"`` (killed at the
    deadline), ``"crashed"`` (no report), ``"tampered"`` (the checks changed while it was
    graded) or ``"not graded"``."""

    student: str
    passed: dict[str, int] = field(default_factory=dict)  # question -> checks passed
    hints: list[str] = field(default_factory=list)  # "q3 test_name: first line of the failure"
    status: str = "ok"
    output: str = ""  # the judge's own output, for when the report is missing


def collect_checks() -> dict[str, list[str]]:
    """question -> the names of its checks, by asking pytest what it would run."""
    listing = subprocess.run(
        [*PYTEST, "--collect-only"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    checks = defaultdict(list)
    for line in listing.stdout.splitlines():
        match = QUESTION.search(line)
        if "::" in line and match:
            checks[match.group(1)].append(line.split("::", 1)[1].strip())
    if not checks:
        raise SystemExit(f"no checks found in {CHECKS}:\n{listing.stdout}{listing.stderr}")
    return dict(sorted(checks.items()))


def grade_student(
    folder: Path,
    checks: dict[str, list[str]],
    sandbox: isolation.Sandbox,
    test_timeout: float,
    student_timeout: float,
) -> StudentResult:
    """Runs every check on a copy of one folder, within the deadlines."""
    result = StudentResult(folder.name)
    # Private to the grader: the student's processes never see this folder (with bwrap), and
    # the judge only reads the copy.
    with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
        copy, report, output = map(Path(scratch).joinpath, ("submission", "report.xml", "log"))
        result.hints += [f"files: {note}" for note in isolation.copy_submission(folder, copy)]
        command = [*PYTEST, f"--submission={copy}", f"--sandbox={sandbox.kind}"]
        command += [f"--timeout={test_timeout:g}", f"--junitxml={report}"]
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
            result.hints.append(
                f"all: the checks did not finish within {student_timeout:g} s and "
                "were stopped; does your code hang somewhere no check can interrupt?"
            )
        elif not report.exists():
            result.status = "crashed"
            result.hints.append("all: the checks did not run:\n" + result.output[-2000:])
        else:
            read_report(report, checks, result)
    return result


def read_report(report: Path, checks: dict[str, list[str]], result: StudentResult) -> None:
    """Fills ``result`` from a JUnit report: a point per known check that passed, each counted
    once, so no question can score more than its number of checks whatever the report says."""
    passed: dict[str, set[str]] = {question: set() for question in checks}
    try:
        cases = list(ElementTree.parse(report).iter("testcase"))
    except ElementTree.ParseError as error:
        result.status = "crashed"
        result.hints.append(f"all: the checks' report could not be read ({error})")
        cases = []
    for case in cases:
        match = QUESTION.search(case.get("file", "") + " " + case.get("classname", ""))
        name = case.get("name", "")
        if not match or name not in checks.get(match.group(1), ()):
            continue  # not one of the checks we collected
        question = match.group(1)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None and case.find("skipped") is None:
            passed[question].add(name)
        elif problem is not None:
            result.hints.append(f"{question} {name}: {_hint(problem)}")
    result.passed = {question: len(names) for question, names in passed.items()}


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


def scores(result: StudentResult, checks: dict[str, list[str]]) -> list[tuple[int, int]]:
    """(passed, out of) per question, then for the total: what the table and the CSV show."""
    cells = [(result.passed.get(q, 0), len(names)) for q, names in checks.items()]
    return [*cells, (sum(passed for passed, _ in cells), sum(out_of for _, out_of in cells))]


def format_table(results: list[StudentResult], checks: dict[str, list[str]]) -> str:
    """Students down, questions across: passed/total per cell, then the total."""
    header = ["student", *(f"{q} ({len(names)})" for q, names in checks.items()), "total", "status"]
    rows = [
        [result.student, *(f"{a}/{b}" for a, b in scores(result, checks)), result.status]
        for result in results
    ]
    return format_columns(header, rows, left=range(len(header)))


def write_csv(path: Path, results: list[StudentResult], checks: dict[str, list[str]]) -> None:
    """One row per student: passed per question, total, out of, status (written whole, then
    renamed into place, so no one ever reads half a file)."""
    path = path.resolve()
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", *checks, "total", "out_of", "status"])
        for result in results:
            *questions, (total, out_of) = scores(result, checks)
            passed = (cell[0] for cell in questions)
            writer.writerow([result.student, *passed, total, out_of, result.status])
    os.replace(partial, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exercises.grade", description=__doc__.split("\n\n")[0]
    )
    add = parser.add_argument
    add("submissions", type=Path, help="a folder with one subfolder per student")
    add("--csv", type=Path, help="also write the scores to this CSV file")
    seconds = "seconds %s may take (default %%(default)g)"
    add("--test-timeout", type=float, default=30.0, help=seconds % "one check")
    add("--student-timeout", type=float, default=300.0, help=seconds % "one student's checks")
    where = "where student code runs: the best this machine has (default), or one kind, refusing"
    where += " to grade without it"
    add("--sandbox", default="auto", choices=("auto", *isolation.KINDS), help=where)
    add("--no-hints", action="store_true", help="print the table only")
    args = parser.parse_args(argv)

    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    folders = sorted(
        path
        for path in args.submissions.iterdir()
        if path.is_dir() and not path.name.startswith((".", "_"))
    )
    if not folders:
        parser.error(f"{args.submissions} has no student subfolders")
    try:
        sandbox = isolation.choose(args.sandbox)
    except RuntimeError as error:
        parser.error(str(error))
    print(f"student code runs in: {sandbox.kind}", file=sys.stderr)
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

    checks = collect_checks()
    watched = (EXERCISES, isolation.vecenvs_folder())
    submissions = args.submissions.resolve()
    before = fingerprint(*watched, leave_out=submissions)
    results: list[StudentResult] = []
    for folder in folders:
        if results and results[-1].status == "tampered":
            results.append(StudentResult(folder.name, status="not graded"))
            continue
        print(f"grading {folder.name} ...", file=sys.stderr, flush=True)
        results.append(
            grade_student(
                folder.resolve(), checks, sandbox, args.test_timeout, args.student_timeout
            )
        )
        # Only possible without bubblewrap: a student's code changed the checks (or what they
        # import), and every later score would be decided by its version of them.
        if fingerprint(*watched, leave_out=submissions) != before:
            results[-1] = StudentResult(
                folder.name,
                status="tampered",
                hints=[
                    "all: the checks or the files they import changed while this student was graded; "
                    "grading stopped. Restore them (git checkout exercises vecenvs) and grade in a sandbox."
                ],
            )

    print(format_table(results, checks))
    if not args.no_hints:
        for result in results:
            if result.hints:
                print(f"\n{result.student}:")
                for hint in result.hints:
                    print("  " + hint.replace("\n", "\n    "))
    if args.csv:
        write_csv(args.csv, results, checks)
        print(f"\nscores written to {args.csv}")
    return 2 if any(result.status == "tampered" for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
