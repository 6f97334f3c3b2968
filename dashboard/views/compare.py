"""Live comparison: measure backends side by side on envs you pick, and get an answer.

*Run* queues a sweep (``vecenvs.bench.run_sweep``). The answer comes first: a verdict table
(what to use at each env and N, by how much, how sure), then the charts and the numbers, each
beside the code that gives them. Every ratio on the page is the one :mod:`vecenvs.bench.ratios`
defines, so the verdict, the tables and the charts agree. A job reopened from its address
(``?job=12``) fills the form with its own settings.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import common
import plotly.graph_objects as go
import streamlit as st

from vecenvs.bench import (
    Backend,
    BenchEnv,
    SweepConfig,
    env_grid,
    figures,
    fit_overhead_model,
    ratios,
)
from vecenvs.bench.engine import (
    CEILING,
    DEFAULT_REFERENCE,
    Measurement,
    describe,
    in_words,
    measurable_backends,
    short_env_labels,
)
from vecenvs.bench.jobs import Job
from vecenvs.bench.ratios import ABOVE_CEILING, DISTURBED, measurement_row, relate
from vecenvs.bench.snippets import sweep_code
from vecenvs.bench.verdict import TOO_FEW, model_qualities, verdict_rows, verdicts
from vecenvs.envspec import CHECK_SECONDS

#: What the form starts with: cheap to run (~30 s), and already telling.
DEFAULT_ENVS = ["CartPole-v1"]
DEFAULT_BACKENDS = ["multi", "subproc", "pool", CEILING]
DEFAULT_N = [1, 4, 16, 64]
#: The pool's own choice of workers: min(CPUs, N).
AUTO = "auto"
#: The timing choices the form offers (a job measured otherwise adds its own).
MEASURE_SECONDS = [0.1, 0.2, 0.3, 0.5, 1.0, 2.0]
WARMUP_SECONDS = [0.0, 0.1, 0.2, 0.5, 1.0]
#: The teaching env's knobs as the form starts them.
STEP_MICROS = "10, 100, 1000"
#: Rough cost of starting a backend, and of each process it starts (fork, import, make the
#: env), for the time estimate: measuring starts only once they are all up.
STARTUP_SECONDS = 0.3
STARTUP_SECONDS_PER_PROCESS = 0.05
#: The charts of a sweep, each a ``*_figure`` of :mod:`vecenvs.bench.figures`.
FIGURES = ("throughput", "speedup", "efficiency")
#: How to read the verdict table, below it.
VERDICT_HELP = (
    "use: the fastest backend, when the paired windows say so. x {reference}: its "
    "throughput over the loop's; x runner-up: over the second fastest's; of ceiling: over "
    "the ceiling's ('?' when a check flags it), all from the measurements below. "
    "Confidence: clear = faster in every one of 3+ paired windows, by 5%+; likely = in most "
    "of them; tie = within 5%; noisy = the windows disagree more than the backends differ; "
    "suspect = the loop's own windows disagree, so every speed-up at that N is suspect; "
    "one window = nothing to judge by."
)


def build_config(values: dict) -> SweepConfig:
    """The sweep the form describes. Raises ValueError naming a bad field."""
    if not values["envs"] and not values["user_env"]:
        raise ValueError("pick at least one env, or type yours")
    for field, what in (("backends", "backend"), ("num_envs", "N")):
        if not values[field]:
            raise ValueError(f"pick at least one {what}")
    envs: list[str | BenchEnv] = []
    for env_id in values["envs"]:
        if env_id == common.TEACHING_ENV:  # a grid over the step times, the knobs as they are
            step_seconds = common.parse_step_times(values["step_micros"])
            knobs = {name: [value] for name, value in values["knobs"].items()}
            envs += env_grid(env_id, step_seconds=step_seconds, **knobs)
        else:
            envs.append(env_id)
    if values["user_env"]:  # resolved (its module imported) only when the sweep is queued
        envs.append(BenchEnv(values["user_env"], common.parse_env_arguments(values["user_args"])))
    backends: list[str | Backend] = []
    for name in values["backends"]:
        if name == "pool":
            if not values["workers"]:
                raise ValueError("pick at least one number of pool workers")
            backends += [
                Backend("pool") if k == AUTO else Backend("pool", {"num_workers": k})
                for k in values["workers"]
            ]
        else:
            backends.append(name)
    return SweepConfig(
        envs=envs,
        num_envs=values["num_envs"],
        backends=backends,
        warmup_seconds=values["warmup_seconds"],
        measure_seconds=values["measure_seconds"],
        repeats=values["repeats"],
        check_timeout=values.get("check_timeout", CHECK_SECONDS),
    )


def form_values(job: Job | None) -> dict[str, Any]:
    """What the form shows: the settings of the job on the page (so that a reopened job can
    be changed and run again), else the defaults."""
    values: dict[str, Any] = {
        "envs": DEFAULT_ENVS,
        "num_envs": DEFAULT_N,
        "backends": DEFAULT_BACKENDS,
        "workers": [AUTO],
        "measure_seconds": 0.3,
        "repeats": 3,
        "warmup_seconds": 0.2,
        "step_micros": STEP_MICROS,
        "knobs": {},
        "user_env": "",
        "user_kwargs": {},
        "check_timeout": CHECK_SECONDS,
    }
    if job is None:
        return values
    config = SweepConfig.from_dict(job.settings)
    envs = config.env_specs()
    backends = [b for b in config.backend_specs() if b.name != config.reference or b.kwargs]
    # A stored job's own env goes back in the "Your env" field, as text: shown, not imported.
    user = [env for env in envs if common.is_user_env(str(env.env_id))]
    envs = [env for env in envs if env not in user]
    teaching = [env for env in envs if env.env_id == common.TEACHING_ENV]
    steps = [env.kwargs["step_seconds"] for env in teaching if "step_seconds" in env.kwargs]
    values.update(
        envs=list(dict.fromkeys(env.env_id for env in envs)),
        num_envs=sorted(set(config.num_envs)),
        backends=list(dict.fromkeys(b.name for b in backends)),
        workers=[b.kwargs.get("num_workers", AUTO) for b in backends if b.name == "pool"] or [AUTO],
        measure_seconds=config.measure_seconds,
        repeats=config.repeats,
        warmup_seconds=config.warmup_seconds,
        step_micros=", ".join(dict.fromkeys(map(common.micros, steps))) or STEP_MICROS,
        knobs={k: v for k, v in (teaching[0].kwargs if teaching else {}).items()},
        user_env=str(user[0].env_id) if user else "",
        user_kwargs=dict(user[0].kwargs) if user else {},
        check_timeout=config.check_timeout,
    )
    return values


def with_value(options: list, value: Any) -> list:
    """``options`` with ``value`` among them (a job may have been queued from the CLI)."""
    return options if value in options else sorted([*options, value])


def worker_choices(cpus: int) -> list:
    """K the form offers: 1 to 8 (more than the CPUs, to see oversubscription), then powers of
    two up to the CPUs, and the CPUs: 13 choices on 128 CPUs, not 128."""
    powers = {2**i for i in range(3, cpus.bit_length()) if 2**i <= cpus}
    return [AUTO, *sorted({*range(1, 9), *powers, cpus})]


def estimated_seconds(config: SweepConfig, cpus: int) -> float:
    """Roughly how long the sweep takes: starting the backends' processes, warm-ups, windows."""
    backends = config.backend_specs()
    startup = 0.0
    for _, num_envs in config.points():
        processes = SweepConfig(["CartPole-v1"], [num_envs], backends).processes_at_once(cpus)
        startup += STARTUP_SECONDS * len(backends) + STARTUP_SECONDS_PER_PROCESS * processes
    runs = len(config.points()) * len(backends)
    return startup + runs * config.warmup_seconds + config.windows * config.measure_seconds


