"""Writes the results pages (``docs/results/<preset>.md``) from the results files
(``docs/results/data/<preset>.json``, as ``vecenvs bench --json`` wrote them).

Run by ``make docs`` (through ``docs/_ext/generate.py``), or by hand after a new measurement::

    .venv/bin/python -m vecenvs bench --preset core2 --json docs/results/data/core2.json
    .venv/bin/python docs/gen_results.py

Every number on a page is read from its file: throughputs are the measurements' windows, and
each speed-up and share of the ceiling is computed from them by :mod:`vecenvs.bench.ratios`, the
one definition every table of the lab uses (the measuring guide says it in words). A page whose
file does not exist says so, and gives the command that would write it. The pages are committed
(so that links to them resolve on GitHub too); ``tests/test_docs.py`` checks that they are what
this script writes from the committed files.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
DATA = DOCS / "results" / "data"


@dataclass(frozen=True)
class Preset:
    """One results page: the file it is generated from and the command that writes that file."""

    name: str
    title: str
    about: str  # what the run measures, and why, in a sentence or two
    command: str  # writes data/<name>.json, from the repository root
    duration: str  # about how long it takes, and where

    def data(self, folder: Path = DATA) -> Path:
        """Its results file (in ``folder``: another one in tests)."""
        return folder / f"{self.name}.json"


PRESETS = (
    Preset(
        "seeds",
        "The seeds' grid",
        "Cheap to costly envs (CartPole, Acrobot, HumanoidStandup) at N on both sides of the CPU "
        "count, stepped by the loop, one process per env, the pool, gymnasium's AsyncVectorEnv "
        "and the ceiling: where each way of stepping pays, and where it does not.",
        "vecenvs bench --preset seeds --seconds 1 --repeats 3 --json docs/results/data/seeds.json",
        "about 6 to 10 minutes on 2 cores",
    ),
    Preset(
        "core2",
        "The pool against the ceiling, 2 cores",
        "The pool's targets on a 2-core machine: each env at the N the targets name, the pool, "
        "the async pool, gymnasium's AsyncVectorEnv with shared memory and the ceiling, as "
        "speed-ups over the loop and shares of the ceiling.",
        "vecenvs bench --preset core2 --json docs/results/data/core2.json",
        "about 4 minutes on 2 cores; run it on a quiet machine",
    ),
    Preset(
        "core16",
        "The pool against the ceiling, 16 cores",
        "The same targets on a 16-core machine: N up to 1024, the pool at K = 4, 8 and 16, and "
        "the teaching env with 0.1 ms busy steps.",
        "vecenvs bench --preset core16 --json docs/results/data/core16.json",
        "on a machine with 16 CPUs",
    ),
    Preset(
        "threads",
        "Threads in workers",
        "The teaching env doing one 128 x 128 matrix product per step and nothing else (N=16), "
        "each process backend with its workers' BLAS threads limited to 1 (the default) and left "
        "alone, side by side in one run: what `worker_threads` buys (see the threads guide).",
        "vecenvs bench --env vecenvs/Costly-v0 --env-kwarg step_seconds=0 "
        "--env-kwarg matmul_size=128 --num-envs 16 --backend pool --backend subproc "
        "--backend ceiling --workers 2 --worker-threads 1 --worker-threads none --seconds 2 "
        "--repeats 5 --json docs/results/data/threads.json",
        "about 3 minutes on 2 cores",
    ),
)

DEFINITIONS = (
    "Throughput is a measurement's median window, in env steps per second. A **speed-up** is "
    "a throughput over the loop's (gymnasium's `SyncVectorEnv`, `gym-sync`) at the same env "
    "and N, in the same run; a **share of the ceiling** is a throughput over the ceiling's "
    "there. A number a check flags (*disturbed* windows, a disturbed ceiling or loop) is shown "
    "with its flag, not as a result. The "
    "[measuring guide](../guide/measuring.md) says why these definitions, and how the windows "
    "are timed."
)


def load(path: Path) -> tuple[dict[str, Any], list[Any]]:
    """A results file's run facts and its measurements, related again by
    :func:`vecenvs.bench.ratios.relate` (speed-ups, shares and checks from the windows)."""
    from vecenvs.bench import BenchConfig, Measurement
    from vecenvs.bench.ratios import relate

    document = json.loads(path.read_text(encoding="utf-8"))
    names = {f.name for f in dataclasses.fields(Measurement) if f.init}
    measurements = []
    for row in document["results"]:
        values = {key: value for key, value in row.items() if key in names}
        values["config"] = BenchConfig(**row["config"])
        measurements.append(Measurement(**values))
    return document, relate(measurements)


def _facts(document: dict[str, Any], preset: Preset) -> list[str]:
    run = document.get("run") or {}
    machine = document.get("machine") or {}

    def said(key: str) -> str:
        value = run.get(key)
        return "not recorded" if value is None else str(value)

    cpus = machine.get("cpus_from") or f"{machine.get('usable_cpus', '?')} CPUs"
    commit = run.get("commit")
    commit_text = (
        "not recorded"
        if commit is None
        else f"`{commit[:12]}`"
        + (" with uncommitted changes to the package" if commit.endswith("+") else "")
    )
    if run.get("commit_note"):  # what the file's stamp says of it (data/README.md)
        note = run["commit_note"]
        commit_text = note if commit is None else f"{commit_text} ({note})"
    where = f"{run['machine']}: " if run.get("machine") else ""
    return [
        f"- **Date**: {said('started')} to {said('finished')} (UTC).",
        f"- **Machine**: {where}{machine.get('cpu_model', 'not recorded')}; {cpus}; "
        f"{machine.get('os', document.get('platform', ''))}; Python {document.get('python', '?')}.",
        f"- **Load**: {said('load_before')} before, {said('load_after')} after (the 1-minute "
        "load average; the run's own processes count in the second).",
        f"- **Command**: `{run.get('command', preset.command)}`.",
        f"- **Commit**: {commit_text}; vecenvs {document.get('vecenvs_version', '?')}.",
    ]


def _speedup_table(measurements: Sequence[Any]) -> list[str]:
    """Rows (env, N), a column per backend: the speed-up over the loop, and the share of the
    ceiling (or the check that keeps it from being a result)."""
    from vecenvs.bench.ratios import efficiency_text

    backends: list[str] = []
    rows: dict[tuple[str, int], dict[str, str]] = {}
    for m in measurements:
        label = m.config.backend_label
        if m.config.backend == "gym-sync":
            continue
        if label not in backends:
            backends.append(label)
        speedup = "-" if m.ratio is None else f"{m.ratio:.2f}x"
        share = efficiency_text(m)
        if share.startswith("? "):  # a check keeps it from being a result: say which
            share = f"share not shown ({share[2:]})"
        cell = speedup if share == "-" or m.config.backend == "ceiling" else f"{speedup}, {share}"
        if "disturbed" in m.checks:
            cell += ", its windows disturbed"
        rows.setdefault((m.config.env_label, m.config.num_envs), {})[label] = cell
    lines = [
        "| env | N | " + " | ".join(f"`{b}`" for b in backends) + " |",
        "| --- | --- | " + " | ".join("---" for _ in backends) + " |",
    ]
    for (env, n), cells in rows.items():
        lines.append(f"| {env} | {n} | " + " | ".join(cells.get(b, "") for b in backends) + " |")
    return lines


def _numbers_table(measurements: Sequence[Any]) -> list[str]:
    from vecenvs.bench.ratios import measurement_row

    rows = [measurement_row(m) for m in measurements]
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "| " + " | ".join("---" for _ in keys) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(row[key]).replace("|", "\\|") for key in keys) + " |")
    return lines


def page(preset: Preset, folder: Path = DATA) -> str:
    """The Markdown of one preset's page, from its results file in ``folder`` (or saying there
    is none)."""
    path = preset.data(folder)
    data = path.relative_to(DOCS.parent) if path.is_relative_to(DOCS.parent) else path
    lines = [f"# {preset.title}", "", preset.about, ""]
    if not path.exists():
        lines += [
            "**Not measured yet.** There is no results file for this page "
            f"(`{data}`), so it shows no numbers. To measure it ({preset.duration}), from the "
            "repository root:",
            "",
            "```sh",
            f".venv/bin/python -m {preset.command}",
            ".venv/bin/python docs/gen_results.py   # then this page shows it",
            "```",
            "",
            "Earlier measurements, made before the lab kept results files, are on the "
            "[history page](history.md).",
            "",
        ]
        return "\n".join(lines)
    document, measurements = load(path)
    lines += [
        f"Generated by `docs/gen_results.py` from `{data}`, which this command wrote "
        f"({preset.duration}):",
        "",
        *_facts(document, preset),
        "",
        DEFINITIONS,
        "",
        "## Speed-up over the loop, and share of the ceiling",
        "",
        "Each cell: the speed-up over `gym-sync`, then the share of the ceiling.",
        "",
        *_speedup_table(measurements),
        "",
        "## Every measurement",
        "",
        *_numbers_table(measurements),
        "",
    ]
    if preset.name == "core2":
        lines += _bare_pool_section(folder, "bare-pool-*.json")
        lines += _spin_section(folder)
    if preset.name == "core16":
        lines += _bare_pool_section(folder, "bare16-*.json")
        lines += _peers_section(folder)
    return "\n".join(lines)


def _peers_section(folder: Path) -> list[str]:
    """The pool beside the peers (EnvPool, SB3's SubprocVecEnv) on the same machine, one run
    per file (``peers16-*.json``, as ``vecenvs bench --json`` wrote them)."""
    # In the order they were made.
    paths = sorted(
        folder.glob("peers16-*.json"), key=lambda p: json.loads(p.read_text())["run"]["started"]
    )
    if not paths:
        return []
    lines = [
        "## The pool beside the peers",
        "",
        "Runs of their own on the same machine, each with its `gym-sync` reference: the pool at "
        "K=16 beside EnvPool, SB3's `SubprocVecEnv` and gymnasium's `AsyncVectorEnv`. EnvPool "
        "steps its own C++ CartPole, not gymnasium's Python one: its row measures what a user "
        "would pick instead, not the same work.",
        "",
    ]
    for path in paths:
        document, measurements = load(path)
        run = document.get("run") or {}
        lines += [
            f"`{path.relative_to(DOCS.parent) if path.is_relative_to(DOCS.parent) else path}`: "
            f"`{run.get('command')}`, {run.get('started')} to {run.get('finished')}, load "
            f"{run.get('load_before')} before.",
            "",
            *_speedup_table(measurements),
            "",
        ]
    return lines


def _bare_pool_section(folder: Path, pattern: str) -> list[str]:
    """The pool against the bare pool (``tests/bare_pool.py --json``, one file per point and
    run, named by ``pattern``: ``bare-pool-*.json`` on 2 cores, ``bare16-*.json`` on 16): what
    the pool's guarantees cost, measured in the same rounds."""
    import statistics

    paths = sorted(folder.glob(pattern))
    if not paths:
        return []
    lines = [
        "## The pool against a bare pool",
        "",
        "`tests/bare_pool.py` times, round by round, the ceiling, a bare pool (workers spinning "
        "on a word in shared memory; no errors, deadlines, infos or checks) and `PoolVecEnv`, "
        "each built for its window and closed after it; with `--no-infos`, also `PoolVecEnv` "
        "stepping the same envs with their infos dropped (what the infos cost it). Medians of "
        "the windows, env steps per second; the ratios are of those medians.",
        "",
        "| env | N | K | load before / after | ceiling | bare pool | `PoolVecEnv` | pool / bare "
        "| infos dropped | pool / infos dropped |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    commands = []
    documents = [(path, json.loads(path.read_text(encoding="utf-8"))) for path in paths]
    # Point by point, each point's runs in the order they were made.
    documents.sort(
        key=lambda pair: (pair[1]["env_id"], pair[1]["num_envs"], pair[1]["run"]["started"])
    )
    for path, document in documents:
        run, medians = (
            document["run"],
            {name: statistics.median(values) for name, values in document["throughputs"].items()},
        )
        pool = medians["PoolVecEnv"]
        dropped = medians.get("PoolVecEnv, infos dropped")
        without = "| | |" if dropped is None else f"| {dropped:,.0f} | {pool / dropped:.2f} |"
        lines.append(
            f"| `{document['env_id']}` | {document['num_envs']} | {document['num_workers']} "
            f"| {run['load_before']} / {run['load_after']} | {medians['ceiling']:,.0f} "
            f"| {medians['bare pool']:,.0f} | {pool:,.0f} "
            f"| {pool / medians['bare pool']:.2f} {without}"
        )
        commands.append(_provenance(path.name, run))
    return [*lines, "", "Each row's file and command:", "", *commands, ""]


def _spin_section(folder: Path) -> list[str]:
    """How long the async pool's workers may spin at K = CPUs (``tests/spin_policy.py --json``,
    one file per point, ``spin-async-*.json``): what chose ``doorbell.SHARED_SPIN_SECONDS``."""
    paths = sorted(folder.glob("spin-async-*.json"))
    if not paths:
        return []
    documents = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    limits = [row["workers_longest_spin"] for row in documents[0]["rows"]]
    lines = [
        "## How long the async pool's workers spin at K = CPUs",
        "",
        "With its caller, the async pool at K = CPUs has one process more than CPUs: the caller "
        "sleeps while it waits, and the workers may spin for at most "
        "`doorbell.SHARED_SPIN_SECONDS`. `tests/spin_policy.py` measures that limit set to each "
        "value below (0: nobody spins), each beside `gym-sync` in the same windows: the speed-up "
        "over the loop (ratio of the median throughputs).",
        "",
        "| env | N | K | load before / after | "
        + " | ".join(f"at most {limit * 1e6:g} µs" for limit in limits)
        + " |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in limits) + " |",
    ]
    commands = []
    for path, document in zip(paths, documents):
        run, rows = document["run"], document["rows"]
        lines.append(
            f"| `{document['env_id']}` | {document['num_envs']} | {rows[0]['num_workers']} "
            f"| {run['load_before']} / {run['load_after']} | "
            + " | ".join(f"{row['speedup']:.2f}x" for row in rows)
            + " |"
        )
        commands.append(_provenance(path.name, run))
    return [*lines, "", "Each row's file and command:", "", *commands, ""]


def _provenance(name: str, run: dict[str, Any]) -> str:
    """A results file's line under its table: the command that wrote it, when, at which commit
    (with what its stamp says of that commit) and where."""
    note = f" ({run['commit_note']})" if run.get("commit_note") else ""
    where = f", on {run['machine']}" if run.get("machine") else ""
    return (
        f"- `{name}`: `{run['command']}`, {run['started']} to {run['finished']}, "
        f"commit `{(run.get('commit') or 'not recorded')[:12]}`{note}{where}"
    )


def write_pages(folder: Path = DOCS / "results") -> list[Path]:
    """Write every preset's page into ``folder``; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for preset in PRESETS:
        path = folder / f"{preset.name}.md"
        text = page(preset)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")  # unchanged pages keep their mtime
        written.append(path)
    return written


if __name__ == "__main__":
    sys.path.insert(0, str(DOCS.parent))
    for written_path in write_pages():
        print(f"wrote {written_path.relative_to(DOCS.parent)}")
