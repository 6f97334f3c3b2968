"""The dashboard end to end: the real Streamlit server, driven in headless Chromium.

Debian's ``chromium`` package provides the browser (``.ci/run`` installs it) and Playwright's
Python package drives it (no browser download). The server is started the way a user might,
``streamlit run app.py`` from the dashboard's own folder with no address given: it must still
listen on loopback only, send no usage statistics and show no Deploy button.

- Two tabs: a two-env comparison with the ceiling in the first, a shorter one in the second
  (double-clicked: queued once), queued behind it; the verdict table comes first, above the
  fold, its ratios never above the ceiling; the panels' titles do not run into each other,
  the legends sit below the plots; reopened from its address, a job fills the form with its
  settings and shows its busy warning.
- A run with a disturbed window is flagged, never shown above the ceiling; the Profile page's
  flame graph has a size and boxes in it.
- History: three runs of two envs overlaid, one of them labelled with Markdown and HTML that
  would fetch images; nothing is fetched from anywhere but the server, the legend leaves the
  plot its width, and the panels and the backends' styles stay put from one view to the other.

Each saves a screenshot (``test-artifacts/dashboard-*.png``, or under
``$VECENVS_SCREENSHOT_DIR``). ``VECENVS_README_SCREENSHOT=docs/images/dashboard-compare.png``
makes :func:`test_the_readme_screenshot` measure a real comparison and save the README's
picture there (a few minutes; take it on a quiet machine).
"""

from __future__ import annotations

import http.server
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SERVER_START_SECONDS = 90
#: Flags that keep Chromium from reaching out to Google's servers (this network is closed).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

playwright = pytest.importorskip("playwright.sync_api")

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        pytest.fail(
            f"CI must install Debian's chromium (not found at {CHROMIUM}); see .ci/run",
            pytrace=False,
        )
    pytest.skip(f"needs Chromium at {CHROMIUM}: apt-get install chromium", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """``streamlit run app.py`` from the dashboard's folder, given no address and no usage
    statistics setting, with its own store and machine lock. Yields its address."""
    port = free_port()
    # The example env package importable, as a user's own installed package would be: the
    # server and its job runner find "mycart:MyCart-v0" when it is typed in.
    paths = [
        str(ROOT),
        str(ROOT / "examples" / "mycart"),
        str(ROOT / "tests" / "data" / "userenvs"),
    ]
    paths.append(os.environ.get("PYTHONPATH", ""))
    env = {
        **os.environ,
        "VECENVS_STORE": str(tmp_path / "results.sqlite"),
        "VECENVS_MACHINE_LOCK": str(tmp_path / "machine.lock"),
        "PYTHONPATH": os.pathsep.join(path for path in paths if path),
    }
    env.pop("STREAMLIT_SERVER_ADDRESS", None)
    log = open(tmp_path / "server.log", "w+", encoding="utf-8")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless=true",
            f"--server.port={port}",
            "--server.fileWatcherType=none",
        ],
        cwd=ROOT / "dashboard",
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"streamlit exited with {process.returncode}:\n{log.read()}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                    if answer.read() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer within {SERVER_START_SECONDS} s")
            time.sleep(0.3)
        listening = {
            c.laddr.ip
            for c in psutil.Process(process.pid).net_connections("inet")
            if c.status == psutil.CONN_LISTEN
        }
        assert listening and listening <= {"127.0.0.1", "::1"}, (
            f"started from its folder with no address, it listens on {listening}"
        )
        yield url
    finally:
        # Stop the server and the job runner it started (same session), like Ctrl-C would.
        with_children = (
            [process, *psutil.Process(process.pid).children(recursive=True)]
            if process.poll() is None
            else []
        )
        os.killpg(process.pid, signal.SIGINT) if process.poll() is None else None
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        psutil.wait_procs([p for p in with_children if p.pid != process.pid], timeout=20)
        log.seek(0)
        output = log.read()
        log.close()
        assert "Traceback" not in output, f"the server logged an error:\n{output}"


