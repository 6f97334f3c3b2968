"""The pages ``make docs`` writes before Sphinx reads anything (into gitignored folders):

- ``api/generated/<name>.md``: one page per public name of :mod:`vecenvs` (its ``__all__``),
  each an autodoc directive, so the text is the docstring itself;
- ``api/modules/<module>.md``: every module of the package, for readers of the code;
- ``cli.md``: the ``vecenvs`` command line, every command's ``--help``,
  read from the parser :func:`vecenvs.cli.build_parser` builds;
- ``course/*.ipynb``: the notebooks, copied from ``notebooks/`` for myst-nb to render;
- ``results/*.md``: the results pages, from the results files (``docs/gen_results.py``).
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent
REPO = DOCS.parent


def public_names() -> dict[str, str]:
    """Every public name, mapped to the module path its page documents it under."""
    import vecenvs

    names = {name: "vecenvs" for name in vecenvs.__all__}
    return dict(sorted(names.items(), key=lambda item: item[0].lower()))


def api_page(name: str, module: str) -> str:
    """The Markdown (MyST) page of one public name: an autodoc directive (in reST, which is
    what autodoc writes)."""
    import importlib

    obj = getattr(importlib.import_module(module), name)
    options: list[str] = []
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        kind, options = "exception", [":show-inheritance:"]
    elif inspect.isclass(obj):
        kind = "class"
        members = user_members(obj)
        options = [f":members: {', '.join(members)}" if members else ":members:"]
        options.append(":show-inheritance:")
    elif callable(obj):
        kind = "function"
    else:  # data: documented where it is assigned, beside its ``#:`` comment
        kind, options = "data", [":no-value:"]
        module = defining_module(name, obj)
    directive = [f".. auto{kind}:: {module}.{name}", *(f"   {option}" for option in options)]
    return "\n".join([f"# {name}", "", "```{eval-rst}", *directive, "```", ""])


#: Methods gymnasium's ``VectorEnv`` calls itself (``close()`` calls ``close_extras()``): a
#: subclass writes them, a user calls the method that calls them.
HOOKS = ("close_extras",)


def user_members(cls: type) -> list[str]:
    """The members a user of ``cls`` reads about on its page, in the order of ``dir()``.

    Each is this package's (gymnasium's own members are on gymnasium's pages), has text (a
    docstring, its own or the nearest of the package's bases' (``google_style.py`` shows that
    one), or a ``#:`` comment for an attribute: no bare names), and is not part of the
    machinery: not a method gymnasium calls itself (:data:`HOOKS`), not typed with one of the
    package's internal classes (a ``SharedArea``, a ``Chunk``: no public page says what to do
    with one), and not a class-level setting that one of the package's internal base classes
    declares for its subclasses (``uses_shared_area``). The rest are on the module pages
    (``api/modules/``) and in the code, a [source] link away.
    """
    kept = []
    for name in dir(cls):
        owner = next((k for k in cls.__mro__ if declares(k, name)), None)
        if name.startswith("_") or name in HOOKS or owner is None or not ours(owner):
            continue
        if not any(has_text(k, name) for k in cls.__mro__ if ours(k) and declares(k, name)):
            continue
        if typed_internal(owner, name):
            continue
        if is_setting(cls, name):
            continue
        kept.append(name)
    return kept


def declares(cls: type, name: str) -> bool:
    """Whether ``cls`` itself assigns or annotates ``name``."""
    return name in vars(cls) or name in vars(cls).get("__annotations__", {})


def ours(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "vecenvs"


def is_public_class(cls: type) -> bool:
    import vecenvs

    return getattr(vecenvs, cls.__name__, None) is cls


def has_text(owner: type, name: str) -> bool:
    """Whether ``owner``'s ``name`` has a docstring of its own, or a ``#:`` comment."""
    value = vars(owner).get(name)
    if isinstance(value, property):
        value = value.fget
    if inspect.isfunction(value) or isinstance(value, (classmethod, staticmethod)):
        return bool(getattr(value, "__doc__", None))
    from sphinx.pycode import ModuleAnalyzer

    try:
        comments = ModuleAnalyzer.for_module(owner.__module__).find_attr_docs()
    except Exception:
        return False
    return any(comments.get((owner.__qualname__, name), []))


def typed_internal(owner: type, name: str) -> bool:
    """Whether ``name``'s annotation (an attribute's, or what a method or property returns)
    names a class of this package that users do not import."""
    import importlib
    import re

    value = vars(owner).get(name)
    if isinstance(value, property):
        value = value.fget
    if callable(value):
        annotation = getattr(value, "__annotations__", {}).get("return", "")
    else:
        annotation = vars(owner).get("__annotations__", {}).get(name, "")
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    module = importlib.import_module(owner.__module__)
    for word in re.findall(r"[A-Za-z_][\w.]*", text):
        found: Any = module
        for part in word.split("."):
            found = getattr(found, part, None)
        if inspect.isclass(found) and ours(found) and not is_public_class(found):
            return True
    return False


