"""Writes out, on the class a user calls, the keyword arguments it takes through ``**kwargs``.

``PoolVecEnv(..., **kwargs)`` passes ``timeout``, ``start_timeout``, ``copy``... on to
``ChunkedVecEnv.__init__``: a reader of PoolVecEnv's page should see them there, with their
defaults, without following the chain. So, for a class whose ``__init__`` takes ``**kwargs``,
this extension walks its bases (method resolution order) to the next ``__init__`` of its own,
and adds that one's keyword arguments to the signature and its documented ``Args`` to the
parameter list, until an ``__init__`` without ``**kwargs`` ends the chain.

A keyword the class passes to ``super().__init__`` itself (read from its source) is not the
caller's to give: ``AsyncPoolVecEnv`` sets ``step_in_caller=False``, so its page does not offer
``step_in_caller``. Nothing here names a class of vecenvs: the chain is read from the code, so
it follows the code when the classes change.
"""

from __future__ import annotations

import ast
import enum
import inspect
import textwrap
from typing import Any

from sphinx.application import Sphinx
from sphinx.ext.napoleon import Config as NapoleonConfig
from sphinx.ext.napoleon.docstring import GoogleDocstring
from sphinx.util.inspect import stringify_signature


def own_init(cls: type) -> Any:
    """``cls.__init__`` if ``cls`` defines it itself, else None."""
    return cls.__dict__.get("__init__")


def passed_to_super(init: Any) -> set[str]:
    """The keywords ``init`` gives ``super().__init__(...)`` itself (empty if unreadable)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"
            and isinstance(node.func.value, ast.Call)
            and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "super"
        ):
            names.update(keyword.arg for keyword in node.keywords if keyword.arg)
    return names


def inherited_chain(cls: type) -> list[tuple[type, list[inspect.Parameter]]]:
    """Each base whose ``__init__`` receives ``cls``'s ``**kwargs``, with the parameters it adds."""
    init = own_init(cls) or cls.__init__
    try:
        signature = inspect.signature(init)
    except (TypeError, ValueError):
        return []
    seen = set(signature.parameters)
    excluded = passed_to_super(init)
    chain: list[tuple[type, list[inspect.Parameter]]] = []
    has_kwargs = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    for base in cls.__mro__[1:]:
        if not has_kwargs:
            break
        base_init = own_init(base)
        if base_init is None or base is object:
            continue
        try:
            base_signature = inspect.signature(base_init)
        except (TypeError, ValueError):
            break
        added = [
            parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for name, parameter in base_signature.parameters.items()
            if name not in seen
            and name not in excluded
            and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
            and parameter.default is not parameter.empty  # a required one is passed by cls
        ]
        seen.update(base_signature.parameters)
        excluded |= passed_to_super(base_init)
        if added:
            chain.append((base, added))
        has_kwargs = any(p.kind is p.VAR_KEYWORD for p in base_signature.parameters.values())
    return chain


def merged_signature(cls: type) -> inspect.Signature | None:
    """``cls``'s constructor signature with the inherited keywords in place of ``**kwargs``."""
    chain = inherited_chain(cls)
    if not chain:
        return None
    init = own_init(cls) or cls.__init__
    parameters = [p for p in inspect.signature(init).parameters.values() if p.name != "self"]
    var_keyword = [p for p in parameters if p.kind is p.VAR_KEYWORD]
    parameters = [p for p in parameters if p.kind is not p.VAR_KEYWORD]
    for _, added in chain:
        parameters.extend(added)
    # The chain ends at an __init__ without **kwargs only if the last base has none.
    last_init = own_init(chain[-1][0])
    last = inspect.signature(last_init).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in last):
        parameters.extend(var_keyword)
    return inspect.Signature(parameters)


def documented_params(cls: type, config: NapoleonConfig) -> dict[str, list[str]]:
    """The ``:param name:`` fields (with their continuation lines) napoleon makes of ``cls``'s
    Google-style ``Args:``, by name (``a, b: ...`` gives both names the same text)."""
    lines = GoogleDocstring(inspect.getdoc(cls) or "", config).lines()
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith(":param "):
            names, _, _ = line[len(":param ") :].partition(":")
            current = [line]
            for name in names.replace("\\", "").split(","):
                fields[name.strip()] = current
        elif current is not None and line.startswith(" ") and line.strip():
            current.append(line)
        else:
            current = None
    return fields


def rename_field(lines: list[str], name: str) -> list[str]:
    """A ``:param a, b:`` field given for ``a`` alone (the text is shared)."""
    _, _, text = lines[0][len(":param ") :].partition(":")
    return [f":param {name}:{text}", *lines[1:]]


def default_text(value: Any) -> str:
    """A default as code shows it: ``AutoresetMode.NEXT_STEP``, not the enum's repr."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


def process_signature(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, signature: str, annotation: str
) -> tuple[str, str] | None:
    if what != "class" or not inspect.isclass(obj):
        return None
    merged = merged_signature(obj)
    if merged is None:
        return None
    show_annotation = app.config.autodoc_typehints in ("signature", "both")
    return stringify_signature(merged, show_annotation=show_annotation), annotation


def process_docstring(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """Adds the inherited keywords' fields after the class's own (napoleon has already run),
    each with its default and the class it is passed on to; drops the ``**kwargs`` field when
    the signature no longer has ``**kwargs``."""
    if what != "class" or not inspect.isclass(obj):
        return
    chain = inherited_chain(obj)
    merged = merged_signature(obj)
    if not chain or merged is None:
        return
    config = NapoleonConfig(napoleon_use_param=True, napoleon_use_rtype=True)
    added: list[str] = []
    for base, parameters in chain:
        fields = documented_params(base, config)
        where = f"passed on to :class:`~{base.__module__}.{base.__qualname__}`"
        for parameter in parameters:
            field = (
                rename_field(fields[parameter.name], parameter.name)
                if parameter.name in fields
                else [f":param {parameter.name}:"]
            )
            field[-1] += f" (default ``{default_text(parameter.default)}``; {where})"
            added.extend(field)
    if not any(p.kind is p.VAR_KEYWORD for p in merged.parameters.values()):
        drop_field(lines, "\\*\\*kwargs")
    # After the last :param: field (and its continuation lines), or at the end.
    insert_at = len(lines)
    for index, line in enumerate(lines):
        if line.startswith(":param "):
            insert_at = field_end(lines, index)
    lines[insert_at:insert_at] = added


def field_end(lines: list[str], index: int) -> int:
    """The index just after the field starting at ``lines[index]`` (its indented lines)."""
    index += 1
    while index < len(lines) and lines[index].startswith(" "):
        index += 1
    return index


def drop_field(lines: list[str], name: str) -> None:
    """Removes the ``:param name:`` field (and its continuation lines), if there is one."""
    for index, line in enumerate(lines):
        if line.startswith(f":param {name}:"):
            del lines[index : field_end(lines, index)]
            return


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.napoleon")
    app.connect("autodoc-process-signature", process_signature)
    # After napoleon (priority 500), which turns the Args: section into :param: fields.
    app.connect("autodoc-process-docstring", process_docstring, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
