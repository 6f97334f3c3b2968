"""The notebook course: every notebook runs top to bottom in quick mode, says what its numbers
mean only in words that agree with them, shows its figures in exported HTML too, and is
committed clean.

Quick mode (``VECENVS_QUICK=1``) shrinks every grid and timing; the kernel is this venv's
``python3``. Each notebook runs once per session, with a temp folder as its working directory
(the autouse fixture in conftest points ``VECENVS_STORE`` at a temp file), so nothing is written
into the repo; the tests below read what that run printed.

Conclusions: a notebook prints each conclusion drawn from a measurement on a line of its own
starting with ``→``, with the numbers it comes from. :data:`CHECKS` reads every such line back,
recomputes the conclusion from the printed numbers, and fails when the words disagree with them
(on a busy machine the numbers change, and the words must change with them). A ``→`` line that
no check recognises fails too: every conclusion is checked. Timings are never asserted.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from fake_machine import Machine, kernel_manager, quota_skip_reason
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

from vecenvs.bench.machine import BUSY_SHARE
from vecenvs.bench.verdict import _QUALITY_BOUNDS

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))
PLOTLY = "application/vnd.plotly.v1+json"
ARROW = "→"

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


# ------------------------------------------------------------------------------------------------
# The committed files
# ------------------------------------------------------------------------------------------------


def test_the_course_is_there():
    assert len(NOTEBOOKS) >= 11, (
        f"expected the numbered notebooks 01-11, found {[p.name for p in NOTEBOOKS]}"
    )
    numbers = [int(path.name[:2]) for path in NOTEBOOKS]
    assert numbers == list(range(1, len(NOTEBOOKS) + 1)), f"numbering has gaps: {numbers}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_committed_without_outputs_and_with_the_project_kernel(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    spec = notebook.metadata.get("kernelspec", {})
    assert spec.get("name") == "python3" and spec.get("language") == "python", (
        f"{path.name}: kernelspec {spec!r}; expected the venv's python3 kernel"
    )
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}, cell {index}: has outputs; clear them before committing "
                "(JupyterLab: Edit > Clear Outputs of All Cells)"
            )
    assert "What to notice" in notebook.cells[-2].source, (
        f"{path.name}: should end with 'What to notice', then the exercise that practises it"
    )
    assert notebook.cells[-1].source.startswith("## Practise it\n"), (
        f"{path.name}: its last cell should say which exercise practises it ('## Practise it')"
    )
    markdown = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert "Predict" in markdown, f"{path.name}: has no 'Predict, then run' cell"
    first_code = next(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert "machine_load()" in first_code, (
        f"{path.name}: should check the machine's load before measuring"
    )


def test_python3_kernel_is_this_venv():
    """JupyterLab started from the venv runs the notebooks with the venv's Python."""
    argv = KernelSpecManager().get_kernel_spec("python3").argv
    # jupyter_client replaces a bare "python" with the Python running Jupyter, i.e. the venv's.
    assert argv[0] in ("python", "python3") or ".venv" in argv[0], argv


# Files named in the course's text: `vecenvs/core.py`, `tests/data/profiles`, `exercises/README.md`...
_FILE_REFERENCE = re.compile(
    r"`((?:vecenvs|tests|exercises|notebooks|dashboard|docs)/[\w./-]*(?:\.\w+|/))`"
)


@pytest.mark.parametrize(
    "path",
    [
        *NOTEBOOKS,
        REPO / "notebooks" / "README.md",
        REPO / "exercises" / "README.md",
        *sorted((REPO / "exercises" / "student").glob("q*.py")),
        *sorted((REPO / "exercises" / "solutions").glob("q*.py")),
    ],
    ids=lambda path: path.name,
)
def test_every_file_the_course_names_exists(path):
    text = path.read_text()
    assert "shared/seeds" not in text, (
        f"{path.name} points at the seed files, which are not in the repository: cite the post itself "
        "(author, title, date or address as the post gives them)"
    )
    for module in (
        "process_env",
        "shared_memory.py",
        "vecenvs/worker.py",
        "vecenvs.worker ",
        "batching.py",
        "vecenvs/actions.py",
        "ProcessVecEnv",
    ):
        assert module not in text, f"{path.name} names {module!r}, which the core no longer has"
    for reference in _FILE_REFERENCE.findall(text):
        assert (REPO / reference.rstrip("/")).exists(), (
            f"{path.name} names {reference}, which does not exist"
        )


def test_make_lab_opens_the_course_with_the_repository_as_root():
    """As root (py-spy needs it) Jupyter refuses to start without --allow-root; given a folder
    it makes that folder its root, so exercises/ would be out of reach."""
    dry_run = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed-lab", "lab"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    command = next(line for line in dry_run.splitlines() if "jupyter lab" in line)
    assert ("--allow-root" in command) == (os.geteuid() == 0), command
    root = re.search(r'--ServerApp.root_dir="?([^"\s]+)', command)
    assert root and Path(root.group(1)) == REPO and (REPO / "exercises").is_dir(), command
    opened = command.split()[-1]
    assert opened.endswith(".ipynb") and (REPO / opened).is_file(), command


# ------------------------------------------------------------------------------------------------
# Running them
# ------------------------------------------------------------------------------------------------

_RUNS: dict[Path, tuple[nbformat.NotebookNode, list[Path]]] = {}