def is_setting(cls: type, name: str) -> bool:
    """Whether ``name`` is a class-level value (not a method or property) that one of the
    package's internal base classes of ``cls`` declares: a setting for that base's machinery."""
    value = getattr(cls, name, None)
    if callable(value) or isinstance(inspect.getattr_static(cls, name, None), property):
        return False
    return any(
        declares(base, name) and ours(base) and not is_public_class(base) for base in cls.__mro__
    )


def defining_module(name: str, obj: object) -> str:
    """The module that assigns ``name = ...`` (the same object), for data, which do not know."""
    import importlib
    import re

    for module_name in documented_modules():
        module = importlib.import_module(module_name)
        if vars(module).get(name) is obj:
            source = Path(module.__file__ or "").read_text(encoding="utf-8")
            if re.search(rf"^{re.escape(name)}\s*(:|=)", source, re.MULTILINE):
                return module_name
    return "vecenvs"


def write_api_pages(folder: Path) -> list[str]:
    """One page per public name into ``folder`` (emptied first); returns the page names."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    pages = []
    for name, module in public_names().items():
        (folder / f"{name}.md").write_text(api_page(name, module), encoding="utf-8")
        pages.append(name)
    return pages


#: Modules left out of the module pages: the command line has its own page (from its parser),
#: ``__main__`` only calls it.
NOT_DOCUMENTED = ("vecenvs.__main__", "vecenvs.cli")


def documented_modules() -> list[str]:
    """Every module of the package but :data:`NOT_DOCUMENTED`'s, in import-path order."""
    import pkgutil

    import vecenvs

    names = [info.name for info in pkgutil.walk_packages(vecenvs.__path__, "vecenvs.")]
    return sorted(
        name
        for name in names
        if not any(name == skip or name.startswith(skip + ".") for skip in NOT_DOCUMENTED)
    )


def module_page(module_name: str, public: set[int]) -> str:
    """One module's page: its docstring and its documented names. A package documents only
    the names it defines itself (what it re-exports is on its submodules' pages); the public
    names, which have pages of their own, are left out."""
    import importlib

    module = importlib.import_module(module_name)
    directive = [f".. automodule:: {module_name}"]
    is_package = hasattr(module, "__path__")
    defined_here = [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module_name
    ]
    if is_package:
        own = [name for name in defined_here if id(vars(module)[name]) not in public]
        if own:
            directive.append(f"   :members: {', '.join(sorted(own))}")
    else:
        directive.append("   :members:")
        shown_elsewhere = sorted(
            name for name, value in vars(module).items() if id(value) in public
        )
        if shown_elsewhere:
            directive.append(f"   :exclude-members: {', '.join(shown_elsewhere)}")
    return "\n".join([f"# `{module_name}`", "", "```{eval-rst}", *directive, "```", ""])


def write_module_pages(folder: Path) -> list[str]:
    """A page per module into ``folder`` (emptied first); returns the modules."""
    import importlib

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    public = {id(getattr(importlib.import_module(m), n)) for n, m in public_names().items()}
    modules = documented_modules()
    for module_name in modules:
        text = module_page(module_name, public)
        (folder / f"{module_name}.md").write_text(text, encoding="utf-8")
    return modules


def _commands(parser: argparse.ArgumentParser, path: list[str]) -> list[tuple[list[str], Any]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, [*path, name])
    return found


def cli_page() -> str:
    """The command line's reference, from the parser itself."""
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same page everywhere
    from vecenvs.cli import build_parser

    lines = [
        "# Command line: `vecenvs`",
        "",
        "`python -m vecenvs COMMAND` (or `vecenvs COMMAND` where the package's scripts are on "
        "the PATH). This page is generated from the parser itself (`vecenvs.cli.build_parser`), "
        "so it says what `--help` says. Every command checks all of its input before it runs "
        "anything, and reports a bad value on one line with exit code 2.",
        "",
    ]
    for path, parser in _commands(build_parser(), ["vecenvs"]):
        depth = min(len(path) + 1, 4)
        lines += [f"{'#' * depth} `{' '.join(path)}`", ""]
        lines += ["```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def copy_notebooks(folder: Path) -> list[str]:
    """The course's notebooks into ``folder`` (replacing what was there); returns their stems."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.ipynb"):
        old.unlink()
    stems = []
    for notebook in sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        shutil.copyfile(notebook, folder / notebook.name)
        stems.append(notebook.stem)
    return stems


def generate(app: Any = None) -> None:
    """Everything above, then the results pages; run on Sphinx's ``builder-inited``.

    The package's modules are imported with the optional peers (``autodoc_mock_imports``:
    Stable-Baselines3, torch, Ray, EnvPool) mocked, as autodoc imports them, whether they are
    installed or not: ``vecenvs.sb3`` is documented by a docs install without torch, and the
    pages are the same with the peers installed (``make docs`` in a fresh clone installs only
    the docs extras)."""
    import gen_results
    from sphinx.ext.autodoc.mock import mock

    with mock(app.config.autodoc_mock_imports if app is not None else []):
        write_api_pages(DOCS / "api" / "generated")
        write_module_pages(DOCS / "api" / "modules")
    (DOCS / "cli.md").write_text(cli_page(), encoding="utf-8")
    copy_notebooks(DOCS / "course" / "notebooks")
    gen_results.write_pages(DOCS / "results")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
