"""What the dashboard's pages share: the results store, the job queue, and how a job is shown.

The pages never measure anything themselves. They put a job in the queue
(:mod:`vecenvs.bench.jobs`); a runner process measures it into the results store, which the
pages read again every two seconds while the job runs. So two tabs pressing *Run* are queued
one behind the other, and closing the tab loses nothing: the job's id is in the page's address
(``?job=12``), and reopening it shows the same job.

Text that did not come from this code (a label, an env id or an error read from the store,
anything typed) is shown as text: escaped where Streamlit reads Markdown (:func:`plain`), in
tables that never read it (:func:`table`). A label such as ``![x](http://elsewhere/pixel.png)``
must not make every browser that opens the page fetch it.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from vecenvs.bench import ResultsStore, StoreError, default_store_path
from vecenvs.bench.jobs import Job
from vecenvs.bench.machine import machine_load
from vecenvs.cpus import available_cpus
from vecenvs.envspec import CHECK_SECONDS, CheckProgress, reporting_checks
from vecenvs.factory import BACKENDS, available_backends
from vecenvs.lab import LabQueue

#: How often a page showing an unfinished job reads the store again, in seconds: each redraw
#: costs the machine being measured a little CPU.
REFRESH_SECONDS = 2.0
#: How often the sidebar looks at the queue again, in seconds.
SIDEBAR_REFRESH_SECONDS = 5.0

#: The envs the forms offer, cheapest first (CartPole ~11 us a step on our 2-core VM,
#: HumanoidStandup ~0.6 ms; MuJoCo's only when installed), and the teaching env whose cost per
#: step is a knob (vecenvs/envs/costly.py).
CLASSIC_ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1"]
MUJOCO_ENVS = ["Hopper-v5", "HalfCheetah-v5", "Ant-v5", "Humanoid-v5", "HumanoidStandup-v5"]
TEACHING_ENV = "vecenvs/Costly-v0"

N_CHOICES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]

#: The icon of each job status (Streamlit's Material Symbols: no emoji font needed).
STATUS_ICONS = {
    "queued": ":material/hourglass_top:",
    "running": ":material/directions_run:",
    "done": ":material/check_circle:",
    "cancelled": ":material/block:",
    "failed": ":material/error:",
}

CANCELLED = {
    "dropped": "Removed from the queue.",
    "requested": "Stopping…",
    "finished": "It had already finished.",
}

#: Each page: its file in views/ (and its address), its title, its Material icon, and the kind
#: of job it shows. The first is the default.
PAGES = [
    ("compare", "Live comparison", "monitoring", "sweep"),
    ("profile", "Profile", "local_fire_department", "profile"),
    ("autotune", "Autotune", "tune", "autotune"),
    ("train", "Train", "school", "train"),
    ("history", "History", "history", None),
    ("machine", "Machine", "memory", None),
]

#: The page that shows each kind of job, and its title.
JOB_PAGES = {kind: (f"views/{name}.py", title) for name, title, _, kind in PAGES if kind}

LOOPBACK = ("localhost", "127.0.0.1", "::1")

#: SQLite's largest row id: a ``?job=`` above it is not a job number.
_LARGEST_ID = 2**63 - 1

#: What Markdown could read as markup (CommonMark lets a backslash escape each), Streamlit's
#: own ``:`` (``:red[...]``, ``:material/...:``) and ``$`` (LaTeX). With ``:`` and ``.``
#: escaped, addresses are not turned into links either.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")

#: Where GitHub-flavoured Markdown starts a bare link: ``http://`` (its ``:`` escaped by
#: then), ``www`` and ``@``.
_BARE_LINK = re.compile(r"\\?:/|www|@", re.IGNORECASE)


def plain(text: object) -> str:
    """``text`` escaped for Streamlit's Markdown: nothing in it is read as a link, an image, a
    colour, an icon or LaTeX. Backslashes do not stop GitHub's bare links (``http://...``,
    ``www.``, ``a@b.c``), found after parsing: an invisible word joiner inside each does."""
    escaped = _MARKDOWN.sub(r"\\\1", str(text)).replace("\n", "  \n")
    return _BARE_LINK.sub(lambda match: match.group(0) + "\u2060", escaped)


def table(rows: Iterable[Mapping[str, Any]]) -> None:
    """A table of ``rows``. ``st.dataframe`` shows cells as text (``st.table`` reads Markdown
    in them), so labels and ids from the store can be shown as they are."""
    st.dataframe(list(rows), hide_index=True, width="stretch", height="content")


def text_table(rows: Iterable[Mapping[str, Any]]) -> None:
    """A small table whose cells are text in the page itself (``st.table``: it wraps long
    cells and prints as it is shown, where ``st.dataframe`` draws a canvas), every cell
    escaped with :func:`plain`, since ``st.table`` reads Markdown in them."""
    escaped = [{name: plain(value) for name, value in row.items()} for row in rows]
    st.table(escaped, hide_index=True)


def number(value: float | None, spec: str = ",.0f", suffix: str = "") -> str:
    """``value`` formatted (``12,345`` env steps/s by default), or an em dash for no number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:{spec}}{suffix}"


