"""Each dashboard page's logic, through Streamlit's AppTest (no browser), with real jobs.

The pages queue real jobs that a real runner process measures into a real SQLite store (each
test has its own, see conftest.py); the tests press the buttons and rerun the script the way
the browser's once-a-second refresh does. ``test_dashboard_browser.py`` drives the real
server in Chromium.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import plotly.io as pio
import psutil
import pytest
from conftest import live_children, wait_gone
from synthetic_measurements import finished_job

from vecenvs.bench import (
    Backend,
    BenchConfig,
    BenchEnv,
    Measurement,
    ResultsStore,
    SweepConfig,
    default_store_path,
)
from vecenvs.bench.ratios import relate_point
from vecenvs.bench.snippets import history_code, machine_code, profile_code, sweep_code
from vecenvs.cpus import available_cpus, cpu_count
from vecenvs.lab import LabQueue
from vecenvs.profile import ProfileConfig, check_attach

pytest.importorskip("streamlit")
from streamlit import config as streamlit_config
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
TIMEOUT = 60


@pytest.fixture
def queue():
    """The queue of the store the app uses; no job may be left running after the test."""
    jobs = LabQueue(ResultsStore(default_store_path()))
    yield jobs
    for job in jobs.jobs(unfinished=True):
        jobs.cancel(job.id)
    deadline = time.monotonic() + 60
    while jobs.runner_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    # A runner that let go of the queue still has to exit: a loaded machine (CI, once) can take
    # more than the 5 s that no_leftover_processes grants to wind down an interpreter that
    # imported torch. It is given the same minute; one still there after it is a leftover.
    wait_gone([p for p in live_children() if _is_runner(p)], max(deadline - time.monotonic(), 5.0))
    jobs.store.close()


def _is_runner(process: psutil.Process) -> bool:
    try:
        return "vecenvs.lab" in process.cmdline()
    except psutil.Error:  # gone already
        return False


def app(page: str | None = None, *, address: str = "localhost", **query: str) -> AppTest:
    # What dashboard/.streamlit/config.toml says; AppTest serves nothing and reads no config.
    streamlit_config.set_option("server.address", address)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    if page is not None:
        at.switch_page(f"views/{page}.py").run()
    assert not at.exception, at.exception
    return at


def shown(markdown: str) -> str:
    """What the browser shows for Markdown source: the pages escape text that is not theirs
    (backslashes, and an invisible word joiner inside bare links)."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u2060", "")


def widget(elements, label: str):
    (found,) = [element for element in elements if element.label == label]
    return found


def rerun_until_finished(at: AppTest, timeout: float = 120) -> str:
    """Rerun the page, as its refresh does, until its job's status line says it ended."""
    deadline = time.monotonic() + timeout
    while True:
        at.run()
        assert not at.exception, at.exception
        line = status_line(at)
        if line and re.search(r": (done|cancelled|failed)$", line):
            return line
        assert time.monotonic() < deadline, f"job still not finished: {line!r}"
        time.sleep(0.5)


def status_line(at: AppTest) -> str | None:
    lines = [m.value for m in at.markdown if re.search(r"\*\*.*Job \d+", m.value)]
    return shown(re.sub(r":material/\w+: ", "", lines[0]).replace("**", "")) if lines else None


def charts(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def tiny_form(at: AppTest, *, num_envs=(2, 4), backends=("multi", "pool")) -> None:
    widget(at.multiselect, "Numbers of envs N").set_value(list(num_envs))
    widget(at.multiselect, "Backends").set_value(list(backends))
    widget(at.select_slider, "Seconds per timed window").set_value(0.1)
    widget(at.slider, "Timed windows per backend").set_value(1)
    widget(at.select_slider, "Warm-up seconds").set_value(0.0)


def press(at: AppTest, label: str) -> AppTest:
    widget(at.button, label).click().run()
    assert not at.exception, at.exception
    return at


# --- Live comparison ----------------------------------------------------------------------


def test_every_page_renders_with_an_empty_store():
    at = app()
    assert at.title[0].value == "Live comparison"
    for page, title in [
        ("profile", "Profile"),
        ("autotune", "Autotune"),
        ("train", "Train"),
        ("history", "History"),
        ("machine", "Machine"),
    ]:
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, at.exception
        assert at.title[0].value == title


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda at: widget(at.multiselect, "Backends").set_value([]), "pick at least one backend"),
        (
            lambda at: widget(at.multiselect, "Numbers of envs N").set_value([]),
            "pick at least one N",
        ),
        (
            lambda at: (
                widget(at.multiselect, "Environments").set_value(["vecenvs/Costly-v0"]),
                widget(
                    at.text_input, "Step time, microseconds (several, comma-separated, make a grid)"
                ).set_value("10, fast"),
            ),
            "step time 'fast' is not a number",
        ),
        (
            lambda at: (
                widget(at.multiselect, "Numbers of envs N").set_value([1, 4]),
                widget(at.multiselect, "Pool workers K").set_value([2]),
            ),
            "pool with num_workers=2 cannot step N=1 env(s)",
        ),
    ],
)
def test_bad_form_input_is_refused_with_a_message_and_nothing_is_queued(queue, change, message):
    at = app()
    change(at)
    press(at, "Run")
    assert any(message in shown(error.value) for error in at.error), [e.value for e in at.error]
    assert queue.jobs() == []


