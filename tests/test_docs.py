"""The documentation site: it builds with no warning, every link in it resolves, it documents
every public name (with the keyword arguments a class takes through ``**kwargs`` written out),
the course, the exercises and a results page per preset; the results pages are what
``docs/gen_results.py`` writes from the results files; the docstrings' examples run.

The site is built once for this module, as ``make docs`` builds it (nitpicky, warnings as
errors) but into a temp folder, from a copy of ``docs/`` beside links to the package, the
notebooks and the exercises: the build writes its generated pages into its source folder, and
this test must not touch the checkout. The notebooks are rendered without being run
(``VECENVS_DOCS_EXECUTE=0``): ``tests/test_notebooks.py`` runs every one of them already, and
``make docs`` runs them in quick mode.
"""

from __future__ import annotations

import html
import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import vecenvs

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "docs"))
sys.path.insert(0, str(REPO / "docs" / "_ext"))

import gen_results
from generate import documented_modules

pytest.importorskip("sphinx", reason="the docs extra (`make docs` installs it)")
pytest.importorskip("myst_nb", reason="the docs extra (`make docs` installs it)")

pytestmark = pytest.mark.timeout(900)

#: The pages other projects' pages and the README link to: they must keep these names.
GUIDES = (
    "install",
    "where-it-runs",
    "dashboard",
    "gymnasium-differences",
    "measuring",
    "profiling",
    "async",
    "autotune",
    "threads",
    "ray",
    "sb3",
    "checking-your-vector-env",
)


class Site:
    """The built site: its folder, and the build's output."""

    def __init__(self, html_dir: Path, source: Path, output: str):
        self.html = html_dir
        self.source = source
        self.output = output

    def page(self, path: str) -> str:
        file = self.html / path
        assert file.is_file(), f"the site has no {path}"
        return file.read_text(encoding="utf-8")

    def text(self, path: str) -> str:
        """A page's text as a reader sees it (tags dropped, entities decoded, spaces collapsed)."""
        body = self.page(path)
        body = body[body.find("<article") :]
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())
        return re.sub(r"\(\s+", "(", re.sub(r"\s+([;:,.)])", r"\1", text))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Site:
    root = tmp_path_factory.mktemp("site")
    source = root / "repo"
    source.mkdir()
    shutil.copytree(REPO / "docs", source / "docs", ignore=shutil.ignore_patterns("_build"))
    for name in ("vecenvs", "notebooks", "exercises"):
        (source / name).symlink_to(REPO / name, target_is_directory=True)
    env = {**os.environ, "VECENVS_DOCS_EXECUTE": "0", "PYTHONPATH": str(source)}
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-b",
            "html",
            "-n",
            "-W",
            "--keep-going",
            "-q",
            str(source / "docs"),
            str(root / "html"),
            "-d",
            str(root / "doctrees"),
        ],
        capture_output=True,
        text=True,
        timeout=800,
        env=env,
        cwd=source,
    )
    output = build.stdout + build.stderr
    assert build.returncode == 0, f"the docs build failed:\n{output[-6000:]}"
    return Site(root / "html", source / "docs", output)


def test_the_build_gives_no_warning(site):
    problems = [line for line in site.output.splitlines() if "WARNING" in line or "ERROR" in line]
    assert not problems, "\n".join(problems)


def public_names() -> list[str]:
    return sorted(vecenvs.__all__)


@pytest.mark.parametrize("name", public_names())
def test_every_public_name_has_a_page_that_documents_it(site, name):
    page = site.page(f"api/generated/{name}.html")
    # autodoc gives the documented object's description the id of its full name.
    ids = re.findall(r'<dt class="sig sig-object py" id="([^"]+)"', page)
    assert any(i.endswith(f".{name}") for i in ids), f"{name}'s page documents {ids}"
    assert f"generated/{name}.html" in site.page("api/index.html"), "not in the API index"


def signature(site: Site, name: str) -> str:
    """The constructor signature on ``name``'s page, as text."""
    page = site.page(f"api/generated/{name}.html")
    found = re.search(rf'id="vecenvs\.([a-z_]+\.)?{name}"', page)
    assert found, f"{name}'s page has no description of it"
    start = found.start()
    head = page[start : page.index("</dt>", start)]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", head)).split())