def executed(path: Path, tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """The notebook, run once top to bottom in quick mode (later calls get the same run)."""
    if path not in _RUNS:
        folder = tmp_path_factory.mktemp(path.stem)
        notebook = nbformat.read(path, as_version=4)
        client = NotebookClient(
            notebook,
            timeout=150,
            kernel_name="python3",
            resources={"metadata": {"path": str(folder)}},
        )
        quick = os.environ.get("VECENVS_QUICK")
        os.environ["VECENVS_QUICK"] = "1"  # the kernel inherits it
        try:
            client.execute()  # raises CellExecutionError, naming the cell, on any error
        finally:
            if quick is None:
                os.environ.pop("VECENVS_QUICK")
            else:
                os.environ["VECENVS_QUICK"] = quick
        _RUNS[path] = (notebook, list(folder.iterdir()))
    return _RUNS[path][0]


def printed(notebook: nbformat.NotebookNode) -> str:
    """Everything the code cells printed (stdout and text results), in order."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream" and output.name == "stdout":
                parts.append(output.text)
            elif (
                output.output_type in ("execute_result", "display_data")
                and PLOTLY not in output.data
            ):
                parts.append(output.data.get("text/plain", "") + "\n")
    return "".join(parts)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_runs_top_to_bottom_in_quick_mode(path, tmp_path_factory):
    notebook = executed(path, tmp_path_factory)
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors
    assert _RUNS[path][1] == [], f"{path.name} wrote into its working folder: {_RUNS[path][1]}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_every_conclusion_agrees_with_its_numbers(path, tmp_path_factory):
    check_printed(path.stem, printed(executed(path, tmp_path_factory)))


#: The load check's sentence: the share, the CPUs and where that count came from, the word.
LOAD_CHECK = re.compile(
    r"Load check: other programs used (?P<share>\d+)% of the (?P<cpus>\d+) CPUs this process may "
    r"use \((?P<source>[^()]*(?:\([^()]*\)[^()]*)*)\) over .*? (?P<word>BUSY|Quiet) "
    r"\(busy from (?P<threshold>\d+)%\)"
)
#: What vecenvs.pool.WorkerCount prints: K for an N, and whether N capped it.
WORKER_COUNT = re.compile(
    r"K=(?P<k>\d+) at N=(?P<n>\d+)(?:, not (?P<wanted>\d+))? \((?P<per>one|\d+) per CPU of "
    r"(?P<cpus>\d+)\)|K=(?P<k2>\d+) at N=(?P<n2>\d+): (?P<per2>one|\d+) per CPU of (?P<cpus2>\d+)"
)


def check_printed(stem: str, text: str, cpus: int | None = None) -> None:
    """Everything a notebook printed agrees with itself: the load check, each K it chose for an
    N (at most N, capped only when it says so, from ``cpus`` CPUs when given), and every ``→``
    conclusion against its own numbers (:data:`CHECKS`)."""
    load = LOAD_CHECK.search(text)
    assert load, f"{stem}: no load check printed"
    assert int(load["threshold"]) == round(100 * BUSY_SHARE)
    agree(
        float(load["share"]),
        ">=",
        float(load["threshold"]),
        load["word"] == "BUSY",
        tolerance=0.5,
        what=load.group(0),
    )
    assert load["source"].startswith(f"{load['cpus']} CPU"), load.group(0)
    if cpus is not None:
        assert int(load["cpus"]) == cpus, f"{stem}: expected {cpus} CPUs: {load.group(0)}"
    for match in WORKER_COUNT.finditer(text):
        k, n = int(match["k"] or match["k2"]), int(match["n"] or match["n2"])
        per, on = match["per"] or match["per2"], int(match["cpus"] or match["cpus2"])
        wanted = (1 if per == "one" else int(per)) * on
        assert k == min(wanted, n), f"{stem}: K should be min({wanted}, N): {match.group(0)}"
        assert (match["wanted"] is not None) == (k < wanted), f"{stem}: {match.group(0)}"
        assert cpus is None or on == cpus, f"{stem}: expected {cpus} CPUs: {match.group(0)}"
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith(ARROW)]
    PRINTED[:] = lines
    PRINTED_TEXT[:] = [text]
    checks = CHECKS.get(stem, []) + GENERIC
    unrecognised = []
    for line in lines:
        matched = [check for check in checks if check.pattern.search(line)]
        if not matched:
            unrecognised.append(line)
        for check in matched:
            check.verify(check.pattern.search(line), line)
    assert not unrecognised, f"{stem}: conclusions no check reads: {unrecognised}"
    skipped = "is not installed: this notebook is skipped" in text  # Ray, Stable-Baselines3
    for check in CHECKS.get(stem, []):
        if check.required and not skipped and not (check.unless and check.unless in text):
            assert any(check.pattern.search(line) for line in lines), (
                f"{stem}: no conclusion matching {check.pattern.pattern!r} was printed"
            )


@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_figures_render_in_exported_html(path, tmp_path_factory):
    from nbconvert import HTMLExporter

    notebook = executed(path, tmp_path_factory)
    figures = [
        output
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type in ("execute_result", "display_data") and PLOTLY in output.data
    ]
    for figure in figures:
        assert "image/png" in figure.data, f"{path.name}: a figure without its still picture"
    page, _ = HTMLExporter().from_notebook_node(notebook)
    pictures = len(re.findall(r"<img [^>]*src=\"data:image/png;base64", page))
    assert pictures >= len(figures), (
        f"{path.name}: {len(figures)} figures, {pictures} pictures in the HTML export"
    )


# ------------------------------------------------------------------------------------------------
# Other machines: the course at 1, 3, 8 and 64 CPUs, and in a 4-CPU container on a 64-CPU host
# ------------------------------------------------------------------------------------------------

#: The machines every notebook also runs on (tests/fake_machine fakes them). 1: no second CPU,
#: K=1 everywhere; 3: K does not divide the grids' N; 8 and 64: K above the small N of the quick
#: grids, capped; a 4-CPU quota on a 64-CPU host: the count comes from the quota, as in Docker.
MACHINES = [Machine(1), Machine(3), Machine(8), Machine(64), Machine(64, quota=4)]

#: Run before each notebook of a smoke pass, in the one kernel all of a machine's notebooks share
#: (a kernel and its imports cost ~4 s; 55 kernels would cost minutes). It empties the namespace,
#: then shortens what takes time but does not depend on the CPU count: every timed window (a
#: stand-in for compare and run_sweep that keeps their arguments but the timing), autotune's
#: budget, the load check's interval, and notebook 5's py-spy runs (it reads its recorded
#: profiles instead, as where py-spy may not attach). Every cell still runs, and every conclusion
#: is still checked. Ray is hidden: starting it took 20-70 s on our 2 cores and failed outright
#: (its raylet gave up waiting for its own agents) whenever other tests kept them busy, so
#: notebook 10 runs as where Ray is not installed, its K still printed and checked; Ray itself
#: runs in the normal pass, at the real count.
SMOKE_CELL = """\
%reset -f
import sys

import vecenvs.autotune
import vecenvs.bench
import vecenvs.profile

sys.modules["ray"] = None  # notebook 10 without Ray, as where it is not installed (see below)


def _shorten(bench, profile, tuning):  # closures, not names: the next %reset keeps them
    import dataclasses
    import functools

    timing = {"warmup_seconds": 0.02, "measure_seconds": 0.05, "repeats": 2}
    compare, run_sweep, autotune = bench.compare, bench.run_sweep, tuning.autotune
    tuning.autotune = lambda env, num_envs, budget_seconds=20.0, **kwargs: autotune(
        env, num_envs, min(budget_seconds, 1.5), **kwargs
    )
    bench.compare = lambda *args, **kwargs: compare(*args, **{**kwargs, **timing})
    bench.run_sweep = lambda config, **kwargs: run_sweep(
        dataclasses.replace(config, **timing), **kwargs
    )
    bench.machine_load = functools.partial(bench.machine_load, seconds=0.2)
    profile.check_attach = lambda *args, **kwargs: profile.AttachCheck(
        False, "smoke pass at another CPU count: the recorded profiles, not py-spy"
    )
    bench.shortened = True


if not hasattr(vecenvs.bench, "shortened"):
    _shorten(vecenvs.bench, vecenvs.profile, vecenvs.autotune)
"""

#: Run after each notebook's first code cell, which imports what it needs: where that was
#: Stable-Baselines3 (notebook 11), its PPO learns one rollout (8 envs x 64 steps), not four.
#: (Not in SMOKE_CELL: importing SB3 there would put torch in every process the earlier
#: notebooks fork from the kernel.)
SMOKE_AFTER_SETUP_CELL = """\
import sys


def _one_rollout(ppo):
    learn = ppo.learn
    ppo.learn = lambda self, total_timesteps, **kwargs: learn(
        self, min(total_timesteps, 512), **kwargs
    )
    ppo.shortened = True


_ppo = getattr(sys.modules.get("stable_baselines3"), "PPO", None)
if _ppo is not None and not hasattr(_ppo, "shortened"):
    _one_rollout(_ppo)
"""

#: What the kernels of a smoke pass get besides the fake CPU count: quick mode.
SMOKE_ENV = {"VECENVS_QUICK": "1"}


def run_course(machine: Machine, folder: Path) -> dict[str, nbformat.NotebookNode]:
    """Every notebook, top to bottom, in one kernel running on ``machine``, each after
    :data:`SMOKE_CELL` (and :data:`SMOKE_AFTER_SETUP_CELL` after its setup cell; neither is
    kept in the returned notebooks); by stem."""
    runs = {}
    work = folder / "work"
    work.mkdir(parents=True)
    with kernel_manager(machine, folder, SMOKE_ENV) as km:
        km.start_kernel(cwd=str(work))
        for path in NOTEBOOKS:
            notebook = nbformat.read(path, as_version=4)
            setup = next(i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code")
            smoke = [
                nbformat.v4.new_code_cell(SMOKE_AFTER_SETUP_CELL),
                nbformat.v4.new_code_cell(SMOKE_CELL),
            ]
            notebook.cells.insert(setup + 1, smoke[0])
            notebook.cells.insert(0, smoke[1])
            client = NotebookClient(notebook, km=km, timeout=150)
            try:
                client.execute()  # raises CellExecutionError, naming the cell, on any error
            finally:
                if client.kc is not None:
                    client.kc.stop_channels()
            for cell in smoke:
                assert not cell.outputs, cell.outputs
                notebook.cells.remove(cell)
            runs[path.stem] = notebook
    assert list(work.iterdir()) == [], (
        f"the notebooks wrote into their working folder on {machine.id}"
    )
    return runs


_COURSE_RUNS: dict[Machine, Future] = {}


def course_run(machine: Machine, tmp_path_factory: pytest.TempPathFactory):
    """The smoke pass on ``machine``. The first call runs every machine of :data:`MACHINES` that
    can be played here side by side, one kernel each, and waits for all of them: much of a pass
    is timed windows and process start-ups that wait rather than compute, so five at once take
    about half as long as five in turn on our 2 cores (the checks read numbers, not speeds: a
    busy machine is fine). Skips a machine that cannot be played (a quota needs root)."""
    reason = quota_skip_reason() if machine.quota is not None else None
    if reason is not None:
        pytest.skip(f"the {machine.id} container is not played here: {reason}")
    if not _COURSE_RUNS:
        playable = [m for m in MACHINES if m.quota is None or quota_skip_reason() is None]
        with ThreadPoolExecutor(len(playable)) as pool:
            for each in playable:
                folder = tmp_path_factory.mktemp(each.id)
                _COURSE_RUNS[each] = pool.submit(run_course, each, folder)
    return _COURSE_RUNS[machine].result()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("machine", MACHINES, ids=lambda machine: machine.id)
def test_every_notebook_runs_and_agrees_with_itself_on_another_machine(machine, tmp_path_factory):
    """The course at other CPU counts: no cell fails (a K above N once stopped notebooks 4, 6,
    7 and 8 at 8 and 64 CPUs), every K printed is at most N and says when N capped it, and the
    words follow the numbers there too."""
    check_course(machine, course_run(machine, tmp_path_factory))


def check_course(machine: Machine, runs: dict[str, nbformat.NotebookNode]) -> None:
    """What a smoke pass on ``machine`` printed agrees with itself and with the machine."""
    assert sorted(runs) == [path.stem for path in NOTEBOOKS]
    for stem, notebook in runs.items():
        text = printed(notebook)
        check_printed(stem, text, cpus=machine.count)
        if machine.quota is not None:
            where = f"{machine.count} CPUs: cgroup quota {machine.quota * 100000}/100000 on a "
            assert f"({where}{machine.cpus}-CPU host)" in text, f"{stem}: {text[:600]}"


# ------------------------------------------------------------------------------------------------
# Reading conclusions back
# ------------------------------------------------------------------------------------------------


#: The conclusion lines of the notebook being checked, for checks that compare two of them.
PRINTED: list[str] = []
#: Everything it printed (one string), for checks against its tables.
PRINTED_TEXT: list[str] = []


def number(text: str) -> float:
    """A printed number: ``1,234``, ``12.5``, ``-3``, ``40%`` (as 40)."""
    return float(text.replace(",", "").rstrip("%x"))


def rounded_to(printed_text: str) -> float:
    """Half the last printed digit: how far a printed number may be from the value it shows."""
    digits = printed_text.replace(",", "").rstrip("%x")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return 0.5 * 10.0**-decimals


def agree(
    value: float,
    relation: str,
    threshold: float,
    claimed: bool,
    *,
    tolerance: float = 0.0,
    what: str = "",
) -> None:
    """``claimed`` must be what ``value relation threshold`` says, except within ``tolerance``
    of the threshold, where rounding of the printed numbers may decide either way."""
    if abs(value - threshold) <= tolerance:
        return
    holds = {
        ">=": value >= threshold,
        ">": value > threshold,
        "<=": value <= threshold,
        "<": value < threshold,
    }[relation]
    assert holds == claimed, (
        f"the words say {claimed} but {value} {relation} {threshold} is {holds}: {what}"
    )


def close(
    value: float, expected: float, *, relative: float = 0.0, absolute: float = 0.0, what: str = ""
) -> None:
    assert math.isclose(value, expected, rel_tol=relative, abs_tol=absolute), (
        f"printed {value}, but the printed numbers give {expected}: {what}"
    )


class Check:
    """A kind of conclusion line: how to recognise it, and how to check it against its numbers."""

    def __init__(
        self,
        pattern: str,
        verify: Callable[[re.Match, str], None],
        *,
        required: bool = True,
        unless: str | None = None,
    ):
        self.pattern = re.compile(pattern)
        self._verify = verify
        self.required = required
        #: A required conclusion may be missing when the notebook printed this instead (a cell
        #: that says why it skipped, e.g. oversubscribing a machine of many CPUs).
        self.unless = unless

    def verify(self, match: re.Match, line: str) -> None:
        self._verify(match, line)


N = r"(-?[\d,]+(?:\.\d+)?)"  # a printed number


def _percent_of(
    match: re.Match, part: int, whole: int, share: int, line: str, *, minus_one: bool = False
) -> None:
    """``share`` is printed as part / whole (or part / whole - 1) in percent."""
    numerator, denominator = number(match.group(part)), number(match.group(whole))
    ratio = numerator / denominator
    # Rounding the two printed numbers moves their ratio by up to this much: each one's
    # relative rounding, times the ratio (a small whole moves a large ratio a lot: 37.45 /
    # 9.57 may be anything from 3.908 to 3.918).
    slack = ratio * (
        rounded_to(match.group(part)) / numerator + rounded_to(match.group(whole)) / denominator
    )
    expected = 100 * (ratio - (1 if minus_one else 0))
    close(number(match.group(share)), expected, absolute=0.5 + 100 * slack * 1.5, what=line)


def _skewed_env_share(match: re.Match, line: str) -> None:
    """The factor, or (when the workers' env compute printed as 0.0%) no factor at all."""
    if match.group(3) is None:
        assert number(match.group(1)) == 0, f"a factor it could print is missing: {line}"
    else:
        _times(match, 3, 2, 1, line)


def _times(match: re.Match, factor: int, numerator: int, denominator: int, line: str) -> None:
    """``factor`` (printed as 1.2x) is numerator / denominator."""
    ratio = number(match.group(numerator)) / number(match.group(denominator))
    slack = ratio * (
        rounded_to(match.group(numerator)) / number(match.group(numerator))
        + rounded_to(match.group(denominator)) / number(match.group(denominator))
    )
    close(
        number(match.group(factor)),
        ratio,
        absolute=rounded_to(match.group(factor)) + 1.5 * slack,
        what=line,
    )


def _verdict_use(match: re.Match, line: str) -> None:
    """A call (vecenvs.bench.verdict): ahead by 5%, in every one of 3+ rounds if "clear", in
    more than half of them if "likely"."""
    margin = number(match.group("margin"))
    wins, rounds = int(match.group("wins")), int(match.group("rounds"))
    assert margin >= 1.05 - 0.005, f"a call needs a 5% lead: {line}"
    if match.group("word") == "clear":
        assert wins == rounds >= 3, f"'clear' needs every one of 3+ rounds won: {line}"
    else:
        assert rounds / 2 < wins, f"'likely' needs most rounds won: {line}"
    share = match.group("share")
    assert share is None or number(share) <= 100, f"a share above the ceiling: {line}"


def _verdict_tie(match: re.Match, line: str) -> None:
    best, rival = number(match.group("best")), number(match.group("rival"))
    assert best / rival <= 1.05 + 0.01, f"a 'tie' more than 5% apart: {line}"


def _verdict_no_call(match: re.Match, line: str) -> None:
    if match.group("low") is not None:  # the rounds disagree: one lost, or a wide spread
        low, high = number(match.group("low")), number(match.group("high"))
        assert low <= 1.0 + 0.005 or high >= 1.15 - 0.005, f"'noisy' but steady: {line}"


def _fit_quality(match: re.Match, line: str) -> None:
    error = number(match.group("error")) / 100
    r2 = math.nan if match.group("r2") is None or match.group("loop") else number(match.group("r2"))
    word = "poor"
    for candidate, largest_error, smallest_r2 in _QUALITY_BOUNDS:
        if error <= largest_error + 0.005 and (math.isnan(r2) or r2 >= smallest_r2 - 0.005):
            word = candidate
            break
    # Within rounding of a bound the printed numbers cannot decide: accept the neighbour word.
    near = any(
        abs(error - bound) <= 0.005 or (not math.isnan(r2) and abs(r2 - r2_bound) <= 0.005)
        for _, bound, r2_bound in _QUALITY_BOUNDS
    )
    assert match.group("word") == word or near, (
        f"fit called {match.group('word')}, its numbers say {word}: {line}"
    )
    assert ("its curve is not drawn" in line) == (match.group("word") == "poor"), line


#: Conclusions any notebook may print: the bench's verdicts and fit qualities.
GENERIC = [
    Check(
        rf"→ .+?, N=\d+: use .+?: {N}x \S+, (?P<margin>{N})x the runner-up .+?; "
        rf"(?P<word>clear|likely): faster in (?P<wins>\d+) of (?P<rounds>\d+) paired windows"
        rf"(?:; (?P<share>{N})% of the ceiling)?",
        _verdict_use,
        required=False,
    ),
    Check(
        rf"→ .+?, N=\d+: a tie between .+? at (?P<best>{N})x \S+ and .+? at (?P<rival>{N})x: "
        r"within 5% of .+ in every window: either will do",
        _verdict_tie,
        required=False,
    ),
    Check(
        rf"→ .+?, N=\d+: no call between .+? at {N}x \S+ and .+? at {N}x: (?:noisy: \d+ windows "
        rf"ranged (?P<low>{N})-(?P<high>{N})x .+; measure \d+ windows|one window: no spread|"
        r"suspect: the windows of .+? disagree, so every speed-up here is suspect; measure again)",
        _verdict_no_call,
        required=False,
    ),
    Check(
        r"→ .+?: too few points to judge the model \((?P<points>\d+) point\(s\) for "
        r"(?P<numbers>\d+) numbers",
        lambda match, line: (
            int(match.group("points")) <= int(match.group("numbers")) or pytest.fail(line)
        ),
        required=False,
    ),
    Check(
        r"→ .+?, N=\d+: .+ is the only backend measured", lambda match, line: None, required=False
    ),
    Check(
        rf"→ .+?: the model fits (?P<word>good|rough|poor) \(median error (?P<error>{N})%, "
        rf"(?:R² (?P<r2>{N})|R² undefined: too little spread)(?P<loop>; R² not used for a loop)?\)",
        _fit_quality,
        required=False,
    ),
]


def _sampling(match: re.Match, line: str) -> None:
    _percent_of(match, 1, 3, 2, line)
    agree(
        number(match.group(2)),
        ">=",
        5,
        "overstate the step noticeably" in line,
        tolerance=0.5,
        what=line,
    )


def _ratio_words(factor: int, numerator: int, denominator: int, threshold: float, yes: str):
    """``factor`` = numerator / denominator, and the words contain ``yes`` iff factor >= threshold."""

    def verify(match: re.Match, line: str) -> None:
        _times(match, factor, numerator, denominator, line)
        agree(
            number(match.group(factor)),
            ">=",
            threshold,
            yes in line,
            tolerance=rounded_to(match.group(factor)),
            what=line,
        )

    return verify


def _doubling(match: re.Match, line: str) -> None:
    before, after, gain = number(match.group(4)), number(match.group(5)), number(match.group(3))
    close(gain, 100 * (after / before - 1), absolute=1.0, what=line)
    words = "levelled off" if abs(gain) < 10 else "still growing" if gain > 0 else "it fell"
    if abs(abs(gain) - 10) > 1:
        assert words in line, f"{gain}% should read '{words}': {line}"


def _sleeping_loop(match: re.Match, line: str) -> None:
    num_envs, millis, factor, each, expected = (number(match.group(i)) for i in range(1, 6))
    close(expected, num_envs * each, relative=1e-9, what=line)
    close(factor, millis / expected, absolute=0.006 + 0.005 / expected, what=line)
    agree(factor, ">=", 0.9, "waits for each env in turn" in line, tolerance=0.005, what=line)


def _overlap(match: re.Match, line: str) -> None:
    in_turn, overlapped, saved = (
        number(match.group(1)),
        number(match.group(2)),
        number(match.group(3)),
    )
    close(saved, 100 * (1 - overlapped / in_turn), absolute=1.0, what=line)
    agree(
        saved, ">=", 20, "(the work ran while the envs stepped)" in line, tolerance=0.5, what=line
    )


def _stragglers(match: re.Match, line: str) -> None:
    _times(match, 3, 2, 4, line)
    close(number(match.group(6)), 100 * (1 - 0.95 ** int(match.group(1))), absolute=0.5, what=line)


def _chunks(match: re.Match, line: str) -> None:
    sizes = [int(size) for size in match.group(1).split(",")]
    assert int(match.group(2)) == max(sizes) - min(sizes), line
    assert (match.group(3) == "the smallest") == (sizes[0] == min(sizes)), line


def _tally(match: re.Match, line: str) -> None:
    total, *counts = (int(value) for value in match.groups())
    assert sum(counts) == total, f"the counts do not add up to the points: {line}"


def _within_range(match: re.Match, line: str) -> None:
    middle, low, high = (number(value) for value in match.groups()[:3])
    assert low - 0.005 <= middle <= high + 0.005, f"a median outside its range: {line}"


def _spinning(match: re.Match, line: str) -> None:
    """Slower below 0.9x, faster above 1.1x, else no clear difference."""
    spin = number(match.group(1))
    agree(spin, "<", 0.9, "made it slower" in line, tolerance=0.005, what=line)
    agree(spin, ">", 1.1, "made it faster" in line, tolerance=0.005, what=line)


def _oversubscribed(match: re.Match, line: str) -> None:
    _times(match, 3, 4, 5, line)
    agree(
        number(match.group(3)),
        ">=",
        1.1,
        "were faster on this run" in line,
        tolerance=0.005,
        what=line,
    )


def _parent_talking(match: re.Match, line: str) -> None:
    waiting, io, pickling, total = (number(match.group(i)) for i in range(1, 5))
    close(total, waiting + io + pickling, absolute=1.6, what=line)
    agree(total, ">=", 50, "most of its time goes to talking" in line, tolerance=0.5, what=line)


def _env_shares(match: re.Match, line: str) -> None:
    shares = [number(share) for share in re.findall(r"(\d+)% of [\w ]+?'s time", match.group(1))]
    assert shares and all(0 <= share <= 100 for share in shares), line
    if "the env is" in line:
        agree(
            min(shares),
            ">=",
            50,
            "the env is most of every process's time" in line,
            tolerance=0.5,
            what=line,
        )
        least = re.search(r"the least: (\d+)%", line)
        assert least is None or number(least.group(1)) == min(shares), line


def _growing_overhead(match: re.Match, line: str) -> None:
    constant, growing = number(match.group(1)), number(match.group(2))
    if constant != growing:
        assert ("fits better" in line) == (growing < constant), line


def _prediction(match: re.Match, line: str) -> None:
    predicted, measured, error = (
        number(match.group(2)),
        number(match.group(3)),
        number(match.group(4)),
    )
    exact = 100 * (predicted - measured) / measured
    slack = 100 * 0.005 * (1 / measured + predicted / measured**2)  # both printed to 2 decimals
    close(error, exact, absolute=0.5 + slack, what=line)
    words = (
        "within 10%"
        if abs(error) <= 10
        else "within 25%"
        if abs(error) <= 25
        else "off by more than 25%"
    )
    if min(abs(abs(error) - 10), abs(abs(error) - 25)) > 0.5:
        assert match.group(5) == words, f"{error}% off reads '{words}': {line}"
    label, word = match.group(1), match.group(6)
    judged = (
        f"→ {label}: too few points to judge the model"
        if word == "too few points"
        else f"→ {label}: the model fits {word} "
    )
    assert any(other.startswith(judged) for other in PRINTED), (
        f"the fit's word does not match the fit printed before: {line} / {PRINTED}"
    )


def _growth(match: re.Match, line: str) -> None:
    _times(match, 6, 4, 2, line)
    assert int(match.group(7)) == int(match.group(5)) // int(match.group(3)), line


def _ranking(match: re.Match, line: str) -> None:
    rates = [number(rate) for _, rate in re.findall(r"([^,]+?) ([\d,]+)(?:, |$)", match.group(2))]
    assert len(rates) >= 2 and rates == sorted(rates, reverse=True), f"not fastest first: {line}"


def _largest_smallest(match: re.Match, line: str) -> None:
    assert number(match.group(3)) >= number(match.group(5)), line


def _counted(yes: str):
    """``X of Y``: the words contain ``yes`` exactly when X == Y."""

    def verify(match: re.Match, line: str) -> None:
        done, total = int(match.group(1)), int(match.group(2))
        assert done <= total and (yes in line) == (done == total), line

    return verify


def _autotune_choice(match: re.Match, line: str) -> None:
    assert f"best: {match.group(2)}\n" in PRINTED_TEXT[0], (
        f"autotune's own table chose otherwise: {line}"
    )


def _autotune_change(match: re.Match, line: str) -> None:
    assert (match.group(3) == "differ") == (match.group(1) != match.group(2)), line
    for num_envs, label in ((4, match.group(1)), (128, match.group(2))):
        assert any(
            other.startswith(f"→ CartPole-v1, N={num_envs}: autotune chose {label} (")
            for other in PRINTED
        ), line


def _ray(match: re.Match, line: str) -> None:
    ray_ratio, ray_ms, pool_ms, difference = (number(match.group(i)) for i in (1, 3, 4, 7))
    agree(ray_ratio, ">", 1.0, match.group(5) == "beat", tolerance=0.005, what=line)
    close(difference, abs(ray_ms - pool_ms), absolute=0.0015, what=line)
    assert (match.group(6) == "trailed") == (ray_ms > pool_ms), line


def _env_share(match: re.Match, line: str) -> None:
    _percent_of(match, 3, 4, 5, line)
    agree(number(match.group(5)), ">=", 50, "the env dominates" in line, tolerance=0.05, what=line)


#: Notebook stem -> the conclusions it must print, each checked against its own numbers.
CHECKS: dict[str, list[Check]] = {
    "01-timing-one-env": [
        Check(rf"→ sampling an action costs {N} µs, {N}% of a step's {N} µs", _sampling),
        Check(
            rf"→ the slowest measurement \({N} µs\) took {N}% longer than the fastest \({N} µs\)",
            lambda m, line: _percent_of(m, 1, 3, 2, line, minus_one=True),
        ),
        Check(
            rf"→ the single reading above \({N} µs\) was {N}x the median of averaged steps \({N} µs\)",
            lambda m, line: _times(m, 2, 1, 3, line),
        ),
        Check(
            rf"→ \S+ steps {N}x slower than \S+ \({N} vs {N} µs\)",
            lambda m, line: _times(m, 1, 2, 3, line),
        ),
    ],
    "02-sequential-loop": [
        Check(
            rf"→ a straight line explains {N} of the variation \(R²\)",
            lambda m, line: agree(
                number(m.group(1)),
                ">=",
                0.95,
                "grows in a straight line" in line,
                tolerance=0.0005,
                what=line,
            ),
        ),
        Check(
            rf"→ one more env costs {N} µs in the loop, {N}x a bare CartPole step \({N} µs\)",
            _ratio_words(2, 1, 3, 1.1, "the extra is the loop's own work"),
        ),
        Check(
            rf"→ doubling N from (\d+) to (\d+) changed the throughput by ([+-]\d+)% \({N} -> {N} env steps/s\)",
            _doubling,
        ),
        Check(rf"→ N=(\d+): {N} ms per step\(\) call, {N}x N x {N} ms \({N} ms\)", _sleeping_loop),
    ],
    "03-one-process-per-env": [
        Check(
            rf"→ (?:computing|waiting) steps, 2 (?:threads|processes): {N}x the loop \({N} vs {N} ms per step\(\)\): "
            r"(?P<word>faster|no faster)$",
            lambda m, line: (
                _times(m, 1, 3, 2, line),
                agree(
                    number(m.group(1)),
                    ">=",
                    1.3,
                    m.group("word") == "faster",
                    tolerance=0.005,
                    what=line,
                ),
            ),
        ),
        Check(
            rf"→ obs_size {N}: a round trip took {N} µs, {N}x the 4-float round trip \({N} µs\)",
            lambda m, line: _times(m, 3, 2, 4, line),
        ),
        Check(
            rf"→ the smallest round trip \({N} µs\) is {N}x its pickling \({N} µs\)",
            _ratio_words(2, 1, 3, 2.0, "the cost is waking processes"),
        ),
        Check(
            rf"→ one process per env was {N}x the loop \({N} vs {N} ms per step\(\)\)",
            _ratio_words(1, 3, 2, 2.0, "waited at the same time"),
        ),
        Check(
            rf"→ step\(\) then work: {N} ms; step_async, work, step_wait: {N} ms: overlapping saved {N}%",
            _overlap,
        ),
        Check(
            rf"→ N=(\d+): mean step\(\) {N} ms, {N}x one env's average step \({N} ms\); a straggler in {N}% of "
            rf"the batches \({N}% expected\)",
            _stragglers,
        ),
        Check(
            rf"→ {N}% of the step\(\) calls lasted at least as long as their slowest env's step",
            lambda m, line: agree(
                number(m.group(1)),
                ">=",
                90,
                "a call lasts as long as its slowest env" in line,
                tolerance=0.5,
                what=line,
            ),
        ),
    ],
    "04-the-pool": [
        Check(
            r"→ chunk sizes \[([\d, ]+)\]: they differ by (\d+), and the caller's is (the smallest|not the smallest)",
            _chunks,
        ),
        Check(
            rf"→ in a tight loop the worker was asleep before {N}% of the steps; after {N} ms pauses, before {N}%",
            lambda m, line: (
                all(0 <= number(m.group(i)) <= 100 for i in (1, 3)) or pytest.fail(line)
            ),
        ),
        Check(
            rf"→ a step took {N} µs in a tight loop and {N} µs after a pause \({N}x\)",
            _ratio_words(3, 2, 1, 1.2, "waking a sleeping worker costs time"),
        ),
        Check(
            r"→ of (\d+) points, the pool won (\d+), one process per env (\d+), a loop (\d+); (\d+) too close",
            _tally,
        ),
        Check(
            rf"→ shared memory made the pool {N}x as fast as pickling over pipes \({N}-{N}x window by window\)",
            _within_range,
        ),
        Check(
            rf"→ K=(\d+) on (\d+) CPUs ran at {N}x K=\d+ \({N}x vs {N}x gym-sync\)",
            _oversubscribed,
            unless="oversubscription skipped",
        ),
        Check(
            rf"→ made to spin, K=\d+ ran at {N}x itself not spinning \({N}x gym-sync\)",
            _spinning,
            unless="oversubscription skipped",
        ),
    ],
    "05-profiling": [
        Check(
            rf"→ the workers waited {N}% of their time and stepped envs {N}%",
            lambda m, line: agree(
                number(m.group(1)), ">=", 50, "they mostly wait" in line, tolerance=0.5, what=line
            ),
        ),
        Check(
            rf"→ the parent spent {N}% waiting, {N}% on pipe & shm I/O and {N}% pickling, {N}% in all",
            _parent_talking,
        ),
        Check(r"→ pool \(K=2\), 8 x CartPole: env compute is (.+)$", _env_shares),
        Check(r"→ pool \(K=2\), 128 x CartPole: env compute is (.+)$", _env_shares),
        Check(
            rf"→ the workers' env compute: {N}% of their time with idle samples, {N}% without: "
            rf"(?:a default profile would show it {N}x larger|too few samples of it to compare)",
            _skewed_env_share,
        ),
    ],
    "06-overhead-model": [
        Check(
            r"→ .+?: (?:the model fits (?:good|rough|poor) |too few points to judge the model)",
            lambda m, line: None,
        ),  # read by GENERIC
        Check(
            rf"→ subproc: median error {N}% with a constant overhead, {N}% with one growing with N "
            rf"\(b = {N} µs per env\)",
            _growing_overhead,
        ),
        Check(
            rf"→ (.+?) at N=\d+: predicted {N}x, measured {N}x \(([+-]\d+)% off\): "
            r"(within 10%|within 25%|off by more than 25%); the fit: (good|rough|poor|too few points)",
            _prediction,
        ),
    ],
    "07-beyond": [
        Check(
            rf"→ (.+?): one step\(\) took {N} µs at N=(\d+) and {N} µs at N=(\d+), {N}x longer for (\d+)x the envs",
            _growth,
        ),
        Check(r"→ at N=(\d+), fastest first: (.+) env steps/s$", _ranking),
        Check(
            r"→ at N=(\d+), the policy's share of acting time is largest with (.+?) \((\d+)%\) and smallest with "
            r"(.+?) \((\d+)%\)",
            _largest_smallest,
        ),
    ],
    "08-async-pool": [
        Check(
            rf"→ measured {N}x against {N}x on paper: {N} of it",
            lambda m, line: _times(m, 3, 1, 2, line),
        ),
        Check(
            r"→ after \d+ batches the envs had been returned from (\d+) to (\d+) times",
            lambda m, line: int(m.group(1)) <= int(m.group(2)) or pytest.fail(line),
        ),
        Check(
            r"→ by env_id: replaying each env's recorded actions reproduced (\d+) of its (\d+) recorded",
            _counted("each buffer holds a true trajectory"),
        ),
        Check(
            r"→ by position: column 0 of the stacked batches, .+ reproduced (\d+) of (\d+):",
            _counted("it is a true trajectory"),
        ),
    ],
    "09-autotune": [
        Check(
            r"→ CartPole-v1, N=(\d+): autotune chose (.+?) \((?:[\d.]+x the loop|the loop not measured), measured",
            _autotune_choice,
        ),
        Check(
            r"→ the winner at N=4 \((.+?)\) and at N=128 \((.+?)\) (differ|are the same)",
            _autotune_change,
        ),
    ],
    "10-ray": [
        Check(
            rf"→ \S+: Ray {N}x the loop, the pool {N}x; one step\(\) took {N} ms through Ray, {N} ms in the pool: "
            rf"Ray (beat|did not beat) the loop, and (trailed|beat) the pool by {N} ms per step",
            _ray,
        ),
    ],
    "11-training": [
        Check(
            rf"→ (.+?): stepping alone at {N} env steps/s, the env would take {N} s of the {N} s of learn\(\) "
            rf"\({N}%\)",
            _env_share,
        ),
        Check(
            rf"→ learn\(\) took from {N} s \((.+?)\) to {N} s \((.+?)\): {N}x apart",
            lambda m, line: _times(m, 5, 3, 1, line),
        ),
    ],
}


def read_back(stem: str, line: str, printed: list[str] | None = None) -> None:
    """Runs every check that recognises ``line``, as the conclusions test does."""
    PRINTED[:] = printed or [line]
    PRINTED_TEXT[:] = ["\n".join(PRINTED) + "\n"]
    matched = [check for check in CHECKS.get(stem, []) + GENERIC if check.pattern.search(line)]
    assert matched, f"no check reads {line!r}"
    for check in matched:
        check.verify(check.pattern.search(line), line)


@pytest.mark.parametrize(
    "stem, honest, contradicting",
    [
        (
            "02-sequential-loop",
            "→ a straight line explains 0.998 of the variation (R²): the time per step() grows in a straight line with N",
            "→ a straight line explains 0.700 of the variation (R²): the time per step() grows in a straight line with N",
        ),
        (
            "03-one-process-per-env",
            "→ computing steps, 2 threads: 0.80x the loop (5.78 vs 4.62 ms per step()): no faster",
            "→ computing steps, 2 threads: 1.80x the loop (5.78 vs 4.62 ms per step()): faster",
        ),
        (
            "04-the-pool",
            "→ K=8 on 2 CPUs ran at 0.92x K=2 (0.94x vs 1.02x gym-sync): more workers than CPUs did not help",
            "→ K=8 on 2 CPUs ran at 1.32x K=2 (0.94x vs 1.02x gym-sync): more workers than CPUs were faster on this run",
        ),
        (
            "04-the-pool",
            "→ made to spin, K=16 ran at 2.24x itself not spinning (0.52x gym-sync): spinning made it faster on this "
            "run (see the explanation below)",
            "→ made to spin, K=16 ran at 2.24x itself not spinning (0.52x gym-sync): spinning made no clear "
            "difference here",
        ),
        (
            "05-profiling",
            "→ pool (K=2), 128 x CartPole: env compute is 24% of parent's time, 44% of worker 0's time: the env is not "
            "most of every process's time on this run (the least: 24%)",
            "→ pool (K=2), 128 x CartPole: env compute is 24% of parent's time, 44% of worker 0's time: the env is most of "
            "every process's time",
        ),
        (
            "06-overhead-model",
            "→ pool (num_workers=2): the model fits poor (median error 65%, R² -1.60); its curve is not drawn.",
            "→ pool (num_workers=2): the model fits good (median error 65%, R² -1.60).",
        ),
        (
            "04-the-pool",
            "→ CartPole-v1, N=128: no call between pool (num_workers=2) at 1.02x gym-sync and gym-sync (the loop) "
            "at 1.00x: noisy: 3 windows ranged 0.92-1.10x gym-sync; measure 6 windows.",
            "→ CartPole-v1, N=128: use pool (num_workers=2): 1.02x gym-sync, 1.02x the runner-up gym-sync (the "
            "loop); clear: faster in 2 of 3 paired windows.",
        ),
        (
            "09-autotune",
            "→ the winner at N=4 (multi) and at N=128 (pool (num_workers=2)) differ: more work per step() paid",
            "→ the winner at N=4 (multi) and at N=128 (pool (num_workers=2)) are the same on this run",
        ),
    ],
)
def test_the_checks_catch_words_that_contradict_their_numbers(stem, honest, contradicting):
    """The conclusions the issue found beside numbers that said otherwise, and their honest forms."""
    printed = [honest]
    if stem == "09-autotune":
        printed = [
            "→ CartPole-v1, N=4: autotune chose multi (1.00x the loop, measured one",
            "→ CartPole-v1, N=128: autotune chose pool (num_workers=2) (1.30x the loop, measured one",
        ]
    read_back(stem, honest, [*printed, honest])
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        read_back(stem, contradicting, [*printed, contradicting])


def test_a_prediction_names_the_judgement_of_the_fit_printed_before_it():
    """Notebook 6 at two values of N: the model has too few points to be judged, and the test of
    its prediction says so, not a word the fit never got."""
    judged = (
        "→ pool (num_workers=2): too few points to judge the model (2 point(s) for 2 numbers: "
        "t_env per env and t_os); its curve is not drawn. Measure at more N to test it."
    )
    line = (
        "→ pool (num_workers=2) at N=8: predicted 1.14x, measured 0.82x (+39% off): off by more "
        "than 25%; the fit: too few points"
    )
    read_back("06-overhead-model", line, [judged, line])
    good = line.replace("too few points", "good")
    with pytest.raises(AssertionError, match="does not match the fit printed before"):
        read_back("06-overhead-model", good, [judged, good])