@pytest.fixture
def browser():
    with playwright.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def screenshot_path(name: str) -> Path:
    folder = Path(os.environ.get("VECENVS_SCREENSHOT_DIR", ROOT / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def new_page(browser, server: str):
    """A tab that records every address it fetches, in ``page.fetched``."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.set_default_timeout(60_000)
    page.fetched = []
    page.on("request", lambda request: page.fetched.append(request.url))
    return page


def open_compare(browser, url: str):
    page = new_page(browser, url)
    page.goto(url)
    page.get_by_role("button", name="Run").wait_for()
    return page


def only_from(page, server: str) -> None:
    """Nothing fetched from anywhere but the dashboard itself (no usage statistics, no image a
    label points to)."""
    elsewhere = [
        url for url in page.fetched if not url.startswith((server, "data:", "blob:", "about:"))
    ]
    assert not elsewhere, f"the page fetched {elsewhere}"


def boxes(locator) -> list[dict]:
    return [element.bounding_box() for element in locator.all()]


def overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def check_reads_at_a_glance(chart) -> None:
    """A plotly chart whose panel titles do not overlap, whose legend sits below its plots
    (not beside them, taking their width), and whose log axes are labelled at round values."""
    chart.locator(".main-svg").first.wait_for()
    # Right after a job finishes the chart may be redrawn: for a moment some of its elements
    # have no box. Measure again until every one has.
    deadline = time.monotonic() + 15
    while True:
        titles = boxes(chart.locator(".infolayer .annotation"))
        plots = boxes(chart.locator(".cartesianlayer .subplot .gridlayer"))
        legend = chart.locator(".legend").first.bounding_box()
        whole = chart.bounding_box()
        measured = [*titles, *plots, legend, whole]
        if all(box is not None for box in measured) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for a, b in itertools.combinations(titles, 2):
        assert not overlap(a, b), "two panel titles overlap"
    assert legend["y"] >= max(p["y"] + p["height"] for p in plots) - 1, "legend beside a plot"
    width = max(p["x"] + p["width"] for p in plots) - min(p["x"] for p in plots)
    assert width > 0.75 * whole["width"], "the plots keep the chart's width"


def fill_form(page, *, remove: list[str], shortest: bool, label: str) -> None:
    """Untick chips (``"Remove 64"``...) and, if ``shortest``, pull every slider to its minimum."""
    for name in remove:
        page.get_by_role("button", name=name, exact=True).click()
    if shortest:
        for slider in ("Seconds per timed window", "Timed windows per backend", "Warm-up seconds"):
            handle = page.get_by_role("slider", name=slider)
            handle.focus()
            handle.press("Home")
    page.get_by_label("Label (optional)").fill(label)


def value_once_settled(field, value: str, timeout: float = 30.0) -> str:
    """The field's value once it reads ``value``, or what it holds at the deadline: Streamlit
    fills a restored form over a rerun or two, so the first read may come before the last."""
    deadline = time.monotonic() + timeout
    while (current := field.input_value()) != value and time.monotonic() < deadline:
        time.sleep(0.2)
    return current


def expect_text(page, pattern: str | re.Pattern, timeout: float = 60_000) -> None:
    """Wait until ``pattern`` shows on the page; on timeout, fail with what the page shows
    (and a screenshot of it)."""
    try:
        page.get_by_text(pattern).first.wait_for(timeout=timeout)
    except playwright.Error:
        path = screenshot_path("dashboard-failure.png")
        page.screenshot(path=str(path), full_page=True)
        shown = page.locator("body").inner_text()
        pytest.fail(
            f"{pattern!r} did not appear within {timeout / 1000:g} s; the page "
            f"(screenshot: {path}) shows:\n{shown[:3000]}",
            pytrace=False,
        )


def status_text(page) -> str:
    """The job's status line, in the page (not the sidebar's list of jobs)."""
    main = page.locator('[data-testid="stMain"] [data-testid="stMarkdownContainer"]')
    return main.filter(has_text=re.compile(r"Job \d")).first.inner_text()


# Longer than the suite's 120 s: it waits for two real comparisons, which on a busy 2-core
# machine take minutes (its own waits allow 240 s for the first).
@pytest.mark.timeout(420)
def test_a_two_env_comparison_reads_at_a_glance_and_two_tabs_queue(server, browser, tmp_path):
    from vecenvs.bench import ResultsStore
    from vecenvs.lab import LabQueue

    first = open_compare(browser, server)
    # The first tab: CartPole and Acrobot, N = 1, 4, 16, with multi, subproc, the pool and the
    # ceiling (~40 s).
    first.get_by_role("combobox", name="Environments").click()
    first.get_by_role("option", name="Acrobot-v1").click()
    first.keyboard.press("Escape")
    fill_form(first, remove=["Remove 64"], shortest=False, label="first tab")
    second = open_compare(browser, server)
    # The second: N = 1 and 4 with multi, the pool and the ceiling, the shortest timing.
    fill_form(
        second,
        remove=["Remove 16", "Remove 64", "Remove subproc"],
        shortest=True,
        label="second tab",
    )
    assert (
        "No benchmark queued or running" in second.locator('[data-testid="stSidebar"]').inner_text()
    )

    first.get_by_role("button", name="Run").click()
    expect_text(first, re.compile(r"Job 1 .*: running"))
    # The second tab's sidebar, untouched since it was drawn, sees the first tab's job.
    expect_text(second, re.compile(r"job 1 \(sweep\): (queued|running)"), 20_000)
    second.get_by_role("button", name="Run").dblclick()
    # The second tab's job waits for the first: one benchmark at a time on a machine.
    expect_text(second, re.compile(r"Job 2 .*: queued"))
    expect_text(second, "1 job(s) ahead of this one")
    assert "running" in status_text(first)
    queue = LabQueue(ResultsStore(tmp_path / "results.sqlite"))
    assert [job.id for job in queue.jobs()] == [2, 1], "a double click queues one job"
    queue.store.close()

    expect_text(first, re.compile(r"Job 1 .*: done"), 240_000)
    expect_text(second, re.compile(r"Job 2 .*: done"), 120_000)

    for page, envs in ((first, ("CartPole-v1", "Acrobot-v1")), (second, ("CartPole-v1",))):
        charts = page.locator('[data-testid="stPlotlyChart"]')
        charts.nth(2).locator(".main-svg").first.wait_for()
        # Right after "done" the page may still be swapping the last chart in (a loaded machine
        # shows both for a moment): wait for the three to settle.
        deadline = time.monotonic() + 30
        while charts.count() != 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert charts.count() == 3, "throughput, speed-up and efficiency charts"
        text = " ".join(charts.nth(i).inner_text() for i in range(3))
        for words in (
            "number of envs N",
            "env steps/s",
            "speed-up over gym-sync",
            "share of the ceiling",
            "ceiling (measured)",
            "multi",
            "pool",
            *envs,
        ):
            assert words in text, f"{words!r} missing from the charts"
        for i in range(3):
            check_reads_at_a_glance(charts.nth(i))
        # Results first: the verdict table, above the charts and above the fold.
        verdict = page.locator('[data-testid="stTable"]').first
        text = verdict.inner_text()
        for env in envs:
            assert re.search(rf"{re.escape(env)}\s+4\s", text), f"no verdict row for {env}, N=4"
        assert "confidence" in text and "x runner-up" in text
        assert not re.search(r"\b(1\d\d|[2-9]\d\d)%", text), "a share above the ceiling"
        box = verdict.bounding_box()
        assert box["y"] < charts.nth(0).bounding_box()["y"]
        if page is first:  # (the second tab may show a queued-behind note above it)
            assert box["y"] + box["height"] <= page.viewport_size["height"], "below the fold"
        expect_text(page, "Overhead model")
        assert page.get_by_role("button", name="Deploy").count() == 0
        only_from(page, server)

    # Streamlit scrolls inside its own container, so a "full page" screenshot is only the
    # window: make the window as tall as the page instead.
    for page in (first, second):
        page.set_viewport_size({"width": 1500, "height": 4800})
        page.wait_for_timeout(1500)  # let plotly redraw at the new size
    path = screenshot_path("dashboard-compare.png")
    first.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 50_000, "the screenshot should show the charts"
    second.screenshot(path=str(screenshot_path("dashboard-compare-queued-tab.png")), full_page=True)

    # Reopening the page from its address shows the same finished run, its settings in the
    # form, and the busy warning its page gave (as if the machine had been busy).
    queue = LabQueue(ResultsStore(tmp_path / "results.sqlite"))
    queue.add_notes(1, {"busy": {"others_share": 0.8, "cpus": 2}})
    queue.store.close()
    reopened = new_page(browser, server)
    reopened.goto(f"{server}/?job=1")
    expect_text(reopened, re.compile(r"Job 1 · run 1 · first tab.*: done"))
    expect_text(reopened, re.compile(r"Settings of this run: envs: CartPole-v1, Acrobot-v1"))
    expect_text(reopened, "The machine was busy when this job was queued")
    reopened.get_by_text("Settings of job 1").click()
    chips = reopened.locator('[data-testid="stMultiSelect"]').first.inner_text()
    assert "CartPole-v1" in chips and "Acrobot-v1" in chips, chips
    numbers = reopened.locator('[data-testid="stMultiSelect"]').nth(1).inner_text()
    assert re.findall(r"\d+", numbers) == ["1", "4", "16"], numbers
    label = reopened.get_by_label("Label (optional)")
    assert value_once_settled(label, "first tab") == "first tab"
    run_again = reopened.get_by_role("button", name="Run again")
    run_again.first.wait_for()  # (the form settles over a rerun or two, as the label above)
    assert run_again.count() == 1
    reopened.locator('[data-testid="stPlotlyChart"]').nth(2).wait_for(timeout=60_000)


def looks(chart) -> dict:
    """What a drawn plotly chart shows: its panels' titles, and each backend's line style and
    marker in its legend (read from the chart plotly drew, not from the server's figure)."""
    chart.locator(".main-svg").first.wait_for()
    return chart.locator(".js-plotly-plot").evaluate(
        """plot => ({
            titles: (plot.layout.annotations || []).map(a => a.text),
            styles: Object.fromEntries(plot.data.filter(t => t.legendgroup === "backends")
                .map(t => [t.name, [t.line.dash, t.marker.symbol]])),
        })"""
    )


def test_a_disturbed_window_is_flagged_and_the_flame_graph_has_boxes(server, browser, tmp_path):
    from synthetic_measurements import finished_job

    from vecenvs.bench import BenchConfig, Measurement, ResultsStore, SweepConfig
    from vecenvs.bench.ratios import relate_point
    from vecenvs.lab import LabQueue
    from vecenvs.profile import ProfileConfig

    queue = LabQueue(ResultsStore(tmp_path / "results.sqlite"))
    try:
        # The page: multi 15,718 and the loop 8,761 env steps/s at N=4, one of the
        # ceiling's two windows stalled; it used to say 155% of the ceiling.
        windows = {
            "multi": [15_000, 16_436],
            "ceiling": [4_031, 16_269],
            "gym-sync": [8_500, 9_022],
        }
        point = [
            Measurement(
                BenchConfig("Acrobot-v1", 4, backend),
                values,
                [100, 100],
                [1.0, 1.0],
                0.1,
                1.0,
                0.0,
                0,
                10**8,
                None,
            )
            for backend, values in windows.items()
        ]
        relate_point(point, point[-1])
        config = SweepConfig(["Acrobot-v1"], [4], ["multi", "ceiling"], repeats=2)
        disturbed = finished_job(queue, config, point, "a stalled window")
        profiled = queue.submit_profile(ProfileConfig(num_envs=2, backend="subproc", seconds=1))
        queue.wait(profiled, 120)
    finally:
        queue.store.close()

    page = new_page(browser, server)
    page.goto(f"{server}/?job={disturbed}")
    expect_text(page, "Flagged, not results")
    expect_text(page, "the ceiling was disturbed")
    verdict = page.locator('[data-testid="stTable"]').first.inner_text()
    assert "1.79x" in verdict, "the ratio of the throughputs shown, 15,718 / 8,761"
    assert "? ceiling disturbed" in verdict and "155%" not in verdict
    efficiency = page.locator('[data-testid="stPlotlyChart"]').nth(2)
    efficiency.locator(".main-svg").first.wait_for()
    shares = efficiency.locator(".js-plotly-plot").evaluate(
        "plot => plot.data.filter(t => t.name === 'multi').flatMap(t => t.y)"
    )
    assert shares == [], "no share of a disturbed ceiling is drawn"
    assert "ceiling disturbed" in efficiency.inner_text()

    page.goto(f"{server}/profile?job={profiled}")
    expect_text(page, "Flame graph")
    flame = page.locator('[data-testid="stPlotlyChart"]').nth(1)
    flame.locator("g.slice").first.wait_for(timeout=60_000)
    box = flame.bounding_box()
    assert box["width"] > 500 and box["height"] > 300, box
    assert flame.locator("g.slice").count() > 10, "a flame graph with boxes in it"
    assert "worker 0" in flame.inner_text() and "env compute" in flame.inner_text()
    page.set_viewport_size({"width": 1500, "height": 2600})
    page.wait_for_timeout(1500)
    page.screenshot(path=str(screenshot_path("dashboard-profile.png")), full_page=True)
    only_from(page, server)


README_SCREENSHOT = os.environ.get("VECENVS_README_SCREENSHOT")


@pytest.mark.timeout(900)
@pytest.mark.skipif(
    not README_SCREENSHOT,
    reason="takes the README's picture: VECENVS_README_SCREENSHOT=docs/images/dashboard-compare.png",
)
def test_the_readme_screenshot(server, browser):
    """The README's picture, from a real comparison measured here: CartPole and Acrobot at
    N = 1, 4, 16, 64 with the loop, the pool, one process per env and the ceiling, five windows
    of 0.5 s each (about three minutes). Take it on a quiet machine (check ``uptime``)."""
    page = open_compare(browser, server)
    page.get_by_role("combobox", name="Environments").click()
    page.get_by_role("option", name="Acrobot-v1").click()
    page.keyboard.press("Escape")
    for slider, presses in (("Seconds per timed window", 1), ("Timed windows per backend", 2)):
        handle = page.get_by_role("slider", name=slider)
        handle.focus()
        for _ in range(presses):
            handle.press("ArrowRight")
    page.get_by_label("Label (optional)").fill("README picture")
    page.get_by_role("button", name="Run").click()
    expect_text(page, re.compile(r"Job 1 .*: done"), 900_000)
    page.locator('[data-testid="stPlotlyChart"]').nth(2).locator(".main-svg").first.wait_for()
    page.set_viewport_size({"width": 1500, "height": 2300})
    page.wait_for_timeout(3000)
    path = Path(README_SCREENSHOT)
    page.screenshot(path=str(path))
    assert path.stat().st_size > 50_000
    assert "5 window(s) of 0.5 s" in page.locator("body").inner_text()


class _Pixels(http.server.BaseHTTPRequestHandler):
    """Counts every request: an image a label points to must never be fetched."""

    requests: list[str] = []

    def do_GET(self):
        self.requests.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):  # quiet
        pass


def test_history_overlays_three_runs_and_hostile_labels_fetch_nothing(server, browser, tmp_path):
    from vecenvs.bench import ResultsStore, SweepConfig, run_sweep
    from vecenvs.lab import LabQueue

    pixels = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pixels)
    threading.Thread(target=pixels.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{pixels.server_address[1]}"
    labels = [
        f"![pixel]({elsewhere}/markdown.png) :red[red] $x^2$",
        f'<b>bold</b> <img src="{elsewhere}/html.png">',
        "monday, quiet machine",
    ]
    store = ResultsStore(tmp_path / "results.sqlite")
    queue = LabQueue(store)
    try:
        config = SweepConfig(
            ["CartPole-v1", "Acrobot-v1"],
            [2, 8],
            ["multi", "pool", "ceiling"],
            warmup_seconds=0.0,
            measure_seconds=0.05,
            repeats=2,
        )
        for label in labels[1:]:
            run_sweep(config, store=store, label=label)
        # The first as a job of the queue: its label shows in the status line too.
        job = queue.wait(queue.submit_sweep(config, label=labels[0]), 120)

        page = new_page(browser, server)
        page.goto(f"{server}/history")
        expect_text(page, "Runs to overlay")
        page.get_by_role("combobox", name="Runs to overlay").click()
        for name in ("#2 sweep", "#1 sweep"):
            page.get_by_role("option", name=re.compile(re.escape(name))).click()
        page.keyboard.press("Escape")
        chart = page.locator('[data-testid="stPlotlyChart"]').first
        chart.locator(".legend").first.wait_for()
        page.wait_for_timeout(1500)
        legend = " ".join(chart.locator(".legend text").all_text_contents())
        for text in ("runs", "backends", "<b>bold</b>", "monday", "multi", "pool"):
            assert text in legend, f"{text!r} missing from the legend: {legend}"
        check_reads_at_a_glance(chart)
        # Switching to the speed-up view keeps the panels' order and each backend's style.
        throughput = looks(chart)
        page.get_by_text("speed-up over the loop (gym-sync)").click()
        page.wait_for_timeout(1500)
        speedup = looks(page.locator('[data-testid="stPlotlyChart"]').first)
        assert speedup["titles"] == throughput["titles"] == ["CartPole-v1", "Acrobot-v1"]
        assert "gym-sync" not in speedup["styles"], "the loop is the 1x of the speed-up view"
        for backend, style in speedup["styles"].items():
            assert throughput["styles"][backend] == style, f"{backend} changed its style"
        page.get_by_text("throughput (env steps/s)").first.click()
        page.wait_for_timeout(1000)
        page.set_viewport_size({"width": 1500, "height": 2200})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(screenshot_path("dashboard-history.png")), full_page=True)

        # The hostile label, as text wherever it is shown.
        hostile = new_page(browser, server)
        hostile.goto(f"{server}/?job={job.id}")
        expect_text(hostile, re.compile(rf"Job {job.id} · run {job.run_id} · !\[pixel\]\("))
        assert hostile.locator("img").count() == 0
        assert hostile.locator(f'a[href^="{elsewhere}"]').count() == 0, "a label made a link"
        hostile.goto(f"{server}/profile?job=99999999999999999999999")
        expect_text(hostile, "which is not a job number")
        hostile.goto(f"{server}/?job={job.id}")
        expect_text(hostile, re.compile(rf"Job {job.id} · run {job.run_id} · "))
        hostile.set_viewport_size({"width": 1500, "height": 1400})
        hostile.wait_for_timeout(1000)
        hostile.screenshot(path=str(screenshot_path("dashboard-hostile-label.png")))
        for tab in (page, hostile):
            only_from(tab, server)
        assert _Pixels.requests == [], "an image named in a label was fetched"
    finally:
        pixels.shutdown()
        store.close()