def form(job: Job | None) -> int | None:
    """The sweep's form, folded once a job is shown (results first), filled with that job's
    settings; returns the id of the job it queued, if any."""
    cpus = common.cpus()
    backends = [name for name in measurable_backends() if name != DEFAULT_REFERENCE]
    limit = max(128, 16 * cpus)  # more worker processes at once need the user's say-so
    start = form_values(job)
    heading = (
        "Settings: what to measure" if job is None else f"Settings of job {job.id}: change, Run"
    )
    values: dict = {}
    with (
        st.expander(heading, expanded=job is None, icon=":material/tune:"),
        common.form(f"sweep-{'new' if job is None else job.id}"),
    ):
        left, middle, right = st.columns(3)
        envs = common.env_choices()
        values["envs"] = left.multiselect(
            "Environments",
            envs + [env for env in start["envs"] if env not in envs],
            default=start["envs"],
            help="Cheapest first. The teaching env's cost is set below.",
        )
        values["user_env"], values["user_args"], values["check_timeout"] = common.user_env_fields(
            left, start["user_env"], start["user_kwargs"], start["check_timeout"]
        )
        values["num_envs"] = left.multiselect(
            "Numbers of envs N",
            sorted({*common.N_CHOICES, *start["num_envs"]}),
            default=start["num_envs"],
            help=f"This machine has {cpus} CPU(s): N above that is where one process per "
            "env falls behind.",
        )
        values["backends"] = middle.multiselect(
            "Backends",
            backends + [name for name in start["backends"] if name not in backends],
            default=start["backends"],
            format_func=describe,
            help=f"Each is compared with {DEFAULT_REFERENCE} (the loop), measured in the "
            "same run. The ceiling is not a backend: it is the machine's limit, measured "
            "the same way, and every row's efficiency is its share of it.",
        )
        if (missing := common.missing_peers()) is not None:
            middle.caption(missing)
        choices = worker_choices(cpus)
        values["workers"] = middle.multiselect(
            "Pool workers K",
            choices + [k for k in start["workers"] if k not in choices],
            default=start["workers"],
            help=f"{AUTO}: min(CPUs, N), the pool's default, never more workers than envs. "
            "Several values measure the pool once per K; a K above an N of the grid is refused.",
        )
        values["measure_seconds"] = right.select_slider(
            "Seconds per timed window",
            with_value(MEASURE_SECONDS, start["measure_seconds"]),
            value=start["measure_seconds"],
        )
        values["repeats"] = right.slider(
            "Timed windows per backend",
            1,
            max(10, start["repeats"]),
            start["repeats"],
            help="At least 2 to tell a real difference from noise, 3 for a clear call: the "
            "verdict compares backends window by window.",
        )
        values["warmup_seconds"] = right.select_slider(
            "Warm-up seconds",
            with_value(WARMUP_SECONDS, start["warmup_seconds"]),
            value=start["warmup_seconds"],
        )
        values["step_micros"], values["knobs"] = common.teaching_knobs(
            "Step time, microseconds (several, comma-separated, make a grid)",
            start["step_micros"],
            spread=True,
            start=start["knobs"],
        )
        allow_many = st.checkbox(
            f"Allow more than {limit} processes at once",
            help=f"One process per env at large N starts hundreds of processes on {cpus} "
            "CPU(s): slow to start, heavy on memory, and the machine is sluggish meanwhile.",
        )
        label, submitted = common.label_and_button(
            "Run", "e.g. laptop on battery", start=None if job is None else job.label
        )

    def submit() -> int:
        config = build_config(values)
        processes = config.processes_at_once(cpus)
        if processes > limit and not allow_many:
            raise ValueError(
                f"this would run {processes:,} worker processes at once on {cpus} CPU(s) (one "
                "per env for the one-process-per-env backends at the largest N, all backends "
                f'of a point open together). Tick "Allow more than {limit} processes at '
                'once" to run it anyway, or pick a smaller N.'
            )
        return common.queue().submit_sweep(config, label=label)

    return common.queue_job(submit) if submitted else None


