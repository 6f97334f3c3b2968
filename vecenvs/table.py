"""Plain text for people: the one table formatter of the CLI, the notebooks and the dashboard,
and the one way a configuration's arguments are written in a label.

>>> print(format_table(["backend", "steps/s"], [["pool", "12,345"], ["gym-sync", "6,789"]]))
backend   steps/s
-----------------
pool       12,345
gym-sync    6,789

Columns are as wide as their widest cell; the first column is flush left and the others, which
hold numbers, flush right (``left=`` names other columns to keep flush left).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any


def format_table(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    left: Collection[int] = (0,),
    title: str | None = None,
    rule: bool = True,
) -> str:
    """``rows`` (cells turned into text with ``str``) under ``header``, a rule of dashes
    between them unless ``rule=False``, optionally a ``title`` line above."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in (header, *cells)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(width) if i in left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths))
        ).rstrip()

    head = line(header)
    lines = [*([title] if title else []), head, *(["-" * len(head)] if rule else [])]
    return "\n".join([*lines, *map(line, cells)])


def describe_kwargs(kwargs: Mapping[str, Any] | Any) -> str:
    """``{"num_workers": 2}`` -> ``" (num_workers=2)"``; nothing for no arguments.

    Exact (every digit of a float): labels made with it are keys that tell configurations
    apart. For display, :func:`vecenvs.bench.engine.short_env_labels` is shorter. Anything but
    a mapping (read from a damaged store, say) is shown as it is.
    """
    if not kwargs:
        return ""
    if not isinstance(kwargs, Mapping):
        return f" ({kwargs})"
    return " (" + ", ".join(f"{key}={value}" for key, value in kwargs.items()) + ")"