def test_a_comparison_runs_and_its_verdict_charts_table_and_code_appear(queue):
    at = app()
    tiny_form(at, backends=("multi", "pool", "ceiling"))
    widget(at.slider, "Timed windows per backend").set_value(2)
    widget(at.text_input, "Label (optional)").set_value("apptest")
    press(at, "Run")
    assert at.query_params["job"] in ("1", ["1"]), "the address names the job, to come back"
    assert rerun_until_finished(at).endswith("apptest: done")

    # Results first: the verdict table, one row per N, every ratio from the numbers below it.
    verdict, table = at.table[0].value.map(shown), at.dataframe[0].value
    assert list(verdict["N"]) == ["2", "4"] and set(verdict["env"]) == {"CartPole-v1"}
    assert "ceiling" not in set(verdict["fastest"]), "the ceiling is never the answer"
    for _, row in verdict.iterrows():
        point = table[table["N"] == int(row["N"])]
        rates = {
            b: float(r.replace(",", "")) for b, r in zip(point["backend"], point["env steps/s"])
        }
        fastest = max((b for b in rates if b != "ceiling"), key=rates.get)
        assert row["fastest"] == fastest, "the fastest by the throughputs shown"
        (listed,) = point[point["backend"] == fastest]["x gym-sync"]
        assert row["x gym-sync"] == listed, "the verdict's speed-up is the table's"
        loop = rates["gym-sync"]
        assert float(listed.rstrip("x")) == pytest.approx(rates[fastest] / loop, abs=0.006)
        assert row["confidence"] in ("clear", "likely", "tie", "noisy", "suspect", "one window")
        share = row["of ceiling"]
        assert share.startswith("?") or int(share.rstrip("%")) <= 100, "never above the ceiling"
    assert any("multi: every env in this process" in shown(c.value) for c in at.caption), (
        "each backend named once in plain words"
    )
    specs = charts(at)
    assert len(specs) == 3
    titles = [spec["layout"]["title"]["text"] for spec in specs]
    assert titles[0].startswith("Throughput") and titles[1].startswith("Speed-up")
    # (on a busy machine the title may add which shares are flagged, not results)
    assert titles[2].startswith("Efficiency: throughput as a share of the ceiling")
    for spec in specs:
        layout = spec["layout"]
        assert "number of envs N" in layout["xaxis"]["title"]["text"]
        assert re.search(r"\(.*(steps/s|x|%).*\)", layout["yaxis"]["title"]["text"]), (
            "every y axis names its unit"
        )
        names = {trace.get("name") for trace in spec["data"]}
        if "Not shown, not results" in layout["title"]["text"]:
            # a busy machine: the efficiency chart leaves flagged shares out, and says so in its
            # title (all of a backend's, where the ceiling was disturbed at every N)
            assert spec is specs[2], "only the efficiency chart leaves points out"
        else:
            assert {"multi", "pool"} <= names, names
        assert any(name.startswith("ceiling (measured)") for name in names), names
    assert len(table) == 8  # 2 N x (multi, pool, ceiling, gym-sync)
    assert set(table["backend"]) == {"multi", "pool", "ceiling", "gym-sync"}
    assert all(float(rate.replace(",", "")) > 0 for rate in table["env steps/s"])
    assert set(table[table["backend"] == "ceiling"]["of ceiling"]) == {"100%"}
    for share in table["of ceiling"]:  # a share up to 100%, or the check that flags it
        assert re.fullmatch(r"\d+%|\? (above the ceiling|ceiling disturbed)", share), share
        assert share.startswith("?") or int(share.rstrip("%")) <= 100
    code = [block.value for block in at.code if "run_sweep" in block.value]
    assert len(code) == 4, "the code beside each chart and the model table"
    assert "num_envs=[2, 4]" in code[0] and "backends=['multi', 'pool', 'ceiling']" in code[0]
    assert any("Overhead model on" in block.value for block in at.code)


def test_reopening_the_page_shows_the_job_from_its_address(queue):
    config = SweepConfig(
        ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.05, repeats=1
    )
    first = queue.submit_sweep(config, label="earlier")
    queue.submit_sweep(config, label="later")
    queue.wait(first, 60)
    at = app(job=str(first))
    assert status_line(at) == f"Job {first} · run 1 · earlier: done"
    assert len(charts(at)) == 3
    # Without an address, the newest job is shown.
    at = app()
    assert "later" in status_line(at)


def test_a_queued_job_shows_its_place_and_can_be_cancelled(queue):
    blocker = queue.submit_sweep(
        SweepConfig(
            ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.1, repeats=100
        )
    )
    at = app()
    tiny_form(at)
    press(at, "Run")
    job_id = int(
        at.query_params["job"][0]
        if isinstance(at.query_params["job"], list)
        else at.query_params["job"]
    )
    assert status_line(at).endswith("queued")
    assert any("1 job(s) ahead of this one" in info.value for info in at.info)
    press(at, "Cancel")
    assert queue.get(job_id).status == "cancelled"
    at.run()
    assert status_line(at).endswith("cancelled")
    # The running one can be cancelled from its own page too.
    at = app(job=str(blocker))
    press(at, "Cancel")
    assert rerun_until_finished(at, 30).endswith("cancelled")


# --- Profile ------------------------------------------------------------------------------


