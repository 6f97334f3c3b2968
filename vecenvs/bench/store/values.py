"""The values the store writes and reads back: plain JSON, UTC times, checked numbers, and
:class:`StoreError`, the one error the store raises."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from vecenvs.checks import check_whole_number


class StoreError(ValueError):
    """The results store can't be used as asked (a bad path, a file that is not a results store
    or is from a newer vecenvs, an unknown run id, a bad argument); one line saying what to fix."""


def whole_number(name: str, value: Any, minimum: int | None = None) -> int:
    """:func:`~vecenvs.checks.check_whole_number`, raising StoreError."""
    try:
        return check_whole_number(name, value, minimum)
    except ValueError as error:
        raise StoreError(str(error)) from None


def run_ids(ids: Iterable[Any]) -> list[int]:
    """The run ids in order, each once, each checked to be a whole number."""
    return [whole_number("run id", run_id) for run_id in dict.fromkeys(ids)]


def plain(value: Any) -> Any:
    """``value`` as plain JSON values: NaN and infinities become None, tuples lists, and so on.

    ``json.dumps`` would write NaN as the bare word ``NaN``, which other tools refuse to read.
    A value JSON has no word for (an Enum, a Path) becomes its text rather than failing a run
    that may have taken an hour to measure.
    """
    if isinstance(value, float):  # numpy's float64 is a float too
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, Enum):
        return plain(value.value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars, without importing numpy
        return plain(value.tolist())
    return str(value)


def to_json(value: Any) -> str:
    """Compact JSON text of ``value`` made plain, keys sorted (equal values, equal text)."""
    return json.dumps(plain(value), sort_keys=True, allow_nan=False)


def from_json(text: str | None) -> Any:
    """The value of a JSON column; ``None`` for SQL NULL."""
    return None if text is None else json.loads(text)


def utc_now() -> str:
    """The time now, in UTC, as ISO-8601 text with milliseconds (it sorts correctly as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
