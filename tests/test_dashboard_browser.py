"""The dashboard end to end: the real Streamlit server, driven in headless Chromium.

Debian's ``chromium`` package provides the browser (``.ci/run`` installs it) and Playwright's
Python package drives it (no browser download). The test fills the live-comparison form in
two tabs, presses *Run* in both, and checks what a user would see: the second tab's run is
queued behind the first, the charts and the table of numbers appear, and a screenshot is
saved (``test-artifacts/dashboard-compare.png``, or under ``$VECENVS_SCREENSHOT_DIR``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
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
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]

playwright = pytest.importorskip("playwright.sync_api")

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        pytest.fail(f"CI must install Debian's chromium (not found at {CHROMIUM}); "
                    "see .ci/run", pytrace=False)
    pytest.skip(f"needs Chromium at {CHROMIUM}: apt-get install chromium",
                allow_module_level=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """``streamlit run dashboard/app.py`` on localhost, with its own store and machine lock."""
    port = free_port()
    env = {**os.environ, "VECENVS_STORE": str(tmp_path / "results.sqlite"),
           "VECENVS_MACHINE_LOCK": str(tmp_path / "machine.lock")}
    log = open(tmp_path / "server.log", "w+", encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "dashboard" / "app.py"),
         "--server.headless=true", "--server.address=127.0.0.1", f"--server.port={port}",
         "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
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
        yield url
    finally:
        # Stop the server and the job runner it started (same session), like Ctrl-C would.
        with_children = [process, *psutil.Process(process.pid).children(recursive=True)] \
            if process.poll() is None else []
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


def open_compare(browser, url: str):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.set_default_timeout(60_000)
    page.goto(url)
    page.get_by_role("button", name="Run").wait_for()
    return page


def fill_form(page, *, remove: list[str], shortest: bool, label: str) -> None:
    """Untick chips (``"Remove 64"``...) and, if ``shortest``, pull every slider to its minimum."""
    for name in remove:
        page.get_by_role("button", name=name, exact=True).click()
    if shortest:
        for slider in ("Seconds per timed window", "Timed windows per backend",
                       "Warm-up seconds"):
            handle = page.get_by_role("slider", name=slider)
            handle.focus()
            handle.press("Home")
    page.get_by_label("Label (optional)").fill(label)


def expect_text(page, pattern: str | re.Pattern, timeout: float = 60_000) -> None:
    """Wait until ``pattern`` shows on the page; on timeout, fail with what the page shows
    (and a screenshot of it)."""
    try:
        page.get_by_text(pattern).first.wait_for(timeout=timeout)
    except playwright.Error:
        path = screenshot_path("dashboard-failure.png")
        page.screenshot(path=str(path), full_page=True)
        shown = page.locator("body").inner_text()
        pytest.fail(f"{pattern!r} did not appear within {timeout / 1000:g} s; the page "
                    f"(screenshot: {path}) shows:\n{shown[:3000]}", pytrace=False)


def status_text(page) -> str:
    return page.locator('[data-testid="stMarkdownContainer"]', has_text="Job ").first.inner_text()


def test_two_tabs_queue_and_the_charts_and_table_fill_in(server, browser):
    first = open_compare(browser, server)
    # The first tab: CartPole, N = 1, 4, 16 with multi, subproc and the pool (~15 s).
    fill_form(first, remove=["Remove 64"], shortest=False, label="first tab")
    second = open_compare(browser, server)
    # The second: N = 1 and 4 with multi and the pool, the shortest timing (~3 s).
    fill_form(second, remove=["Remove 16", "Remove 64", "Remove subproc"], shortest=True,
              label="second tab")

    first.get_by_role("button", name="Run").click()
    expect_text(first, re.compile(r"Job 1 .*: running"))
    second.get_by_role("button", name="Run").click()
    # The second tab's job waits for the first: one benchmark at a time on a machine.
    expect_text(second, re.compile(r"Job 2 .*: queued"))
    expect_text(second, "1 job(s) ahead of this one")
    assert "running" in status_text(first)

    expect_text(first, re.compile(r"Job 1 .*: done"), 180_000)
    expect_text(second, re.compile(r"Job 2 .*: done"), 120_000)

    for page, backends in ((first, ("multi", "subproc", "pool")), (second, ("multi", "pool"))):
        charts = page.locator('[data-testid="stPlotlyChart"]')
        charts.nth(2).locator(".main-svg").first.wait_for()
        assert charts.count() == 3, "throughput, speed-up and efficiency charts"
        text = " ".join(charts.nth(i).inner_text() for i in range(3))
        for words in ("number of envs N", "env steps/s", "speed-up over gym-sync",
                      "share of the machine limit", *backends):
            assert words in text, f"{words!r} missing from the charts"
        table = page.locator('[data-testid="stTable"]').first
        rows = table.locator("tbody tr")
        assert rows.count() == (3 if page is first else 2) * (len(backends) + 1)
        headers = table.locator("thead th").all_inner_texts()
        for row in rows.all():
            cells = dict(zip(headers, row.locator("th, td").all_inner_texts()))
            assert cells["env"] == "CartPole-v1", cells
            assert float(cells["env steps/s"].replace(",", "")) > 0, cells
            assert re.fullmatch(r"\d+\.\d\dx", cells["speed-up over gym-sync"]), cells
        expect_text(page, "Overhead model")

    # Streamlit scrolls inside its own container, so a "full page" screenshot is only the
    # window: make the window as tall as the page instead.
    for page in (first, second):
        page.set_viewport_size({"width": 1500, "height": 4200})
        page.wait_for_timeout(1500)  # let plotly redraw at the new size
    path = screenshot_path("dashboard-compare.png")
    first.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 50_000, "the screenshot should show the charts"
    second.screenshot(path=str(screenshot_path("dashboard-compare-queued-tab.png")),
                      full_page=True)

    # Reopening the page from its address shows the same finished run.
    reopened = browser.new_page(viewport={"width": 1500, "height": 1100})
    reopened.goto(f"{server}/?job=1")
    expect_text(reopened, re.compile(r"Job 1 · run 1 · first tab.*: done"))
    reopened.locator('[data-testid="stPlotlyChart"]').nth(2).wait_for(timeout=60_000)
