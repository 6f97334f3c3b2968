"""Each dashboard page's logic, through Streamlit's AppTest (no browser), with real jobs.

The pages queue real jobs that a real runner process measures into a real SQLite store (each
test has its own, see conftest.py); the tests press the buttons and rerun the script the way
the browser's once-a-second refresh does. ``test_dashboard_browser.py`` drives the real
server in Chromium.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import plotly.io as pio
import pytest

from vecenvs.bench import ResultsStore, SweepConfig, default_store_path
from vecenvs.bench.jobs import JobQueue
from vecenvs.bench.snippets import history_code, machine_code, profile_code, sweep_code

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402 - after the skip

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
TIMEOUT = 60


@pytest.fixture
def queue():
    """The queue of the store the app uses; no job may be left running after the test."""
    jobs = JobQueue(ResultsStore(default_store_path()))
    yield jobs
    for job in jobs.jobs(unfinished=True):
        jobs.cancel(job.id)
    deadline = time.monotonic() + 60
    while jobs.runner_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    jobs.store.close()


def app(page: str | None = None, **query: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    if page is not None:
        at.switch_page(f"views/{page}.py").run()
    assert not at.exception, at.exception
    return at


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
    return re.sub(r":material/\w+: ", "", lines[0]).replace("**", "") if lines else None


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
    for page, title in [("profile", "Profile"), ("autotune", "Autotune"), ("train", "Train"),
                        ("history", "History"), ("machine", "Machine")]:
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, at.exception
        assert at.title[0].value == title


@pytest.mark.parametrize("change, message", [
    (lambda at: widget(at.multiselect, "Backends").set_value([]), "pick at least one backend"),
    (lambda at: widget(at.multiselect, "Numbers of envs N").set_value([]),
     "pick at least one N"),
    (lambda at: (widget(at.multiselect, "Environments").set_value(["vecenvs/Costly-v0"]),
                 widget(at.text_input, "Step time, microseconds (several, comma-separated, "
                        "make a grid)").set_value("10, fast")),
     "step time 'fast' is not a number"),
    (lambda at: (widget(at.multiselect, "Numbers of envs N").set_value([1, 4]),
                 widget(at.multiselect, "Pool workers K").set_value([2])),
     "pool with num_workers=2 cannot step N=1 env(s)"),
])
def test_bad_form_input_is_refused_with_a_message_and_nothing_is_queued(queue, change, message):
    at = app()
    change(at)
    press(at, "Run")
    assert any(message in error.value for error in at.error), [e.value for e in at.error]
    assert queue.jobs() == []


def test_a_comparison_runs_and_its_charts_table_and_code_appear(queue):
    at = app()
    tiny_form(at)
    widget(at.text_input, "Label (optional)").set_value("apptest")
    press(at, "Run")
    assert at.query_params["job"] in ("1", ["1"]), "the address names the job, to come back"
    assert rerun_until_finished(at).endswith("apptest: done")

    specs = charts(at)
    assert len(specs) == 3
    titles = [spec["layout"]["title"]["text"] for spec in specs]
    assert titles[0].startswith("Throughput") and titles[1].startswith("Speed-up")
    assert titles[2].startswith("Efficiency")
    for spec in specs:
        layout = spec["layout"]
        assert "number of envs N" in layout["xaxis"]["title"]["text"]
        assert re.search(r"\(.*(steps/s|x|%).*\)", layout["yaxis"]["title"]["text"]), \
            "every y axis names its unit"
        names = {trace.get("name") for trace in spec["data"]}
        assert {"multi", "pool"} <= names, names
    table = at.table[0].value
    assert len(table) == 6  # 2 N x (multi, pool, gym-sync)
    assert set(table["backend"]) == {"multi", "pool", "gym-sync"}
    assert all(float(rate.replace(",", "")) > 0 for rate in table["env steps/s"])
    code = [block.value for block in at.code if "run_sweep" in block.value]
    assert len(code) == 4, "the code beside each chart and the model table"
    assert "num_envs=[2, 4]" in code[0] and "backends=['multi', 'pool']" in code[0]
    assert any("Overhead model on" in block.value for block in at.code)


def test_reopening_the_page_shows_the_job_from_its_address(queue):
    config = SweepConfig(["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0,
                         measure_seconds=0.05, repeats=1)
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
    blocker = queue.submit_sweep(SweepConfig(["CartPole-v1"], [2], ["multi"],
                                             warmup_seconds=0.0, measure_seconds=0.1,
                                             repeats=100))
    at = app()
    tiny_form(at)
    press(at, "Run")
    job_id = int(at.query_params["job"][0] if isinstance(at.query_params["job"], list)
                 else at.query_params["job"])
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
    (spec,) = charts(at)
    assert spec["layout"]["xaxis"]["title"]["text"].startswith("share of samples, %")
    assert {trace["name"] for trace in spec["data"]} >= {"env compute", "waiting"}
    processes = at.table[0].value["process"].tolist()
    assert processes[0] == "parent" and "worker 0" in processes and "worker 1" in processes
    flame = at.get("iframe")
    assert flame and "<svg" in flame[0].proto.srcdoc
    labels = [button.label for button in at.download_button]
    assert any(label.endswith(".svg") for label in labels)
    assert any("speedscope" in label for label in labels)
    assert any("ProfileConfig(" in block.value for block in at.code)


# --- History ------------------------------------------------------------------------------


def test_history_overlays_runs_filters_them_and_exports_csv(queue):
    config = SweepConfig(["CartPole-v1"], [2, 4], ["multi"], warmup_seconds=0.0,
                         measure_seconds=0.05, repeats=1)
    for label in ("monday", "tuesday"):
        queue.wait(queue.submit_sweep(config, label=label), 60)
    at = app("history")
    assert len(at.table[0].value) == 2
    picked = widget(at.multiselect, "Runs to overlay (two or more to compare)")
    picked.set_value(list(picked.options)).run()
    assert not at.exception, at.exception
    (spec,) = charts(at)
    names = {trace["name"] for trace in spec["data"]}
    assert any("monday" in name for name in names) and any("tuesday" in name for name in names)
    assert "env steps/s" in spec["layout"]["yaxis"]["title"]["text"]
    widget(at.radio, "Show").set_value("speedup").run()
    assert "speed-up" in charts(at)[0]["layout"]["yaxis"]["title"]["text"]
    (download,) = at.download_button
    assert download.label == "Export these 8 measurements as CSV"
    assert any("export_csv" in block.value for block in at.code)
    widget(at.text_input, "Label or host contains").set_value("tues").run()
    assert at.table[0].value["label"].tolist() == ["tuesday"]


# --- Machine ------------------------------------------------------------------------------


def test_machine_page_shows_cpus_versions_backends_and_py_spy():
    at = app("machine")
    metrics = {metric.label: metric.value for metric in at.metric}
    assert int(metrics["CPUs this process may use"]) >= 1
    assert metrics["Memory"].endswith("GiB")
    assert any("can attach" in success.value for success in at.success), \
        [e.value for e in at.error]  # we run as root here; elsewhere the error says what to do
    backends = at.table[0].value
    assert "pool" in backends["backend"].tolist()
    packages = at.table[1].value
    assert "gymnasium" in packages["package"].tolist()


# --- The code beside the charts -----------------------------------------------------------


def test_the_code_snippets_run_and_give_what_the_page_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(pio.renderers, "default", "json")  # .show() prints instead of opening
    settings = SweepConfig(["CartPole-v1"], [2], ["multi"], warmup_seconds=0.0,
                           measure_seconds=0.05, repeats=1).to_dict()
    for figure in ("throughput", "model"):
        exec(compile(sweep_code(settings, figure), f"<{figure} snippet>", "exec"), {})
    printed = capsys.readouterr().out
    assert "Throughput against the number of envs" in printed
    assert "Overhead model on" in printed
    exec(compile(machine_code(), "<machine snippet>", "exec"), {})
    assert "can attach" in capsys.readouterr().out
    store = ResultsStore(tmp_path / "r.sqlite")
    queue = JobQueue(store)
    run = queue.wait(queue.submit_sweep(SweepConfig.from_dict(settings)), 60).run_id
    monkeypatch.chdir(tmp_path)
    exec(compile(history_code(str(store.path), [run]), "<history snippet>", "exec"), {})
    assert (tmp_path / "results.csv").read_text().count("\n") == 3  # header + 2 rows
    code = profile_code({"env_id": "CartPole-v1", "num_envs": 2, "backend": "multi",
                         "backend_kwargs": {}, "env_kwargs": {}, "seconds": 1, "rate": 50})
    assert "seconds=1" in code and "backend_kwargs" not in code
    compile(code, "<profile snippet>", "exec")  # run for real in test_profile.py's API test
    store.close()


# --- Autotune -----------------------------------------------------------------------------


def test_autotune_picks_a_winner_and_shows_its_table_and_code(queue):
    at = app("autotune")
    widget(at.selectbox, "Environment").set_value("vecenvs/Costly-v0")
    widget(at.select_slider, "Number of envs N").set_value(4)
    widget(at.slider, "Time budget, seconds").set_value(5)
    widget(at.number_input, "Step time, microseconds").set_value(2000.0)
    widget(at.radio, "The step's time is spent").set_value("sleep")
    press(at, "Autotune")
    assert rerun_until_finished(at).endswith("done")
    (spec,) = charts(at)
    assert spec["layout"]["xaxis"]["title"]["text"].startswith("throughput (env steps/s")
    table = at.table[0].value
    assert table["candidate"].tolist()[0] != "multi", "four sleeping envs: parallel must win"
    assert "multi" in table["candidate"].tolist()
    assert any("Best for 4 x vecenvs/Costly-v0" in s.value for s in at.success)
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
    assert {trace["name"] for trace in spec["data"]} == {"stepping the envs",
                                                          "policy and updates"}
    table = at.table[0].value
    assert table["vector env"].tolist() == ["sb3-dummy", "multi"]
    for share in table["share stepping envs"]:
        assert 0 < int(share.rstrip("%")) < 100, "both the env and the learner take time"
    assert any("compare_training(" in block.value for block in at.code)
