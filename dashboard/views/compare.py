"""Live comparison: measure backends side by side on envs you pick, and get an answer.

*Run* queues a sweep (``vecenvs.bench.run_sweep``); the verdict comes first, then the charts
and the numbers, each beside the code that gives them.
"""

from __future__ import annotations

import common
import plotly.graph_objects as go
import streamlit as st

from vecenvs.bench import Backend, BenchEnv, SweepConfig, env_grid, figures, fit_overhead_model
from vecenvs.bench.engine import (
    CEILING,
    DEFAULT_REFERENCE,
    BenchConfig,
    Measurement,
    describe,
    measurable_backends,
    short_env_labels,
)
from vecenvs.bench.jobs import Job
from vecenvs.bench.snippets import sweep_code
from vecenvs.bench.verdict import model_qualities, verdicts

#: What the form starts with: cheap to run (~30 s), and already telling.
DEFAULT_ENVS = ["CartPole-v1"]
DEFAULT_BACKENDS = ["multi", "subproc", "pool", CEILING]
DEFAULT_N = [1, 4, 16, 64]
#: The pool's own choice of workers: min(CPUs, N).
AUTO = "auto"
#: Rough cost of starting a backend, and of each process it starts (fork, import, make the
#: env), for the time estimate: measuring starts only once they are all up.
STARTUP_SECONDS = 0.3
STARTUP_SECONDS_PER_PROCESS = 0.05
#: The charts of a sweep, each a ``*_figure`` of :mod:`vecenvs.bench.figures`.
FIGURES = ("throughput", "speedup", "efficiency")


def build_config(values: dict) -> SweepConfig:
    """The sweep the form describes. Raises ValueError naming a bad field."""
    for field, what in (("envs", "env"), ("backends", "backend"), ("num_envs", "N")):
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
    )


def estimated_seconds(config: SweepConfig, cpus: int) -> float:
    """Roughly how long the sweep takes: starting the backends' processes, warm-ups, windows."""
    backends = config.backend_specs()
    startup = 0.0
    for _, num_envs in config.points():
        processes = SweepConfig(["CartPole-v1"], [num_envs], backends).processes_at_once(cpus)
        startup += STARTUP_SECONDS * len(backends) + STARTUP_SECONDS_PER_PROCESS * processes
    runs = len(config.points()) * len(backends)
    return startup + runs * config.warmup_seconds + config.windows * config.measure_seconds


def form() -> None:
    cpus = common.cpus()
    backends = [name for name in measurable_backends() if name != DEFAULT_REFERENCE]
    limit = max(128, 16 * cpus)  # more worker processes at once need the user's say-so
    values: dict = {}
    with st.form("sweep"):
        left, middle, right = st.columns(3)
        values["envs"] = left.multiselect(
            "Environments",
            common.env_choices(),
            default=DEFAULT_ENVS,
            help="Cheapest first. The teaching env's cost is set below.",
        )
        values["num_envs"] = left.multiselect(
            "Numbers of envs N",
            common.N_CHOICES,
            default=DEFAULT_N,
            help=f"This machine has {cpus} CPU(s): N above that is where one process per "
            "env falls behind.",
        )
        values["backends"] = middle.multiselect(
            "Backends",
            backends,
            default=[b for b in DEFAULT_BACKENDS if b in backends],
            format_func=describe,
            help=f"Each is compared with {DEFAULT_REFERENCE} (the loop), measured in the "
            "same run. The ceiling is not a backend: it is the machine's limit, measured "
            "the same way, and every row's efficiency is its share of it.",
        )
        if (missing := common.missing_peers()) is not None:
            middle.caption(missing)
        values["workers"] = middle.multiselect(
            "Pool workers K",
            [AUTO, *range(1, max(8, cpus) + 1)],
            default=[AUTO],
            help=f"{AUTO}: min(CPUs, N), the pool's default. Several values measure the "
            "pool once per K; a K above an N of the grid is refused.",
        )
        values["measure_seconds"] = right.select_slider(
            "Seconds per timed window", [0.1, 0.2, 0.3, 0.5, 1.0, 2.0], value=0.3
        )
        values["repeats"] = right.slider(
            "Timed windows per backend",
            1,
            10,
            3,
            help="At least 2 to tell a real difference from noise: the "
            "verdict compares backends window by window.",
        )
        values["warmup_seconds"] = right.select_slider(
            "Warm-up seconds", [0.0, 0.1, 0.2, 0.5, 1.0], value=0.2
        )
        values["step_micros"], values["knobs"] = common.teaching_knobs(
            "Step time, microseconds (several, comma-separated, make a grid)",
            "10, 100, 1000",
            spread=True,
        )
        allow_many = st.checkbox(
            f"Allow more than {limit} processes at once",
            help=f"One process per env at large N starts hundreds of processes on {cpus} "
            "CPU(s): slow to start, heavy on memory, and the machine is sluggish meanwhile.",
        )
        label, submitted = common.label_and_button("Run", "e.g. laptop on battery")

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

    if submitted:
        common.queue_job(submit)