def parse_step_times(text: str) -> list[float]:
    """``"10, 100, 1000"`` (microseconds) -> ``[1e-05, 0.0001, 0.001]`` seconds, or a
    ``ValueError`` naming the entry that is not a number of microseconds from 0 to 1e6.

    Divided by 1e6 rather than multiplied by 1e-6: 100 * 1e-6 is 9.999999999999999e-05, and
    that number would then name the env in every table and chart.
    """
    values = []
    for item in filter(None, (part.strip() for part in text.replace(";", ",").split(","))):
        try:
            micros = float(item)
        except ValueError:
            raise ValueError(
                f"step time {item[:40]!r} is not a number; expected microseconds "
                "separated by commas, e.g. 10, 100, 1000"
            ) from None
        if not 0 <= micros <= 1e6:  # also refuses nan
            raise ValueError(
                f"step time {item[:40]!r} us is out of range; expected 0 to 1000000 us"
            )
        values.append(micros / 1e6)
    if not values:
        raise ValueError("no step time given; expected microseconds, e.g. 10, 100, 1000")
    return values


def env_choices() -> list[str]:
    mujoco = MUJOCO_ENVS if importlib.util.find_spec("mujoco") is not None else []
    return [*CLASSIC_ENVS, *mujoco, TEACHING_ENV]


def missing_peers() -> str | None:
    """One line naming the backends whose libraries are not installed and how to add them
    (`make peers`), or None when every one is installed."""
    missing = [name for name in BACKENDS if name not in available_backends()]
    if not missing:
        return None
    return (
        f"Not installed here: {', '.join(missing)}. `make peers` adds them (Stable-Baselines3 "
        "with torch, Ray and EnvPool); restart the dashboard afterwards."
    )