def test_a_profile_shows_its_breakdown_flame_graph_and_downloads(queue):
    at = app("profile")
    widget(at.select_slider, "Number of envs N").set_value(2)
    widget(at.slider, "Seconds of sampling").set_value(1)
    press(at, "Profile")
    assert rerun_until_finished(at).endswith("done"), [e.value for e in at.error]
    spec, _ = charts(at)
    assert spec["layout"]["xaxis"]["title"]["text"].startswith("share of samples, %")
    assert {trace["name"] for trace in spec["data"]} >= {"env compute", "waiting"}
    processes = at.dataframe[0].value["process"].tolist()
    assert processes[0] == "parent" and "worker 0" in processes and "worker 1" in processes
    # The flame graph: plotly's icicle of the stacks (st.html would strip an SVG's boxes).
    flame = [spec for spec in charts(at) if spec["data"][0]["type"] == "icicle"]
    assert len(flame) == 1 and len(flame[0]["data"][0]["ids"]) > 10
    assert flame[0]["data"][0]["labels"][1] == "parent"
    assert not any("The loop ran" in c.value for c in at.caption), "the loop is gym-sync only"
    labels = [button.label for button in at.download_button]
    assert any(label.endswith(".svg") for label in labels)
    assert any("speedscope" in label for label in labels)
    assert any("ProfileConfig(" in block.value for block in at.code)

    # An edited store names files outside the profiles folder: they are neither read nor
    # offered, whatever the run says (a link inside the folder that leads out counts as out).
    job = queue.jobs()[0]
    link = queue.profiles_dir / "passwd-link.txt"
    link.symlink_to("/etc/passwd")
    summary = {
        **job.run.summary,
        "files": {"svg": "/etc/passwd", "speedscope": str(link), "collapsed": "/etc/hostname"},
    }
    with queue.store.transaction(write=True) as connection:
        connection.execute(
            "UPDATE runs SET summary = ? WHERE id = ?", (json.dumps(summary), job.run_id)
        )
    at = app("profile", job=str(job.id))
    assert at.download_button.len == 0 and len(charts(at)) == 1, "no flame graph from elsewhere"
    assert any("is not one this dashboard wrote" in shown(box.value) for box in at.warning)
    assert "root:" not in json.dumps(charts(at))


def test_a_profile_py_spy_may_not_attach_to_fails_saying_what_to_do(queue, tmp_path, monkeypatch):
    # As a user under Ubuntu's ptrace_scope 1 (or Docker without SYS_PTRACE): py-spy's refusal,
    # from a py-spy that prints its real words. The runner the page starts inherits the variable.
    from test_profile import PY_SPY_PERMISSION_MESSAGES, fake_py_spy

    refusing = fake_py_spy(tmp_path, PY_SPY_PERMISSION_MESSAGES["user"])
    monkeypatch.setenv("VECENVS_PY_SPY", str(refusing))
    at = app("profile")
    widget(at.select_slider, "Number of envs N").set_value(2)
    widget(at.slider, "Seconds of sampling").set_value(1)
    press(at, "Profile")
    assert rerun_until_finished(at).endswith("failed")
    said = " ".join(shown(box.value) for box in at.error)
    assert "py-spy is not allowed to read" in said and "ptrace_scope" in said, said
    assert "Traceback" not in said and not charts(at)
    # The rest of the page still works: the form is there for the next try.
    assert any(button.label == "Profile" for button in at.button)


# --- History ------------------------------------------------------------------------------


HOSTILE_LABEL = "<b>bold</b> ![pixel](http://127.0.0.1:9/pixel.png) :red[red] $x^2$ **strong**"


def test_history_overlays_runs_filters_them_and_exports_csv(queue):
    config = SweepConfig(
        ["CartPole-v1"], [2, 4], ["multi"], warmup_seconds=0.0, measure_seconds=0.05, repeats=1
    )
    for label in ("monday", "tuesday", HOSTILE_LABEL):
        queue.wait(queue.submit_sweep(config, label=label), 60)
    queue.wait(
        queue.submit_training(
            "CartPole-v1", 2, ["sb3-dummy"], timesteps=512, repeats=1, torch_threads=1, label="ppo"
        ),
        120,
    )
    at = app("history")
    table = at.dataframe[0].value
    assert len(table) == 4
    assert HOSTILE_LABEL in table["label"].tolist(), "a label is shown as typed"
    picked = widget(at.multiselect, "Runs to overlay (two or more to compare)")
    picked.set_value(list(picked.options)).run()
    assert not at.exception, at.exception
    names = list(picked.options)
    (monday,) = [name for name in names if "monday" in name]
    (tuesday,) = [name for name in names if "tuesday" in name]
    # Training throughput is another quantity: a chart of its own, never the same axis.
    stepping, training = charts(at)
    assert stepping["layout"]["yaxis"]["title"]["text"].startswith("throughput (env steps/s")
    assert training["layout"]["yaxis"]["title"]["text"].startswith("training throughput")
    legend = [trace["name"] for trace in stepping["data"] if trace.get("showlegend") is not False]
    assert len(legend) == 3 + 2, "a colour per run and a line style per backend"
    assert any("monday" in name for name in legend) and any("tuesday" in name for name in legend)
    assert any("&lt;b&gt;bold&lt;/b&gt;" in name for name in legend), "escaped for plotly"
    assert stepping["layout"]["legend"]["orientation"] == "h", "below the plot, not beside it"
    widget(at.radio, "Show").set_value("speedup").run()
    (speedups,) = charts(at)  # training runs have no loop beside them: no empty chart
    assert "speed-up" in speedups["layout"]["yaxis"]["title"]["text"]
    assert any("no speed-up over the loop" in c.value for c in at.caption)
    # What changed from an earlier run to the newest picked: ratios of their throughputs.
    widget(at.selectbox, "What changed in").set_value(tuesday).run()
    widget(at.selectbox, "Against").set_value(monday).run()
    change = at.dataframe[1].value
    assert set(change["backend"]) == {"multi", "gym-sync"} and list(change["N"]) == [2, 2, 4, 4]
    for _, row in change.iterrows():
        then, now = (
            float(row[k].replace(",", "")) for k in ("then (env steps/s)", "now (env steps/s)")
        )
        change = float(row["change"].rstrip("%")) / 100  # the ratio of the throughputs shown
        assert change == pytest.approx(now / then - 1, abs=0.006)
    (download,) = at.download_button
    assert download.label == "Export these 13 measurements as CSV"
    assert any("export_csv" in block.value for block in at.code)
    widget(at.text_input, "Label or host contains").set_value("tues").run()
    assert at.dataframe[0].value["label"].tolist() == ["tuesday"]