def settings_of(job: Job) -> list[tuple[str, str]]:
    """The sweep's settings in words, for a reopened job."""
    config = SweepConfig.from_dict(job.settings)
    envs = config.env_specs()
    names = short_env_labels(BenchConfig(env.env_id, env_kwargs=dict(env.kwargs)) for env in envs)
    shared = {
        key: value
        for env in envs
        for key, value in env.kwargs.items()
        if all(other.kwargs.get(key) == value for other in envs)
    }
    settings = [
        ("envs", ", ".join(names.get(env.label, env.label) for env in envs)),
        ("N", ", ".join(map(str, sorted(set(config.num_envs))))),
        ("backends", ", ".join(backend.label for backend in config.backend_specs())),
        (
            "timing",
            f"{config.repeats} window(s) of {config.measure_seconds:g} s per backend "
            f"after {config.warmup_seconds:g} s of warm-up",
        ),
        ("estimate", f"about {estimated_seconds(config, common.cpus(job)):.0f} s"),
    ]
    if shared:
        settings.insert(1, ("every env with", ", ".join(f"{k}={v}" for k, v in shared.items())))
    return settings


def results(job: Job) -> None:
    measurements = [Measurement.from_dict(data) for data in common.measured(job)]
    if not measurements:
        if job.status in ("queued", "running"):
            st.caption("The verdict and the charts appear as soon as the first point is measured.")
        return
    cpus = common.cpus(job)
    try:
        model = fit_overhead_model(measurements, cpus=cpus)
    except ValueError:  # e.g. only the reference measured so far
        model = None
    env_names = short_env_labels(m.config for m in measurements)
    show_verdict(measurements, model, env_names)
    which = (str(common.queue().store.path), job.id, len(measurements), job.status, cpus)
    for name in FIGURES:
        figure = sweep_figure(name, *which, measurements, model)
        wide = len(env_names) > 1  # one panel per env: the whole width
        common.chart(figure, f"{name}-{job.id}", sweep_code(job.settings, name), wide=wide)
    st.subheader("Measurements")
    common.table(
        {
            "env": env_names[m.config.env_label],
            "N": m.config.num_envs,
            "backend": m.config.backend_label,
            "env steps/s": common.number(m.mean),
            "± std": common.number(m.std),
            f"x {DEFAULT_REFERENCE}": common.number(m.ratio, ".2f", "x"),
            "of ceiling": common.number(m.efficiency, ".0%"),
        }
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


def show_verdict(measurements: list[Measurement], model, env_names: dict[str, str]) -> None:
    """What to use at each N, and how far to trust the model: every word from the numbers."""
    st.subheader("Verdict")
    lines = []
    for verdict in verdicts(measurements):
        icon = ":material/balance:" if verdict.close else ":material/check_circle:"
        lines.append(f"- {icon} {common.plain(verdict.sentence(env_names[verdict.env_label]))}")
    st.markdown("\n".join(lines))
    if model is None:
        return
    qualities = model_qualities(model)
    poor = [quality.sentence for quality in qualities if quality.poor]
    if poor:
        st.warning("Overhead model:\n" + "\n".join(f"- {common.plain(text)}" for text in poor))
    fine = [quality.sentence for quality in qualities if not quality.poor]
    if fine:
        st.caption("Overhead model: " + common.plain(" ".join(fine)))


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
form()
common.show_job("sweep", results, settings_of)