def test_your_env_typed_in_gets_a_verdict_and_a_module_in_the_address_is_not_imported(
    server, browser, tmp_path
):
    from vecenvs.bench import ResultsStore
    from vecenvs.lab import LabQueue

    # An address naming a module: no page reads it, nothing is queued, nothing imported.
    page = new_page(browser, server)
    page.goto(f"{server}/?env=mycart:MyCart-v0&user_env=mycart:MyCart-v0")
    page.get_by_role("button", name="Run").wait_for()
    assert page.get_by_role("textbox", name="Your env (optional)").input_value() == ""
    queue = LabQueue(ResultsStore(tmp_path / "results.sqlite"))
    assert queue.jobs() == []

    # Enter in "Your env" is not the Run button: the arguments come next.
    page.get_by_role("button", name="Remove CartPole-v1", exact=True).click()
    env_field = page.get_by_role("textbox", name="Your env (optional)")
    arguments = page.get_by_role("textbox", name="Your env's arguments (optional)")
    timeout = page.get_by_role("spinbutton", name="Check timeout, seconds")
    env_field.fill("slowmake:SlowMake-v0")
    env_field.press("Enter")
    time.sleep(3)  # what a submitted form would take to check and queue it
    assert queue.jobs() == [] and "Checking" not in page.locator("body").inner_text()

    # A slow env: the check's progress shows while the page waits, then it runs out of the
    # time the field gives it, naming the phase; nothing is queued.
    arguments.fill("make_seconds=6")
    timeout.fill("3")
    page.get_by_role("button", name="Run").click()
    expect_text(
        page,
        "Checking slowmake:SlowMake-v0 (make_seconds=6) before queueing it: making it",
        10_000,
    )
    expect_text(
        page,
        re.compile(
            r"Not started: env slowmake:SlowMake-v0 \(make_seconds=6\): making it took "
            r"more than 3 s, the check's time limit"
        ),
        30_000,
    )
    assert queue.jobs() == []

    # Typed into the form: checked, queued, measured, and answered with a verdict table.
    env_field.fill("mycart:MyCart-v0")
    arguments.fill("physics_steps=20")
    timeout.fill("30")
    fill_form(
        page,
        remove=["Remove 16", "Remove 64", "Remove subproc"],
        shortest=True,
        label="my env",
    )
    page.get_by_role("button", name="Run").click()
    expect_text(page, re.compile(r"Job 1 .*my env.*: done"), 240_000)
    verdict = page.locator('[data-testid="stTable"]').first
    text = verdict.inner_text()
    assert re.search(r"mycart:MyCart-v0\s+4\s", text), text
    assert "confidence" in text
    (job,) = queue.jobs()
    assert job.settings["envs"][0]["env_id"] == "mycart:MyCart-v0"
    queue.store.close()

    # Reloaded from its address: the same job, its env back in the field.
    page.goto(f"{server}/?job=1")
    expect_text(page, re.compile(r"Job 1 .*my env.*: done"))
    page.get_by_text("Settings of job 1").click()
    field = page.get_by_role("textbox", name="Your env (optional)")
    assert value_once_settled(field, "mycart:MyCart-v0") == "mycart:MyCart-v0"
    only_from(page, server)
