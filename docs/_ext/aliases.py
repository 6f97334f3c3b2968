"""Resolves a cross-reference to a vecenvs name by whichever path it is documented under.

The public classes are documented where users import them (``vecenvs.PoolVecEnv``), while the
package's docstrings name them where they are defined (``:class:`~vecenvs.pool.PoolVecEnv```),
and the other way round. Both are the same object: when a reference to ``vecenvs...`` finds no
target, this imports it, and links to the documented name of the same object, if there is one.
Two more cases, each for a name the code really has:

- an attribute that is not documented on its own (a dataclass field commented with ``#``):
  the link goes to its class;
- a name its module keeps out of its ``__all__`` (a ``TypeVar``, a ``Protocol`` used in
  annotations): shown as code, with no link, since the reference pages document ``__all__``.

A reference to a name the code does not have stays a warning (the build runs nitpicky, ``-n``).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

#: What :func:`find` returns for a path that names nothing (None may be a real value).
MISSING = object()


def find(path: str) -> Any:
    """The object at the dotted ``path`` (a module, or a name inside one), or :data:`MISSING`."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for name in parts[split:]:
                obj = getattr(obj, name)
        except AttributeError:
            return MISSING
        return obj
    return MISSING


def documented_objects(env: BuildEnvironment) -> dict[int, str]:
    """id(object) -> the name it is documented under, for every documented vecenvs object."""
    cache = getattr(env, "_vecenvs_documented", None)
    if cache is None:
        cache = {}
        for name, _ in env.get_domain("py").objects.items():
            if name.startswith("vecenvs"):
                obj = find(name)
                if obj is not MISSING and not isinstance(obj, (int, float, str, bool, type(None))):
                    cache.setdefault(id(obj), name)
        env._vecenvs_documented = cache  # type: ignore[attr-defined]
    return cache


def kept_private(path: str) -> bool:
    """Whether ``path`` names a module-level name its module leaves out of ``__all__``."""
    module_path, _, name = path.rpartition(".")
    module = find(module_path)
    names = getattr(module, "__all__", None)
    return inspect.ismodule(module) and names is not None and name not in names


def resolve(
    app: Sphinx, env: BuildEnvironment, node: Any, contnode: nodes.Element
) -> nodes.Element | None:
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target.startswith("vecenvs"):
        return None
    domain = env.get_domain("py")
    obj = find(target)
    plain = obj is MISSING or isinstance(obj, (int, float, str, bool, type(None)))
    documented = None if plain else documented_objects(env).get(id(obj))  # one value, many names
    if documented is not None and documented != target:
        return domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], documented, node, contnode
        )
    owner_path, _, attribute = target.rpartition(".")
    owner = find(owner_path)
    if inspect.isclass(owner) and attribute in getattr(owner, "__dataclass_fields__", {}):
        documented_owner = documented_objects(env).get(id(owner))
        if documented_owner is not None:
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, "class", documented_owner, node, contnode
            )
    if obj is not MISSING and documented is None and kept_private(target):
        return contnode
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("missing-reference", resolve)
    app.connect("env-updated", lambda app, env: env.__dict__.pop("_vecenvs_documented", None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