def settings_of(job: Job) -> list[tuple[str, str]]:
    """The sweep's settings in words, for a reopened job: the env arguments all envs that take
    some share said once, the others beside each env, step times in microseconds."""
    config = SweepConfig.from_dict(job.settings)
    envs = config.env_specs()
    with_arguments = [env for env in envs if env.kwargs]
    shared = {
        key: value
        for key, value in (with_arguments[0].kwargs.items() if with_arguments else ())
        if all(key in env.kwargs and env.kwargs[key] == value for env in with_arguments)
    }
    names = []
    for env in envs:
        own = {key: value for key, value in env.kwargs.items() if key not in shared}
        names.append(env.env_id + (f" ({common.env_arguments(own)})" if own else ""))
    settings = [
        ("envs", ", ".join(dict.fromkeys(names))),
        ("N", ", ".join(map(str, sorted(set(config.num_envs))))),
        ("backends", ", ".join(backend.label for backend in config.backend_specs())),
        (
            "timing",
            f"{config.repeats} window(s) of {config.measure_seconds:g} s per backend "
            f"after {config.warmup_seconds:g} s of warm-up",
        ),
        ("estimate", f"about {estimated_seconds(config, common.cpus(job)):.0f} s"),
    ]
    if config.only is not None:
        settings.insert(2, ("only", ", ".join(f"{label} N={n}" for label, n in config.only)))
    if shared:
        settings.insert(1, ("env arguments", common.env_arguments(shared)))
    return settings