def test_pool_pages_write_out_the_keywords_they_pass_on(site):
    pool = signature(site, "PoolVecEnv")
    for keyword, default in [
        ("num_workers", "None"),
        ("timeout", "60.0"),
        ("start_timeout", "120.0"),
        ("spin_seconds", "None"),
        ("copy", "True"),
        ("autoreset_mode", "AutoresetMode.NEXT_STEP"),
    ]:
        assert re.search(rf"\b{keyword}(: [^=,]+)? = {re.escape(default)}", pool), (keyword, pool)
    assert "**kwargs" not in pool, "every keyword passed on is written out"
    # ... and in its parameter list, with the text of the class they are passed on to.
    text = site.text("api/generated/PoolVecEnv.html")
    assert re.search(
        r"\btimeout \u2013 .{0,200}\(default 60\.0; passed on to ChunkedVecEnv\)", text
    )
    assert re.search(
        r"start_timeout \u2013 .{0,200}\(default 120\.0; passed on to ChunkedVecEnv\)", text
    )

    # The async pool sets step_in_caller itself: it is not the caller's to give.
    async_pool = signature(site, "AsyncPoolVecEnv")
    assert "step_in_caller" not in async_pool, async_pool
    assert re.search(r"\bstart_timeout(: [^=,]+)? = 120\.0", async_pool), async_pool
    assert re.search(r"\bspin_seconds(: [^=,]+)? = None", async_pool), async_pool
    # Ray's actors take longer to start: its own default wins over the base class's.
    ray = signature(site, "RayVecEnv")
    assert re.search(r"\bstart_timeout(: [^=,]+)? = 180\.0", ray), ray
    assert len(re.findall(r"\bstart_timeout\b", ray)) == 1, ray


def api_pages(site: Site) -> list[Path]:
    """Every API page: a page per public name and a page per module."""
    return sorted((site.html / "api").rglob("*.html"))


def fields(page: str, label: str) -> list[str]:
    """The text of every ``label`` field (``Type``, ``Parameters``...) of a page's descriptions."""
    found = re.findall(
        rf'<dt class="field-\w+">{label}<span class="colon">:</span></dt>\s*<dd class="field-\w+">(.*?)</dd>',
        page,
        re.S,
    )
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", f)).split()) for f in found]


#: What a type reads as: dotted names, brackets, commas, unions, literals and ellipses.
TYPE = re.compile(r"^[\w.\[\]()|,'\" ]+$|^[\w.\[\]()|,'\" ]*\.\.\.[\w.\[\]()|,'\" ]*$")


def test_no_type_field_holds_prose(site):
    """napoleon read an attribute's first line as ``type: description`` when it had a colon:
    ``caller_chunk`` read "TYPE: The envs this process steps itself (None"."""
    prose = []
    for path in api_pages(site):
        for text in fields(path.read_text(encoding="utf-8"), "Type"):
            words = re.findall(r"[A-Za-z]+", text)
            lower = [
                w
                for w in words
                if w.islower()
                and w
                not in (
                    "int",
                    "str",
                    "float",
                    "bool",
                    "bytes",
                    "list",
                    "dict",
                    "tuple",
                    "set",
                    "type",
                    "object",
                    "range",
                    "slice",
                    "frozenset",
                    "memoryview",
                )
            ]
            if not TYPE.match(text) or lower:
                prose.append(f"{path.relative_to(site.html)}: {text!r}")
    assert not prose, "\n".join(prose)
    text = site.text("api/modules/vecenvs.core.html")
    assert "The envs this process steps itself (None: the workers step them all)" in text


def test_no_class_lists_a_base_twice(site):
    """``WorkerTimeoutError``'s bases read "VecEnvError, TimeoutError, TimeoutError,
    TimeoutError": bases that share a name are shown by their import paths."""
    repeated = []
    checked = 0
    for path in api_pages(site):
        page = path.read_text(encoding="utf-8")
        for bases in re.findall(r"<p>Bases: (.*?)</p>", page, re.S):
            names = [
                " ".join(html.unescape(re.sub(r"<[^>]+>", "", b)).split())
                for b in bases.split(", ")
            ]
            checked += 1
            if len(set(names)) != len(names):
                repeated.append(f"{path.relative_to(site.html)}: {names}")
    assert checked >= 10, f"only {checked} Bases lines found"
    assert not repeated, "\n".join(repeated)
    text = site.text("api/generated/WorkerTimeoutError.html")
    assert (
        "Bases: VecEnvError, TimeoutError, multiprocessing.TimeoutError, multiprocess.TimeoutError"
        in text
    ), text[:600]


