"""Grade a class: run the exercise checks on every student's folder and print a score table.

    python -m exercises.grade submissions/                 # one subfolder per student
    python -m exercises.grade submissions/ --csv scores.csv

Each student's checks run in a pytest process of their own, in a new process group, under two
deadlines: pytest-timeout stops any single check after ``--test-timeout`` seconds, and the
whole run is killed (its process group: pytest and every process the student's code started)
after ``--student-timeout`` seconds. So a student's hung or crashing code costs at most that
long and leaves nothing running; the student gets 0 for what did not finish.

A check is one point. The table shows, per student, the checks passed out of the checks of
each question, and the total; below it, the first line of each failure's hint.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

EXERCISES = Path(__file__).resolve().parent
CHECKS = EXERCISES / "checks"
REPO = EXERCISES.parent

#: A check's question, from its file name: ``test_q3_step_wait.py`` -> ``q3``.
QUESTION = re.compile(r"test_(q\d+)_")


@dataclass
class StudentResult:
    """How one student's folder did."""

    student: str
    passed: dict[str, int] = field(default_factory=dict)
    """question -> checks passed."""
    hints: list[str] = field(default_factory=list)
    """``"q3 test_name: first line of the failure message"``, one per failed check."""
    status: str = "ok"
    """``"ok"``, ``"timed out"`` (killed at the deadline) or ``"crashed"`` (pytest gave no report)."""
    output: str = ""
    """pytest's own output, for when the report is missing."""


def collect_checks() -> dict[str, list[str]]:
    """question -> the names of its checks, by asking pytest what it would run."""
    command = [sys.executable, "-m", "pytest", str(CHECKS), "--collect-only", "-q"]
    listing = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120,
                             check=False)
    checks = defaultdict(list)
    for line in listing.stdout.splitlines():
        match = QUESTION.search(line)
        if "::" in line and match:
            checks[match.group(1)].append(line.split("::", 1)[1].strip())
    if not checks:
        raise SystemExit(f"no checks found in {CHECKS}:\n{listing.stdout}{listing.stderr}")
    return dict(sorted(checks.items()))


def grade_student(folder: Path, test_timeout: float, student_timeout: float) -> StudentResult:
    """Runs every check on one folder, within the deadlines."""
    result = StudentResult(folder.name)
    with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
        report = Path(scratch) / "report.xml"
        command = [sys.executable, "-m", "pytest", str(CHECKS), "--submission", str(folder),
                   "-q", "-p", "no:cacheprovider", f"--timeout={test_timeout:g}",
                   f"--junitxml={report}", "-o", "junit_family=xunit1"]
        # A session of its own: the process group that the deadline kills, grandchildren included.
        process = subprocess.Popen(command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace",
                                   start_new_session=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        try:
            result.output, _ = process.communicate(timeout=student_timeout)
        except subprocess.TimeoutExpired:
            result.status = "timed out"
        finally:
            # Also after a normal exit: processes the student's code left behind go too.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if result.status == "timed out":
                result.output, _ = process.communicate()
        if result.status == "timed out":
            result.hints.append(f"all: the checks did not finish within {student_timeout:g} s and "
                                "were stopped; does your code hang somewhere no check can interrupt?")
            return result
        if not report.exists():
            result.status = "crashed"
            result.hints.append("all: pytest did not run the checks:\n" + result.output[-2000:])
            return result
        _read_report(report, result)
    return result


def _read_report(report: Path, result: StudentResult) -> None:
    for case in ElementTree.parse(report).iter("testcase"):
        match = QUESTION.search(case.get("file", "") + " " + case.get("classname", ""))
        if not match:
            continue
        question = match.group(1)
        result.passed.setdefault(question, 0)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None and case.find("skipped") is None:
            result.passed[question] += 1
        elif problem is not None:
            message = (problem.get("message") or problem.text or "").strip()
            message = re.sub(r'^failed on setup with "?', "", message)
            lines = [line.strip() for line in message.splitlines() if line.strip()] or ["failed"]
            # Keep the check's own message, not pytest's rewrite of the assert statement below it.
            cut = next((i for i, line in enumerate(lines) if i and line.startswith("assert ")), len(lines))
            lines = lines[:cut]
            hint = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
            result.hints.append(f"{question} {case.get('name')}: {hint[:300]}")


def format_table(results: list[StudentResult], checks: dict[str, list[str]]) -> str:
    """Students down, questions across: passed/total per cell, then the total."""
    questions = list(checks)
    total = sum(len(names) for names in checks.values())
    header = ["student", *(f"{q} ({len(checks[q])})" for q in questions), "total", "status"]
    rows = []
    for result in results:
        cells = [f"{result.passed.get(q, 0)}/{len(checks[q])}" for q in questions]
        score = sum(result.passed.values())
        rows.append([result.student, *cells, f"{score}/{total}", result.status])
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in (header, *rows)]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def write_csv(path: Path, results: list[StudentResult], checks: dict[str, list[str]]) -> None:
    """One row per student: passed per question, total, out of, status."""
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", *checks, "total", "out_of", "status"])
        total = sum(len(names) for names in checks.values())
        for result in results:
            writer.writerow([result.student, *(result.passed.get(q, 0) for q in checks),
                             sum(result.passed.values()), total, result.status])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exercises.grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="a folder with one subfolder per student")
    parser.add_argument("--csv", type=Path, help="also write the scores to this CSV file")
    parser.add_argument("--test-timeout", type=float, default=30.0,
                        help="seconds one check may take (default 30)")
    parser.add_argument("--student-timeout", type=float, default=300.0,
                        help="seconds all of one student's checks may take (default 300)")
    parser.add_argument("--no-hints", action="store_true", help="print the table only")
    args = parser.parse_args(argv)

    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    folders = sorted(path for path in args.submissions.iterdir()
                     if path.is_dir() and not path.name.startswith((".", "_")))
    if not folders:
        parser.error(f"{args.submissions} has no student subfolders")
    checks = collect_checks()
    results = []
    for folder in folders:
        print(f"grading {folder.name} ...", file=sys.stderr, flush=True)
        results.append(grade_student(folder.resolve(), args.test_timeout, args.student_timeout))

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
