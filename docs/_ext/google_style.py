"""Reads the package's Google-style docstrings with napoleon, but an attribute's as plain text.

napoleon reads the first line of an attribute's or a property's docstring as ``type:
description`` when it has a colon: "The envs this process steps itself (None: the workers step
them all)." became the type "The envs this process steps itself (None" and the description "the
workers step them all).". The package never writes types there: they are annotations, which
autodoc already shows beside the name. So this runs napoleon's Google parser on every docstring
(``conf.py`` turns napoleon's own handler off with ``napoleon_google_docstring = False``), and
on an attribute's, property's or module variable's as on any other text.

A method or property of this package with no docstring of its own (``MultiEnv.get_attr_at``,
which overrides ``EnvsVectorEnv``'s) shows the docstring of the nearest of the package's own
bases that has one; never gymnasium's (``conf.py``: ``autodoc_inherit_docstrings = False``),
written for its classes in its own markup.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from sphinx.application import Sphinx
from sphinx.ext.napoleon.docstring import GoogleDocstring
from sphinx.util.docstrings import prepare_docstring

#: What napoleon reads as ``type: description``: these are read as text instead.
ATTRIBUTE_KINDS = ("attribute", "property", "data")


def process_docstring(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    if not any(line.strip() for line in lines) and what in ("method", "property"):
        lines[:] = prepare_docstring(nearest_docstring(name))
    # napoleon decides its kind from the object when it is given none ("object" here).
    kind = "" if what in ATTRIBUTE_KINDS else what
    lines[:] = GoogleDocstring(lines, app.config, app, kind, name, obj, options).lines()


def nearest_docstring(name: str) -> str:
    """The docstring of the member ``name`` (``vecenvs.MultiEnv.get_attr_at``) in the nearest of
    its class's bases of this package that documents it; empty if none does."""
    path, _, member = name.rpartition(".")
    module_path, _, class_name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_path), class_name)
    except (ImportError, AttributeError, ValueError):
        return ""
    for base in getattr(cls, "__mro__", ())[1:]:
        if base.__module__.split(".")[0] != "vecenvs" or member not in vars(base):
            continue
        value = vars(base)[member]
        value = value.fget if isinstance(value, property) else value
        if getattr(value, "__doc__", None):
            return inspect.cleandoc(value.__doc__)
    return ""


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.napoleon")
    # napoleon's own handler runs at the default priority, 500: this one instead of it, before
    # the handlers that read napoleon's fields (inherited_kwargs.py, parameters.py).
    app.connect("autodoc-process-docstring", process_docstring, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