def parameters(site: Site, name: str) -> dict[str, str]:
    """The Parameters field of ``name``'s own description (not its methods'): name -> text."""
    page = site.page(f"api/generated/{name}.html")
    start = re.search(rf'id="vecenvs\.{name}"', page).start()
    body = page[start : page.find("</dd>", page.find('<dt class="field-', start))]
    found = fields(body + "</dd>", "Parameters")
    assert found, f"{name}'s page has no Parameters field"
    items = re.findall(r"<li>(.*?)</li>", body, re.S) or [body]
    listed = {}
    for item in items:
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", item)).split())
        head, _, rest = text.partition(" \u2013 ")
        for argument in head.split(","):
            listed[argument.strip().lstrip("*")] = rest
    return listed


def user_facing() -> list[str]:
    """The public classes (not the errors) and functions: what users pass arguments to."""
    return [
        name
        for name in public_names()
        if inspect.isfunction(getattr(vecenvs, name))
        or (
            inspect.isclass(getattr(vecenvs, name))
            and not issubclass(getattr(vecenvs, name), BaseException)
        )
    ]


@pytest.mark.parametrize("name", user_facing())
def test_every_argument_is_listed_with_its_default(site, name):
    """Every argument a user may pass (``**kwargs`` written out) has a field, and each that has
    a default says it: ``env_fns`` was missing from ``PoolVecEnv`` and two more classes,
    ``num_envs`` from ``make_vec``."""
    from parameters import constructor_signature

    obj = getattr(vecenvs, name)
    signature = constructor_signature(obj) if inspect.isclass(obj) else inspect.signature(obj)
    wanted = [p for p in signature.parameters.values() if p.kind is not p.VAR_POSITIONAL]
    if not wanted:  # (available_cpus takes none)
        return
    listed = parameters(site, name)
    for parameter in wanted:
        assert parameter.name in listed, f"{name} does not list {parameter.name}: {sorted(listed)}"
        if parameter.default is not parameter.empty:
            assert "default" in listed[parameter.name].lower(), (
                name,
                parameter.name,
                listed[parameter.name],
            )


def test_the_pool_lists_env_fns_and_make_vec_num_envs_with_an_example(site):
    assert "env_fns" in parameters(site, "PoolVecEnv")
    assert "one function per env" in parameters(site, "PoolVecEnv")["env_fns"]
    assert "num_envs" in parameters(site, "make_vec")
    text = site.text("api/generated/make_vec.html")
    assert "Example" in text and 'make_vec ("CartPole-v1", num_envs = 8' in text, text[-1500:]


@pytest.mark.parametrize("name", ["PoolVecEnv", "AsyncPoolVecEnv", "SubprocVecEnv", "MultiEnv"])
def test_the_user_facing_pages_show_no_internals_and_no_bare_names(site, name):
    """The machinery (the shared area, the workers, a chunk's spec, the class settings the
    pool's base reads) is on the module pages, not on the page of the class a user calls; and
    every member shown has text."""
    page = site.page(f"api/generated/{name}.html")
    members = re.findall(rf'<dt class="sig sig-object py" id="vecenvs\.{name}\.(\w+)">', page)
    assert {"reset", "step", "close"} <= set(members), members
    internal = {
        "area",
        "own",
        "workers",
        "spec_of",
        "uses_shared_area",
        "env_words",
        "close_extras",
    }
    assert not internal & set(members), internal & set(members)
    bare = re.findall(rf'id="vecenvs\.{name}\.(\w+)">.*?</dt>\s*<dd>\s*</dd>', page, re.S)
    assert not bare, f"members shown with no text: {bare}"


def test_api_pages_link_to_their_source_and_to_python_numpy_and_gymnasium(site):
    for name in ("PoolVecEnv", "make_vec", "WorkerTimeoutError"):
        page = site.page(f"api/generated/{name}.html")
        assert re.search(
            r'href="[^"]*_modules/vecenvs/[\w/]+\.html#[^"]*"><span class="viewcode-link">', page
        ), name
    pool = site.page("api/generated/PoolVecEnv.html")
    assert 'href="https://gymnasium.farama.org/api/env/#gymnasium.Env"' in pool
    assert 'href="https://docs.python.org/3.11/library/functions.html#int"' in pool
    timeout = site.page("api/generated/WorkerTimeoutError.html")
    assert (
        "https://docs.python.org/3.11/library/multiprocessing.html#multiprocessing.TimeoutError"
        in timeout
    )
    multi = site.page("api/generated/MultiEnv.html")
    assert (
        'href="https://numpy.org/doc/stable/reference/generated/numpy.ndarray.html#numpy.ndarray"'
        in multi
    )
    everything = "".join(p.read_text(encoding="utf-8") for p in api_pages(site))
    for site_address in (
        "https://docs.python.org/",
        "https://numpy.org/",
        "https://gymnasium.farama.org/api/vector/",
    ):
        assert f'href="{site_address}' in everything, site_address