def teaching_knobs(
    step_label: str,
    step_default: str,
    *,
    spread: bool = False,
    start: Mapping[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The teaching env's knobs, folded: the step time(s) in microseconds as typed (for
    :func:`parse_step_times`), and the env's other arguments; ``start``: the arguments a job
    was run with, which the knobs show (else their defaults)."""
    start = start or {}
    with st.expander(f"Teaching env knobs (for {TEACHING_ENV})"):
        left, right = st.columns(2)
        step_micros = left.text_input(step_label, step_default)
        kinds = ["busy", "sleep"]
        knobs: dict[str, Any] = {
            "cost_kind": left.radio(
                "The step's time is spent",
                kinds,
                index=kinds.index(start["cost_kind"]) if start.get("cost_kind") in kinds else 0,
                horizontal=True,
                help="busy: computing (competes for CPUs); sleep: waiting "
                "(parallelises even on one core)",
            )
        }
        if spread:
            knobs["step_spread"] = right.slider(
                "Spread of the step time (relative)",
                0.0,
                2.0,
                _within(start.get("step_spread"), 0.0, 0.0, 2.0),
            )
        knobs["straggler_probability"] = right.slider(
            "Straggler probability per step",
            0.0,
            0.2,
            _within(start.get("straggler_probability"), 0.0, 0.0, 0.2),
            step=0.01,
        )
        knobs["straggler_factor"] = right.slider(
            "A straggler step is this many times slower",
            1.0,
            400.0,
            _within(start.get("straggler_factor"), 10.0, 1.0, 400.0),
        )
    return step_micros, knobs


#: What the "Your env" field takes, said beside it.
USER_ENV_HELP = (
    "Your own env, named as gymnasium names envs: a registered id (Taxi-v3), "
    "module:EnvId (mycart:MyCart-v0: the module is imported on this machine, so it must be "
    "installed or on the dashboard's PYTHONPATH), or an entry point package.module:Class. It "
    "is made, reset and stepped once before the job is queued, and what it returns compared "
    "with its spaces: a broken env is refused in one line. Filled in, it is measured besides "
    "(Live comparison) or instead of (Profile, Autotune, Train) the env picked above."
)
#: What the "Check timeout" field is for.
CHECK_TIMEOUT_HELP = (
    "How long the check of the env may take, in seconds: it is made, reset and stepped once, "
    "in a process of its own, before the job is queued (and again when it runs). Raise it for "
    "an env that is slow to build."
)
#: The longest env name and argument text the fields take: a name, not a program.
USER_ENV_MAX_CHARS = 200


def user_env_fields(
    container: Any,
    start_env: str = "",
    start_kwargs: Mapping[str, Any] | None = None,
    start_timeout: Any = None,
) -> tuple[str, str, float]:
    """The "Your env" field, its arguments' field, as typed, and the check's timeout
    (``start_*``: a stored job's, shown, never imported: only pressing the form's button makes
    the page resolve a name). Pressing Enter in them does not press the button: the forms
    holding them are made with ``enter_to_submit=False`` (:func:`form`)."""
    env = container.text_input(
        "Your env (optional)",
        value=start_env[:USER_ENV_MAX_CHARS],
        max_chars=USER_ENV_MAX_CHARS,
        placeholder="mycart:MyCart-v0",
        help=USER_ENV_HELP,
    )
    arguments = container.text_input(
        "Your env's arguments (optional)",
        value=", ".join(f"{key}={value!r}" for key, value in (start_kwargs or {}).items()),
        max_chars=USER_ENV_MAX_CHARS,
        placeholder="physics_steps=1000, dt=0.01",
        help="Keyword arguments for your env, as in Python: key=value, comma-separated; a "
        "value that is not a Python literal is taken as text.",
    )
    timeout = container.number_input(
        "Check timeout, seconds",
        min_value=1.0,
        max_value=MAX_CHECK_SECONDS,
        value=_within(start_timeout, CHECK_SECONDS, 1.0, MAX_CHECK_SECONDS),
        step=10.0,
        format="%g",
        help=CHECK_TIMEOUT_HELP,
    )
    return env.strip(), arguments, float(timeout)


#: The longest check the field allows: an hour.
MAX_CHECK_SECONDS = 3600.0


def form(key: str) -> Any:
    """``st.form(key)`` whose text fields do not submit it on Enter: a user typing their env's
    name and pressing Enter has not finished (its arguments come next), and Enter started a
    run before they were typed."""
    return st.form(key, enter_to_submit=False)


class CheckShown:
    """Shows where the check of an env stands while the page waits for it (making it, reset,
    a step: :func:`vecenvs.envspec.reporting_checks`), in a place of its own above the job
    below: the check of a slow env takes seconds, and the page used to show nothing new."""

    def __init__(self) -> None:
        self.place = st.empty()

    def __call__(self, progress: CheckProgress) -> None:
        self.place.info(
            f"Checking {plain(progress.env)} before queueing it: {plain(progress.phase)} "
            f"({progress.elapsed_seconds:.0f} s of at most {progress.timeout:g} s).",
            icon=":material/hourglass_top:",
        )

    def clear(self) -> None:
        self.place.empty()


def parse_env_arguments(text: str) -> dict[str, Any]:
    """``"physics_steps=1000, mode=fast"`` -> ``{"physics_steps": 1000, "mode": "fast"}``.

    Read with Python's parser and ``ast.literal_eval``, never evaluated: ValueError naming
    what is not ``key=value``.
    """
    text = text.strip()
    if not text:
        return {}
    if len(text) > USER_ENV_MAX_CHARS:
        raise ValueError(
            f"your env's arguments are {len(text)} characters; at most {USER_ENV_MAX_CHARS}"
        )
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ValueError(
            f"your env's arguments {text!r}: expected key=value pairs, comma-separated"
        ) from None
    if not isinstance(call, ast.Call) or call.args or any(k.arg is None for k in call.keywords):
        raise ValueError(
            f"your env's arguments {text!r}: expected key=value pairs, comma-separated"
        )
    arguments: dict[str, Any] = {}
    for keyword in call.keywords:
        try:
            arguments[str(keyword.arg)] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            if not isinstance(keyword.value, ast.Name):
                raise ValueError(
                    f"your env's argument {keyword.arg}: expected a Python literal (1000, 0.5, "
                    "True, 'text') or a bare word"
                ) from None
            arguments[str(keyword.arg)] = keyword.value.id  # mode=fast: the text "fast"
    return arguments


def is_user_env(env_id: str) -> bool:
    """Whether a stored job's env goes in the "Your env" field rather than the list."""
    return env_id not in env_choices()


def _within(value: Any, default: float, low: float, high: float) -> float:
    """A job's knob for a slider from ``low`` to ``high``: held to them (a job queued from
    Python may have gone beyond), ``default`` when it is not a number."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return default
    return float(min(max(value, low), high))


def label_and_button(
    button: str, placeholder: str | None = None, start: str | None = None
) -> tuple[str | None, bool]:
    """The end of every form: the run's label (None if blank; ``start``: a job's, to run it
    again under the same name), and whether it was submitted."""
    label = st.text_input(
        "Label (optional)", value=(start or "")[:80], max_chars=80, placeholder=placeholder
    )
    return label.strip() or None, st.form_submit_button(button, type="primary")


@st.cache_resource
def _queue(path: str) -> LabQueue:
    # One store connection and queue per store path, shared by every session of this server.
    return LabQueue(ResultsStore(path))


def queue() -> LabQueue:
    """The queue of the results store (``$VECENVS_STORE`` or the default, as for the CLI)."""
    return _queue(str(default_store_path()))


def cpus(job: Job | None = None) -> int:
    """CPUs this process may use: what "N above the CPUs" means here; for a ``job`` that has
    run, those of the machine it ran on."""
    ran_on = job.run.machine.get("usable_cpus") if job is not None and job.run else None
    return ran_on or available_cpus()


def measured(job: Job) -> list[dict[str, Any]]:
    if job.run_id is None:
        return []
    return [row["data"] for row in queue().store.measurements([job.run_id])]


def refuse_unless_loopback() -> None:
    """Stop every page when the server listens beyond this machine: it starts processes and
    runs a profiler. Its config says ``localhost``; this catches an address given otherwise."""
    address = st.get_option("server.address")
    if address not in LOOPBACK:
        st.error(
            f"This dashboard listens on {plain(address or 'every network interface')}, "
            "not only on this machine, and it starts processes and runs a profiler: it "
            "will not run like that. Start it with `--server.address=localhost` (the "
            "default of `make dashboard` and `streamlit run dashboard/app.py`)."
        )
        st.stop()


@st.fragment(run_every=SIDEBAR_REFRESH_SECONDS)
def queue_status() -> None:
    """The queue at a glance, in every page's sidebar; a fragment that refreshes itself, so it
    sees a run started after the page was drawn."""
    jobs_queue = queue()
    unfinished = jobs_queue.jobs(unfinished=True)
    st.caption(f"Results store: {plain(jobs_queue.store.path)}")
    if not unfinished:
        st.caption("No benchmark queued or running on this machine's queue.")
    for job in reversed(unfinished):
        text = f"{STATUS_ICONS[job.status]} job {job.id} ({job.kind}): {job.status}"
        if job.kind in JOB_PAGES:
            st.page_link(JOB_PAGES[job.kind][0], label=text, query_params={"job": job.id})
        else:
            st.caption(text)


def watched_job(kind: str) -> Job | None:
    """The job this page shows: ``?job=`` in the address, else this kind's newest job.

    A ``?job=`` that is not a job number, names no job, or names a job of another kind gets a
    message (and a link to the right page), never a traceback nor another job.
    """
    jobs_queue = queue()
    wanted = st.query_params.get("job")
    if wanted is None:
        newest = [job for job in jobs_queue.jobs(limit=20) if job.kind == kind]
        return newest[0] if newest else None
    text = str(wanted).strip()
    if not text.isdecimal() or not 0 < int(text) <= _LARGEST_ID:
        st.warning(
            f"The address asks for job {plain(repr(text[:60]))}, which is not a job "
            "number (a whole number such as ?job=12). Nothing is shown."
        )
        return None
    try:
        job = jobs_queue.get(int(text))
    except StoreError:
        st.warning(f"There is no job {int(text)} in this results store. Nothing is shown.")
        return None
    if job.kind != kind:
        page, title = JOB_PAGES.get(job.kind, (None, job.kind))
        st.warning(
            f"Job {job.id} is {_article(job.kind)} {plain(job.kind)} job, shown on the "
            f"{plain(title)} page, not here."
        )
        if page is not None:
            st.page_link(
                page, label=f"Open job {job.id} on the {title} page", query_params={"job": job.id}
            )
        return None
    return job


def queue_job(submit: Callable[[], int]) -> int | None:
    """Queue a job with ``submit`` (a :class:`LabQueue` ``submit_*``); return its id, the
    address (``?job=``) now naming it, or None when it was refused.

    A ``ValueError`` is shown instead, and nothing queued. A double click queues one job. If
    other programs keep the machine busy, the job keeps a note of it, which its page shows
    whenever it is opened: numbers measured then are low.
    """
    jobs_queue = queue()
    before = {job.id for job in jobs_queue.jobs(unfinished=True)}
    # Not while our own jobs run: they are what keeps the machine busy then.
    load = None if before else machine_load(0.5)
    shown = CheckShown()
    try:
        with reporting_checks(shown):
            job_id = submit()
    except ValueError as error:
        st.error(f"Not started: {plain(error)}")
        return None
    finally:
        shown.clear()
    st.query_params["job"] = str(job_id)  # reopening the page's address shows this job
    if job_id in before:  # said by the job's status line, after the page is drawn again
        st.session_state[f"flash-{job_id}"] = (
            f"Already queued as job {job_id}: the same run was asked for a moment ago "
            "(a double click?), so it is not queued twice."
        )
    elif load is not None and load.busy:
        jobs_queue.add_notes(
            job_id, {"busy": {"others_share": load.others_share, "cpus": load.cpus}}
        )
    return job_id


def show_job(
    job: Job | None,
    render: Callable[[Job], None],
    describe: Callable[[Job], list[tuple[str, str]]] | None = None,
) -> None:
    """Below a page's form: the job it shows (:func:`watched_job`), if any: its status, its
    settings (``describe(job)``: (name, value) pairs), *Run again*, and ``render(job)``,
    redrawn until it finishes. Only this fragment is redrawn, so the form above keeps what the
    user is typing."""
    if job is None:
        return
    watched: Job = job

    def draw() -> None:
        jobs_queue = queue()
        jobs_queue.store.fail_abandoned_runs()
        current = jobs_queue.get(watched.id)
        if current.status == "queued" and not jobs_queue.runner_alive():
            jobs_queue.ensure_runner()  # its runner was stopped before taking it: start one
        flash = st.session_state.pop(f"flash-{current.id}", None)
        if flash:
            st.info(flash)
        status_line(current)
        # What the job was asked to do, so that a reopened job describes itself.
        settings = (describe or settings_in_words)(current)
        st.caption("Settings of this run: " + plain(" · ".join(f"{k}: {v}" for k, v in settings)))
        render(current)
        if current.finished and not watched.finished:
            st.rerun()  # stop polling; the page below the fragment may change too

    st.fragment(draw, run_every=None if job.finished else REFRESH_SECONDS)()


#: Settings a job keeps that say how, not what: left out of its description.
_INTERNAL_SETTINGS = {
    "output_dir",
    "nonblocking",
    "start_timeout",
    "warmup_seconds",
    "seed",
    "check_timeout",
}


def settings_in_words(job: Job) -> list[tuple[str, str]]:
    """A job's settings, a flat dict, as (name, value) pairs: empty values and internal ones
    left out, the teaching env's step time in microseconds as the forms take it."""
    pairs = []
    for name, value in job.settings.items():
        if value in (None, {}, []) or name in _INTERNAL_SETTINGS:
            continue
        if name == "env_kwargs" and isinstance(value, dict):
            value = env_arguments(value)
        elif isinstance(value, dict):
            value = ", ".join(f"{key}={item}" for key, item in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        pairs.append((name.replace("_", " "), str(value)))
    return pairs


def env_arguments(kwargs: Mapping[str, Any]) -> str:
    """An env's arguments as a reader types them: ``step_seconds=1e-05`` is ``step time 10
    us``, as the forms ask for it."""
    parts = []
    for key, value in kwargs.items():
        if key == "step_seconds" and isinstance(value, (int, float)):
            parts.append(f"step time {micros(value)} us")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def micros(seconds: float) -> str:
    """``1e-05`` seconds -> ``"10"`` (microseconds, as typed in the forms)."""
    return f"{seconds * 1e6:.6g}"


def status_line(job: Job) -> None:
    """Where the job is (queued behind whom, how far along, how it ended), and Cancel."""
    jobs_queue = queue()
    title = f"{STATUS_ICONS[job.status]} Job {job.id}"
    if job.run_id is not None:
        title += f" · run {job.run_id}"
    if job.label:
        title += f" · {plain(job.label)}"
    st.markdown(f"**{title}**: {job.status}")
    message = job.progress.get("message", "")
    if job.status == "queued":
        st.info(
            f"Queued: {jobs_queue.position(job.id)} job(s) ahead of this one on this machine. "
            "It starts as soon as they finish; measuring two things at once would spoil both."
            + (f" ({plain(message)})" if message else "")
        )
    elif job.status == "running":
        started = datetime.fromisoformat(job.run.started_at) if job.run else None
        elapsed = (datetime.now(timezone.utc) - started).total_seconds() if started else 0.0
        st.progress(
            job.fraction_done, text=plain(f"{message or 'starting'} · {elapsed:.0f} s so far")
        )
    elif job.status == "failed":
        error = job.run.error if job.run is not None else None
        st.error(
            f"The run failed: {plain(error or 'see the runner log')}\n\n"
            f"Runner log: {plain(jobs_queue.runner_log_path)}"
        )
    elif job.status == "cancelled":
        st.warning("Cancelled. What was measured before that is kept below.")
    busy = job.notes.get("busy")
    if busy:
        st.warning(
            f"The machine was busy when this job was queued: other programs took "
            f"{busy['others_share']:.0%} of the {busy['cpus']} CPU(s) it may use. Numbers "
            "measured beside them are lower and noisier than on a quiet machine; close "
            "them, or measure again later."
        )
    if not job.finished and st.button(
        "Cancel",
        key=f"cancel-{job.id}",
        help="Stop this job (at its next timed window); the measurements so far are kept.",
    ):
        st.toast(CANCELLED[jobs_queue.cancel(job.id)])
    if job.finished and st.button(
        "Run again",
        key=f"again-{job.id}",
        help="Queue the same job again, with the same settings and label.",
    ):
        again = queue_job(lambda: jobs_queue.submit(job.kind, job.settings, job.label))
        if again is not None:
            st.rerun()  # the page shows the new job (the address names it now)


def _article(word: str) -> str:
    """``"an"`` before a vowel (an autotune job), else ``"a"``."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def beside_code(code: str, *, wide: bool = False) -> DeltaGenerator:
    """The place for a chart or a table, with the vecenvs code behind it beside it, or folded
    below if ``wide``."""
    caption = "The same numbers from a script"
    # Wrapped: a long line cut off at the right edge hides the argument that matters.
    if wide:
        place = st.container()
        st.expander(caption).code(code, language="python", wrap_lines=True)
        return place
    place, beside = st.columns([3, 2])
    beside.caption(caption)
    beside.code(code, language="python", wrap_lines=True)
    return place


def chart(figure: Any, key: str, code: str, *, wide: bool = False) -> None:
    beside_code(code, wide=wide).plotly_chart(figure, key=key, width="stretch")


def project_file(path: str | None, folder: Path) -> Path | None:
    """``path`` if it is a file under ``folder`` (links resolved), else None: paths come from
    the store, which anyone may edit, and ``/etc/passwd`` is not offered because a run says so."""
    if not path:
        return None
    try:
        resolved = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return resolved if resolved.is_file() and resolved.is_relative_to(folder.resolve()) else None