# --- Machine ------------------------------------------------------------------------------


def test_machine_page_shows_cpus_versions_backends_and_py_spy():
    at = app("machine")
    metrics = {metric.label: metric.value for metric in at.metric}
    assert int(metrics["CPUs this process may use"]) == available_cpus()
    assert f"CPUs this process may use: {cpu_count()}" in [shown(c.value) for c in at.caption]
    assert metrics["Memory"].endswith("GiB")
    if check_attach().ok:  # as root; as a user where the kernel lets one trace one's own
        assert any("can attach" in success.value for success in at.success), [
            e.value for e in at.error
        ]
    else:  # Ubuntu's ptrace_scope 1 for a user, Docker without SYS_PTRACE, macOS without sudo
        assert any("What to do" in error.value for error in at.error), [e.value for e in at.error]
    backends = at.dataframe[0].value
    assert {"pool", "ceiling"} <= set(backends["backend"].tolist())
    packages = at.dataframe[1].value
    assert "gymnasium" in packages["package"].tolist()


def test_without_the_peers_the_pages_name_them_and_say_make_peers_adds_them(monkeypatch):
    real_find_spec = importlib.util.find_spec
    peers = {"stable_baselines3", "envpool", "ray"}
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name in peers else real_find_spec(name, *args),
    )
    machine = app("machine")
    (note,) = [c.value for c in machine.caption if "make peers" in c.value]
    assert all(name in note for name in ("sb3-dummy", "sb3-subproc", "envpool", "ray")), note
    compare = app("compare")
    assert any("make peers" in c.value for c in compare.caption)
    assert not any(
        option.startswith(("sb3", "envpool", "ray"))
        for option in widget(compare.multiselect, "Backends").options
    )
    train = app("train")
    assert any("make peers" in e.value for e in train.error), [e.value for e in train.error]


def test_with_every_peer_installed_no_page_asks_for_them():
    if any(importlib.util.find_spec(name) is None for name in ("stable_baselines3", "ray")):
        pytest.skip("the peers are not installed here (make peers)")
    for page in ("machine", "compare"):
        assert not any("make peers" in c.value for c in app(page).caption), page


# --- The code beside the charts -----------------------------------------------------------


def test_the_code_snippets_run_and_give_what_the_page_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(pio.renderers, "default", "json")  # .show() prints instead of opening
    settings = SweepConfig(
        ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.05, repeats=1
    ).to_dict()
    for figure in ("throughput", "model"):
        exec(compile(sweep_code(settings, figure), f"<{figure} snippet>", "exec"), {})
    printed = capsys.readouterr().out
    assert "Throughput against the number of envs" in printed
    assert "Overhead model on" in printed
    exec(compile(machine_code(), "<machine snippet>", "exec"), {})
    assert check_attach().message.splitlines()[0] in capsys.readouterr().out
    store = ResultsStore(tmp_path / "r.sqlite")
    queue = LabQueue(store)
    run = queue.wait(queue.submit_sweep(SweepConfig.from_dict(settings)), 60).run_id
    monkeypatch.chdir(tmp_path)
    exec(compile(history_code(str(store.path), [run]), "<history snippet>", "exec"), {})
    assert (tmp_path / "results.csv").read_text().count("\n") == 3  # header + 2 rows
    code = profile_code(
        {
            "env_id": "CartPole-v1",
            "num_envs": 2,
            "backend": "multi",
            "backend_kwargs": {},
            "env_kwargs": {},
            "seconds": 1,
            "rate": 50,
        }
    )
    assert "seconds=1" in code and "backend_kwargs" not in code
    compile(code, "<profile snippet>", "exec")  # run for real in test_profile.py's API test
    store.close()


# --- Autotune -----------------------------------------------------------------------------


def test_autotune_picks_a_winner_and_shows_its_table_and_code(queue):
    at = app("autotune")
    widget(at.selectbox, "Environment").set_value("vecenvs/Costly-v0")
    widget(at.select_slider, "Number of envs N").set_value(4)
    widget(at.slider, "Time budget, seconds").set_value(5)
    widget(at.text_input, "Step time, microseconds").set_value("2000")
    widget(at.radio, "The step's time is spent").set_value("sleep")
    press(at, "Autotune")
    assert rerun_until_finished(at).endswith("done")
    (spec,) = charts(at)
    assert spec["layout"]["xaxis"]["title"]["text"].startswith("throughput (env steps/s")
    table = at.dataframe[0].value
    assert table["candidate"].tolist()[0] != "multi", "four sleeping envs: parallel must win"
    assert "multi" in table["candidate"].tolist()
    assert any("Best for 4 x vecenvs/Costly-v0" in shown(s.value) for s in at.success)
    assert "gym-sync" in table["candidate"].tolist(), "the loop every page compares with"
    assert "x gym-sync" in table.columns, "speed-ups over the loop, gym-sync, as on every page"
    (loop,) = table[table["candidate"] == "gym-sync"]["x gym-sync"]
    assert loop == "1.00x"
    assert any("autotune(" in block.value for block in at.code)


