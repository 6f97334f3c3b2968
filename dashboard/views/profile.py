"""Profile: one configuration under py-spy, and where each of its processes spends its time.

It runs through the queue like a benchmark (it needs the CPUs to itself). Only files under the
queue's own profiles folder are read or offered, whatever a run in the store says.
"""

from __future__ import annotations

import html

import common
import streamlit as st

from vecenvs.bench.engine import in_words
from vecenvs.bench.jobs import Job
from vecenvs.bench.snippets import profile_code
from vecenvs.factory import WORKER_BACKENDS, available_backends, describe_backend
from vecenvs.profile import Breakdown, ProfileConfig, breakdown_figure, read_collapsed
from vecenvs.profile.flamegraph import flamegraph_figure

#: The pool's own choice of workers: min(CPUs, N), never more workers than envs.
AUTO = "auto"

#: The files py-spy wrote that the page offers, and their types.
DOWNLOADS = {"svg": "image/svg+xml", "speedscope": "application/json", "collapsed": "text/plain"}


def form() -> None:
    cpus = common.cpus()
    backends = available_backends()
    with common.form("profile"):
        left, middle, right = st.columns(3)
        env_id = left.selectbox("Environment", common.env_choices())
        user_env, user_args, check_timeout = common.user_env_fields(left)
        num_envs = left.select_slider("Number of envs N", common.N_CHOICES, value=8)
        backend = middle.selectbox(
            "Backend", backends, index=backends.index("subproc"), format_func=describe_backend
        )
        powers = [2**i for i in range(cpus.bit_length() + 1) if 2**i <= max(8, cpus)]
        workers = middle.select_slider(
            "Pool workers K (pools only)",
            [AUTO, *sorted({*powers, cpus})],
            value=AUTO,
            help=f"{AUTO}: min(CPUs, N), the pool's default. A K above N is refused.",
        )
        seconds = right.slider("Seconds of sampling", 1, 30, 3)
        rate = right.select_slider("Samples per second", [20, 50, 100, 200, 500], value=100)
        label, submitted = common.label_and_button("Profile")

    def submit() -> int:
        config = ProfileConfig(
            env_id=user_env or env_id,
            env_kwargs=common.parse_env_arguments(user_args) if user_env else {},
            num_envs=num_envs,
            backend=backend,
            backend_kwargs=(
                {"num_workers": workers} if backend in WORKER_BACKENDS and workers != AUTO else {}
            ),
            seconds=seconds,
            rate=rate,
            check_timeout=check_timeout,
        )
        return common.queue().submit_profile(config, label=label)

    if submitted:
        common.queue_job(submit)


def results(job: Job) -> None:
    summary = job.run.summary if job.run is not None else None
    if job.status != "done" or not summary:
        return
    result = Breakdown.from_dict(summary["breakdown"])
    settings = summary["config"]
    title = f"{settings['backend']}, N={settings['num_envs']} x {settings['env_id']}"
    common.chart(
        breakdown_figure(
            result,  # plotly reads tags: the title is escaped
            title=html.escape(f"{title}: where each process spends its time", quote=False),
        ),
        f"breakdown-{job.id}",
        profile_code(settings),
    )
    rate = summary.get("steps_per_second")
    st.caption(
        f"{summary['counted_samples']:,} samples counted (idle ones included: a "
        "blocked worker is the point). "
        + common.plain(in_words(settings["backend"]))
        + (
            f"; it stepped {rate:,.0f} env steps/s while sampled (slowed by the sampling: not a "
            "benchmark)."
            if rate
            else "."
        )
    )
    st.subheader("Share of each process's time, %")
    common.table(
        {
            "process": process,
            **{category: common.number(100 * share, ".1f") for category, share in shares.items()},
        }
        for process, shares in result.by_process().items()
    )
    st.subheader("Flame graph")
    st.caption(
        "Each box is a function, as wide as its share of the samples, above the function "
        "that called it; its colour is its category. Hover a box for its file, lines and "
        "shares; click one to zoom into it (a process, to give it the whole width), click "
        "the bottom row to zoom out."
    )
    files = summary.get("files") or {}
    folder = common.queue().profiles_dir
    stacks = common.project_file(files.get("collapsed"), folder)
    if stacks is None:
        st.warning(
            f"The stacks file {common.plain(files.get('collapsed'))} is gone, or is not "
            f"one this dashboard wrote (under {common.plain(folder)})."
        )
    else:
        # Drawn by plotly from py-spy's stacks: Streamlit's st.html strips an SVG's boxes.
        samples = read_collapsed(stacks.read_text(encoding="utf-8", errors="replace"))
        figure = flamegraph_figure(samples, title=f"Flame graph: {title}")
        st.plotly_chart(figure, key=f"flame-{job.id}", width="stretch")
    for column, (name, mime) in zip(st.columns(3), DOWNLOADS.items()):
        path = common.project_file(files.get(name), folder)
        if path is not None:
            column.download_button(
                f"Download {path.name}",
                path.read_bytes(),
                file_name=path.name,
                mime=mime,
                key=f"download-{name}-{job.id}",
            )
        elif files.get(name):
            column.caption(
                f"Not offered: {common.plain(files[name])} is not a file this dashboard wrote."
            )


st.caption(
    "Runs one configuration in its own process and samples it and its workers with "
    "py-spy. Pipes, pickling and waiting show up as what they cost."
)
form()
common.show_job(common.watched_job("profile"), results)