def results(job: Job) -> None:
    config = SweepConfig.from_dict(job.settings)
    # The numbers as vecenvs.bench.ratios defines them, also for a run stored before it did.
    measured = [Measurement.from_dict(data) for data in common.measured(job)]
    measurements = relate(measured, reference=config.reference)
    if not measurements:
        if job.status in ("queued", "running"):
            st.caption("The verdict and the charts appear as soon as the first point is measured.")
        return
    cpus = common.cpus(job)
    try:
        model = fit_overhead_model(measurements, cpus=cpus, reference=config.reference)
    except ValueError:  # e.g. only the reference measured so far
        model = None
    env_names = short_env_labels(m.config for m in measurements)
    show_verdict(job, measurements, model, env_names)
    which = (str(common.queue().store.path), job.id, len(measurements), job.status, cpus)
    for name in FIGURES:
        figure = sweep_figure(name, *which, measurements, model)
        wide = len(env_names) > 1  # one panel per env: the whole width
        common.chart(figure, f"{name}-{job.id}", sweep_code(job.settings, name), wide=wide)
    st.subheader("Measurements")
    st.caption(
        "Throughput: the median timed window. Every ratio on this page is of these "
        "throughputs: x the loop = this row's / the loop's at the same N, of ceiling = this "
        "row's / the ceiling's."
    )
    common.table(
        measurement_row(m, reference=config.reference, env_name=env_names[m.config.env_label])
        for m in measurements
    )
    if model is not None:
        with common.beside_code(sweep_code(job.settings, "model")):  # a text table, not a chart
            st.subheader("Overhead model")
            st.caption(
                "One step() of N envs takes N·t_env/c + t_os, c = min(workers, N, "
                "the ceiling's speed-up) (vecenvs/bench/model.py explains the fit)."
            )
            st.code(model.format_table(), language=None)


