"""Live comparison: measure backends side by side on envs you pick, and watch the charts fill in.

Pressing *Run* queues a sweep (``vecenvs.bench.run_sweep``); each point measured lands in the
results store, and the charts below are redrawn from the store once a second: throughput
against N with the machine's limit, the speed-up over the sequential loop, the efficiency,
and the fitted overhead model's curves beside the points.
"""

from __future__ import annotations

import common
import streamlit as st

from vecenvs.bench import Backend, EnvSpec, SweepConfig, env_grid, figures, fit_overhead_model
from vecenvs.bench.engine import DEFAULT_REFERENCE, Measurement
from vecenvs.bench.jobs import Job
from vecenvs.bench.snippets import sweep_code
from vecenvs.factory import available_backends, describe_backend

#: What the form starts with: cheap to run (~30 s), and already telling.
DEFAULT_ENVS = ["CartPole-v1"]
DEFAULT_BACKENDS = ["multi", "subproc", "pool"]
DEFAULT_N = [1, 4, 16, 64]
#: The pool's own choice of workers: min(CPUs, N).
AUTO = "auto"


def parse_step_times(text: str) -> list[float]:
    """``"10, 100, 1000"`` (microseconds) -> ``[1e-05, 1e-04, 1e-03]`` seconds.

    Raises:
        ValueError: naming the entry that is not a number of microseconds >= 0.
    """
    values = []
    for item in text.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            micros = float(item)
        except ValueError:
            raise ValueError(f"step time {item!r} is not a number; expected microseconds "
                             "separated by commas, e.g. 10, 100, 1000") from None
        if not 0 <= micros <= 1e6:
            raise ValueError(f"step time {item!r} us is out of range; expected 0 to 1000000 us")
        values.append(micros * 1e-6)
    if not values:
        raise ValueError("no step time given; expected microseconds, e.g. 10, 100, 1000")
    return values


def build_config(values: dict) -> SweepConfig:
    """The sweep the form describes. Raises ValueError naming a bad field."""
    if not values["envs"]:
        raise ValueError("pick at least one env")
    if not values["backends"]:
        raise ValueError("pick at least one backend")
    if not values["num_envs"]:
        raise ValueError("pick at least one N")
    envs: list[str | EnvSpec] = []
    for env_id in values["envs"]:
        if env_id == common.TEACHING_ENV:
            envs += env_grid(
                env_id, step_seconds=parse_step_times(values["step_micros"]),
                cost_kind=[values["cost_kind"]],
                step_spread=[values["step_spread"]],
                straggler_probability=[values["straggler_probability"]],
                straggler_factor=[values["straggler_factor"]],
            )
        else:
            envs.append(env_id)
    backends: list[str | Backend] = []
    for name in values["backends"]:
        if name == "pool":
            if not values["workers"]:
                raise ValueError("pick at least one number of pool workers")
            backends += [Backend("pool") if k == AUTO else Backend("pool", {"num_workers": k})
                         for k in values["workers"]]
        else:
            backends.append(name)
    return SweepConfig(
        envs=envs, num_envs=values["num_envs"], backends=backends,
        warmup_seconds=values["warmup_seconds"], measure_seconds=values["measure_seconds"],
        repeats=values["repeats"],
    )


def estimated_seconds(config: SweepConfig) -> float:
    """Roughly how long the sweep takes: warm-ups and windows (envs' start-up not counted)."""
    runs = len(config.points()) * len(config.backend_specs())
    return runs * config.warmup_seconds + config.windows * config.measure_seconds


