"""Train: how fast Stable-Baselines3's PPO trains on each way of stepping envs.

In training a faster vector env buys less, depending on the env's share of the training time,
which this page measures beside the training throughput (:mod:`vecenvs.bench.training`).
"""

from __future__ import annotations

import html

import common
import plotly.graph_objects as go
import streamlit as st

from vecenvs.bench.engine import Measurement
from vecenvs.bench.jobs import Job
from vecenvs.bench.snippets import training_code
from vecenvs.factory import BACKEND_INFO, available_backends, describe_backend

#: Up to this many CPUs, torch gets one thread by default (see the form).
SMALL_MACHINE_CPUS = 4

#: Backends PPO can train on here: lock-step ones (SB3 steps every env at once).
TRAINABLE = [name for name, info in BACKEND_INFO.items() if info.trainable]


def form() -> None:
    installed = set(available_backends())
    if "sb3-dummy" not in installed:
        st.error(
            "Training needs Stable-Baselines3, which is not installed here: `make peers` adds "
            "it (with torch, Ray and EnvPool); restart the dashboard afterwards."
        )
        return
    backends = [name for name in TRAINABLE if name in installed]
    with common.form("train"):
        left, middle, right = st.columns(3)
        env_id = left.selectbox(
            "Environment", [e for e in common.env_choices() if e != common.TEACHING_ENV]
        )
        user_env, user_args, check_timeout = common.user_env_fields(left)
        num_envs = left.select_slider("Number of envs N", common.N_CHOICES, value=8)
        chosen = middle.multiselect(
            "Vector envs to train on",
            backends,
            default=["sb3-dummy", "multi", "pool"],
            format_func=describe_backend,
        )
        timesteps = right.select_slider(
            "Env steps per timed learn()", [512, 1024, 2048, 4096, 8192, 16384], value=2048
        )
        repeats = right.slider("Timed learn() calls", 1, 5, 2)
        # On few cores torch's threads and the workers fight over them: on our 2-core VM
        # PPO on the pool trained at ~1,900 env steps/s with torch's default, ~4,700 with 1.
        threads = right.radio(
            "Threads for torch",
            [1, "default"],
            horizontal=True,
            index=0 if common.cpus() <= SMALL_MACHINE_CPUS else 1,
            help="torch takes one thread per core by default. On few cores its threads "
            f"and the vector env's worker processes compete for the CPUs, so on "
            f"{SMALL_MACHINE_CPUS} CPUs or fewer it gets 1 unless you say otherwise.",
        )
        label, submitted = common.label_and_button("Train")

    def submit() -> int:
        # Your env, typed in, instead of the one picked: resolved (its module imported) only
        # now, when the job is queued.
        return common.queue().submit_training(
            user_env or env_id,
            num_envs,
            chosen,
            timesteps=timesteps,
            repeats=repeats,
            torch_threads=None if threads == "default" else threads,
            label=label,
            env_kwargs=common.parse_env_arguments(user_args) if user_env else {},
            check_timeout=check_timeout,
        )

    if submitted:
        common.queue_job(submit)


def training_figure(trained: list[tuple[Measurement, float]]) -> go.Figure:
    """Training throughput per backend (measurement, env's share of the time), split into time
    stepping envs and the rest."""
    figure = go.Figure()
    for name, colour, whose, part in (
        ("stepping the envs", "#2ca02c", "env", lambda share: share),
        ("policy and updates", "#7f7f7f", "learner", lambda share: 1 - share),
    ):
        figure.add_bar(
            name=name,
            x=[html.escape(m.config.backend, quote=False) for m, _ in trained],  # plotly reads tags
            y=[m.median * part(share) for m, share in trained],
            marker_color=colour,
            hovertemplate=f"%{{x}}: %{{y:,.0f}} env steps/s worth of {whose} time<extra></extra>",
        )
    figure.update_layout(
        barmode="stack",
        title_text="PPO training throughput, split by where the time goes",
        xaxis_title="vector env",
        yaxis_title="training throughput (env steps/s)",
        legend_title_text="time spent",
    )
    return figure


def results(job: Job) -> None:
    trained = [
        (Measurement.from_dict(data), data.get("env_share", 0.0)) for data in common.measured(job)
    ]
    if not trained:
        return
    common.chart(training_figure(trained), f"train-{job.id}", training_code(job.settings))
    common.table(
        {
            "vector env": measurement.config.backend,
            "training env steps/s": common.number(measurement.median),
            "share stepping envs": common.number(share, ".0%"),
        }
        for measurement, share in trained
    )


st.caption(
    "Benchmarks time the vector env alone. In training, the policy's forward passes and "
    "updates take their share too: this page trains Stable-Baselines3's PPO on each "
    "vector env and shows both."
)
form()
common.show_job(common.watched_job("train"), results)
