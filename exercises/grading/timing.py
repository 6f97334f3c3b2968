"""How long grading a class takes here, one student at a time and N at once: a results file.

    python -m exercises.grading.timing --students 6 --jobs 2 --out exercises/grading/measured/grading-time.json

Builds a class of ``--students`` copies of the reference solutions (every check passes, so every
check runs to its end: q3's and q4's deadlines and sleeps included), grades it with the grader
as an instructor would (``python -m exercises.grade CLASS --jobs J``), serially and with each
``--jobs`` value, ``--repeats`` times in alternating order (serial first, then last, ...) so that
a machine growing busier or quieter weighs on both alike; and checks that every run gives every
student the same total. The file says when, on what machine, at what load (the 1-minute load
average before and after each run), with which command and commit, and what each run took in
wall-clock and CPU seconds (the grader and everything it started), and the students' part of it
as the grader counts it (``graded N student(s) in S s``: its start, reading the policy and
listing the checks, is paid once a class, whatever its size). ``--guide`` also writes the figures
into the instructors' guide.

From those it computes, and labels as computed, what a class of ``--estimate`` students takes on
this machine's CPUs and on others': see :func:`estimate`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

EXERCISES = Path(__file__).resolve().parent.parent
REPO = EXERCISES.parent
DEFAULT_OUT = Path(__file__).resolve().parent / "measured" / "grading-time.json"
#: What the grader says once the students are graded.
GRADED = re.compile(r"^graded \d+ student\(s\) in ([\d.]+) s", re.M)


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def commit() -> str | None:
    """This checkout's commit, with ``+`` when the grader or the checks have changes not
    committed."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "exercises"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+" if changed else "")


def make_class(folder: Path, students: int) -> None:
    """``students`` folders, each with the reference solutions."""
    solutions = EXERCISES / "solutions"
    for number in range(1, students + 1):
        student = folder / f"student-{number:03d}"
        student.mkdir(parents=True)
        for path in [*solutions.glob("q*.py"), solutions / "q6_sweep.json"]:
            shutil.copy2(path, student / path.name)


