"""Autotune: let the machine say how to step your envs (:func:`vecenvs.autotune.autotune`).

Its speed-ups are over ``multi``, and the page says so: "the loop" is gym-sync everywhere else
in the dashboard.
"""

from __future__ import annotations

import common
import streamlit as st

from vecenvs.bench import figures
from vecenvs.bench.jobs import Job
from vecenvs.bench.snippets import autotune_code


def form() -> None:
    with st.form("autotune"):
        left, middle, right = st.columns(3)
        env_id = left.selectbox("Environment", common.env_choices())
        num_envs = middle.select_slider("Number of envs N", common.N_CHOICES, value=16)
        budget = right.slider(
            "Time budget, seconds",
            5,
            120,
            20,
            help="A deadline: candidates that no longer fit are skipped.",
        )
        step_micros, knobs = common.teaching_knobs("Step time, microseconds", "1000")
        label, submitted = common.label_and_button("Autotune")

    def submit() -> int:
        env_kwargs = {}
        if env_id == common.TEACHING_ENV:  # "abc" used to become 1000 us without a word
            step_seconds = common.parse_step_times(step_micros)
            if len(step_seconds) != 1:
                raise ValueError(f"autotune takes one step time, got {len(step_seconds)}")
            env_kwargs = {"step_seconds": step_seconds[0], **knobs}
        return common.queue().submit_autotune(
            env_id, num_envs, float(budget), env_kwargs=env_kwargs, label=label
        )

    if submitted:
        common.queue_job(submit)


def results(job: Job) -> None:
    summary = job.run.summary if job.run is not None else None
    if not summary or not summary.get("table"):
        return
    table = summary["table"]
    st.success(
        f"Best for {summary['num_envs']} x {common.plain(summary['env'])} on "
        f"{summary['cpus']} CPU(s): **{common.plain(summary['best']['label'])}** "
        f"({common.number(table[0]['steps_per_second'])} env steps/s)"
    )
    common.chart(figures.autotune_figure(table), f"autotune-{job.id}", autotune_code(job.settings))
    common.table(
        {
            "candidate": row["label"],
            "mode": row["mode"],
            "workers K": str(row["workers"]),
            "envs per worker": str(row["envs_per_worker"]),
            "env steps/s": common.number(row["steps_per_second"]),
            "± std": common.number(row["std"]),
            "x multi": common.number(row["vs_loop"], ".2f"),
            "x multi, side by side": common.number(row.get("head_to_head_vs_loop"), ".2f"),
        }
        for row in table
    )
    if summary.get("head_to_head"):
        st.caption(
            "A close call: the two fastest were measured again, their windows "
            "interleaved with multi's, and the winner chosen on those paired "
            "speed-ups (the last column)."
        )
    if summary.get("skipped"):
        st.caption(
            "Not measured (the budget ran out): " + common.plain(", ".join(summary["skipped"]))
        )


st.caption(
    "Measures the ways of stepping N copies of an env on this machine, within a time "
    "budget, and picks the fastest: every env in this process (multi) wins for cheap "
    "envs on few CPUs, the pool for many envs or costly steps, the async pool when "
    "stragglers hold the others back. Speed-ups are over multi."
)
form()
common.show_job("autotune", results)
