"""Writes the intersphinx inventories of gymnasium and numpy that ``docs/conf.py`` reads.

An inventory (``objects.inv``) lists the names a project's site documents and where; intersphinx
links a name in our pages to that page. Intersphinx normally downloads it from the project's
site when the docs are built; this project builds its docs with no network, so the inventories
are files here (``README.md`` beside this says where each came from):

    python docs/_inventories/make_inventories.py gymnasium PATH/TO/Gymnasium/docs/api
    python docs/_inventories/make_inventories.py numpy

- **gymnasium**: every name gymnasium's own documentation sources (``docs/api/**/*.md`` of its
  repository) document with an autodoc directive (``autoclass``, ``autofunction``,
  ``automethod``...), at the page that directive is on, as gymnasium's site
  (``https://gymnasium.farama.org``, built with Sphinx's ``dirhtml`` builder) puts it:
  ``api/vector/#gymnasium.vector.VectorEnv``.
- **numpy**: the few numpy names this package's pages refer to, at the pages numpy's site
  (``https://numpy.org/doc/stable``) documents them on (:data:`NUMPY`).

Both are written in Sphinx's inventory format, version 2 (a four-line header, then one zlib
compressed line per name: ``name domain:role priority uri display-name``), which Sphinx's
``InventoryFile.load`` reads back (``tests/test_docs.py`` checks that).
"""

from __future__ import annotations

import argparse
import re
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: What each autodoc directive documents, as the Python domain's object type.
DIRECTIVES = {
    "autoclass": "class",
    "autoexception": "exception",
    "autofunction": "function",
    "automethod": "method",
    "autoattribute": "attribute",
    "autoproperty": "property",
    "autodata": "data",
    "automodule": "module",
}

#: numpy's names our pages use, and their pages on numpy's site (numpy's reference documents
#: each class and function on a page of its own under ``reference/generated/``, the scalar
#: types on ``arrays.scalars``, the random generator on ``random/generator``).
NUMPY = {
    "numpy.ndarray": ("class", "reference/generated/numpy.ndarray.html#numpy.ndarray"),
    "numpy.dtype": ("class", "reference/generated/numpy.dtype.html#numpy.dtype"),
    "numpy.generic": ("class", "reference/arrays.scalars.html#numpy.generic"),
    "numpy.float32": ("class", "reference/arrays.scalars.html#numpy.float32"),
    "numpy.float64": ("class", "reference/arrays.scalars.html#numpy.float64"),
    "numpy.int64": ("class", "reference/arrays.scalars.html#numpy.int64"),
    "numpy.random.Generator": (
        "class",
        "reference/random/generator.html#numpy.random.Generator",
    ),
    "numpy.random.default_rng": (
        "function",
        "reference/random/generator.html#numpy.random.default_rng",
    ),
}


def write_inventory(
    path: Path, project: str, version: str, entries: dict[str, tuple[str, str]]
) -> None:
    """``entries``: name -> (object type, uri relative to the site's root)."""
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project}\n"
        f"# Version: {version}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    lines = "".join(
        f"{name} py:{kind} 1 {uri} -\n" for name, (kind, uri) in sorted(entries.items())
    )
    path.write_bytes(header.encode() + zlib.compress(lines.encode(), 9))


def gymnasium_entries(api: Path) -> dict[str, tuple[str, str]]:
    """Every name ``api`` (gymnasium's ``docs/api`` folder) documents with an autodoc
    directive, at its page's address (``dirhtml``: ``api/vector/`` for ``api/vector.md``)."""
    entries: dict[str, tuple[str, str]] = {}
    directive = re.compile(r"^\s*\.\. (auto\w+|py:currentmodule|currentmodule):: *(\S+)")
    for page in sorted(api.rglob("*.md")):
        address = "api/" + page.relative_to(api).with_suffix("").as_posix() + "/"
        module = ""
        for line in page.read_text(encoding="utf-8").splitlines():
            found = directive.match(line)
            if not found:
                continue
            kind, name = found.groups()
            if kind.endswith("currentmodule"):
                module = name
                continue
            if kind not in DIRECTIVES:
                continue
            if not name.startswith("gymnasium") and module:
                name = f"{module}.{name}"
            anchor = f"module-{name}" if kind == "automodule" else name
            entries.setdefault(name, (DIRECTIVES[kind], f"{address}#{anchor}"))
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", choices=["gymnasium", "numpy"])
    parser.add_argument("api", nargs="?", type=Path, help="gymnasium's docs/api folder")
    parser.add_argument("--version", default="", help="what the Version line says")
    arguments = parser.parse_args()
    if arguments.project == "gymnasium":
        if arguments.api is None or not arguments.api.is_dir():
            parser.error("give the docs/api folder of a checkout of gymnasium's repository")
        entries = gymnasium_entries(arguments.api)
        write_inventory(HERE / "gymnasium.inv", "Gymnasium", arguments.version, entries)
    else:
        write_inventory(HERE / "numpy.inv", "NumPy", arguments.version or "stable", NUMPY)
    print(f"{len(entries if arguments.project == 'gymnasium' else NUMPY)} names")


if __name__ == "__main__":
    main()