# --- Train --------------------------------------------------------------------------------


def test_training_throughput_is_measured_per_vector_env_with_the_env_share(queue):
    at = app("train")
    widget(at.select_slider, "Number of envs N").set_value(4)
    widget(at.multiselect, "Vector envs to train on").set_value(["sb3-dummy", "multi"])
    widget(at.select_slider, "Env steps per timed learn()").set_value(512)
    widget(at.slider, "Timed learn() calls").set_value(1)
    widget(at.radio, "Threads for torch").set_value(1)
    press(at, "Train")
    assert queue.jobs()[0].settings["torch_threads"] == 1
    assert rerun_until_finished(at, 180).endswith("done")
    (spec,) = charts(at)
    assert spec["layout"]["yaxis"]["title"]["text"] == "training throughput (env steps/s)"
    assert {trace["name"] for trace in spec["data"]} == {"stepping the envs", "policy and updates"}
    table = at.dataframe[0].value
    assert table["vector env"].tolist() == ["sb3-dummy", "multi"]
    for share in table["share stepping envs"]:
        assert 0 < int(share.rstrip("%")) < 100, "both the env and the learner take time"
    assert any("compare_training(" in block.value for block in at.code)


# --- Hostile input: a message, never a traceback, never markup ------------------------------


@pytest.mark.parametrize("page", ["compare", "profile", "autotune", "train"])
@pytest.mark.parametrize("wanted", ["99999999999999999999999", "abc", "-3", "<img src=x>"])
def test_a_bad_job_in_the_address_gets_a_message_not_a_traceback(queue, page, wanted):
    at = app(page if page != "compare" else None, job=wanted)

    assert not at.exception
    assert any("which is not a job number" in shown(box.value) for box in at.warning), [
        box.value for box in at.warning
    ]
    assert status_line(at) is None, "nothing else is shown instead"


def test_a_job_of_another_kind_or_none_is_named_not_swapped(queue):
    config = SweepConfig(
        ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.05, repeats=1
    )
    sweep = queue.wait(queue.submit_sweep(config, label="a sweep"), 60).id
    queue.submit_autotune("CartPole-v1", 2, 5.0, start_runner=False)  # a newest job of its own

    at = app("autotune", job=str(sweep))
    assert any(
        f"Job {sweep} is a sweep job, shown on the Live comparison page" in shown(w.value)
        for w in at.warning
    )
    assert status_line(at) is None, "not swapped for the autotune job"
    (link,) = [
        element
        for element in at.get("page_link")
        if element.proto.label.startswith(f"Open job {sweep}")
    ]
    assert link.proto.label.endswith("on the Live comparison page")
    assert link.proto.query_string == f"job={sweep}" and link.proto.page_script_hash
    at = app(job="424242")
    assert any("There is no job 424242" in shown(w.value) for w in at.warning)
    assert status_line(at) is None


def test_labels_and_errors_are_shown_as_text_not_markdown(queue):
    config = SweepConfig(
        ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.05, repeats=1
    )
    job = queue.wait(queue.submit_sweep(config, label=HOSTILE_LABEL), 60).id

    at = app(job=str(job))
    (line,) = [m.value for m in at.markdown if re.search(r"\*\*.*Job \d+", m.value)]
    label = line.split("run 1 · ")[1].rsplit("**", 1)[0]
    unescaped = re.sub(r"\\.", "", label)  # what is left once every escaped character is out
    assert not set(unescaped) & set("![]()$<>*:`_"), unescaped
    assert status_line(at) == f"Job {job} · run 1 · {HOSTILE_LABEL}: done"
    widget(at.multiselect, "Environments").set_value(["vecenvs/Costly-v0"])
    widget(
        at.text_input, "Step time, microseconds (several, comma-separated, make a grid)"
    ).set_value("![x](http://127.0.0.1:9/y.png)")
    press(at, "Run")
    (error,) = at.error
    assert "![" not in error.value and "](" not in error.value
    assert "step time '![x](http://127.0.0.1:9/y.png)' is not a number" in shown(error.value)


def test_the_pages_refuse_to_run_on_an_address_beyond_this_machine():
    at = app(address="0.0.0.0")

    assert not at.title, "no page is drawn"
    assert any("not only on this machine" in shown(error.value) for error in at.error)


# --- A job that describes itself, and no surprises ------------------------------------------