def show_verdict(
    job: Job, measurements: list[Measurement], model, env_names: dict[str, str]
) -> None:
    """The answer first: the verdict table, each backend in words, what a check flagged, what
    to do where the windows could not decide (one click), and how far to trust the model."""
    reference = SweepConfig.from_dict(job.settings).reference
    st.subheader("Verdict")
    found = verdicts(measurements, reference=reference)
    common.text_table(verdict_rows(found, env_names))
    families = dict.fromkeys(m.config.backend for m in measurements)
    st.caption(common.plain(VERDICT_HELP.format(reference=reference)))
    st.caption("The backends: " + common.plain(" · ".join(map(in_words, families))) + ".")
    flagged = [
        f"{env_names[m.config.env_label]}, N={m.config.num_envs}: {text}"
        for m in measurements
        for text in flags(m, reference)
    ]
    if flagged:
        st.warning(
            "Flagged, not results (measure again, on a quieter machine or with more "
            "windows):\n" + "\n".join(f"- {common.plain(text)}" for text in flagged[:8])
        )
    undecided = [verdict for verdict in found if verdict.windows_to_measure]
    if undecided and job.finished:
        windows = max(verdict.windows_to_measure or 0 for verdict in undecided)
        where = ", ".join(f"{env_names[v.env_label]} N={v.num_envs}" for v in undecided)
        st.info(
            f"No call yet at {common.plain(where)}: the windows disagreed more than the "
            f"backends differ. Measuring those points again with {windows} windows can decide."
        )
        if st.button(
            f"Measure {len(undecided)} point(s) again with {windows} windows",
            key=f"again-noisy-{job.id}",
            icon=":material/replay:",
        ):
            config = dataclasses.replace(
                SweepConfig.from_dict(job.settings),
                repeats=windows,
                only=[(verdict.env_label, verdict.num_envs) for verdict in undecided],
            )
            if common.queue_job(lambda: common.queue().submit_sweep(config, label=job.label)):
                st.rerun()
    if model is None:
        return
    qualities = model_qualities(model)
    poor = [quality.sentence for quality in qualities if quality.poor]
    if poor:
        st.warning("Overhead model:\n" + "\n".join(f"- {common.plain(text)}" for text in poor))
    fine = [quality.sentence for quality in qualities if not quality.poor]
    if fine:
        st.caption("Overhead model: " + common.plain(" ".join(fine)))
    if any(quality.word == TOO_FEW for quality in qualities):
        st.caption("Curves are drawn only for fits judged from enough points.")


def flags(measurement: Measurement, reference: str) -> list[str]:
    """What the checks say of a measurement that matters beyond its own row: a disturbed
    ceiling or reference (every ratio at that N leans on them), or a result above the
    ceiling. One line each, not one per backend."""
    checks, config = measurement.checks, measurement.config
    spread = f"its fastest window {ratios.spread(measurement):.1f}x its slowest"
    if config.backend == CEILING and DISTURBED in checks:
        return [f"the ceiling was disturbed ({spread}): no efficiency at this N is shown"]
    if config.backend_label == reference and DISTURBED in checks:
        name = "the loop" if reference == DEFAULT_REFERENCE else f"the reference, {reference},"
        return [f"{name} was disturbed ({spread}): every speed-up at this N is suspect"]
    if ABOVE_CEILING in checks:
        return [
            f"{config.backend_label} was faster than the ceiling, which none can be: the "
            "ceiling was measured low"
        ]
    return []


@st.cache_data(max_entries=32, show_spinner=False)
def sweep_figure(name, store, job_id, count, status, cpus, _measurements, _model) -> go.Figure:
    """One of the :data:`FIGURES`, built once per new measurement of a job (the arguments
    without ``_`` say which), not at each redraw."""
    return getattr(figures, f"{name}_figure")(_measurements, _model, cpus=cpus)


st.caption(
    "Which way of stepping N envs is fastest on this machine, and why. Each backend is "
    f"timed in windows interleaved with {DEFAULT_REFERENCE} (the loop) and with the "
    "ceiling (what no vector env can beat), so every speed-up and efficiency is "
    "measured against runs a moment before on the same machine."
)
shown = common.watched_job("sweep")
# The form holds the settings of the job the address names, and stays the same form until
# the address changes: one that changed under the user's typing would lose what they typed.
if form(shown if "job" in st.query_params else None) is not None:
    st.rerun()  # the address names the new job: show it, the form folded with its settings
common.show_job(shown, results, settings_of)
