"""History: past runs from the results store; filter them, overlay two or more, export CSV."""

from __future__ import annotations

import io

import common
import streamlit as st

from vecenvs.bench import figures
from vecenvs.bench.engine import Measurement
from vecenvs.bench.snippets import history_code
from vecenvs.bench.store import RunRecord


def run_name(run: RunRecord) -> str:
    """``#12 sweep · 2026-11-21 10:04 · laptop``: how a run is listed."""
    name = f"#{run.id} {run.kind} · {run.started_at[:16].replace('T', ' ')}"
    return name + (f" · {run.label}" if run.label else "")


def filtered(runs: list[RunRecord]) -> list[RunRecord]:
    """The runs that pass the filters shown above the table."""
    left, middle, right, far = st.columns(4)
    kinds = left.multiselect("Kind", sorted({run.kind for run in runs}))
    statuses = middle.multiselect("Status", sorted({run.status for run in runs}))
    envs = right.multiselect("Env", sorted({env for run in runs for env in run.env_ids}))
    text = far.text_input("Label or host contains")
    keep = []
    for run in runs:
        host = str(run.machine.get("hostname", ""))
        if ((not kinds or run.kind in kinds) and (not statuses or run.status in statuses)
                and (not envs or set(envs) & set(run.env_ids))
                and (not text or text.lower() in f"{run.label or ''} {host}".lower())):
            keep.append(run)
    return keep


st.title("History")
store = common.queue().store
store.fail_abandoned_runs()
runs = store.runs()
if not runs:
    st.info("No runs yet. Run a comparison, or `python -m vecenvs bench`: every run is saved "
            f"in {store.path}.")
    st.stop()

shown = filtered(runs)
st.table([{
    "run": run.id, "kind": run.kind, "status": run.status,
    "started (UTC)": run.started_at[:19].replace("T", " "), "label": run.label or "",
    "host": run.machine.get("hostname", ""), "CPUs": run.machine.get("usable_cpus", ""),
    "envs": ", ".join(run.env_ids), "N": ", ".join(map(str, run.num_envs)),
    "backends": ", ".join(run.backends), "measurements": run.measurement_count,
} for run in shown])

with_data = [run for run in shown if run.measurement_count]
by_name = {run_name(run): run for run in with_data}
picked = st.multiselect("Runs to overlay (two or more to compare)", list(by_name),
                        default=list(by_name)[:1])
if picked:
    metric = st.radio("Show", ["throughput", "speedup"], horizontal=True,
                      format_func={"throughput": "throughput (env steps/s)",
                                   "speedup": "speed-up over the loop"}.get)
    ids = [by_name[name].id for name in picked]
    rows = store.measurements(ids)
    per_run = {name: [Measurement.from_dict(row["data"]) for row in rows
                      if row["run_id"] == by_name[name].id] for name in picked}
    common.chart_and_code(figures.runs_figure(per_run, metric=metric), "history-overlay",
                          history_code(str(store.path), ids))
    text = io.StringIO()
    count = store.export_csv(text, ids)
    st.download_button(f"Export these {count} measurements as CSV", text.getvalue(),
                       file_name="vecenvs-results.csv", mime="text/csv")