def form() -> None:
    """The sweep form; on *Run*, queue the sweep and watch it."""
    cpus = common.cpus()
    backends = [name for name in available_backends() if name != DEFAULT_REFERENCE]
    with st.form("sweep"):
        left, middle, right = st.columns(3)
        with left:
            envs = st.multiselect("Environments", common.env_choices(), default=DEFAULT_ENVS,
                                  help="Cheapest first. The teaching env's cost is set below.")
            num_envs = st.multiselect(
                "Numbers of envs N", common.N_CHOICES, default=DEFAULT_N,
                help=f"This machine has {cpus} CPU(s): N above that is where one process per "
                "env falls behind.")
        with middle:
            chosen = st.multiselect(
                "Backends", backends, default=[b for b in DEFAULT_BACKENDS if b in backends],
                format_func=describe_backend,
                help=f"Each is compared with {DEFAULT_REFERENCE} (the sequential loop), "
                "measured in the same run.")
            workers = st.multiselect(
                "Pool workers K", [AUTO, *range(1, max(8, cpus) + 1)], default=[AUTO],
                help=f"{AUTO}: min(CPUs, N), the pool's default. Several values measure the "
                "pool once per K; a K above an N of the grid is refused.")
        with right:
            measure_seconds = st.select_slider(
                "Seconds per timed window", [0.1, 0.2, 0.3, 0.5, 1.0, 2.0], value=0.3)
            repeats = st.slider("Timed windows per backend", 1, 10, 3)
            warmup_seconds = st.select_slider("Warm-up seconds", [0.0, 0.1, 0.2, 0.5, 1.0],
                                              value=0.2)
        with st.expander(f"Teaching env knobs (for {common.TEACHING_ENV})"):
            knob_left, knob_right = st.columns(2)
            with knob_left:
                step_micros = st.text_input(
                    "Step time, microseconds (several, comma-separated, make a grid)",
                    "10, 100, 1000")
                cost_kind = st.radio("The step's time is spent", ["busy", "sleep"],
                                     horizontal=True,
                                     help="busy: computing (competes for CPUs); sleep: waiting "
                                     "(parallelises even on one core)")
            with knob_right:
                step_spread = st.slider("Spread of the step time (relative)", 0.0, 2.0, 0.0)
                straggler_probability = st.slider("Straggler probability per step",
                                                  0.0, 0.2, 0.0, step=0.01)
                straggler_factor = st.slider("A straggler step is this many times slower",
                                             1.0, 100.0, 10.0)
        label = st.text_input("Label (optional)", max_chars=80,
                              placeholder="e.g. laptop on battery")
        submitted = st.form_submit_button("Run", type="primary")
    if not submitted:
        return
    values = dict(
        envs=envs, num_envs=num_envs, backends=chosen, workers=workers,
        measure_seconds=measure_seconds, repeats=repeats, warmup_seconds=warmup_seconds,
        step_micros=step_micros, cost_kind=cost_kind, step_spread=step_spread,
        straggler_probability=straggler_probability, straggler_factor=straggler_factor,
    )
    try:
        config = build_config(values)
    except ValueError as error:
        st.error(f"Not started: {error}")
        return
    common.queue_job(lambda: common.queue().submit_sweep(config, label=label.strip() or None),
                     f" (about {estimated_seconds(config):.0f} s of measuring)")


def measurements_of(job: Job) -> list[Measurement]:
    """The job's measurements saved so far, as Measurements."""
    if job.run_id is None:
        return []
    rows = common.queue().store.measurements([job.run_id])
    return [Measurement.from_dict(row["data"]) for row in rows]


def results(job: Job) -> None:
    """Charts and table of whatever the job has measured so far, each beside its code."""
    measurements = measurements_of(job)
    if not measurements:
        if job.status in ("queued", "running"):
            st.caption("The charts appear as soon as the first point is measured.")
        return
    cpus = (job.run.machine.get("usable_cpus") if job.run else None) or common.cpus()
    try:
        model = fit_overhead_model(measurements, cpus=cpus)
    except ValueError:  # e.g. only the reference measured so far
        model = None
    charts = [
        ("throughput", figures.throughput_figure(measurements, model, cpus=cpus)),
        ("speedup", figures.speedup_figure(measurements, model, cpus=cpus)),
    ]
    if model is not None:
        charts.append(("efficiency", figures.efficiency_figure(measurements, model)))
    wide = len({m.config.env_label for m in measurements}) > 1  # one panel per env
    for name, figure in charts:
        common.chart_and_code(figure, f"{name}-{job.id}", sweep_code(job.settings, name),
                              wide=wide)
    st.subheader("Measurements")
    st.table([{
        "env": m.config.env_label,
        "N": m.config.num_envs,
        "backend": m.config.backend_label,
        "env steps/s": common.format_rate(m.mean),
        "± std": common.format_rate(m.std),
        f"speed-up over {DEFAULT_REFERENCE}": "—" if m.ratio is None else f"{m.ratio:.2f}x",
    } for m in measurements])
    if model is not None:
        table, code = st.columns([3, 2])  # a text table, not a chart: beside its code
        with table:
            st.subheader("Overhead model")
            st.caption("One step() of N envs on c CPUs takes N·t_env/c + t_os "
                       "(vecenvs/bench/model.py explains the fit).")
            st.code(model.format_table(), language=None)
        with code:
            common.show_code(sweep_code(job.settings, "model"))


st.title("Live comparison")
st.caption("Which way of stepping N envs is fastest on this machine, and why. Each backend is "
           f"timed in windows interleaved with {DEFAULT_REFERENCE} (the plain loop), so every "
           "speed-up is measured against a loop run a moment before on the same machine.")
form()
common.show_jobs("sweep", results)
