"""Lists every argument of a public class's constructor and of a public function, with its
default.

A class's ``Args:`` may leave out an argument that a class it builds on documents:
``PoolVecEnv(env_fns, ...)`` takes the same ``env_fns`` as ``MultiEnv``, documented there.
This adds the missing argument's field from the nearest class that documents an argument of
that name and annotation: the class's bases first, then the classes its docstring names, and
theirs, breadth first, saying which (``(as for MultiEnv)``). An argument of a public name that
is documented nowhere is a build warning (an error under ``-W``), naming it.

Each field of an argument with a default ends with that default, ``(default ``None``)``, unless
its text already speaks of the default. Runs after napoleon (``google_style.py``) and after
``inherited_kwargs.py``, which writes out the keyword arguments passed on through ``**kwargs``.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections import deque
from typing import Any

from inherited_kwargs import default_text, documented_params, field_end, merged_signature
from sphinx.application import Sphinx
from sphinx.ext.napoleon import Config as NapoleonConfig
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: (name, argument) already warned about: autodoc reads a docstring more than once.
WARNED: set[tuple[str, str]] = set()

#: The end of a field taken from another class (:func:`borrowed_field`).
BORROWED = re.compile(r" \(as for (:class:`[^`]+`)\)$")

#: A class named in a docstring: ``:class:`~vecenvs.pool.PoolVecEnv```.
CLASS_ROLE = re.compile(r":(?:py:)?class:`~?([\w.]+)`")


def constructor_signature(cls: type) -> inspect.Signature | None:
    """The signature a user calls ``cls`` with (``**kwargs`` written out where it is passed on)."""
    merged = merged_signature(cls)
    if merged is not None:
        return merged
    try:
        return inspect.signature(cls)
    except (TypeError, ValueError):
        return None


def own_params(cls: type) -> dict[str, inspect.Parameter]:
    """The arguments ``cls``'s own ``__init__`` takes by name."""
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {}
    return dict(parameters)


def named_class(path: str) -> type | None:
    """The class at the dotted ``path``, if it is one of this package's."""
    module_path, _, name = path.rpartition(".")
    if not module_path.startswith("vecenvs"):
        return None
    try:
        found = getattr(importlib.import_module(module_path), name, None)
    except ImportError:
        return None
    return found if inspect.isclass(found) else None


def related_classes(cls: type) -> list[type]:
    """The package's classes ``cls`` builds on: its bases, then the classes its docstring names,
    and theirs, breadth first."""
    seen: set[type] = {cls}
    order: list[type] = []
    queue: deque[type] = deque([cls])
    while queue:
        current = queue.popleft()
        bases = [b for b in current.__mro__[1:] if b.__module__.startswith("vecenvs")]
        named = [named_class(path) for path in CLASS_ROLE.findall(inspect.getdoc(current) or "")]
        for other in [*bases, *(c for c in named if c is not None)]:
            if other not in seen:
                seen.add(other)
                order.append(other)
                queue.append(other)
    return order


def borrowed_field(cls: type, parameter: inspect.Parameter) -> list[str] | None:
    """The field of ``parameter`` from the nearest related class that takes and documents an
    argument of that name and annotation, saying which class; None if none does."""
    config = NapoleonConfig(napoleon_use_param=True, napoleon_use_rtype=True)
    for other in related_classes(cls):
        theirs = own_params(other).get(parameter.name)
        if theirs is None or same_type(theirs.annotation) != same_type(parameter.annotation):
            continue
        fields = documented_params(other, config)
        if parameter.name in fields:
            _, _, text = fields[parameter.name][0][len(":param ") :].partition(":")
            field = [f":param {parameter.name}:{text}", *fields[parameter.name][1:]]
            field[-1] += f" (as for :class:`~{other.__module__}.{other.__qualname__}`)"
            return field
    return None


def same_type(annotation: Any) -> str:
    """An annotation as text without module paths: ``Callable[[], gym.Env]`` written as a string
    and ``typing.Callable[[], gymnasium.core.Env]`` evaluated read the same."""
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return re.sub(r"\b[A-Za-z_]\w*\.", "", text).replace(" ", "")


def field_names(line: str) -> list[str]:
    """The argument names a ``:param a, b:`` line documents."""
    names, _, _ = line[len(":param ") :].partition(":")
    return [name.replace("\\", "").strip() for name in names.split(",")]


def is_public(name: str) -> bool:
    """Whether ``name`` (``vecenvs.PoolVecEnv``) is one of the names users import."""
    import vecenvs

    module, _, short = name.rpartition(".")
    return module == "vecenvs" and short in vecenvs.__all__


def process_docstring(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    if what == "class" and inspect.isclass(obj) and not issubclass(obj, BaseException):
        signature = constructor_signature(obj)
    elif what == "function" and callable(obj):
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):
            signature = None
    else:
        return
    if signature is None:
        return
    named = [
        p
        for p in signature.parameters.values()
        if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    documented = {n for line in lines if line.startswith(":param ") for n in field_names(line)}
    for parameter in named:
        if parameter.name in documented:
            continue
        field = borrowed_field(obj, parameter) if inspect.isclass(obj) else None
        if field is None:
            if is_public(name) and (name, parameter.name) not in WARNED:
                WARNED.add((name, parameter.name))
                logger.warning(
                    "%s: its argument %r is documented nowhere (add it to the docstring's Args:)",
                    name,
                    parameter.name,
                )
            continue
        lines[insert_at(lines, parameter, named) : insert_at(lines, parameter, named)] = field
    add_defaults(lines, {p.name: p for p in named})


def insert_at(lines: list[str], parameter: inspect.Parameter, named: list[Any]) -> int:
    """Where ``parameter``'s field goes: before the field of the next argument in the signature
    that has one, else after the last field."""
    after = [p.name for p in named[named.index(parameter) + 1 :]]
    last = None
    for index, line in enumerate(lines):
        if line.startswith(":param "):
            if any(n in after for n in field_names(line)):
                return index
            last = field_end(lines, index)
    return len(lines) if last is None else last


def add_defaults(lines: list[str], parameters: dict[str, inspect.Parameter]) -> None:
    """Ends each argument's field with its default, unless its text speaks of one already."""
    for index, line in enumerate(lines):
        if not line.startswith(":param "):
            continue
        names = [n for n in field_names(line) if n in parameters]
        defaults = [parameters[n].default for n in names]
        if not names or any(d is inspect.Parameter.empty for d in defaults):
            continue
        end = field_end(lines, index)
        if "default" in " ".join(lines[index:end]).lower():
            continue
        shown = " / ".join(f"``{d}``" for d in sorted({default_text(d) for d in defaults}))
        borrowed = BORROWED.search(lines[end - 1])
        if borrowed:  # one parenthesis: (default ``True``; as for ChunkedVecEnv)
            lines[end - 1] = lines[end - 1][: borrowed.start()] + f" (default {shown}; as for "
            lines[end - 1] += borrowed.group(1) + ")"
        else:
            lines[end - 1] += f" (default {shown})"


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    # After napoleon (google_style.py, 500) and inherited_kwargs.py (600).
    app.connect("autodoc-process-docstring", process_docstring, priority=700)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
