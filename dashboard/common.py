"""What the dashboard's pages share: the results store, the job queue, and how a job is shown.

The pages never measure anything themselves. They put a job in the queue
(:mod:`vecenvs.bench.jobs`), and a runner process measures it and saves each result in the
results store; the pages read the store and redraw once a second while the job runs. That is
why two tabs pressing *Run* are queued one behind the other, and why closing the tab loses
nothing: the job's id is in the page's address (``?job=12``), so reopening it shows the same
job, still going or finished.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from vecenvs.bench import ResultsStore, default_store_path
from vecenvs.bench.jobs import Job, JobQueue
from vecenvs.workers import available_cpus

#: How often a page showing an unfinished job reads the store again, in seconds.
REFRESH_SECONDS = 1.0

#: The gymnasium classics, cheapest first (CartPole ~12 us a step on our VM).
CLASSIC_ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1"]

#: MuJoCo envs, offered when the mujoco package is installed (HumanoidStandup ~0.6 ms a step).
MUJOCO_ENVS = ["Hopper-v5", "HalfCheetah-v5", "Ant-v5", "Humanoid-v5", "HumanoidStandup-v5"]

#: The teaching env whose cost per step is a knob (vecenvs/envs/costly.py).
TEACHING_ENV = "vecenvs/Costly-v0"

#: The values of N the forms offer.
N_CHOICES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]

#: The icon of each job status (Streamlit's Material Symbols: no emoji font needed).
STATUS_ICONS = {"queued": ":material/hourglass_top:", "running": ":material/directions_run:",
                "done": ":material/check_circle:", "cancelled": ":material/block:",
                "failed": ":material/error:"}


def env_choices() -> list[str]:
    """The envs the forms offer: the classics, MuJoCo if installed, then the teaching env."""
    mujoco = MUJOCO_ENVS if importlib.util.find_spec("mujoco") is not None else []
    return [*CLASSIC_ENVS, *mujoco, TEACHING_ENV]


@st.cache_resource
def _queue(path: str) -> JobQueue:
    """One store connection and queue per store path, shared by every session of this server."""
    return JobQueue(ResultsStore(path))


def queue() -> JobQueue:
    """The job queue of the results store this dashboard uses (``$VECENVS_STORE`` or the
    default, as for ``python -m vecenvs bench``)."""
    return _queue(str(default_store_path()))


def cpus() -> int:
    """CPUs this process may use: what "N above the CPUs" means here."""
    return available_cpus()


def sidebar_status() -> None:
    """The queue at a glance, in the sidebar of every page."""
    jobs_queue = queue()
    unfinished = jobs_queue.jobs(unfinished=True)
    with st.sidebar:
        st.caption(f"Results store: `{jobs_queue.store.path}`")
        if not unfinished:
            st.caption("No benchmark running on this machine's queue.")
        for job in reversed(unfinished):
            st.caption(f"{STATUS_ICONS[job.status]} job {job.id} ({job.kind}): {job.status}")


def watched_job(kind: str) -> Job | None:
    """The job this page shows: ``?job=`` in the address, else this kind's newest job."""
    jobs_queue = queue()
    wanted = st.query_params.get("job")
    if wanted is not None:
        try:
            job = jobs_queue.get(int(wanted))
        except (ValueError, LookupError):
            st.warning(f"There is no job {wanted!r} in this results store; showing the newest.")
        else:
            if job.kind == kind:
                return job
    newest = [job for job in jobs_queue.jobs(limit=20) if job.kind == kind]
    return newest[0] if newest else None


def queue_job(submit: Callable[[], int], note: str = "") -> None:
    """Queue a job with ``submit`` (one of :class:`JobQueue`'s ``submit_*``) and watch it; a
    bad input (``ValueError``) is shown in the page instead, and nothing is queued."""
    try:
        job_id = submit()
    except ValueError as error:
        st.error(f"Not started: {error}")
        return
    st.query_params["job"] = str(job_id)  # reopening the page's address shows this job
    st.toast(f"Queued as job {job_id}{note}.")


def show_jobs(kind: str, render: Callable[[Job], None]) -> None:
    """Below a page's form: the job this page shows (see :func:`watched_job`), if any."""
    job = watched_job(kind)
    if job is not None:
        watch(job, render)


def watch(job: Job, render: Callable[[Job], None]) -> None:
    """Show ``job``'s status and ``render(job)``; redraw every second until it finishes.

    Only this part of the page is redrawn (a Streamlit fragment), so the form above keeps
    what the user is typing. When the job finishes, the whole page is redrawn once.
    """

    def draw() -> None:
        jobs_queue = queue()
        jobs_queue.store.fail_abandoned_runs()
        current = jobs_queue.get(job.id)
        if current.status == "queued" and not jobs_queue.runner_alive():
            jobs_queue.ensure_runner()  # its runner was stopped before taking it: start one
        status_line(current)
        render(current)
        if current.finished and not job.finished:
            st.rerun()  # stop polling; the page below the fragment may change too

    st.fragment(draw, run_every=None if job.finished else REFRESH_SECONDS)()


def status_line(job: Job) -> None:
    """Where the job is: queued behind whom, how far along, or how it ended; and Cancel."""
    jobs_queue = queue()
    title = f"{STATUS_ICONS[job.status]} Job {job.id}"
    if job.run_id is not None:
        title += f" · run {job.run_id}"
    if job.label:
        title += f" · {job.label}"
    st.markdown(f"**{title}**: {job.status}")
    message = job.progress.get("message", "")
    if job.status == "queued":
        ahead = jobs_queue.position(job.id)
        st.info(f"Queued: {ahead} job(s) ahead of this one on this machine. It starts as soon "
                "as they finish; measuring two things at once would spoil both."
                + (f" ({message})" if message else ""))
    elif job.status == "running":
        st.progress(job.fraction_done, text=message or "starting")
    elif job.status == "failed":
        error = job.run.error if job.run is not None else None
        st.error(f"The run failed: {error or 'see the runner log'}\n\n"
                 f"Runner log: `{jobs_queue.runner_log_path}`")
    elif job.status == "cancelled":
        st.warning("Cancelled. What was measured before that is kept below.")
    if not job.finished:
        if st.button("Cancel", key=f"cancel-{job.id}", help="Stop this job (at its next timed "
                     "window); the measurements so far are kept."):
            outcome = jobs_queue.cancel(job.id)
            st.toast({"dropped": "Removed from the queue.", "requested": "Stopping…",
                      "finished": "It had already finished."}[outcome])


def show_code(code: str, caption: str = "The same numbers from a script") -> None:
    """The few lines of vecenvs code behind a chart."""
    st.caption(caption)
    st.code(code, language="python")


def chart_and_code(figure, key: str, code: str, *, wide: bool = False) -> None:
    """A plotly chart with its code beside it; a ``wide`` chart (several panels) gets the whole
    width, and its code folds out right below it instead."""
    if wide:
        st.plotly_chart(figure, key=key, width="stretch")
        with st.expander("The same numbers from a script"):
            st.code(code, language="python")
        return
    chart, beside = st.columns([3, 2])
    with chart:
        st.plotly_chart(figure, key=key, width="stretch")
    with beside:
        show_code(code)


def format_rate(value: float | None) -> str:
    """``12,345`` env steps/s, or an em dash when there is no number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.0f}"


def read_text(path: str | None) -> str | None:
    """A file's text, or None if it is gone (profiles live in the store's directory)."""
    if not path or not Path(path).is_file():
        return None
    return Path(path).read_text(encoding="utf-8")