def test_the_inventories_are_sphinx_s_and_name_real_pages():
    """The intersphinx inventories (docs/_inventories, see its README) load as Sphinx loads
    them, and gymnasium's lists the names gymnasium's vector API documents."""
    from sphinx.util.inventory import InventoryFile

    def load(name: str, base: str) -> dict:
        with open(REPO / "docs" / "_inventories" / f"{name}.inv", "rb") as file:
            inventory = InventoryFile.load(file, base, "/".join)
        data = getattr(inventory, "data", inventory)
        return {name: item for kind in data.values() for name, item in kind.items()}

    gymnasium = load("gymnasium", "https://gymnasium.farama.org")
    for name in (
        "gymnasium.Env",
        "gymnasium.vector.VectorEnv",
        "gymnasium.spaces.Space",
        "gymnasium.make_vec",
    ):
        assert name in gymnasium, name
    assert gymnasium["gymnasium.vector.AsyncVectorEnv"].uri.endswith(
        "/api/vector/async_vector_env/#gymnasium.vector.AsyncVectorEnv"
    )
    numpy = load("numpy", "https://numpy.org/doc/stable")
    assert (
        numpy["numpy.ndarray"].uri
        == "https://numpy.org/doc/stable/reference/generated/numpy.ndarray.html#numpy.ndarray"
    )
    python = load("python", "https://docs.python.org/3.11")
    assert python["multiprocessing.TimeoutError"].uri.endswith(
        "multiprocessing.html#multiprocessing.TimeoutError"
    )


def test_every_module_has_a_page(site):
    for module in documented_modules():
        page = site.page(f"api/modules/{module}.html")
        assert f'id="module-{module}"' in page, module


def test_the_cli_page_has_every_command_and_option(site):
    from vecenvs.cli import build_parser

    text = site.text("cli.html")
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, parser in commands.items():
        assert f"vecenvs {name}" in text, name
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in text, f"vecenvs {name} {flag}"


def test_the_guides_the_course_and_the_exercises_are_there(site):
    for guide in GUIDES:
        site.page(f"guide/{guide}.html")
    notebooks = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    assert len(notebooks) >= 11
    for notebook in notebooks:
        page = site.text(f"course/notebooks/{notebook.stem}.html")
        assert "What to notice" in page, f"{notebook.stem} is rendered without its text"
    exercises = site.text("course/exercises.html")
    for stub in sorted((REPO / "exercises" / "student").glob("q*.py")):
        assert stub.name in exercises, stub.name
        first_line = stub.read_text(encoding="utf-8").splitlines()[0].strip('"')
        assert first_line in exercises, first_line


def test_a_results_page_per_preset_each_from_its_results_file(site):
    for preset in gen_results.PRESETS:
        text = site.text(f"results/{preset.name}.html")
        if preset.data().exists():
            assert "Generated by docs/gen_results.py" in text
            for fact in ("Date", "Machine", "Load", "Command", "Commit"):
                assert f"{fact}:" in text, (preset.name, fact)
        else:
            assert "Not measured yet" in text, preset.name
    site.page("results/history.html")
    # The committed pages (what GitHub shows, and the README links to) are what the generator
    # writes from the committed results files.
    for preset in gen_results.PRESETS:
        committed = (REPO / "docs" / "results" / f"{preset.name}.md").read_text(encoding="utf-8")
        regenerated = (site.source / "results" / f"{preset.name}.md").read_text(encoding="utf-8")
        assert committed == regenerated, (
            f"docs/results/{preset.name}.md is out of date: run .venv/bin/python docs/gen_results.py"
        )