def grade_once(class_dir: Path, jobs: int) -> dict[str, Any]:
    """Grades the class once with ``--jobs jobs``; what it took, and each student's total."""
    scratch = Path(tempfile.mkdtemp(prefix="timing-"))
    command = [sys.executable, "-m", "exercises.grade", str(class_dir), "--jobs", str(jobs)]
    command += ["--csv", str(scratch / "scores.csv"), "--feedback", str(scratch / "feedback")]
    command += ["--no-hints"]
    before_load, before_cpu = load_average(), resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        after_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"the grader failed:\n{done.stdout}\n{done.stderr}")
        with open(scratch / "scores.csv", newline="", encoding="utf-8") as file:
            totals = {row["folder"]: float(row["checks"]) for row in csv.DictReader(file)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    cpu = (after_cpu.ru_utime - before_cpu.ru_utime) + (after_cpu.ru_stime - before_cpu.ru_stime)
    # The grader's own count of the students' part, without its start (reading the policy,
    # listing the checks, trying the sandbox), which a class pays once whatever its size.
    graded = GRADED.search(done.stderr)
    if graded is None:
        raise SystemExit(f"the grader did not say how long the students took:\n{done.stderr}")
    return {
        "jobs": jobs,
        "seconds": round(seconds, 2),
        "grading_seconds": float(graded.group(1)),
        "cpu_seconds": round(cpu, 2),
        "load_before": before_load,
        "load_after": load_average(),
        "totals": totals,
    }


def estimate(
    serial: float,
    parallel: float,
    jobs: int,
    cpu: float,
    students: int,
    cpus: int,
    here: int,
    start: float = 0.0,
) -> dict[str, Any]:
    """What ``students`` take graded with ``--jobs cpus`` on ``cpus`` CPUs, from a class measured
    on ``here`` CPUs: ``serial`` and ``parallel`` seconds per student (serially and with
    ``--jobs jobs``) and ``cpu`` CPU seconds per student. On this machine's CPUs, the parallel
    time per student times ``students``; on others, computed (not measured): the parallel
    efficiency measured here (speed-up / jobs) assumed to hold at ``cpus`` jobs, and never below
    the CPU time per student spread over ``cpus`` CPUs. Either way plus ``start``, the grader's
    start (reading the policy, listing the checks), which a class pays once."""
    if cpus == here and jobs == here:
        return {
            "students": students,
            "cpus": cpus,
            "seconds": round(students * parallel + start),
            "how": f"{students} x {parallel:.2f} s per student, measured here with --jobs {jobs} "
            f"on {here} CPUs, + {start:.0f} s to start",
        }
    efficiency = min(1.0, serial / parallel / jobs)
    wall = students * serial / (cpus * efficiency)
    floor = students * cpu / cpus
    return {
        "students": students,
        "cpus": cpus,
        "seconds": round(max(wall, floor) + start),
        "how": f"computed, not measured: {students} x {serial:.2f} s per student (serially, "
        f"measured on {here} CPUs) / ({cpus} jobs x {efficiency:.2f}, the parallel efficiency "
        f"measured there with --jobs {jobs}), at least {students} x {cpu:.2f} CPU s per student "
        f"/ {cpus} CPUs; + {start:.0f} s to start",
    }


#: Where the guide shows the figures: between these lines of exercises/INSTRUCTORS.md.
GUIDE = EXERCISES / "INSTRUCTORS.md"
GUIDE_START = (
    "<!-- timing: written by python -m exercises.grading.timing --guide from its results file -->"
)
GUIDE_END = "<!-- /timing -->"


def guide_text(document: dict[str, Any], path: str) -> str:
    """The guide's paragraph and table on the time a class takes, from a results file."""
    run, machine = document["run"], document.get("machine", {})
    jobs, numbers = next(iter(document["parallel"].items()))
    rows = [
        f"| {item['students']} | {item['cpus']} | {item['seconds'] / 60:.0f} min | {item['how']} |"
        for item in document["estimates"]
    ]
    loads = ", ".join(f"{each['load_before']:g}" for each in document["runs"])
    commit = str(run["commit"])
    commit = commit[:10] + (" with changes not committed" if commit.endswith("+") else "")
    same = "the same" if document["same_totals"] else "NOT the same"
    # Busy: other programs' load on top of the grading's own (about one process per job).
    busy = "; the machine was shared" if max(run["load_before"], run["load_after"]) > 3 else ""
    paragraph = (
        f"Measured on {run['started'][:10]} by `{run['command']}` (its results file: `{path}`, "
        f"commit {commit}), on {document['cpus_usable']} CPUs ({machine.get('cpu_model', '?')}) "
        f"at a load average of {run['load_before']:g} before and {run['load_after']:g} after "
        f"(before each run: {loads}{busy}): a class of {document['students']} "
        "copies of the reference solutions, where every check runs to its end, took "
        f"{document['serial_seconds_per_student']:g} s per student graded serially and "
        f"{numbers['seconds_per_student']:g} s with `--jobs {jobs}`, "
        f"{numbers['ratio_to_serial']:g} of the serial time (the grader's own count of the "
        f"students' part; its start, {document['start_seconds']:g} s, is paid once a class), with "
        f"{same} totals in every run; {document['cpu_seconds_per_student']:g} CPU seconds per "
        "student: most of a student's time is spent waiting (on deadlines and sleeps the checks "
        "set). Budget more for students whose code hangs until its deadlines."
    )
    return "\n".join(
        [
            textwrap.fill(paragraph, width=100, break_on_hyphens=False, break_long_words=False),
            "",
            "| students | CPUs | time | how it was obtained |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
            "Run the command again on your own machine (it takes a few minutes) for your figures.",
        ]
    )


def write_guide(document: dict[str, Any], path: str, guide: Path = GUIDE) -> None:
    """Rewrites the guide's timing section (between :data:`GUIDE_START` and :data:`GUIDE_END`)."""
    text = guide.read_text(encoding="utf-8")
    start, end = text.index(GUIDE_START), text.index(GUIDE_END)
    body = f"{GUIDE_START}\n{guide_text(document, path)}\n"
    guide.write_text(text[:start] + body + text[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exercises.grading.timing", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--students", type=int, default=6, help="default: %(default)s")
    parser.add_argument(
        "--jobs", type=int, action="append", help="--jobs of the parallel runs (default: 2)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="default: %(default)s")
    parser.add_argument("--estimate", type=int, default=200, help="class size to estimate for")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: %(default)s")
    parser.add_argument(
        "--guide",
        action="store_true",
        help=f"also write the figures into {GUIDE.relative_to(REPO)} (its timing section)",
    )
    args = parser.parse_args(argv)
    jobs = args.jobs or [2]
    if not 1 <= args.students <= 100 or not 1 <= args.repeats <= 10:
        parser.error("expected 1 to 100 --students and 1 to 10 --repeats")
    if any(not 2 <= value <= 64 for value in jobs):
        parser.error(f"--jobs {jobs}: expected whole numbers from 2 to 64")

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    load_before = load_average()
    runs = []
    with tempfile.TemporaryDirectory(prefix="timing-class-") as scratch:
        class_dir = Path(scratch, "class")
        make_class(class_dir, args.students)
        for repeat in range(args.repeats):
            order = [1, *jobs] if repeat % 2 == 0 else [*jobs, 1]
            for value in order:
                print(f"grading {args.students} students with --jobs {value} ...", file=sys.stderr)
                run = grade_once(class_dir, value)
                print(f"  {run['seconds']} s (load {run['load_before']} -> {run['load_after']})")
                runs.append(run)
    totals = {json.dumps(run["totals"], sort_keys=True) for run in runs}
    same = len(totals) == 1

    def per_student(value: int, key: str = "grading_seconds") -> float:
        chosen = [run[key] for run in runs if run["jobs"] == value]
        return sum(chosen) / len(chosen) / args.students

    serial, cpu = per_student(1), per_student(1, "cpu_seconds")
    start = sum(run["seconds"] - run["grading_seconds"] for run in runs) / len(runs)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    summary = {}
    for value in jobs:
        parallel = per_student(value)
        summary[str(value)] = {
            "seconds_per_student": round(parallel, 2),
            "ratio_to_serial": round(parallel / serial, 3),
            "speedup": round(serial / parallel, 2),
        }
    cpus = cpus or 1
    base = cpus if cpus in jobs else jobs[0]  # the efficiency of as many jobs as CPUs
    estimates = [
        estimate(serial, per_student(base), base, cpu, args.estimate, cores, cpus, start)
        for cores in sorted({cpus, 8})
    ]
    from vecenvs.bench.machine import machine_info

    document = {
        "run": {
            "started": started,
            "ended": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": shlex.join(
                [
                    "python",
                    "-m",
                    "exercises.grading.timing",
                    *(sys.argv[1:] if argv is None else argv),
                ]
            ),
            "commit": commit(),
            "load_before": load_before,
            "load_after": load_average(),
        },
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": cpus,
        "machine": machine_info(),
        "students": args.students,
        "class": "copies of the reference solutions (every check runs to its end)",
        "same_totals": same,
        "start_seconds": round(start, 2),
        "serial_seconds_per_student": round(serial, 2),
        "cpu_seconds_per_student": round(cpu, 2),
        "parallel": summary,
        "estimates": estimates,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    for value, numbers in summary.items():
        print(
            f"--jobs {value}: {numbers['seconds_per_student']} s per student, "
            f"{numbers['ratio_to_serial']} of serial ({serial:.2f} s per student)"
        )
    for item in estimates:
        print(
            f"{item['students']} students on {item['cpus']} CPUs: {item['seconds']} s ({item['how']})"
        )
    print(f"same totals in every run: {same}; written to {args.out}")
    if args.guide:
        out = args.out.resolve()
        shown = out.relative_to(REPO) if out.is_relative_to(REPO) else out
        write_guide(document, str(shown))
        print(f"and into {GUIDE}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