def test_a_reopened_job_shows_its_own_settings_not_the_forms(queue):
    config = SweepConfig(
        [
            "CartPole-v1",
            BenchEnv("vecenvs/Costly-v0", {"step_seconds": 1e-4, "cost_kind": "sleep"}),
        ],
        [2, 8],
        ["multi", Backend("pool", {"num_workers": 2}), "ceiling"],
        warmup_seconds=0.0,
        measure_seconds=0.05,
        repeats=2,
    )
    job = queue.submit_sweep(config, label="mine", start_runner=False)

    at = app(job=str(job))
    # The form holds the job's settings, to change and run again.
    assert widget(at.multiselect, "Environments").value == ["CartPole-v1", "vecenvs/Costly-v0"]
    assert widget(at.multiselect, "Numbers of envs N").value == [2, 8]
    assert widget(at.multiselect, "Backends").value == ["multi", "pool", "ceiling"]
    assert widget(at.multiselect, "Pool workers K").value == [2]
    assert widget(at.select_slider, "Seconds per timed window").value == 0.05
    assert widget(at.slider, "Timed windows per backend").value == 2
    assert widget(at.select_slider, "Warm-up seconds").value == 0.0
    steps = "Step time, microseconds (several, comma-separated, make a grid)"
    assert widget(at.text_input, steps).value == "100"
    assert widget(at.radio, "The step's time is spent").value == "sleep"
    assert widget(at.text_input, "Label (optional)").value == "mine"
    (caption,) = [shown(c.value) for c in at.caption if "Settings of this run" in c.value]
    assert "step_seconds" not in caption and "step time 100 us" in caption, caption
    for part in (
        "envs: CartPole-v1, vecenvs/Costly-v0",
        "N: 2, 8",
        "backends: multi, pool (num_workers=2), ceiling, gym-sync",
        "2 window(s) of 0.05 s per backend after 0 s of warm-up",
        "estimate: about",
    ):
        assert part in caption, caption
    at = app("autotune")
    queue.submit_autotune("CartPole-v1", 4, 7.0, start_runner=False)
    at.run()
    assert any(
        "num envs: 4" in shown(c.value) and "budget seconds: 7.0" in shown(c.value)
        for c in at.caption
    )
    at = app("profile")
    queue.submit_profile(ProfileConfig(num_envs=2, seconds=1), start_runner=False)
    at.run()
    (caption,) = [shown(c.value) for c in at.caption if "Settings of this run" in c.value]
    assert "num envs: 2" in caption and "nonblocking" not in caption and "seed" not in caption


def point(num_envs: int, **windows: list[float]) -> list:
    """One point of CartPole-v1 with these windows per backend (``gym_sync`` the loop)."""
    found = []
    for backend, throughputs in windows.items():
        found.append(
            Measurement(
                BenchConfig("CartPole-v1", num_envs, backend.replace("_", "-")),
                list(throughputs),
                [100] * len(throughputs),
                [0.1] * len(throughputs),
                0.01,
                0.1,
                0.0,
                0,
                10**8,
                None,
            )
        )
    return list(relate_point(found, found[-1]))


def test_noisy_points_and_a_disturbed_ceiling_are_flagged_and_one_click_measures_again(queue):
    config = SweepConfig(
        ["CartPole-v1"],
        [2, 4],
        ["multi", "ceiling"],
        warmup_seconds=0.0,
        measure_seconds=0.05,
        repeats=2,
    )
    measured = [
        *point(2, multi=[263, 82], ceiling=[300, 310], gym_sync=[100, 100]),  # noisy
        *point(4, multi=[150, 160], ceiling=[40, 160], gym_sync=[100, 100]),  # a stalled window
    ]
    job = finished_job(queue, config, measured, label="noisy")

    at = app(job=str(job))

    verdict = at.table[0].value.map(shown)
    assert list(verdict["confidence"]) == ["noisy", "likely"]
    assert list(verdict["use"]) == ["no call yet", "multi"]
    assert (
        verdict["what to do"][0] == "noisy: 2 windows ranged 0.82-2.63x gym-sync; measure 5 windows"
    )
    assert verdict["of ceiling"][1] == "? ceiling disturbed", "155% of a stalled ceiling: flagged"
    table = at.dataframe[0].value
    assert set(table[table["N"] == 4]["of ceiling"]) == {"? ceiling disturbed", "100%"}
    assert any("the ceiling was disturbed" in shown(box.value) for box in at.warning)
    press(at, "Measure 1 point(s) again with 5 windows")
    again = queue.get(max(j.id for j in queue.jobs()))
    assert again.id != job and again.label == "noisy"
    assert again.settings["repeats"] == 5 and again.settings["only"] == [["CartPole-v1", 2]]
    assert status_line(at).startswith(f"Job {again.id} "), "the page shows the new job"
    queue.cancel(again.id)


def test_run_again_queues_the_same_job_and_shows_it(queue):
    config = SweepConfig(
        ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.05, repeats=1
    )
    job = queue.wait(queue.submit_sweep(config, label="twice"), 60).id
    at = app(job=str(job))
    press(at, "Run again")
    (again,) = [j for j in queue.jobs() if j.id != job]
    assert again.settings == queue.get(job).settings and again.label == "twice"
    assert status_line(at).startswith(f"Job {again.id} ")
    queue.wait(again.id, 60)


def test_a_double_click_on_run_queues_one_job(queue):
    blocker = queue.submit_sweep(
        SweepConfig(
            ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.1, repeats=100
        )
    )
    at = app()
    tiny_form(at)
    press(at, "Run")
    press(at, "Run")

    assert len(queue.jobs()) == 2, "the blocker and one job, not two"
    assert any("Already queued as job 2" in shown(box.value) for box in at.info)
    queue.cancel(blocker)


