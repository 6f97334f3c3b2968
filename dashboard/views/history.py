"""History: past runs from the results store; filter them, overlay two or more, see what changed
against an earlier run, export CSV.

Every run's numbers are computed again from its saved windows (:func:`vecenvs.bench.ratios.relate`),
so a run stored before the lab had one definition of a speed-up reads like a new one. Training
runs measure PPO's training throughput, not the vector env alone: they get a chart of their
own.
"""

from __future__ import annotations

import io

import common
import streamlit as st

from vecenvs.bench import figures
from vecenvs.bench.engine import DEFAULT_REFERENCE, Measurement
from vecenvs.bench.ratios import changes, relate
from vecenvs.bench.snippets import history_code
from vecenvs.bench.store import ResultsStore, RunRecord

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


def measurements_of(store: ResultsStore, runs: list[RunRecord]) -> dict[int, list[Measurement]]:
    """Each run's measurements, their ratios as :mod:`vecenvs.bench.ratios` defines them."""
    rows = store.measurements([run.id for run in runs])
    found: dict[int, list[Measurement]] = {run.id: [] for run in runs}
    for row in rows:
        found[row["run_id"]].append(Measurement.from_dict(row["data"]))
    for run in runs:
        reference = run.settings.get("reference") if isinstance(run.settings, dict) else None
        relate(found[run.id], reference=reference or DEFAULT_REFERENCE)
    return found


def overlay(store: ResultsStore, by_name: dict[str, RunRecord], picked: list[str]) -> None:
    """The picked runs overlaid, in the metric chosen; training runs on a chart of their own."""
    metric = st.radio(
        "Show",
        ["throughput", "speedup"],
        horizontal=True,
        format_func={
            "throughput": "throughput (env steps/s)",
            "speedup": "speed-up over the loop (gym-sync)",
        }.get,
    )
    runs = [by_name[name] for name in picked]
    measured = measurements_of(store, runs)
    # PPO's training throughput and the vector env's stepping throughput are different
    # quantities: never one axis for both.
    for what, training in (("env stepping", False), ("training", True)):
        names = [name for name in picked if (by_name[name].kind == "train") == training]
        if not names:
            continue
        per_run = {name: measured[by_name[name].id] for name in names}
        if metric == "speedup" and not any(m.ratio for ms in per_run.values() for m in ms):
            st.caption(
                f"The {what} runs picked have no speed-up over the loop (training runs measure "
                "no loop beside them): see their throughput."
            )
            continue
        common.chart(
            figures.runs_figure(per_run, metric=metric, what=what),
            f"history-overlay-{what}",
            history_code(str(store.path), [by_name[name].id for name in names]),
            wide=True,
        )
    what_changed(measured, by_name, picked)


def what_changed(
    measured: dict[int, list[Measurement]], by_name: dict[str, RunRecord], picked: list[str]
) -> None:
    """A table of what changed from a chosen earlier run to the newest of those picked."""
    if len(picked) < 2:
        st.caption("Pick two runs or more to see what changed from one to the other.")
        return
    by_age = sorted(picked, key=lambda name: by_name[name].id)
    st.subheader("What changed")
    left, right = st.columns(2)
    newest = left.selectbox("What changed in", by_age[::-1])
    others = [name for name in by_age[::-1] if name != newest]
    earlier = right.selectbox("Against", others)
    if newest is None or earlier is None:
        return
    rows = changes(measured[by_name[newest].id], measured[by_name[earlier].id])
    if not rows:
        st.caption("These two runs measured no (env, N, backend) in common.")
        return
    common.table(
        {
            "env": row["env"],
            "N": row["num_envs"],
            "backend": row["backend"],
            "then (env steps/s)": common.number(row["then"]),
            "now (env steps/s)": common.number(row["now"]),
            "change": common.number(row["change"] - 1, "+.0%"),
            f"x {DEFAULT_REFERENCE} then": common.number(row["speedup_then"], ".2f", "x"),
            f"x {DEFAULT_REFERENCE} now": common.number(row["speedup_now"], ".2f", "x"),
            "checks": ", ".join(row["checks"]),
        }
        for row in rows
    )
    st.caption(
        "Throughputs are the median windows of each run; change = now / then - 1. A change "
        "within the runs' own spread (see the checks, and each run's ± std) is noise."
    )


store = common.queue().store
store.fail_abandoned_runs()
runs = store.runs()
if not runs:
    st.info(
        "No runs yet. Run a comparison, or `python -m vecenvs bench`: every run is saved "
        f"in {common.plain(store.path)}."
    )
else:
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
        overlay(store, by_name, picked)
        ids = [by_name[name].id for name in picked]
        text = io.StringIO()
        count = store.export_csv(text, ids)
        st.download_button(
            f"Export these {count} measurements as CSV",
            text.getvalue(),
            file_name="vecenvs-results.csv",
            mime="text/csv",
        )
