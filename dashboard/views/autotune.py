"""Autotune: let the machine say how to step your envs (:func:`vecenvs.autotune.autotune`).

Its jobs measure gym-sync among the candidates (:mod:`vecenvs.lab`), so its speed-ups are over
the loop, gym-sync, like every other page's: each candidate's throughput over gym-sync's in the
same table. (A run from before, without gym-sync, shows its speed-ups over ``multi``, named so.)
"""

from __future__ import annotations

import common
import streamlit as st

from vecenvs.bench import figures
from vecenvs.bench.engine import DEFAULT_REFERENCE, in_words
from vecenvs.bench.jobs import Job
from vecenvs.bench.snippets import autotune_code


def form() -> None:
    with common.form("autotune"):
        left, middle, right = st.columns(3)
        env_id = left.selectbox("Environment", common.env_choices())
        user_env, user_args, check_timeout = common.user_env_fields(left)
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
        if user_env:  # resolved (its module imported) only now, when the search is queued
            return common.queue().submit_autotune(
                user_env,
                num_envs,
                float(budget),
                env_kwargs=common.parse_env_arguments(user_args),
                label=label,
                check_timeout=check_timeout,
            )
        env_kwargs = {}
        if env_id == common.TEACHING_ENV:  # "abc" used to become 1000 us without a word
            step_seconds = common.parse_step_times(step_micros)
            if len(step_seconds) != 1:
                raise ValueError(f"autotune takes one step time, got {len(step_seconds)}")
            env_kwargs = {"step_seconds": step_seconds[0], **knobs}
        return common.queue().submit_autotune(
            env_id,
            num_envs,
            float(budget),
            env_kwargs=env_kwargs,
            label=label,
            check_timeout=check_timeout,
        )

    if submitted:
        common.queue_job(submit)


def results(job: Job) -> None:
    summary = job.run.summary if job.run is not None else None
    if not summary or not summary.get("table"):
        return
    table = summary["table"]
    best = summary["best"]
    st.success(
        f"Best for {summary['num_envs']} x {common.plain(summary['env'])} on "
        f"{summary['cpus']} CPU(s): **{common.plain(best['label'])}** "
        f"({common.number(table[0]['steps_per_second'])} env steps/s); "
        + common.plain(in_words(best["backend"]))
    )
    if summary.get("use_code"):  # the lines to paste (runs from before had none)
        st.markdown("**Use it**: paste these lines into your script.")
        st.code(summary["use_code"], language="python")
        if summary.get("sb3_code"):
            st.caption("For Stable-Baselines3 (e.g. PPO('MlpPolicy', vec_env)):")
            st.code(summary["sb3_code"], language="python")
    common.chart(figures.autotune_figure(table), f"autotune-{job.id}", autotune_code(job.settings))
    loop = next((r for r in table if r["label"] == DEFAULT_REFERENCE), None)
    if loop is not None:  # every speed-up over the loop, the throughputs' own ratio
        versus, base = f"x {DEFAULT_REFERENCE}", loop["steps_per_second"]
        ratio = {row["label"]: row["steps_per_second"] / base for row in table}
    else:  # a run from before gym-sync was a candidate: over multi, as it was measured
        versus = "x multi"
        ratio = {row["label"]: row["vs_loop"] for row in table}
    common.table(
        {
            "candidate": row["label"],
            "mode": row["mode"],
            "workers K": str(row["workers"]),
            "envs per worker": str(row["envs_per_worker"]),
            "env steps/s": common.number(row["steps_per_second"]),
            "± std": common.number(row["std"]),
            versus: common.number(ratio[row["label"]], ".2f", "x"),
        }
        for row in table
    )
    finalists = summary.get("head_to_head") or []
    if len(finalists) == 2 and all(f.get("vs_loop") for f in finalists):
        first, second = sorted(finalists, key=lambda f: -f["vs_loop"])
        st.caption(
            f"A close call: the two fastest were measured again side by side, their windows "
            f"interleaved, and {common.plain(first['label'])} stepped "
            f"{first['vs_loop'] / second['vs_loop']:.2f}x as fast as "
            f"{common.plain(second['label'])}: it was chosen."
        )
    if summary.get("skipped"):
        st.caption(
            "Not measured (the budget ran out): " + common.plain(", ".join(summary["skipped"]))
        )


st.caption(
    "Measures the ways of stepping N copies of an env on this machine, within a time "
    "budget, and picks the fastest: a loop in this process (gym-sync, multi) wins for "
    "cheap envs on few CPUs, the pool for many envs or costly steps, the async pool when "
    f"stragglers hold the others back. Speed-ups are over the loop, {DEFAULT_REFERENCE}, "
    "as on every page."
)
form()
common.show_job(common.watched_job("autotune"), results)
