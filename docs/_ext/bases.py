"""Names a class's bases so that no two read the same.

autodoc shows each base by its last name: ``WorkerTimeoutError``'s bases, the built-in
``TimeoutError``, ``multiprocessing``'s and ``multiprocess``'s, read "VecEnvError, TimeoutError,
TimeoutError, TimeoutError". Where two bases share a name, this shows them by the path a reader
imports them from (``multiprocessing.TimeoutError``, not ``multiprocessing.context``'s), so each
is told apart and links to its own page where there is one.
"""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

from sphinx.application import Sphinx


def public_paths(cls: Any) -> list[str]:
    """Every dotted path, shortest first, that imports ``cls`` itself through public modules:
    ``multiprocessing.TimeoutError`` for ``multiprocessing.context.TimeoutError``;
    ``gymnasium.Space`` and ``gymnasium.spaces.Space`` for ``gymnasium.spaces.space.Space``. A
    built-in is its bare name."""
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", getattr(cls, "__name__", repr(cls)))
    if module == "builtins":
        return [name]
    parts = module.split(".")
    found = []
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if any(part.startswith("_") for part in parts[:end]) and end < len(parts):
            continue
        try:
            value = importlib.import_module(prefix)
            for attribute in name.split("."):
                value = getattr(value, attribute)
        except (ImportError, AttributeError):
            continue
        if value is cls:
            found.append(f"{prefix}.{name}")
    return found or [f"{module}.{name}"]


def public_path(cls: Any) -> str:
    """The shortest of :func:`public_paths`."""
    return public_paths(cls)[0]


def process_bases(app: Sphinx, name: str, obj: Any, options: Any, bases: list[Any]) -> None:
    """Replaces, in place, each base whose name another base shares by its full public path."""
    short = Counter(getattr(base, "__name__", None) for base in bases if isinstance(base, type))
    for index, base in enumerate(bases):
        if isinstance(base, type) and short[base.__name__] > 1:
            role = "exc" if issubclass(base, BaseException) else "class"
            bases[index] = f":py:{role}:`{public_path(base)}`"


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-bases", process_bases)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
