"""The command line: ``python -m vecenvs results`` shows what the results store holds.

Every ``bench`` run is saved in the results store, one SQLite file (see
:mod:`vecenvs.bench.store`). This command reads it back::

    python -m vecenvs results list                         # the runs, newest first
    python -m vecenvs results show 3                       # run 3: machine, settings, numbers
    python -m vecenvs results export --format csv -o results.csv   # for pandas or a spreadsheet
    python -m vecenvs results export --format json --run 3 --run 4 # runs 3 and 4, to stdout
    python -m vecenvs results list --store other-machine.sqlite    # another machine's runs

Every action takes ``--store PATH`` to read another store than the default one (for instance
a file copied from another machine).

Exit codes: 0 done, 2 bad input (an unknown run id, a store that can't be read, an output file
that can't be written).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from vecenvs.bench import ratios
from vecenvs.bench.engine import Measurement
from vecenvs.bench.machine import format_machine
from vecenvs.bench.store import (
    STORE_ENV_VAR,
    ResultsStore,
    RunRecord,
    StoreError,
    default_store_path,
)
from vecenvs.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    add_command,
    check_writable,
    fail,
    positive_int,
)
from vecenvs.table import describe_kwargs, format_table

__all__ = ["add_parser", "format_measurements", "format_runs"]

#: How the default store is chosen, for ``--help`` (see :func:`default_store_path`).
_DEFAULT_STORE_RULE = (
    f"${STORE_ENV_VAR} if set, else $XDG_DATA_HOME/vecenvs/results.sqlite, "
    "else ~/.local/share/vecenvs/results.sqlite"
)

#: Widest a cell of the ``list`` table may be before it is cut short with "...".
MAX_CELL_WIDTH = 36


def add_parser(commands: argparse._SubParsersAction) -> None:
    where = _default_store_where()
    results_parser = add_command(
        commands,
        "results",
        __doc__,
        None,
        help="list, show and export the runs saved in the results store",
        description="Read the results store: the SQLite file where every `vecenvs bench` run is "
        f"saved, with its settings and the machine it ran on.\n\nThe store read unless --store "
        f"is given: {where}.",
    )
    actions = results_parser.add_subparsers(
        title="actions", dest="action", required=True, metavar="ACTION"
    )
    # Every action reads a store: one definition of --store, shared through `parents`.
    store_option = argparse.ArgumentParser(add_help=False)
    store_option.add_argument(
        "--store", metavar="PATH", type=Path, help=f"the results store to read (default: {where})"
    )

    def action(name: str, run: Any, help: str, description: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(
            name, parents=[store_option], help=help, description=description
        )
        parser.set_defaults(run=run, parser=parser)
        return parser

    list_parser = action(
        "list",
        _run_list,
        "the runs, newest first: what was measured, when, and on which machine",
        "List the runs in the store, newest first, one line each.",
    )
    list_parser.add_argument(
        "--limit", type=positive_int, metavar="N", help="show only the newest N runs (default: all)"
    )
    list_parser.add_argument(
        "--kind", metavar="KIND", help="show only runs of this kind, e.g. bench, sweep or profile"
    )
    show_parser = action(
        "show",
        _run_show,
        "one run: its machine, settings, summary and every measurement",
        "Show one run: the machine it ran on, its settings and summary, and a table of its "
        "measurements.",
    )
    show_parser.add_argument(
        "run_id",
        type=positive_int,
        metavar="RUN_ID",
        help="the run's id, as `results list` shows it",
    )
    export_parser = action(
        "export",
        _run_export,
        "write runs to CSV (one line per measurement) or JSON (runs with measurements)",
        "Write the store's runs to a file, or to stdout. CSV has one line per measurement with "
        "its run and machine, ready for pandas or a spreadsheet; JSON has a list of runs, each "
        "with its machine, settings, summary and measurements.",
    )
    export_parser.add_argument(
        "--format",
        choices=("csv", "json"),
        help="the file format (default: from the -o file's extension, .csv or .json)",
    )
    export_parser.add_argument(
        "--run",
        action="extend",
        nargs="+",
        type=positive_int,
        metavar="ID",
        dest="run_ids",
        help="export only this run; repeat or give several ids (default: every run)",
    )
    export_parser.add_argument(
        "-o", "--output", metavar="PATH", type=Path, help="the file to write (default: stdout)"
    )


# --- list ---------------------------------------------------------------------------------


def _run_list(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    path = _store_path(args)
    if not path.exists():
        # Not an error: a newcomer's first question is "where are my results?".
        _write_out(_no_results(path) + "\n")
        return EXIT_OK
    try:
        with ResultsStore(path) as store:
            runs = store.runs(limit=args.limit, kind=args.kind)
            kinds = store.kinds() if not runs else []
    except StoreError as error:
        return fail(parser, error, code=EXIT_BAD_INPUT)
    if not runs:
        if kinds:
            _write_out(
                f"no runs of kind {args.kind!r} in {path}; it has runs of kind: "
                f"{', '.join(kinds)}\n"
            )
        else:
            _write_out(_no_results(path) + "\n")
        return EXIT_OK
    count = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    if args.limit is not None and len(runs) == args.limit:
        shown = f"the newest {count} (--limit {args.limit})"
    else:
        shown = f"{count}, newest first,"
    _write_out(
        f"{format_runs(runs)}\n\n{shown} in {store.path}.\n"
        "For one run's numbers: python -m vecenvs results show ID"
        f"{'' if args.store is None else f' --store {args.store}'}\n"
    )
    return EXIT_OK


def format_runs(runs: Sequence[RunRecord]) -> str:
    """A plain-text table of runs, one line each (what ``results list`` prints)."""
    columns: dict[str, Callable[[RunRecord], str]] = {
        "id": lambda run: str(run.id),
        "started": lambda run: _local_time(run.started_at),
        "kind": lambda run: run.kind,
        "status": lambda run: run.status,
        "label": lambda run: run.label or "-",
        "envs": lambda run: ", ".join(run.env_ids) or "-",
        "N": lambda run: ", ".join(map(str, run.num_envs)) or "-",
        "backends": lambda run: ", ".join(run.backends) or "-",
        "meas.": lambda run: str(run.measurement_count),
        "machine": lambda run: _machine_short(run.machine),
    }
    cells = [[_shorten(cell(run)) for cell in columns.values()] for run in runs]
    return format_table(list(columns), cells, left=set(range(1, 8)) | {9})


# --- show ---------------------------------------------------------------------------------


def _run_show(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    path = _store_path(args)
    if not path.exists():
        return fail(parser, _no_results(path), code=EXIT_BAD_INPUT)
    try:
        with ResultsStore(path) as store:
            run = store.run(args.run_id)
            rows = store.measurements([args.run_id])
    except StoreError as error:
        return fail(parser, error, code=EXIT_BAD_INPUT)

    lines = [f"run {run.id}: {run.kind}, {run.status}"]
    if run.label:
        lines.append(f"  label     {run.label}")
    took = run.duration_seconds
    lines.append(
        f"  started   {_local_time(run.started_at, seconds=True)} (local time)"
        + ("" if took is None else f", took {_duration(took)}")
    )
    lines.append(
        textwrap.fill(
            format_machine(run.machine),
            width=100,
            initial_indent="  machine   ",
            subsequent_indent=" " * 12,
        )
    )
    if run.error:
        lines.append(f"  error     {run.error}")
    lines += ["", "settings:", *_describe_json(run.settings)]
    if run.summary is not None:
        lines += ["", "summary:", *_describe_json(run.summary)]
    lines.append("")
    if rows:
        reference = run.settings.get("reference") if isinstance(run.settings, dict) else None
        lines.append(f"measurements ({len(rows)}), in env steps per second:")
        lines.append(format_measurements(rows, reference=reference))
        divided_by = f"{reference}'s" if reference else "the reference backend's"
        lines.append(
            f"x {reference or 'ref'}: steps/s divided by {divided_by}, measured in the "
            "same run on the same machine."
        )
    else:
        lines.append(
            "no measurements" + (" yet: the run is still going" if run.status == "running" else "")
        )
    _write_out("\n".join(lines) + "\n")
    return EXIT_OK


def format_measurements(rows: Sequence[dict[str, Any]], reference: str | None = None) -> str:
    """A plain-text table of :meth:`ResultsStore.measurements` rows (of one run); ``reference``,
    the backend the ratios are relative to, titles its column.

    The numbers are computed again from the saved windows (:func:`vecenvs.bench.ratios.relate`),
    so a run saved before the lab had one way of computing ratios reads like a new one; rows
    whose ``data`` is not a measurement keep their saved columns.
    """
    ratio = f"x {reference or 'ref'}"
    header = ["env", "N", "backend", "steps/s (median ± std)", ratio, "of ceiling", "checks"]
    measurements: dict[int, Measurement] = {}
    for index, row in enumerate(rows):
        with contextlib.suppress(Exception):  # a damaged row is shown as it was saved
            measurements[index] = Measurement.from_dict(row["data"])
    ratios.relate(measurements.values(), reference=reference or ratios.DEFAULT_REFERENCE)
    table_rows = []
    for index, row in enumerate(rows):
        measured = measurements.get(index)
        if measured is not None and measured.throughputs:
            speed = f"{_number(measured.throughput)} ± {_number(measured.std)}"
            speedup = "-" if measured.ratio is None else f"{measured.ratio:.2f}"
            share, checks = ratios.efficiency_text(measured), ", ".join(measured.checks)
        else:
            speed = f"{_number(row['median'])} ± {_number(row['std'])}"
            speedup = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
            share, checks = "-", ""
        table_rows.append(
            (
                row["env_id"] + describe_kwargs(row["env_kwargs"]),
                str(row["num_envs"]),
                row["backend"] + describe_kwargs(row["backend_kwargs"]),
                speed,
                speedup,
                share,
                checks,
            )
        )
    return format_table(header, table_rows, left={0, 2, 6})


# --- export -------------------------------------------------------------------------------


def _run_export(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    path = _store_path(args)
    output: Path | None = args.output
    file_format = args.format
    if file_format is None:
        suffix = output.suffix.lower() if output is not None else ""
        if suffix not in (".csv", ".json"):
            return fail(
                parser, "which format? add --format csv or --format json", code=EXIT_BAD_INPUT
            )
        file_format = suffix[1:]
    # Check the output before reading anything: no point reading a large store only to fail.
    try:
        if output is not None:
            check_writable(str(output), "-o")
    except ValueError as error:
        return fail(parser, error, code=EXIT_BAD_INPUT)
    if not path.exists():
        return fail(parser, f"{_no_results(path)}; nothing to export", code=EXIT_BAD_INPUT)

    text = io.StringIO()
    try:
        with ResultsStore(path) as store:
            export = store.export_csv if file_format == "csv" else store.export_json
            # Everything is read before the file is touched: no half-written file.
            count = export(text if output is None else output, run_ids=args.run_ids)
    except StoreError as error:
        return fail(parser, error, code=EXIT_BAD_INPUT)
    except OSError as error:
        return fail(
            parser, f"cannot write -o {output}: {error.strerror or error}", code=EXIT_BAD_INPUT
        )
    if output is None:
        _write_out(text.getvalue())
        return EXIT_OK
    what = "measurement" if file_format == "csv" else "run"
    _write_out(f"wrote {count} {what}{'s' if count != 1 else ''} to {output}\n")
    return EXIT_OK


# --- Helpers ------------------------------------------------------------------------------


def _store_path(args: argparse.Namespace) -> Path:
    return args.store.expanduser() if args.store is not None else default_store_path()


def _default_store_where() -> str:
    try:
        return f"{default_store_path()}, which is {_DEFAULT_STORE_RULE}"
    except RuntimeError:  # no home directory to be found: the rule alone
        return _DEFAULT_STORE_RULE


def _no_results(path: Path) -> str:
    return (
        f"no results yet in {path}; run `python -m vecenvs bench --quick` to make some, "
        "or pass --store PATH to read another store"
    )


def _write_out(text: str) -> None:
    """Print to stdout; quietly stop if the reader went away (``... | head``)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null, or Python's own flush at exit fails with the same error
        # and prints a traceback about it.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _shorten(text: str, width: int = MAX_CELL_WIDTH) -> str:
    """``text`` cut to ``width`` characters, ending in "..." if it was cut."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _local_time(iso: str, seconds: bool = False) -> str:
    """A stored UTC time as the local time, e.g. ``2026-05-09 09:35``."""
    try:
        moment = datetime.fromisoformat(iso).astimezone()
    except (TypeError, ValueError):
        return str(iso)
    return moment.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def _duration(seconds: float) -> str:
    """``83.2`` -> ``"1 min 23 s"``."""
    if seconds < 1:
        return "under 1 s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def _machine_short(machine: dict[str, Any]) -> str:
    """``host, N CPUs, CPU model``, for one cell of the ``list`` table."""
    # The CPU model last: when the cell is too wide, its tail is what is cut.
    cpus = machine.get("usable_cpus") or machine.get("logical_cpus")
    parts = [
        machine.get("hostname", "?"),
        *([f"{cpus} CPUs"] if cpus else []),
        machine.get("cpu_model", "?"),
    ]
    return ", ".join(map(str, parts))


def _describe_json(value: Any, indent: str = "  ") -> list[str]:
    """Indented lines for a settings or summary value: a line per key of a dict, and values
    too long for one line spread over several."""
    if isinstance(value, dict) and value:
        lines = []
        for key, item in value.items():
            compact = json.dumps(item)
            if len(indent) + len(key) + len(compact) + 2 <= 100:
                lines.append(f"{indent}{key}: {compact}")
            else:
                lines.append(f"{indent}{key}:")
                lines.extend(indent * 2 + line for line in json.dumps(item, indent=2).splitlines())
        return lines
    return [indent + line for line in json.dumps(value, indent=2).splitlines()]


def _number(value: Any, form: str = "{:,.0f}", unknown: str = "?") -> str:
    """``value`` written as ``form`` says (steps per second with thousands separators), or
    ``unknown`` when it is not a number."""
    return form.format(value) if isinstance(value, (int, float)) else unknown
