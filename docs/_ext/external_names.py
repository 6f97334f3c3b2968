"""Links the names of other projects (Python, numpy, gymnasium) under the path their docs use.

autodoc names a class where it is defined: ``gymnasium.core.Env``, ``numpy.random._generator.
Generator``, ``multiprocessing.context.TimeoutError``; a docstring or an annotation may use an
import alias (``gym.Env``, ``np.ndarray``). The projects' inventories (``docs/_inventories``)
list them where users import them: ``gymnasium.Env``, ``numpy.random.Generator``. When
intersphinx finds no target, this tries the same object's public path (the shortest import path
that gives the same object) and the alias spelled out, and asks intersphinx again.

A bare name in one of our docstrings (``:class:`RaySession``` in ``RayVecEnv``'s) is looked up
in the module that defines the documented object, as Python would read it there; an alias with
no module around it (a signature ``inherited_kwargs.py`` wrote) is what the package's modules
import under that name.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from bases import public_paths
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.ext import intersphinx


def find(path: str) -> Any:
    """The object at the dotted ``path``, or None."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except Exception:
            continue
        try:
            for name in parts[split:]:
                found = getattr(found, name)
        except AttributeError:
            return None
        return found
    return None


def context_module(node: Any) -> Any:
    """The module that defines the object whose docstring holds ``node``'s reference."""
    module_name = node.get("py:module") or ""
    owner = find(".".join(p for p in (module_name, node.get("py:class")) if p))
    defining = getattr(owner, "__module__", None) or module_name
    return find(defining) if defining else None


def package_alias(name: str) -> Any:
    """The module that this package's modules import as ``name`` (``gym``, ``np``), if they
    all mean the same one by it; else None."""
    import sys

    meant = {
        id(value): value
        for module_name, module in list(sys.modules.items())
        if module_name.split(".")[0] == "vecenvs"
        and inspect.ismodule(value := getattr(module, name, None))
    }
    return next(iter(meant.values())) if len(meant) == 1 else None


def candidates(target: str, node: Any) -> list[str]:
    """Other spellings of ``target`` that name the same object."""
    found = []
    head, _, rest = target.partition(".")
    module = context_module(node)
    alias = getattr(module, head, None) if module is not None else None
    if alias is None and rest:  # a signature autodoc wrote with no module around it
        alias = package_alias(head)
    if rest and inspect.ismodule(alias) and alias.__name__ != head:
        found.append(f"{alias.__name__}.{rest}")  # gym.Env -> gymnasium.Env
    if not rest and alias is not None and getattr(alias, "__module__", None):
        found.append(f"{alias.__module__}.{head}")  # a bare name, as its module reads it
    for path in [target, *found]:
        obj = find(path)
        if isinstance(obj, type) or callable(obj):
            found += [p for p in public_paths(obj) if p not in (target, *found)]
    return found


def resolve(
    app: Sphinx, env: BuildEnvironment, node: Any, contnode: nodes.Element
) -> nodes.Element | None:
    if node.get("refdomain") != "py" or node.get("_external_names_retry"):
        return None
    target = node.get("reftarget", "")
    for other in candidates(target, node):
        retry = node.deepcopy()
        retry["reftarget"] = other
        retry["_external_names_retry"] = True
        domain = env.get_domain("py")
        found = domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], other, retry, contnode
        )
        if found is None:
            found = intersphinx.missing_reference(app, env, retry, contnode)
        if found is not None:
            return found
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.intersphinx")
    # After intersphinx's own handler and aliases.py's (default priority 500).
    app.connect("missing-reference", resolve, priority=800)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