def test_many_processes_need_a_tick_and_a_busy_machine_is_named(queue):
    blocker = queue.submit_sweep(
        SweepConfig(
            ["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0, measure_seconds=0.1, repeats=100
        )
    )
    at = app()
    tiny_form(at, num_envs=(512,), backends=("subproc",))
    press(at, "Run")
    assert any("this would run 512 worker processes at once" in shown(e.value) for e in at.error)
    assert len(queue.jobs()) == 1
    widget(at.checkbox, "Allow more than 128 processes at once").check()
    press(at, "Run")
    (big,) = [job for job in queue.jobs() if job.id != blocker]
    assert big.status == "queued"  # behind the blocker: cancelled before it starts
    queue.cancel(big.id)
    queue.cancel(blocker)


def test_a_busy_machine_is_named_when_a_job_is_queued_and_whenever_it_is_reopened(queue):
    # Other programs: not this process's children, which the load check counts as its own.
    spawn = (
        "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'while True: "
        "pass'], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "
        "stderr=subprocess.DEVNULL).pid)"
    )
    burners = [
        int(subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True).stdout)
        for _ in range(available_cpus())
    ]
    try:
        time.sleep(0.5)
        at = app()
        tiny_form(at)
        press(at, "Run")
        busy = "The machine was busy when this job was queued"
        assert any(busy in shown(box.value) for box in at.warning)
        job = queue.jobs()[0]
        assert job.notes["busy"]["others_share"] > 0.5
        # Another tab, or a reload: the warning is kept with the job.
        reopened = app(job=str(job.id))
        assert any(busy in shown(box.value) for box in reopened.warning)
    finally:
        for pid in burners:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_autotune_refuses_a_step_time_that_is_not_a_number(queue):
    at = app("autotune")
    widget(at.selectbox, "Environment").set_value("vecenvs/Costly-v0")
    widget(at.text_input, "Step time, microseconds").set_value("abc")
    press(at, "Autotune")

    assert any("step time 'abc' is not a number" in shown(e.value) for e in at.error)
    assert queue.jobs() == []


def test_training_gives_torch_one_thread_on_a_small_machine():
    at = app("train")
    expected = 1 if available_cpus() <= 4 else "default"  # the CPUs we may use, not the host's
    assert widget(at.radio, "Threads for torch").value == expected


@pytest.mark.parametrize("cpus", [1, 128])
def test_the_forms_defaults_work_on_one_cpu_and_on_128(queue, monkeypatch, cpus):
    """The defaults adapt to the CPUs: the pool's K is its own choice, min(CPUs, N), so it is
    never above N, and the worker choices stay a short list."""
    sys.path.insert(0, str(APP.parent))
    import common

    monkeypatch.setattr(common, "available_cpus", lambda: cpus)
    # What is queued is the point, not measuring it: no runner.
    monkeypatch.setattr(LabQueue, "ensure_runner", lambda self: None)
    at = app()
    workers = widget(at.multiselect, "Pool workers K")
    assert workers.value == ["auto"] and len(workers.options) <= 14
    assert str(cpus) in workers.options
    widget(at.multiselect, "Numbers of envs N").set_value([1, 4])
    widget(at.multiselect, "Backends").set_value(["pool", "ceiling"])
    press(at, "Run")
    assert not at.error, [e.value for e in at.error]
    (job,) = queue.jobs()
    assert [b for b in job.settings["backends"] if b["name"] == "pool"] == [
        {"name": "pool", "kwargs": {}}
    ], "the pool's own K: min(CPUs, N)"
    queue.cancel(job.id)
    at = app("profile")
    assert widget(at.select_slider, "Pool workers K (pools only)").value == "auto"
    widget(at.selectbox, "Backend").set_value("pool")
    press(at, "Profile")
    assert not at.error, [e.value for e in at.error]
    profile = queue.jobs()[0]
    assert profile.kind == "profile" and profile.settings["backend_kwargs"] == {}
    queue.cancel(profile.id)


# --- Your env: typed in, checked before it is queued, never imported from the address -------

USER_ENVS = [
    str(Path(__file__).resolve().parents[1] / "examples" / "mycart"),
    str(Path(__file__).resolve().parent / "data" / "userenvs"),
]


@pytest.fixture
def user_envs_on_path(monkeypatch):
    """The example package and the test envs importable here and in the job runner (which
    inherits PYTHONPATH), as a user's installed package would be."""
    for folder in USER_ENVS:
        monkeypatch.syspath_prepend(folder)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*USER_ENVS, *sys.path]))


def type_user_env(at: AppTest, env: str, arguments: str = "") -> None:
    widget(at.text_input, "Your env (optional)").set_value(env)
    widget(at.text_input, "Your env's arguments (optional)").set_value(arguments)


def test_your_env_typed_in_gets_a_verdict_and_comes_back_with_its_job(queue, user_envs_on_path):
    at = app()
    tiny_form(at, num_envs=(2,), backends=("multi", "pool"))
    widget(at.multiselect, "Environments").set_value([])
    type_user_env(at, "mycart:MyCart-v0", "physics_steps=20")
    press(at, "Run")
    assert rerun_until_finished(at).endswith("done")
    verdict = at.table[0].value.map(shown)
    assert set(verdict["env"]) == {"mycart:MyCart-v0"} and list(verdict["N"]) == ["2"]
    (job,) = queue.jobs()
    assert job.settings["envs"] == [{"env_id": "mycart:MyCart-v0", "kwargs": {"physics_steps": 20}}]
    (row,) = [m for m in queue.store.measurements() if m["backend"] == "multi"]
    assert row["data"]["env"]["module"] == "mycart" and row["data"]["env"]["version"] == "0.1.0"

    # Reopened from its address (a reload, another tab): the same job, its env in the field.
    again = app(job=str(job.id))
    assert status_line(again).endswith("done")
    assert widget(again.text_input, "Your env (optional)").value == "mycart:MyCart-v0"
    assert widget(again.text_input, "Your env's arguments (optional)").value == "physics_steps=20"
    assert set(again.table[0].value.map(shown)["env"]) == {"mycart:MyCart-v0"}


