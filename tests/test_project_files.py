"""Checks that the project's configuration files agree with each other.

pyproject.toml is the source of truth for dependencies; environment.yml (for conda users)
must list the same runtime dependencies with the same version constraints.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        tomllib = None

ROOT = Path(__file__).resolve().parents[1]

# Conda-only entries that have no counterpart in [project.dependencies].
CONDA_ONLY = {"python", "pip"}


def normalize(name: str) -> str:
    """Compare names the way installers do: lowercase, ``_`` and ``.`` become ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(requirement: str) -> tuple[str, SpecifierSet]:
    """``"gymnasium[classic-control]>=1.2,<1.5"`` -> ``("gymnasium", SpecifierSet(">=1.2,<1.5"))``.

    Extras are dropped; conda has no extras. SpecifierSet compares as a set, so the order
    of the clauses does not matter.
    """
    req = Requirement(requirement)
    return normalize(req.name), req.specifier


def load_pyproject() -> dict:
    if tomllib is None:
        pytest.skip("needs tomllib (Python 3.11+) or tomli to read pyproject.toml")
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def load_environment() -> dict:
    yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")
    with open(ROOT / "environment.yml", encoding="utf-8") as f:
        return yaml.safe_load(f)


def as_dict(pairs: list[tuple[str, SpecifierSet]], source: str) -> dict[str, SpecifierSet]:
    names = [name for name, _ in pairs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"{source} lists {duplicates} more than once"
    return dict(pairs)


def test_environment_yml_matches_pyproject_dependencies():
    project = load_pyproject()["project"]
    env = load_environment()

    pip_deps = as_dict([parse(r) for r in project["dependencies"]], "pyproject.toml")
    conda_entries = [d for d in env["dependencies"] if isinstance(d, str)]
    conda_all = as_dict([parse(d) for d in conda_entries], "environment.yml")
    conda_deps = {n: s for n, s in conda_all.items() if n not in CONDA_ONLY}

    # Guard against the check passing vacuously (e.g. a parse that finds nothing).
    assert pip_deps, "no runtime dependencies found in pyproject.toml"
    assert conda_deps, "no dependencies found in environment.yml"

    missing = sorted(set(pip_deps) - set(conda_deps))
    extra = sorted(set(conda_deps) - set(pip_deps))
    assert not missing, f"in pyproject.toml but not in environment.yml: {missing}"
    assert not extra, f"in environment.yml but not in pyproject.toml: {extra}"
    for name, spec in pip_deps.items():
        assert conda_deps[name] == spec, (
            f"{name}: pyproject.toml has {str(spec) or '(any)'!r}, "
            f"environment.yml has {str(conda_deps[name]) or '(any)'!r}"
        )

    # The rest of the conda file: the right channel, the same Python floor, and a pip
    # step that installs this package with the same extras as `make test` but the peers, which
    # its comment says how to add.
    assert env["name"] == "vecenvs"
    assert "conda-forge" in env["channels"]
    assert "pip" in conda_all
    assert conda_all.get("python") == SpecifierSet(project["requires-python"])
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1 and len(pip_sections[0]) == 1, pip_sections
    editable = re.fullmatch(r"-e \.\[([\w,-]+)\]", pip_sections[0][0])
    assert editable, f"the pip step should be `-e .[extras]`, not {pip_sections[0][0]!r}"
    left_out = make_extras()["test"] - set(editable.group(1).split(","))
    assert left_out == {"peers"}, f"environment.yml leaves out {sorted(left_out)}, not the peers"
    text = (ROOT / "environment.yml").read_text(encoding="utf-8")
    assert "pip install -e '.[peers]' -c constraints.txt" in text


def make_extras() -> dict[str, set[str]]:
    """The extras each make target installs: ``EXTRAS_dashboard := dashboard,mujoco`` ->
    ``{"dashboard": {"dashboard", "mujoco"}}``."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    found = re.findall(r"^EXTRAS_(\w+)\s*:=\s*(\S+)\s*$", makefile, re.MULTILINE)
    assert found, "the Makefile names no EXTRAS_<target> sets"
    return {target: set(extras.split(",")) for target, extras in found}


def test_each_make_target_installs_extras_that_exist_and_the_dashboard_no_peers():
    extras = load_pyproject()["project"]["optional-dependencies"]
    sets = make_extras()
    for target, names in sets.items():
        unknown = names - set(extras)
        assert not unknown, f"make {target} installs extras pyproject.toml lacks: {sorted(unknown)}"
    # The peers are a step of their own: the lean installs leave them (and torch) out.
    peers = [Requirement(r) for r in extras["peers"]]
    assert {r.name for r in peers} == {"vecenvs"}, "the peers extra names our own extras"
    assert {extra for r in peers for extra in r.extras} == {"sb3", "envpool", "ray"}
    for linux in ({"sys_platform": "linux", "platform_machine": m} for m in ("x86_64", "aarch64")):
        assert all(r.marker is None or r.marker.evaluate(linux) for r in peers)
    for lean in ("dashboard", "lab", "bench"):
        assert not sets[lean] & {"peers", "sb3", "envpool", "ray", "test"}, (lean, sets[lean])
    # `make test` installs everything the suite tests: every extra there is.
    assert sets["test"] | {"sb3", "envpool", "ray"} == set(extras), sets["test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("dashboard", "lab", "bench", "peers", "test", "lint", "grade"):
        line = re.search(rf"^{target}:(.*)$", makefile, re.MULTILINE)
        assert line and ".installed-" in line.group(1), f"make {target} installs nothing first"


def test_readme_and_ci_run_make_test():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make test" in readme, "README.md should tell people to run `make test`"

    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line.split("#", 1)[0] for line in ci_lines if not line.lstrip().startswith("#")]
    assert any(re.search(r"(^|\s)make\s+test\b", c) for c in commands), (
        ".ci/run should run the README's test command, `make test`"
    )


def test_the_dashboard_listens_on_localhost_unless_told_otherwise():
    # It starts processes and a profiler: it must not be reachable from the network by default.
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        pytest.skip("needs tomllib (Python 3.11+)")
    # Beside app.py, where Streamlit reads it whatever the working folder.
    config = tomllib.loads(
        (ROOT / "dashboard" / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    )
    assert config["server"]["address"] == "localhost"
    assert config["browser"]["gatherUsageStats"] is False
    assert config["client"]["toolbarMode"] == "viewer"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\ndashboard:", 1)[1].split("\n\n", 1)[0]
    assert "streamlit run dashboard/app.py" in recipe and "--server.address=localhost" in recipe
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make dashboard" in readme


def test_ci_installs_the_browser_the_dashboard_test_drives():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "apt-get install" in ci and "chromium" in ci


def test_ci_installs_the_sandbox_the_grader_uses():
    # Without bubblewrap the grader falls back to weaker sandboxes, and the hostile-class test
    # fails in CI rather than skip.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bubblewrap" in ci and "apt-get install" in ci and "bwrap --version" in ci


# The files a library is expected to carry, each checked for what makes it what it says it is.


def test_the_license_is_mit_with_its_holder():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 The vecenvs authors\n")
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_citation_cff_has_the_required_keys():
    yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    # CFF 1.2.0's required keys, and an author given as a name or as family and given names.
    assert citation["cff-version"] == "1.2.0"
    assert isinstance(citation["message"], str) and isinstance(citation["title"], str)
    assert citation["authors"] and all(
        "name" in author or "family-names" in author for author in citation["authors"]
    )
    assert citation["license"] == "MIT"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    assert version and citation["version"] == version.group(1), "CITATION.cff's version"


def test_the_changelog_keeps_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n") and "## [Unreleased]" in text
    kinds = re.findall(r"^### (\w+)$", text, re.M)
    assert kinds and set(kinds) <= {
        "Added",
        "Changed",
        "Deprecated",
        "Removed",
        "Fixed",
        "Security",
    }
    # Every entry says the day it landed.
    entries = re.findall(r"^- (.*)$", text, re.M)
    assert entries and all(re.match(r"\d{4}-\d{2}-\d{2}", entry) for entry in entries), [
        entry for entry in entries if not re.match(r"\d{4}-\d{2}-\d{2}", entry)
    ]


def test_contributing_says_how_to_lint_and_test():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for words in ("make lint", "make test", ".ci/run", "## Layout", "without outputs"):
        assert words in text, f"CONTRIBUTING.md should say {words!r}"
    # Every file the layout names exists.
    for path in re.findall(r"`((?:vecenvs|dashboard|tests|docs)/[\w./]+\.py)`", text):
        assert (ROOT / path).exists(), path
