"""[source] links to this package's code (``sphinx.ext.viewcode``), and [docs] links back that
land where each name is documented.

viewcode gives each documented name a [source] link to a page of its module's code, and that
page a [docs] link back to the name. It builds the way back from one module path per module: the
path the module's first documented name was documented under. Here a module's public names are
documented where users import them (``vecenvs.MultiEnv``, on ``api/generated/``) and the rest
under the module (``vecenvs.multi_env.EnvsVectorEnv``, on ``api/modules/``), so half of the
[docs] links pointed at anchors that do not exist. This runs viewcode's page collection and
points each [docs] link at the page and anchor the name is documented at.

Only this package's modules get code pages: a name it re-exports from gymnasium (its errors) has
no [source] link, rather than one to a page of gymnasium's code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from aliases import MISSING, documented_objects, find
from sphinx.application import Sphinx
from sphinx.ext import viewcode

#: A [docs] link of a code page: its target page and anchor.
BACK = re.compile(r'<a class="viewcode-back" href="([^"#]*)#([^"]+)">')


def find_source(app: Sphinx, modname: str) -> tuple[str, dict[str, Any]] | None:
    """No code, and no [source] links, for a module that is not this package's."""
    if modname.split(".")[0] != "vecenvs":
        return "", {}
    return None  # viewcode reads the module itself


def where_documented(app: Sphinx, modname: str, name: str) -> tuple[str, str] | None:
    """(page, anchor) of the name ``name`` of module ``modname``, wherever it is documented."""
    objects = app.env.get_domain("py").objects
    full = f"{modname}.{name}"
    if full not in objects:
        obj = find(full)
        documented = None if obj is MISSING else documented_objects(app.env).get(id(obj))
        if documented is None or documented not in objects:
            return None
        full = documented
    entry = objects[full]
    return entry.docname, entry.node_id


def collect_pages(app: Sphinx) -> Iterator[tuple[str, dict[str, Any], str]]:
    env = app.env
    modules = getattr(env, "_viewcode_modules", None)
    if modules is None:
        return
    ours = {name: entry for name, entry in modules.items() if entry and entry[0]}
    env._viewcode_modules = ours  # type: ignore[attr-defined]
    try:
        pages = list(viewcode.collect_pages(app))
    finally:
        env._viewcode_modules = modules  # type: ignore[attr-defined]
    for pagename, context, template in pages:
        modname = pagename.removeprefix(viewcode.OUTPUT_DIRNAME + "/").replace("/", ".")
        entry = ours.get(modname)
        if entry is not None and "body" in context:
            context["body"] = fix_backlinks(app, pagename, modname, entry[3], context["body"])
        yield pagename, context, template


def fix_backlinks(app: Sphinx, pagename: str, modname: str, refname: str, body: str) -> str:
    """``body`` (module ``modname``'s code page) with each [docs] link, which viewcode wrote
    as ``refname.name``, pointing where that name is documented."""

    def fix(match: re.Match[str]) -> str:
        anchor = match.group(2)
        name = anchor[len(refname) + 1 :] if anchor.startswith(refname + ".") else anchor
        found = where_documented(app, modname, name)
        if found is None:
            return match.group(0)
        uri = app.builder.get_relative_uri(pagename, found[0])
        return f'<a class="viewcode-back" href="{uri}#{found[1]}">'

    return BACK.sub(fix, body)


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.viewcode")
    for listener in list(app.events.listeners.get("html-collect-pages", [])):
        if listener.handler is viewcode.collect_pages:
            app.disconnect(listener.id)
    app.connect("html-collect-pages", collect_pages)
    app.connect("viewcode-find-source", find_source)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