def test_autotune_on_your_env_says_what_to_paste(queue, user_envs_on_path):
    at = app("autotune")
    type_user_env(at, "mycart.env:MyCartEnv", "physics_steps=20")
    widget(at.select_slider, "Number of envs N").set_value(2)
    widget(at.slider, "Time budget, seconds").set_value(5)
    press(at, "Autotune")
    assert rerun_until_finished(at).endswith("done")
    code = [block.value for block in at.code]
    assert any(
        block.startswith("from vecenvs import make_vec")
        and 'make_vec("mycart.env:MyCartEnv", 2, ' in block
        and 'env_kwargs={"physics_steps": 20}' in block
        for block in code
    ), code
    assert any("to_sb3(make_vec(" in block for block in code)


def test_your_env_trains_on_the_train_page(queue, user_envs_on_path):
    at = app("train")
    type_user_env(at, "mycart:MyCart-v0", "physics_steps=20")
    widget(at.select_slider, "Number of envs N").set_value(2)
    widget(at.multiselect, "Vector envs to train on").set_value(["sb3-dummy", "multi"])
    widget(at.select_slider, "Env steps per timed learn()").set_value(512)
    widget(at.slider, "Timed learn() calls").set_value(1)
    press(at, "Train")
    (job,) = queue.jobs()
    assert (job.settings["env_id"], job.settings["env_kwargs"]) == (
        "mycart:MyCart-v0",
        {"physics_steps": 20},
    )
    assert rerun_until_finished(at, 180).endswith("done")
    table = at.dataframe[0].value
    assert table["vector env"].tolist() == ["sb3-dummy", "multi"]
    rows = queue.store.measurements()
    assert {row["env_id"] for row in rows} == {"mycart:MyCart-v0"}
    assert all(row["env_kwargs"] == {"physics_steps": 20} for row in rows)
    assert any("env_kwargs={'physics_steps': 20}" in block.value for block in at.code)


@pytest.mark.parametrize("page", [None, "profile", "autotune", "train"])
def test_enter_in_a_field_does_not_submit_the_form(page):
    # Enter in "Your env" started a run before its arguments were typed. (The browser test
    # presses Enter for real.)
    at = app(page)
    forms = at.get("form")
    assert forms and all(form.proto.form.enter_to_submit is False for form in forms)


def test_the_check_timeout_field_sets_the_checks_limit(queue, user_envs_on_path):
    at = app("autotune")
    type_user_env(at, "slowmake:SlowMake-v0", "make_seconds=3")
    widget(at.number_input, "Check timeout, seconds").set_value(1.0)
    press(at, "Autotune")
    errors = [shown(box.value) for box in at.error]
    assert any(
        "env slowmake:SlowMake-v0 (make_seconds=3): making it took more than 1 s" in error
        for error in errors
    ), errors
    assert queue.jobs() == []
    # Given the time, it passes, and the job keeps the limit for its runner's own check.
    widget(at.number_input, "Check timeout, seconds").set_value(20.0)
    type_user_env(at, "slowmake:SlowMake-v0", "make_seconds=0.5")
    widget(at.slider, "Time budget, seconds").set_value(5)
    press(at, "Autotune")
    (job,) = queue.jobs()
    assert job.settings["check_timeout"] == 20.0


@pytest.mark.parametrize(
    "page, button",
    [(None, "Run"), ("profile", "Profile"), ("autotune", "Autotune"), ("train", "Train")],
)
@pytest.mark.parametrize(
    "env, arguments, reason",
    [
        ("raisingstep:RaisingStep-v0", "", "step() number 3 after reset raised ZeroDivisionError"),
        (
            "mismatch:WrongDtype-v0",
            "",
            "does not fit its observation_space: expected float32 of shape (2,), got float64",
        ),
        ("RoboWalk-v0", "", "Did you mean `robowalk:RoboWalk-v0`?"),
        (
            "brokenimport:BrokenImport-v0",
            "",
            "No module named 'a_dependency_that_is_not_installed'",
        ),
        ("mycart:MyCart-v0", "physics_steps=0", "physics_steps must be a whole number >= 1"),
        ("mycart:MyCart-v0", "physics_steps=(", "expected key=value pairs"),
        # Hostile input: shown as text, never run.
        ("<img src=x>:X-v0", "", "'<img src=x>' is not a module name"),
        (
            "mycart:MyCart-v0",
            "a=__import__('os').getcwd()",
            "argument a: expected a Python literal",
        ),
    ],
)
def test_a_broken_env_typed_in_is_refused_in_one_line_and_nothing_is_queued(
    queue, user_envs_on_path, page, button, env, arguments, reason
):
    at = app(page)
    if page is None:
        tiny_form(at)
    type_user_env(at, env, arguments)
    press(at, button)
    errors = [shown(box.value) for box in at.error]
    assert any(reason in error and "\n" not in error for error in errors), errors
    assert queue.jobs() == []


@pytest.mark.parametrize("page", [None, "profile", "autotune", "history"])
def test_the_address_never_makes_the_dashboard_import_a_module(queue, user_envs_on_path, page):
    sys.modules.pop("canary", None)
    # Every way an address could name a module: none of these parameters is read.
    at = app(
        page,
        env="canary:Canary-v0",
        user_env="canary:Canary-v0",
        envs="canary:Canary-v0",
        env_id="canary:Canary-v0",
    )
    assert "canary" not in sys.modules and queue.jobs() == []
    # A stored job naming it (as if queued from Python on this machine) is shown from its
    # ?job= address, its env in the field as text; the module is imported only on a click.
    config = SweepConfig(["canary:Canary-v0"], [2], ["multi"], **{"repeats": 1})
    job = queue.submit("sweep", config.to_dict(), start_runner=False)
    at = app(job=str(job))
    assert "canary" not in sys.modules
    assert widget(at.text_input, "Your env (optional)").value == "canary:Canary-v0"
