"""Exporting runs and their measurements as JSON (one document) or CSV (one line per
measurement); :meth:`ResultsStore.export_json` and ``export_csv`` read, these write."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping
from typing import IO, Any

from vecenvs.bench.store.records import MEASUREMENT_COLUMNS, RunRecord

#: Where an export goes: a file name, or an open text file such as ``sys.stdout``.
Destination = str | os.PathLike[str] | IO[str]


def write_json(destination: Destination, runs: list[RunRecord], rows: list[dict[str, Any]]) -> None:
    """A list of runs, each with every :class:`RunRecord` field and ``measurements``: a list of
    ``{"id", "recorded_at", "env_id", ..., "ratio", "data"}``."""
    by_run: dict[int, list[dict[str, Any]]] = {run.id: [] for run in runs}
    for row in rows:
        by_run[row["run_id"]].append(
            {
                "id": row["measurement_id"],
                "recorded_at": row["recorded_at"],
                **{name: row[name] for name in MEASUREMENT_COLUMNS},
                "data": row["data"],
            }
        )
    document = [{**run.to_dict(), "measurements": by_run[run.id]} for run in runs]
    _write(destination, json.dumps(document, indent=2, allow_nan=False) + "\n")


def write_csv(destination: Destination, rows: list[dict[str, Any]]) -> None:
    """One line per row: its columns (the kwargs as JSON text), then every field of its
    ``data`` flattened (``config.warmup_seconds``), less those repeating a column."""
    lines = []
    columns: dict[str, None] = {}  # an ordered set: every row may add fields
    for row in rows:
        line = {name: value for name, value in row.items() if name != "data"}
        for name in ("env_kwargs", "backend_kwargs"):
            line[name] = json.dumps(line[name], sort_keys=True)
        for name, value in _flatten(row["data"]).items():
            if name not in line and name.removeprefix("config.") not in line:
                line[name] = value
        columns.update(dict.fromkeys(line))
        lines.append(line)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns), restval="")
    writer.writeheader()
    writer.writerows(lines)
    _write(destination, text.getvalue())


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"config": {"seed": 0}, "throughputs": [1.0]}`` -> ``{"config.seed": 0,
    "throughputs": "[1.0]"}``: one value per CSV column (None becomes an empty cell)."""
    if not isinstance(data, Mapping):
        return {prefix.rstrip(".") or "data": _cell(data)}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = _cell(value)
    return flat


def _cell(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def _write(destination: Destination, text: str) -> None:
    if isinstance(destination, (str, os.PathLike)):
        # newline="": the text already has the line endings it needs (CSV uses \r\n).
        with open(destination, "w", encoding="utf-8", newline="") as file:
            file.write(text)
    else:
        destination.write(text)