def test_a_results_page_shows_its_file_s_numbers_and_how_it_was_made(tmp_path):
    """A real (tiny) run of ``vecenvs bench --json``, as a preset's results file: its page says
    when, where, under what load, by which command and at which commit it was measured, shows
    every measurement's throughput, and each speed-up and share as the ratio of the throughputs
    in the file (median windows), not of anything else."""
    out = tmp_path / "core2.json"
    command = [sys.executable, "-m", "vecenvs", "bench", "--env", "CartPole-v1"]
    command += ["--num-envs", "2", "--num-envs", "4", "--backend", "pool", "--backend", "ceiling"]
    command += ["--workers", "2", "--seconds", "0.05", "--warmup", "0.05", "--repeats", "3"]
    command += ["--no-store", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(out.read_text(encoding="utf-8"))
    preset = next(p for p in gen_results.PRESETS if p.name == "core2")
    text = gen_results.page(preset, tmp_path)

    run = document["run"]
    assert "Not measured yet" not in text
    assert f"**Command**: `{run['command']}`" in text
    assert run["command"].endswith(f"--json {out}")
    assert f"**Date**: {run['started']} to {run['finished']} (UTC)" in text
    assert f"{run['load_before']} before, {run['load_after']} after" in text
    assert f"`{run['commit'][:12]}`" in text
    assert document["machine"]["cpu_model"] in text

    def median(values):
        return statistics.median(values)

    by_point = {}
    for row in document["results"]:
        config = row["config"]
        by_point.setdefault((config["num_envs"]), {})[config["backend"]] = median(
            row["throughputs"]
        )
        assert f"{median(row['throughputs']):,.0f}" in text, row["config"]
    table = text.split("## Every measurement")[0]
    for n, throughputs in by_point.items():
        loop, pool, ceiling = throughputs["gym-sync"], throughputs["pool"], throughputs["ceiling"]
        row = next(line for line in table.splitlines() if line.startswith(f"| CartPole-v1 | {n} |"))
        assert f"{pool / loop:.2f}x, " in row, (row, pool / loop)
        assert f"{ceiling / loop:.2f}x" in row, (row, ceiling / loop)
        share = f"{pool / ceiling:.0%}"
        assert share in row or "share not shown" in row, (row, share)


class Links(HTMLParser):
    """The ids and the link targets (href, src) of one page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            elif name in ("href", "src") and value and tag != "link":
                self.targets.append(value)


def test_every_relative_link_resolves(site):
    pages: dict[Path, Links] = {}
    for path in site.html.rglob("*.html"):
        links = Links()
        links.feed(path.read_text(encoding="utf-8"))
        pages[path] = links
    broken = []
    checked = 0
    for path, links in pages.items():
        for target in links.targets:
            parts = urlsplit(target)
            if parts.scheme or target.startswith("//"):
                continue  # the web: no network here (Sphinx's linkcheck needs it)
            file = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if file.is_dir():
                file = file / "index.html"
            checked += 1
            if not file.exists():
                broken.append(f"{path.relative_to(site.html)}: {target} (no such file)")
            elif parts.fragment and file.suffix == ".html":
                if file not in pages:
                    continue
                if unquote(parts.fragment) not in pages[file].ids:
                    broken.append(f"{path.relative_to(site.html)}: {target} (no such anchor)")
    assert checked > 500, f"only {checked} links checked: is the site there?"
    assert not broken, "\n".join(broken)


def test_the_docstrings_examples_run():
    """Every ``>>>`` example in the package, as pytest's doctest runner runs them; the modules
    whose examples need a missing optional extra are left out (and said so)."""
    needs = {
        "vecenvs/ray_env.py": "ray",
        "vecenvs/sb3.py": "stable_baselines3",
        "vecenvs/peers.py": "stable_baselines3",
        "vecenvs/bench/training.py": "stable_baselines3",
    }
    ignored = [path for path, module in needs.items() if importlib.util.find_spec(module) is None]
    command = [sys.executable, "-m", "pytest", "--doctest-modules", "vecenvs", "-q"]
    command += ["-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts="]
    command += [f"--ignore={path}" for path in ignored]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO, timeout=800, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    count = re.search(r"(\d+) passed", done.stdout)
    assert count and int(count.group(1)) >= 30, done.stdout[-2000:]
    if ignored:
        print(f"left out for want of their extras: {ignored}")


def test_make_docs_builds_this_site_the_same_way():
    """``make docs`` (dry run): the same strict build as above, into docs/_build/html, with the
    notebooks executed (the fixture renders them without running them)."""
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    dry = subprocess.run(
        ["make", "-n", "docs"], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert dry.returncode == 0, dry.stderr
    build = [line for line in dry.stdout.splitlines() if "-m sphinx" in line]
    assert len(build) == 1, dry.stdout
    assert "VECENVS_DOCS_EXECUTE=1" in build[0]
    for flag in ("-b html", "-n", "-W", "--keep-going", "docs docs/_build/html"):
        assert f" {flag}" in build[0], (flag, build[0])
