"""Sphinx configuration of the vecenvs documentation site (``make docs``).

Why Sphinx: the package's docstrings are Google style with Sphinx roles (``:class:``,
``:func:``) and doctest examples, and Sphinx's autodoc with napoleon renders them as they are,
signatures and defaults read from the code; it is what gymnasium, Stable-Baselines3 and EnvPool
use. The pages are Markdown (MyST, through myst-nb), like the rest of the repository. Why myst-nb
rather than nbsphinx: it renders (and can execute) notebooks with no binary outside pip
(nbsphinx needs pandoc), and caches executed notebooks. Why furo: a small, well-kept theme that
reads well on a phone and in dark mode. See ``docs/README.md`` for how the site is built.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # this checkout's vecenvs, not an installed one
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS))  # gen_results

import vecenvs  # noqa: E402

project = "vecenvs"
author = "the vecenvs authors"
copyright = "the vecenvs authors, MIT licence"
release = version = vecenvs.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "myst_nb",
    "generate",  # docs/_ext/generate.py: API stubs, CLI reference, notebooks, results pages
    "aliases",  # docs/_ext/aliases.py: vecenvs.PoolVecEnv and vecenvs.pool.PoolVecEnv are one
    "google_style",  # docs/_ext/google_style.py: napoleon, with attributes' docstrings as text
    "inherited_kwargs",  # docs/_ext/inherited_kwargs.py: **kwargs written out on each class
    "parameters",  # docs/_ext/parameters.py: every argument listed, with its default
    "bases",  # docs/_ext/bases.py: no two bases that read the same
    "external_names",  # docs/_ext/external_names.py: gymnasium.core.Env is gymnasium.Env
    "source_links",  # docs/_ext/source_links.py: viewcode's [source] links, and [docs] back
]

exclude_patterns = [
    "_build",
    "_inventories",
    "README.md",
    "results/data",
    "**/.ipynb_checkpoints",
]
html_theme = "furo"
html_title = f"vecenvs {release}"

# Cross-references: every one to vecenvs must resolve (nitpicky, -n). Names of Python, numpy
# and gymnasium link to their docs through intersphinx, from inventories kept in
# docs/_inventories (the build has no network: README.md there says where each came from);
# names of other projects (plotly, psutil, Ray...) are left as text.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!vecenvs\b).*")]
intersphinx_mapping = {
    "python": ("https://docs.python.org/3.11", str(DOCS / "_inventories" / "python.inv")),
    "numpy": ("https://numpy.org/doc/stable", str(DOCS / "_inventories" / "numpy.inv")),
    "gymnasium": ("https://gymnasium.farama.org", str(DOCS / "_inventories" / "gymnasium.inv")),
}
intersphinx_timeout = 1  # never waits on the network (the inventories are files)

# autodoc: signatures with their defaults; type hints in the description, where they read better
# than in a long signature.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_default_options = {"undoc-members": False}
autodoc_mock_imports = ["ray", "stable_baselines3", "envpool", "torch"]
# napoleon's Google parser runs from docs/_ext/google_style.py, which reads an attribute's
# docstring as text (napoleon's own handler would read "(None: ..." as a type), so its own
# handler is off.
napoleon_google_docstring = False
napoleon_numpy_docstring = False
napoleon_use_param = True
napoleon_use_rtype = True

# MyST: Markdown pages; headings get anchors so that pages can link to their sections.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# The notebooks: executed in quick mode by `make docs` (VECENVS_DOCS_EXECUTE=1, the Makefile's
# default), or shown without outputs (tests/test_docs.py, which only checks the site builds:
# tests/test_notebooks.py already runs every notebook). Executed notebooks are cached in
# _build/.jupyter_cache, so a second build runs only the notebooks that changed.
nb_execution_mode = "cache" if os.environ.get("VECENVS_DOCS_EXECUTE") == "1" else "off"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True  # a failing cell's traceback in the build's output
# Notebook 10 starts Ray, which took 20-70 s on 2 cores and failed to start (its raylet gave up
# waiting for its own agents) while other programs kept the CPUs busy (tests/test_notebooks.py
# hides Ray in its quick pass for the same reason). The site shows it unexecuted, unless
# VECENVS_DOCS_EXECUTE_RAY=1 (on a machine that starts Ray reliably).
if os.environ.get("VECENVS_DOCS_EXECUTE_RAY") != "1":
    nb_execution_excludepatterns = ["course/notebooks/10-ray.ipynb"]
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
os.environ.setdefault("VECENVS_QUICK", "1")  # the kernels inherit it
nb_execution_in_temp = True  # whatever a notebook writes lands in a temp folder, not in docs/
if nb_execution_mode != "off":  # their quick runs are not results: keep them out of your store
    os.environ["VECENVS_STORE"] = str(DOCS / "_build" / "notebook-results.sqlite")
# tqdm's widgets and plotly's figures have no static form: show the text/HTML beside them.
nb_mime_priority_overrides = [
    ("html", "application/vnd.jupyter.widget-view+json", None),
]
suppress_warnings = ["mystnb.unknown_mime_type"]
autosummary_generate = False  # the pages are docs/_ext/generate.py's
# A method without a docstring of its own shows none, rather than gymnasium's (written for its
# classes, in its own markup).
autodoc_inherit_docstrings = False
