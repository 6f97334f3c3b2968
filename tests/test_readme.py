"""README.md is a front door: short, every link leads somewhere, its example runs as written, and
every figure of its headline table is in the results file the table names
(``docs/gen_headline.py`` writes that table; these tests read the file themselves too)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The issue's limit: about 10 KB.
MAX_BYTES = 10_240


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_headline", ROOT / "docs" / "gen_headline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_headline = load_generator()


def readme() -> str:
    return README.read_text(encoding="utf-8")


def relative_links(text: str) -> list[str]:
    """The targets of Markdown links and images that are not web addresses or in-page anchors."""
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def headline_file(text: str) -> Path:
    block = text.split(gen_headline.START, 1)[1].split(gen_headline.END, 1)[0]
    files = [t for t in relative_links(block) if t.endswith(".json")]
    assert len(files) == 1, f"the headline block should name one results file, found {files}"
    return ROOT / files[0]


def test_the_readme_is_at_most_10_kb():
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, (
        f"README.md is {size:,} bytes; the front door's limit is {MAX_BYTES:,}"
    )


#: The project's Markdown files at the top, whose links a reader of the repository follows.
FRONT_FILES = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")


@pytest.mark.parametrize("name", FRONT_FILES)
def test_every_relative_link_resolves(name):
    links = relative_links((ROOT / name).read_text(encoding="utf-8"))
    assert links or name != "README.md", "README.md should link to the rest of the documentation"
    broken = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert not broken, f"{name} links to files that do not exist: {broken}"


def test_the_headline_block_is_what_its_results_file_gives():
    text = readme()
    path = headline_file(text)
    expected = gen_headline.replace_block(text, gen_headline.render(path, gen_headline.load(path)))
    assert text == expected, (
        f"README.md's headline block differs from {path.name}: run "
        f"`python docs/gen_headline.py render {path.relative_to(ROOT)}`"
    )


def test_every_figure_of_the_headline_table_is_in_its_results_file():
    text = readme()
    path = headline_file(text)
    document = json.loads(path.read_text(encoding="utf-8"))
    speedups = {f"{r['ratio']:.2f}x" for r in document["results"] if r.get("ratio") is not None}
    shares = {
        f"{round(100 * r['efficiency'])}%"
        for r in document["results"]
        if r.get("efficiency") is not None
    }
    block = text.split(gen_headline.START, 1)[1].split(gen_headline.END, 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    assert rows, "the headline table has no rows"
    for row in rows:
        env, n, *cells = [cell.strip() for cell in row.strip("|").split("|")]
        points = [r["config"] for r in document["results"] if f"`{r['config']['env_id']}`" == env]
        assert any(str(config["num_envs"]) == n for config in points), (env, n)
        for cell in cells:
            figure = cell.split()[0]
            assert figure in speedups | shares | {"-", "?"}, (
                f"{env} N={n}: {figure} is not in {path.name}"
            )
    run = document["run"]
    for key in ("date", "machine", "command"):
        assert str(run[key]) in block, f"the headline should say the run's {key}: {run[key]!r}"
    assert f"load {run['load_before']} before" in block
    assert ("commit " + (run.get("commit") or "not recorded")) in block


def test_the_headline_counts_as_wins_only_rows_with_no_flag(tmp_path):
    """A row with a flag ("reference disturbed", as a busy run gives) is not a win: the summary
    says how many rows were counted and how many were flagged. The committed file says what it
    says of itself; one of its rows flagged says the rest."""

    def summary(document: dict) -> str:
        path = tmp_path / "core2.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        block = gen_headline.render(path, document, base=tmp_path)
        return next(line for line in block.splitlines() if line.startswith("`PoolVecEnv` is"))

    document = json.loads(headline_file(readme()).read_text(encoding="utf-8"))
    rows: dict[tuple[str, int], list[dict]] = {}
    for result in document["results"]:
        rows.setdefault((result["config"]["env_id"], result["config"]["num_envs"]), []).append(
            result
        )
    flagged = sum(any(r.get("checks") for r in row) for row in rows.values())
    said = summary(document)
    assert said.split(". Numbers:")[0] in readme(), "the README says what its file gives"
    if not flagged:  # a quiet run: flag one row, as a disturbed reference would be
        next(iter(rows.values()))[0]["checks"] = ["reference disturbed"]
        flagged = 1
    said = summary(document)
    assert (
        f"of the {len(rows) - flagged} rows with no flag ({flagged} flagged, not counted)" in said
    )

    for result in document["results"]:  # a clean run: every row counts
        result["checks"] = []
    assert f"of the {len(rows)} rows with no flag," in summary(document)


def test_the_example_runs_as_written(tmp_path):
    code = re.search(r"```python\n(.*?)```", readme(), re.S)
    assert code, "README.md should have a Python example"
    lines = code.group(1).strip().splitlines()
    assert len(lines) <= 10, f"the example is {len(lines)} lines; the front door promises ten"
    script = tmp_path / "example.py"
    script.write_text(code.group(1), encoding="utf-8")
    # From a folder outside the repository, with this checkout's package first on the path.
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("(64, 4) "), done.stdout


def test_the_readme_is_a_front_door_not_a_diary():
    text = readme()
    for words in ("fixed since", "Until then", "load average", "issue 2", "issue 1"):
        assert words not in text, f"README.md should leave history to CHANGELOG.md: {words!r}"
    assert "make test" in text and "pip install" in text and "not on PyPI" in text


# The generator itself, on files it must refuse or escape.


def run_generator(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_headline.py"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def bench_file(tmp_path: Path, **run: object) -> Path:
    """A file shaped as `bench --json` writes it, from the headline's own results."""
    document = json.loads(headline_file(readme()).read_text(encoding="utf-8"))
    document.pop("run")
    if run:
        document["run"] = run
    path = tmp_path / "core2.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not a JSON file"),
        ('{"results": 3}', "a 'results' list"),
        ('{"results": []}', "lacks date, machine, load_before, command"),
    ],
)
def test_the_generator_names_what_is_wrong_with_a_file(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    done = run_generator("render", path, "--check")
    assert done.returncode == 2, done
    assert words in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_missing_file_is_one_line_too(tmp_path):
    done = run_generator("render", tmp_path / "nowhere.json", "--check")
    assert done.returncode == 2 and "nowhere.json" in done.stderr and "Traceback" not in done.stderr


def test_a_bad_value_is_named(tmp_path):
    path = bench_file(tmp_path, date="d", machine="m", load_before=0.1, command="c")
    document = json.loads(path.read_text(encoding="utf-8"))
    document["results"][0]["ratio"] = "fast"
    path.write_text(json.dumps(document), encoding="utf-8")
    done = run_generator("render", path, "--check")
    assert done.returncode == 2 and "result 0's ratio is 'fast'" in done.stderr


def test_text_from_the_file_renders_as_text_not_markup(tmp_path):
    path = bench_file(
        tmp_path,
        date="2026-01-01",
        machine="<script>alert(1)</script> [a link](http://x) *bold*",
        load_before=0.1,
        command="python -m vecenvs bench",
    )
    block = gen_headline.render(path, gen_headline.load(path))
    assert "<script>" not in block and "[a link](http://x)" not in block and " *bold*" not in block
    assert r"\<script\>alert(1)\</script\> \[a link\](http://x) \*bold\*" in block
    with_backtick = bench_file(
        tmp_path, date="d", machine="m", load_before=0.1, command="rm -rf `pwd`"
    )
    with pytest.raises(gen_headline.BadResults, match="backtick"):
        gen_headline.render(with_backtick, gen_headline.load(with_backtick))


def test_a_changed_figure_fails_the_check(tmp_path):
    """The check can fail: a README whose table says 1.33x where the file says 1.32x."""
    path = headline_file(readme())
    copy = tmp_path / "README.md"
    figure = re.search(r"\| (\d+)\.(\d\d)x \|", readme().split(gen_headline.START, 1)[1])
    changed = f"| {figure[1]}.{(int(figure[2]) + 1) % 100:02d}x |"
    copy.write_text(readme().replace(figure[0], changed, 1), encoding="utf-8")
    assert copy.read_text(encoding="utf-8") != readme()
    results = tmp_path / path.relative_to(ROOT)  # beside the copy, as the file is beside README
    results.parent.mkdir(parents=True)
    results.write_bytes(path.read_bytes())
    done = run_generator("render", results, "--check", "--readme", copy)
    assert done.returncode == 1 and "differs" in done.stderr, done
    assert run_generator("render", path, "--check").returncode == 0


def test_stamp_adds_what_bench_does_not_know(tmp_path):
    path = bench_file(tmp_path)
    assert run_generator("render", path, "--check").returncode == 2  # no run object yet
    done = run_generator("stamp", path, "--load", "0.05", "--machine", "a quiet VM")
    assert done.returncode == 0, done.stderr
    run = json.loads(path.read_text(encoding="utf-8"))["run"]
    assert run["load_before"] == 0.05 and run["machine"] == "a quiet VM"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", run["date"])
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    if head.returncode == 0:  # a checkout (an unpacked sdist has no commit to name)
        assert run["commit"] == head.stdout.strip()
    block = gen_headline.render(path, gen_headline.load(path))
    assert "a quiet VM, load 0.05 before" in block


def test_a_results_file_outside_the_repository_is_refused(tmp_path):
    """The README could not link to it."""
    path = bench_file(tmp_path, date="d", machine="m", load_before=0.1, command="c")
    done = run_generator("render", path, "--check")
    assert done.returncode == 2 and "put it in docs/results/data/" in done.stderr, done.stderr
