"""History: past runs from the results store; filter them, overlay two or more, export CSV.

Training runs measure PPO's training throughput, not the vector env alone: they get a chart of
their own.
"""

from __future__ import annotations

import io

import common
import streamlit as st

from vecenvs.bench import figures
from vecenvs.bench.engine import Measurement
from vecenvs.bench.snippets import history_code
from vecenvs.bench.store import RunRecord

#: How much of a label a run's name in the picker and the legend keeps.
LABEL_CHARACTERS = 32


def run_name(run: RunRecord) -> str:
    """``#12 sweep · 2026-11-21 10:04 · laptop``: how a run is listed."""
    name = f"#{run.id} {run.kind} · {run.started_at[:16].replace('T', ' ')}"
    if run.label:
        label = " ".join(run.label.split())  # no line breaks in a legend
        name += " · " + (
            label if len(label) <= LABEL_CHARACTERS else label[: LABEL_CHARACTERS - 1] + "…"
        )
    return name


def filtered(runs: list[RunRecord]) -> list[RunRecord]:
    left, middle, right, far = st.columns(4)
    kinds = left.multiselect("Kind", sorted({run.kind for run in runs}))
    statuses = middle.multiselect("Status", sorted({run.status for run in runs}))
    envs = right.multiselect("Env", sorted({env for run in runs for env in run.env_ids}))
    text = far.text_input("Label or host contains")
    return [
        run
        for run in runs
        if (not kinds or run.kind in kinds)
        and (not statuses or run.status in statuses)
        and (not envs or set(envs) & set(run.env_ids))
        and text.lower() in f"{run.label or ''} {run.machine.get('hostname', '')}".lower()
    ]


store = common.queue().store
store.fail_abandoned_runs()
runs = store.runs()
if not runs:
    st.info(
        "No runs yet. Run a comparison, or `python -m vecenvs bench`: every run is saved "
        f"in {common.plain(store.path)}."
    )
    st.stop()

shown = filtered(runs)
common.table(
    {
        "run": run.id,
        "kind": run.kind,
        "status": run.status,
        "started (UTC)": run.started_at[:19].replace("T", " "),
        "label": run.label or "",
        "host": str(run.machine.get("hostname", "")),
        "CPUs": str(run.machine.get("usable_cpus", "")),
        "envs": ", ".join(run.env_ids),
        "N": ", ".join(map(str, run.num_envs)),
        "backends": ", ".join(run.backends),
        "measurements": run.measurement_count,
    }
    for run in shown
)

with_data = [run for run in shown if run.measurement_count]
by_name = {run_name(run): run for run in with_data}
picked = st.multiselect(
    "Runs to overlay (two or more to compare)", list(by_name), default=list(by_name)[:1]
)
if picked:
    metric = st.radio(
        "Show",
        ["throughput", "speedup"],
        horizontal=True,
        format_func={
            "throughput": "throughput (env steps/s)",
            "speedup": "speed-up over the loop (gym-sync)",
        }.get,
    )
    ids = [by_name[name].id for name in picked]
    rows = store.measurements(ids)
    # PPO's training throughput and the vector env's stepping throughput are different
    # quantities: never one axis for both.
    for what, training in (("env stepping", False), ("training", True)):
        names = [name for name in picked if (by_name[name].kind == "train") == training]
        if names:
            per_run = {
                name: [
                    Measurement.from_dict(row["data"])
                    for row in rows
                    if row["run_id"] == by_name[name].id
                ]
                for name in names
            }
            common.chart(
                figures.runs_figure(per_run, metric=metric, what=what),
                f"history-overlay-{what}",
                history_code(str(store.path), [by_name[name].id for name in names]),
                wide=True,
            )
    text = io.StringIO()
    count = store.export_csv(text, ids)
    st.download_button(
        f"Export these {count} measurements as CSV",
        text.getvalue(),
        file_name="vecenvs-results.csv",
        mime="text/csv",
    )
