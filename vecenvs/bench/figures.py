"""Charts of the measurements and of the overhead model, as plotly figures.

The notebooks and the dashboard draw the same charts from the same functions, so a chart means
the same thing wherever it is seen: the seed post's grid of bars (:func:`seeds_figure`), one
measure against N with the machine's limit and the model's curves (:func:`metric_figure` and
its three faces :func:`throughput_figure`, :func:`speedup_figure`, :func:`efficiency_figure`),
several stored runs overlaid (:func:`runs_figure`) and autotune's candidates
(:func:`autotune_figure`).

Made to be read at a glance: panels are named by the env's id plus only the arguments that
differ between the envs shown, at most three panels side by side, legends below the panels,
log axes labelled at a few round values. Every name that comes from data is escaped, so a
label in a results store is shown as typed, never read as markup.

They are pure functions of the data (the dashboard redraws by calling them again as results
arrive): the order of envs, backends and traces depends only on the data, never on the order
results arrived in, and where one configuration (env, N, backend) was measured more than once
the last measurement is drawn. Colours are per backend family (every ``pool (...)`` a shade of
green), the same in every chart.

Example:
    >>> from vecenvs.bench import QUICK, compare
    >>> from vecenvs.bench.figures import throughput_figure
    >>> from vecenvs.bench.model import fit_overhead_model
    >>> results = compare("CartPole-v1", 2, ["pool"], **QUICK)
    >>> figure = throughput_figure(results, fit_overhead_model(results))
    >>> figure.write_html("throughput.html")  # doctest: +SKIP
"""

from __future__ import annotations

import html
import math
import re
import textwrap
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plotly import graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from vecenvs.bench import ratios
from vecenvs.bench.engine import (
    CEILING,
    DEFAULT_REFERENCE,
    BenchConfig,
    Measurement,
    in_words,
    short_env_labels,
)
from vecenvs.bench.model import OverheadModel, check_cpus, env_step_seconds, native_backends
from vecenvs.bench.verdict import fit_quality
from vecenvs.factory import BACKEND_INFO

__all__ = [
    "BACKEND_COLORS",
    "CASES",
    "METRICS",
    "autotune_figure",
    "backend_colors",
    "display_label",
    "efficiency_figure",
    "metric_figure",
    "runs_figure",
    "seeds_figure",
    "seeds_figures",
    "speedup_figure",
    "throughput_figure",
]

#: Backend -> colour, from the backend table (:class:`vecenvs.factory.BackendInfo`), in the
#: order legends list them: the reference, the loops in this process, one process per env, the
#: pools, the native peer.
BACKEND_COLORS: dict[str, str] = {
    info.name: info.color
    for info in sorted(
        BACKEND_INFO.values(),
        key=lambda info: (
            info.name != "gym-sync",
            info.native,
            ("none", "per-env", "workers").index(info.processes),
        ),
    )
}

#: For families not in :data:`BACKEND_COLORS`; picked by a checksum of the name, so stable.
_OTHER_COLORS = ("#bcbd22", "#7f7f7f", "#393b79", "#637939", "#843c39", "#7b4173")

#: Variants of one family (e.g. pool with 1, 2, 4 workers): how much to lighten (+) or darken
#: (-) the family colour, in the variants' natural order.
_SHADES = (0.0, 0.4, -0.35, 0.65, -0.55)

#: The seeds figure's cases: every N, N <= CPUs, N > CPUs.
CASES = ("all", "within", "beyond")

_STEPS_PER_SECOND = "env steps/s"
_N_AXIS = "number of envs N (log scale)"
_LIMIT_STYLE = {"color": "black", "dash": "dot", "width": 1.5}
#: The machine's limit line, measured (True) or estimated (False): its name and style.
_LIMITS = {
    True: (
        "ceiling (measured): min(K, N) processes, no coordination",
        {**_LIMIT_STYLE, "width": 2},
    ),
    False: ("limit estimate: min(N, CPUs) x one env's rate (no ceiling measured)", _LIMIT_STYLE),
}
_LEVEL_STYLE = {"color": "#7f7f7f", "dash": "dashdot", "width": 1}
_CURVE_POINTS = 48


def display_label(config: BenchConfig) -> str:
    """The backend's name in legends: its label, marked when its envs are native code."""
    label = config.backend_label
    if config.backend not in native_backends():
        return label
    arguments = label[len(config.backend) :].strip(" ()")
    return f"{config.backend} (native C++" + (f"; {arguments})" if arguments else ")")


def backend_colors(measurements: Iterable[Measurement]) -> dict[str, str]:
    """Backend label -> colour: its family's colour, shaded for the family's other variants.

    The variants of a family (``pool (num_workers=2)``, ``pool (num_workers=4)``) are shaded in
    natural order (2 before 10), the plain name first; so adding a variant to the data can
    re-shade the others of its family, never another family.
    """
    families: dict[str, set[str]] = {}
    for measurement in measurements:
        config = measurement.config
        families.setdefault(config.backend, set()).add(config.backend_label)
    colors = {}
    for family, labels in families.items():
        base = _family_color(family)
        for index, label in enumerate(sorted(labels, key=_natural_key)):
            colors[label] = _shade(base, _SHADES[index % len(_SHADES)])
    return colors


def seeds_figure(
    measurements: Sequence[Measurement],
    *,
    cpus: int | None = None,
    case: str = "all",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """The seed post's figure: rows = N, columns = envs by cost, bars = throughput per backend.

    Columns go from the cheapest env to the costliest (by the ``reference``'s single-env rate;
    envs without a reference measurement come last). Each bar is the throughput (the median
    timed window), its error bar the windows' standard deviation; hovering shows the speed-up
    over the reference. A backend not measured in a cell leaves its slot empty. ``case`` is one of
    :data:`CASES`: every N, N <= ``cpus`` (by default this machine's) or N > ``cpus``.

    Raises:
        ValueError: an unknown ``case`` or a bad ``cpus``.
    """
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; expected one of {CASES}")
    cpus = check_cpus(cpus)
    keep = [m for m in measurements if _in_case(m.config.num_envs, case, cpus)]
    data = _Data.of(keep, reference, ceiling_as_backend=True)
    where = {"all": "", "within": f", N <= {cpus} CPUs", "beyond": f", N > {cpus} CPUs"}[case]
    title = f"Throughput by env cost (columns) and number of envs (rows){where}"
    if not data.latest:
        return _empty_figure(title, f"no measurements{where} yet")

    rows, columns = data.num_envs, data.envs
    height = 230 * len(rows) + 170
    figure = make_subplots(
        rows=len(rows),
        cols=len(columns),
        subplot_titles=[
            _wrap(f"{data.env_names[env]}, N={n}", 110 // len(columns))
            for n in rows
            for env in columns
        ],
        vertical_spacing=min(0.3, 70 / height) if len(rows) > 1 else 0.1,
        horizontal_spacing=min(0.08, 0.3 / len(columns)),
    )
    categories = [data.names[label] for label in data.backends]
    shown: set[str] = set()
    for row, num_envs in enumerate(rows, start=1):
        for column, env in enumerate(columns, start=1):
            for label in data.backends:
                measurement = data.latest.get((env, num_envs, label))
                if measurement is None:
                    continue
                figure.add_trace(
                    go.Bar(
                        x=[data.names[label]],
                        y=[measurement.throughput],
                        error_y={"type": "data", "array": [measurement.std], "visible": True},
                        name=data.names[label],
                        legendgroup=label,
                        showlegend=label not in shown,
                        marker_color=data.colors[label],
                        hovertemplate=(
                            f"%{{fullData.name}}<br>{data.env_names[env]}, N={num_envs}<br>"
                            f"{measurement.throughput:,.0f} ± {measurement.std:,.0f} env steps/s"
                            f"<br>"
                            f"{_ratio_text(measurement.ratio, reference)}<extra></extra>"
                        ),
                    ),
                    row=row,
                    col=column,
                )
                shown.add(label)
        figure.update_yaxes(title_text=_STEPS_PER_SECOND, row=row, col=1)
    figure.update_xaxes(categoryorder="array", categoryarray=categories, showticklabels=False)
    figure.update_xaxes(title_text="backend (see legend)", row=len(rows))
    figure.update_annotations(font_size=13)  # the cell titles
    figure.update_layout(
        title_text=title,
        barmode="overlay",  # one bar per category: "group" would leave a slot per trace
        height=height,
        legend_title_text="backend",
        uirevision=f"seeds-{case}",  # keeps the user's zoom and legend clicks across redraws
    )
    return figure


def _in_case(num_envs: int, case: str, cpus: int) -> bool:
    return case == "all" or (num_envs <= cpus) == (case == "within")


def seeds_figures(
    measurements: Sequence[Measurement],
    *,
    cpus: int | None = None,
    reference: str = DEFAULT_REFERENCE,
) -> dict[str, go.Figure]:
    """The seed post's two figures, ``"within"`` (N <= CPUs) and ``"beyond"`` (N > CPUs),
    leaving out a case with no measurements."""
    cpus = check_cpus(cpus)
    figures = {}
    for case in ("within", "beyond"):
        keep = [m for m in measurements if _in_case(m.config.num_envs, case, cpus)]
        if keep:
            figures[case] = seeds_figure(keep, cpus=cpus, case=case, reference=reference)
    return figures


#: The measures :func:`metric_figure` draws against N: (title, y axis, unit, message when empty).
#: ``{reference}`` is the sequential reference's name.
METRICS: dict[str, tuple[str, str, str, str]] = {
    "throughput": (
        "Throughput against the number of envs",
        f"throughput ({_STEPS_PER_SECOND}, log scale)",
        _STEPS_PER_SECOND,
        "no measurements yet",
    ),
    "speedup": (
        "Speed-up over {reference} against the number of envs",
        "speed-up over {reference} (x, log scale)",
        "x {reference}",
        "no measurements with a speed-up yet (from compare())",
    ),
    "efficiency": (
        "Efficiency: throughput as a share of the ceiling",
        "share of the ceiling (%)",
        "% of the ceiling",
        "no measurements of the ceiling or the reference yet",
    ),
}


def metric_figure(
    measurements: Sequence[Measurement],
    model: OverheadModel | None = None,
    *,
    metric: str = "throughput",
    cpus: int | None = None,
    variant: str = "constant",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """One measure (:data:`METRICS`) of every backend against N, one panel per env.

    The one figure behind :func:`throughput_figure`, :func:`speedup_figure` and
    :func:`efficiency_figure`, which say what each ``metric`` draws. In every one: a point per
    measured (env, N, backend); the dotted black line is the machine's limit, the ceiling
    (measured where the ``ceiling`` row was, else estimated as min(N, ``cpus``) x one env's
    rate, which the legend says; ``cpus`` by default the model's, else this machine's); given a
    fitted ``model``, a dashed curve per fitted backend of what it predicts with its
    ``variant`` of overhead, and without one the points of a backend are joined by a thin line
    (but on the efficiency chart).

    Raises:
        ValueError: an unknown ``metric`` or a bad ``cpus``.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {tuple(METRICS)}")
    title, y_title, unit, empty = (text.format(reference=reference) for text in METRICS[metric])
    speedup, efficiency = metric == "speedup", metric == "efficiency"
    throughput = metric == "throughput"
    if speedup:  # the reference is the line at 1x; measurements without a ratio are not drawn
        measurements = [m for m in measurements if m.ratio is not None]
    data = _Data.of(measurements, reference)
    if efficiency:  # only the envs whose limit is known: measured, or from t_env
        drawable = {env for env in data.envs if data.ceiling(env) or _t_env(data, model, env)}
        data = _Data.of([m for m in measurements if m.config.env_label in drawable], reference)
    backends = [label for label in data.backends if not (speedup and label == reference)]
    if not (backends if speedup else data.latest):
        return _empty_figure(title, empty)
    cpus = model.cpus if model is not None and cpus is None else check_cpus(cpus)
    if efficiency and not all(data.ceiling(env) for env in data.envs):
        title += " (estimated as CPUs x one env where no ceiling was measured)"
    figure = _facets(data, title, y_title, log_y=not efficiency)
    flagged: dict[str, None] = {}  # efficiencies left out, and why (each said once)
    for panel, env in enumerate(data.envs, start=1):
        limit = _limit(data, model, env, cpus)
        for label in backends:
            points = data.series(env, label)
            if efficiency:  # a flagged efficiency is not a result: leave it out, say so
                where = f"{data.env_names[env]}, " if len(data.envs) > 1 else ""
                for m in filter(_efficiency_flagged, points):
                    flag = ratios.efficiency_flag(m.checks)
                    what = "" if flag == ratios.CEILING_DISTURBED else f"{data.names[label]} "
                    flagged[f"{where}{what}N={m.config.num_envs}: {flag}"] = None
                points = [m for m in points if not _efficiency_flagged(m)]
            if not points:
                continue
            values: list[float | None] = [m.ratio if speedup else m.throughput for m in points]
            errors = None if speedup else [m.std for m in points]
            if efficiency:  # a point's own efficiency where the ceiling was measured with it
                limits = [limit(m.config.num_envs) for m in points]
                values = [
                    100 * (m.throughput / lim if m.efficiency is None else m.efficiency)
                    for m, lim in zip(points, limits)
                ]
                errors = [100 * m.std / lim for m, lim in zip(points, limits)]
            error_y = None if errors is None else {"type": "data", "array": errors, "visible": True}
            color = data.colors[label]
            _scatter(
                figure,
                data,
                panel,
                x=[m.config.num_envs for m in points],
                y=values,
                error_y=error_y,
                mode="markers" if model is not None or efficiency else "lines+markers",
                line={"color": color, "width": 1},
                marker={"color": color, "size": 8},
                name=data.names[label],
                legendgroup=label,
                showlegend=not _in_legend(figure, label),
                customdata=[_point_note(m) for m in points],
                hovertemplate=_hover(
                    unit, what=data.words[label], digits=0 if throughput else 3, notes=True
                ),
            )
        ns, ceiling = data.env_num_envs(env), data.ceiling(env)
        if speedup:
            level = f"{reference} (the loop, the reference): 1x"
            _add_line(figure, data, panel, [ns[0], ns[-1]], [1.0, 1.0], level, _LEVEL_STYLE)
        t_env = _t_env(data, model, env)
        ys: list[float | None]
        if efficiency:  # the limit is 100% whichever it is; the legend says which
            xs, ys = ns, [100.0] * len(ns)
        elif ceiling:
            xs = [m.config.num_envs for m in ceiling]
            ys = [m.ratio if speedup else m.throughput for m in ceiling]
        elif speedup:
            xs, ys = ns, [float(min(n, cpus)) for n in ns]
        elif t_env is not None:
            xs, ys = ns, [min(n, cpus) / t_env for n in ns]
        else:
            continue  # no ceiling, no reference: no limit to draw
        name, style = _LIMITS[bool(ceiling)]
        limit_unit = "%" if efficiency else unit
        # A disturbed ceiling window: its point is a cross, and its hover says why.
        disturbed = {m.config.num_envs: m for m in ceiling if ratios.DISTURBED in m.checks}
        _add_line(
            figure,
            data,
            panel,
            xs,
            ys,
            name,
            style,
            markers=bool(ceiling),
            unit=limit_unit,
            symbols=["x" if n in disturbed else "diamond" for n in xs],
            notes=[_point_note(disturbed[n]) if n in disturbed else "" for n in xs],
        )
    if flagged:
        said = list(flagged)
        shown = "; ".join(said[:3]) + (f" (and {len(said) - 3} more)" if said[3:] else "")
        figure.layout.title.text += f"<br><sup>Not shown, not results: {shown}</sup>"
    if model is not None:

        def predict(env: str, label: str, n: float) -> float:
            if speedup:
                return model.predict_speedup(env, label, n, variant=variant)
            rate = model.predict_throughput(env, label, n, variant=variant)
            return 100 * rate / _limit(data, model, env, cpus)(n) if efficiency else rate

        _add_curves(figure, data, model, variant, predict, skip=(reference,) if speedup else ())
    if efficiency:
        figure.update_yaxes(rangemode="tozero")
    return _tidy_log_axes(figure)


# The three charts below repeat metric_figure's signature on purpose (a kept repeat): each is
# public, called by name from notebooks, the CLI and the dashboard, with its own docstring
# saying how to read it. Their arguments are metric_figure's.
def throughput_figure(
    measurements: Sequence[Measurement],
    model: OverheadModel | None = None,
    *,
    cpus: int | None = None,
    variant: str = "constant",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """Env steps/s against N, one panel per env, with the machine's ceiling and the model.

    Points are the throughput (the median timed window), error bars the windows' standard
    deviation; a point's tooltip says what is wrong with it, if anything. The dotted
    black line is the ceiling: where the ``ceiling`` row was measured, its points (min(K, N)
    processes stepping with no coordination, what no vector env can beat); otherwise an
    estimate, min(N, CPUs) x one env's rate, which says so in the legend.
    """
    return metric_figure(
        measurements, model, metric="throughput", cpus=cpus, variant=variant, reference=reference
    )


def speedup_figure(
    measurements: Sequence[Measurement],
    model: OverheadModel | None = None,
    *,
    cpus: int | None = None,
    variant: str = "constant",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """Speed-up over the sequential reference against N, one panel per env.

    A point is a measurement's ``ratio``: its throughput divided by the reference's measured
    right next to it (:mod:`vecenvs.bench.ratios`). The reference itself is the line at
    1x; the dotted line is the ceiling's speed-up, the most any backend can gain on these Python
    envs (measured where the ``ceiling`` row was, else estimated as min(N, CPUs); EnvPool,
    stepping native envs, may cross it: it is not like-for-like). Measurements without a ratio
    are not drawn.
    """
    return metric_figure(
        measurements, model, metric="speedup", cpus=cpus, variant=variant, reference=reference
    )


def efficiency_figure(
    measurements: Sequence[Measurement],
    model: OverheadModel | None = None,
    *,
    cpus: int | None = None,
    variant: str = "constant",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """Throughput as a percentage of the ceiling at the same N, per env.

    100% is the ceiling: min(K, N) processes stepping their envs with no coordination at all.
    Where the ``ceiling`` row was measured, a point is the measurement's own
    :attr:`~vecenvs.bench.Measurement.efficiency` (its throughput over the ceiling's at the
    same point); elsewhere the limit is the estimate min(N, CPUs) x one env's rate, and the
    title says so. An efficiency a check flags (above the ceiling, a disturbed ceiling:
    :mod:`vecenvs.bench.ratios`) is not a result: it is left out, and the title says which.
    EnvPool can go above 100%: its native envs step faster than the Python ones the ceiling
    steps.
    """
    return metric_figure(
        measurements, model, metric="efficiency", cpus=cpus, variant=variant, reference=reference
    )


def runs_figure(
    runs: Mapping[str, Sequence[Measurement]],
    *,
    metric: str = "throughput",
    reference: str = DEFAULT_REFERENCE,
    what: str = "env stepping",
) -> go.Figure:
    """Several runs overlaid: one panel per env, one colour per run, one line style per backend.

    For comparing a run today with last week's, or one machine with another. The legend sits
    below the plot, grouped by run (click a run to hide all its lines), then the line style of
    each backend; so 10 runs of 5 backends take 15 entries, not 50, and never the plot's width.

    ``runs`` maps a run's name (e.g. ``"#12 laptop"``) to its measurements; ``metric`` is
    ``"throughput"`` or ``"speedup"`` (over ``reference``). ``what`` the throughput is of, for
    the axis: ``"env stepping"`` or ``"training"`` (PPO's training throughput, a different
    quantity: never put both on one axis).
    """
    if metric not in ("throughput", "speedup"):
        raise ValueError(f"metric must be 'throughput' or 'speedup', got {metric!r}")
    speedup = metric == "speedup"
    training = what == "training"
    title = (
        "Speed-up" if speedup else "Training throughput" if training else "Throughput"
    ) + " of the selected runs"
    everything = [m for measurements in runs.values() for m in measurements]
    # The panels' order and each backend's style come from every measurement, whatever the
    # metric: switching views must not swap the panels or restyle a backend.
    order = _Data.of(everything, reference, ceiling_as_backend=True)
    every = [
        m
        for m in everything
        if not speedup or (m.ratio is not None and m.config.backend != reference)
    ]
    data = _Data.of(every, reference, ceiling_as_backend=True)
    if not data.latest:
        return _empty_figure(title, "no measurements in the selected runs")
    data.envs = [env for env in order.envs if env in data.envs]
    data.backends = [label for label in order.backends if label in data.backends]
    _, y_title, unit, _ = (text.format(reference=reference) for text in METRICS[metric])
    y_title = ("training " if training and not speedup else "") + y_title
    figure = _facets(data, title, y_title, log_y=True)
    drawn = {id(m) for m in every}
    families = {m.config.backend_label: m.config.backend for m in everything}
    dash_of = {
        label: _backend_style(families[label], index) for index, label in enumerate(order.backends)
    }
    for index, (run, measurements) in enumerate(runs.items()):
        color = _RUN_COLORS[index % len(_RUN_COLORS)]
        run_name = _text(run)
        group = f"run {index}"
        _legend_entry(
            figure,
            name=_text(run if len(run) <= 48 else run[:47] + "…"),
            line={"color": color, "width": 3},
            legendgroup=group,
            legendgrouptitle_text="runs" if index == 0 else None,  # one title for them all
            legendrank=index,
        )
        run_data = _Data.of(
            [m for m in measurements if id(m) in drawn], reference, ceiling_as_backend=True
        )
        for panel, env in enumerate(data.envs, start=1):
            for label in run_data.backends:
                points = run_data.series(env, label)
                if not points:
                    continue
                dash, symbol = dash_of[label]
                _scatter(
                    figure,
                    data,
                    panel,
                    x=[m.config.num_envs for m in points],
                    y=[m.ratio if speedup else m.throughput for m in points],
                    mode="lines+markers",
                    line={"color": color, "width": 1.5, "dash": dash},
                    marker={"color": color, "size": 8, "symbol": symbol},
                    name=f"{data.names[label]} · {run_name}",
                    legendgroup=group,
                    showlegend=False,
                    customdata=[_point_note(m) for m in points],
                    hovertemplate=_hover(
                        unit, what=data.words[label], digits=3 if speedup else 0, notes=True
                    ),
                )
    for rank, label in enumerate(data.backends):  # the line style of each backend
        dash, symbol = dash_of[label]
        figure.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines+markers",
                hoverinfo="skip",
                name=data.names[label],
                line={"color": "#555555", "width": 1.5, "dash": dash},
                marker={"color": "#555555", "size": 8, "symbol": symbol},
                legendgroup="backends",
                legendgrouptitle_text="backends",
                legendrank=1000 + rank,
            )
        )
    figure.update_layout(legend={"groupclick": "togglegroup"})
    return _tidy_log_axes(figure)


def _backend_style(family: str, index: int) -> tuple[str, str]:
    """(dash, marker symbol) of a backend in the History overlay: the ceiling always dotted with
    diamonds, as in the other charts; the others by their place in the order. The marker tells
    backends apart even on a line between two points, too short to show its dashes."""
    if family == CEILING:
        return "dot", "diamond"
    return _DASHES[index % len(_DASHES)], _SYMBOLS[index % len(_SYMBOLS)]


def autotune_figure(
    table: Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """Autotune's candidates as horizontal bars of throughput, fastest on top, the winner marked.

    One colour per backend family, as in every other chart, and one legend entry per colour.
    The speed-up over ``reference`` (the candidate of that label, when it was measured: its
    throughput over the reference's, the bars' own ratio) is written at the base of each bar,
    where the error bar (at its end) cannot hide it; without it, the table's ``vs_loop`` (over
    ``multi``, as autotune measured before the reference was a candidate). ``table`` is
    :attr:`vecenvs.autotune.AutotuneResult.table` (or the ``"table"`` of its ``to_dict()``):
    rows with ``label``, ``steps_per_second`` and ``std``.
    """
    title = title or "Autotune: throughput of each candidate"
    if not table:
        return _empty_figure(title, "no candidate measured yet")
    rows = sorted(table, key=lambda row: row["steps_per_second"])  # plotly draws bottom-up
    best = rows[-1]["label"]
    base = next((row["steps_per_second"] for row in rows if row["label"] == reference), None)

    def versus(row: Mapping[str, Any]) -> str:
        if base:
            return f"{row['steps_per_second'] / base:.2f}x {reference}"
        return "" if row.get("vs_loop") is None else f"{row['vs_loop']:.2f}x multi"

    names = [_text(("★ " if row["label"] == best else "") + str(row["label"])) for row in rows]
    figure = go.Figure()
    by_family: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for name, row in reversed(list(zip(names, rows))):  # families in the order of their best
        by_family.setdefault(str(row["label"]).split(" ")[0], []).insert(0, (name, row))
    for family, mine in by_family.items():
        figure.add_trace(
            go.Bar(
                x=[row["steps_per_second"] for _, row in mine],
                y=[name for name, _ in mine],
                error_x={
                    "type": "data",
                    "array": [row["std"] or 0 for _, row in mine],
                    "visible": True,
                },
                orientation="h",
                marker_color=_family_color(family),
                text=[versus(row) for _, row in mine],
                textposition="inside",
                insidetextanchor="start",
                name=_text(family),
                hovertemplate=f"%{{y}}<br>{_text(in_words(family))}<br>"
                "%{x:,.0f} env steps/s<extra></extra>",
            )
        )
    figure.update_layout(
        title_text=title,
        showlegend=True,
        legend_title_text="backend family",
        xaxis_title=f"throughput ({_STEPS_PER_SECOND}, median of the timed windows)",
        yaxis={"title": "candidate (★ = chosen)", "categoryorder": "array", "categoryarray": names},
        barmode="overlay",
        height=max(280, 90 + 45 * len(rows)),
    )
    return figure


# --- the data behind a figure -------------------------------------------------------------


@dataclass
class _Data:
    """Measurements sorted out for drawing: the last per configuration, in a stable order.

    Every string that came from the measurements (env ids and arguments, backend labels) is
    escaped here, once: plotly reads ``<b>``, ``<a href>`` and the like in names and titles,
    and a name from a results store is not ours to trust.
    """

    latest: dict[tuple[str, int, str], Measurement]
    envs: list[str]
    backends: list[str]
    """Backend labels drawn as points: every one but the ceiling, which is the limit line."""
    num_envs: list[int]
    names: dict[str, str]
    env_names: dict[str, str]
    colors: dict[str, str]
    t_env: dict[str, float]
    words: dict[str, str]
    """Backend label -> what it is, in plain words (its tooltip)."""

    @classmethod
    def of(
        cls,
        measurements: Iterable[Measurement],
        reference: str,
        *,
        ceiling_as_backend: bool = False,
    ) -> _Data:
        measurements = list(measurements)
        latest = {}
        for measurement in measurements:  # a later measurement replaces an earlier one
            config = measurement.config
            latest[config.env_label, config.num_envs, config.backend_label] = measurement
        t_env = env_step_seconds(measurements, reference=reference)
        envs = sorted(
            {env for env, _, _ in latest},
            key=lambda env: (env not in t_env, t_env.get(env, 0.0), env),
        )
        configs = [m.config for m in latest.values()]
        families = {config.backend_label: config.backend for config in configs}
        drawn = [
            label for label, family in families.items() if ceiling_as_backend or family != CEILING
        ]
        backends = sorted(
            drawn, key=lambda label: (_family_rank(families[label]), _natural_key(label))
        )
        names = {config.backend_label: _text(display_label(config)) for config in configs}
        env_names = {label: _text(short) for label, short in short_env_labels(configs).items()}
        return cls(
            latest=latest,
            envs=envs,
            backends=backends,
            num_envs=sorted({n for _, n, _ in latest}),
            names=names,
            env_names=env_names,
            colors=backend_colors(latest.values()),
            t_env=t_env,
            words={config.backend_label: _text(in_words(config.backend)) for config in configs},
        )

    def series(self, env: str, label: str) -> list[Measurement]:
        keys = sorted(key for key in self.latest if key[0] == env and key[2] == label)
        return [self.latest[key] for key in keys]

    def ceiling(self, env: str) -> list[Measurement]:
        """The ceiling of ``env`` at each N it was measured at, by N; the highest where several
        (several K) were measured."""
        best: dict[int, Measurement] = {}
        for (each_env, num_envs, _), measurement in self.latest.items():
            if (
                each_env == env
                and measurement.config.backend == CEILING
                and (num_envs not in best or measurement.median > best[num_envs].median)
            ):
                best[num_envs] = measurement
        return [best[n] for n in sorted(best)]

    def env_num_envs(self, env: str) -> list[int]:
        return sorted({n for e, n, _ in self.latest if e == env})


# --- drawing helpers --------------------------------------------------------------------------

#: At most this many panels side by side; more envs wrap onto further rows.
_MAX_COLUMNS = 3
#: Panel titles wrap at about this many characters for 1, 2 and 3 panels side by side.
_TITLE_CHARACTERS = {1: 110, 2: 60, 3: 38}
_PANEL_HEIGHT = 360
#: Line styles and marker symbols for the backends of the History overlay (its colours are the
#: runs'); "dot" is the ceiling's own.
_DASHES = ("solid", "dash", "dashdot", "longdash", "longdashdot")
_SYMBOLS = ("circle", "square", "triangle-up", "star", "cross", "triangle-down")
#: One colour per run in the History overlay: plotly's qualitative "D3", 10 distinct colours.
_RUN_COLORS = tuple(color.lower() for color in qualitative.D3)


def _cell(data: _Data, panel: int) -> tuple[int, int]:
    """(row, column) of the ``panel``-th env's panel (1-based), wrapping after _MAX_COLUMNS."""
    columns = min(_MAX_COLUMNS, len(data.envs))
    return (panel - 1) // columns + 1, (panel - 1) % columns + 1


def _facets(data: _Data, title: str, y_title: str, *, log_y: bool) -> go.Figure:
    """One panel per env, at most three side by side, N on a log x axis ticked at the measured N.

    Panel titles are the short env names (:func:`~vecenvs.bench.engine.short_env_labels`),
    wrapped to their panel's width, so titles never run into each other; the legend goes
    below the panels, so it never takes their width.
    """
    columns = min(_MAX_COLUMNS, len(data.envs))
    rows = -(-len(data.envs) // columns)
    width = _TITLE_CHARACTERS[columns]
    height = _PANEL_HEIGHT * rows + 220
    figure = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[_wrap(data.env_names[env], width) for env in data.envs],
        horizontal_spacing=0.07 if columns > 1 else 0.0,
        vertical_spacing=min(0.3, 140 / height) if rows > 1 else 0.0,
    )
    ticks = data.num_envs
    figure.update_xaxes(
        type="log", title_text=_N_AXIS, tickvals=ticks, ticktext=[str(n) for n in ticks]
    )
    figure.update_yaxes(type="log" if log_y else "linear")
    figure.update_yaxes(title_text=y_title, col=1)
    figure.update_annotations(font_size=13)  # the panel titles
    figure.update_layout(
        title_text=title,
        height=height,
        legend={
            "orientation": "h",
            "yref": "container",
            "y": 0.0,
            "yanchor": "bottom",
            "x": 0.0,
            "xanchor": "left",
        },
        margin={"b": 40},
        uirevision=title,  # keeps the user's zoom and legend clicks across redraws
    )
    return figure


def _scatter(figure: go.Figure, data: _Data, panel: int, **trace: Any) -> None:
    row, col = _cell(data, panel)
    figure.add_trace(go.Scatter(**trace), row=row, col=col)


def _legend_entry(figure: go.Figure, **trace: Any) -> None:
    """A legend entry with nothing drawn: it says what a colour or a line style means."""
    figure.add_trace(go.Scatter(x=[None], y=[None], mode="lines", hoverinfo="skip", **trace))


def _hover(
    unit: str,
    name: str = "%{fullData.name}",
    digits: int = 3,
    *,
    what: str = "",
    notes: bool = False,
) -> str:
    """A point's tooltip: its backend (and ``what`` it is, in words), N and value, numbers as
    the tables write them (``43,693``, never ``4.37e+4``): ``digits`` 0 for whole numbers,
    else significant digits. ``notes``: the trace's ``customdata`` says what is wrong with a
    point (:func:`_point_note`)."""
    value = "%{y:,.0f}" if digits == 0 else f"%{{y:,.{digits}~g}}"
    said = f"<br>{what}" if what else ""
    note = "%{customdata}" if notes else ""
    return f"{name}{said}<br>N=%{{x}}<br>{value} {unit}{note}<extra></extra>"


def _point_note(measurement: Measurement) -> str:
    """What the checks say of a point, for its tooltip (empty when nothing is wrong)."""
    said = ratios.explain(measurement)
    return "".join(f"<br>⚠ {_text(text)}" for text in said)


def _add_line(
    figure: go.Figure,
    data: _Data,
    panel: int,
    ns: list[int],
    values: Sequence[float | None],
    name: str,
    style: dict,
    *,
    markers: bool = False,
    unit: str = "",
    symbols: Sequence[str] | None = None,
    notes: Sequence[str] | None = None,
) -> None:
    """A line through ``values`` (one legend entry per name): a limit, or a level such as 1x;
    ``symbols`` and ``notes`` (for the tooltip) per point, when it has markers.

    A scatter line rather than a plotly shape: it gets a legend entry, and it sits at the
    right place on log axes too.
    """
    group = "level: " + name
    digits = 0 if unit == _STEPS_PER_SECOND else 4
    _scatter(
        figure,
        data,
        panel,
        x=ns,
        y=values,
        mode="lines+markers" if markers else "lines",
        line=style,
        marker={"color": style["color"], "size": 7, "symbol": list(symbols or ["diamond"])},
        name=name,
        legendgroup=group,
        showlegend=not _in_legend(figure, group),
        customdata=list(notes or [""] * len(ns)),
        hovertemplate=_hover(unit, name, digits=digits, notes=True),
    )


def _add_curves(figure, data: _Data, model: OverheadModel, variant: str, predict, skip=()):
    """The model's dashed curve for every fitted backend and env, over the measured N."""
    drawn = False
    for panel, env in enumerate(data.envs, start=1):
        if env not in model.envs:
            continue
        ns = data.env_num_envs(env)
        grid = _grid(ns[0], ns[-1], model.cpus)
        for label in data.backends:
            fitted = label in model.backends or label == model.reference
            if label in skip or not fitted:
                continue
            fit = model.backends.get(label)
            if fit is not None and variant == "per_env" and fit.per_env is None:
                continue  # measured at one N only: no per-env fit to draw
            if fit is not None and not fit_quality(fit, variant).trusted:
                continue  # a poor fit, or too few points to judge one: no curve to trust
            color = data.colors[label]
            _scatter(
                figure,
                data,
                panel,
                x=grid,
                y=[predict(env, label, n) for n in grid],
                mode="lines" if len(grid) > 1 else "markers",
                line={"color": color, "dash": "dash", "width": 1.5},
                marker={"color": color, "symbol": "line-ew-open", "size": 14},
                name=f"{data.names[label]} (model)",
                legendgroup=label,
                showlegend=False,
                hovertemplate="model, %{fullData.name}<br>N=%{x:.3~g}<br>%{y:,.3~g}<extra></extra>",
            )
            drawn = True
    if drawn:
        # The curves share their backend's legend entry (clicking it hides both); this entry
        # only says what a dashed line is.
        line = {"color": "#7f7f7f", "dash": "dash", "width": 1.5}
        name = f"model prediction ({variant.replace('_', '-')} t_os), dashed"
        _legend_entry(figure, name=name, line=line, legendgroup="model")


def _limit(data: _Data, model: OverheadModel | None, env: str, cpus: int):
    """N -> the env's limit in env steps/s: the measured ceiling (the model's interpolation of
    it between measured N, or the measurements themselves), else min(N, CPUs) / t_env."""
    if model is not None and env in model.envs:
        return model.envs[env].limit
    measured: dict[float, float] = {m.config.num_envs: m.throughput for m in data.ceiling(env)}
    t_env = _t_env(data, model, env)

    def limit(num_envs: float) -> float:
        if num_envs in measured:
            return measured[num_envs]
        if t_env is None:  # only the ceiling was measured: hold the nearest one
            nearest = min(measured, key=lambda n: abs(math.log(n / num_envs)))
            return measured[nearest]
        return min(num_envs, cpus) / t_env

    return limit


def _tidy_log_axes(figure: go.Figure) -> go.Figure:
    """Label each log y axis at a few round values within its data (1, 2, 5 x 10^k; only the
    powers of ten over many decades), instead of plotly labelling every minor tick."""
    values: dict[str, list[float]] = {}
    for trace in figure.data:
        if trace.y is None:
            continue
        axis = "yaxis" + (trace.yaxis or "y")[1:]
        ys = [y if isinstance(y, (int, float)) else math.nan for y in trace.y]
        errors = trace.error_y.array if trace.error_y is not None else None
        if errors is not None:  # the error bars' ends are drawn too: label them
            ys += [y + e for y, e in zip(ys, errors)] + [y - e for y, e in zip(ys, errors)]
        values.setdefault(axis, []).extend(y for y in ys if math.isfinite(y) and y > 0)
    for axis, ys in values.items():
        if ys and figure.layout[axis].type == "log":
            ticks = _log_ticks(min(ys), max(ys))
            figure.layout[axis].update(tickvals=ticks, ticktext=[_round_number(t) for t in ticks])
    return figure


def _log_ticks(low: float, high: float) -> list[float]:
    """Round values to label a log axis from ``low`` to ``high``: 1-2-5 steps over a few
    decades, powers of ten over many, and 1-9 steps when the range is too narrow for two."""
    low, high = low / 1.25, high * 1.25  # plotly's autorange pads the data a little
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for mantissas in ((1,), (1, 2, 5), tuple(range(1, 10))):
        if mantissas == (1,) and last - first <= 4:
            continue
        ticks = [m * 10.0**k for k in range(first, last + 1) for m in mantissas]
        ticks = [float(f"{t:.6g}") for t in ticks if low <= t <= high]
        if len(ticks) >= 2:
            return ticks
    return [float(f"{low:.2g}"), float(f"{high:.2g}")]


def _round_number(value: float) -> str:
    """``20000`` -> ``20k``, ``1500000`` -> ``1.5M``, ``0.05`` -> ``0.05``."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _text(text: str) -> str:
    """``text`` as plotly should show it, character for character: plotly reads a few HTML
    tags (``<br>``, ``<b>``, ``<a href>``) and entities in names and titles, and ``%{...}`` in
    hover templates (a zero-width space after the ``%`` keeps that one from being read)."""
    return html.escape(str(text), quote=False).replace("%{", "%\u200b{")


def _wrap(text: str, width: int) -> str:
    return "<br>".join(textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False))


def _in_legend(figure: go.Figure, group: str) -> bool:
    return any(trace.legendgroup == group and trace.showlegend for trace in figure.data)


def _grid(low: int, high: int, cpus: int) -> list[float]:
    """N values for a smooth curve from ``low`` to ``high``: geometric, plus the kink at cpus."""
    if low == high:
        return [float(low)]
    ratio = (high / low) ** (1 / (_CURVE_POINTS - 1))
    grid = {low * ratio**i for i in range(_CURVE_POINTS)} | {float(low), float(high)}
    if low < cpus < high:
        grid.add(float(cpus))  # where c = min(workers, N, cpus) stops growing
    return sorted(n for n in grid if low <= n <= high)


def _t_env(data: _Data, model: OverheadModel | None, env: str) -> float | None:
    """The env's step time: the model's if it has one, else straight from the reference."""
    if model is not None and env in model.envs:
        return model.envs[env].t_env_seconds
    return data.t_env.get(env)


def _efficiency_flagged(measurement: Measurement) -> bool:
    """An efficiency a check keeps from being a result (:func:`ratios.shown_efficiency`)."""
    return measurement.efficiency is not None and ratios.shown_efficiency(measurement) is None


def _empty_figure(title: str, message: str) -> go.Figure:
    """A figure that says there is nothing to draw yet (the dashboard before the first result)."""
    note = {"text": message, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}
    note |= {"showarrow": False, "font": {"size": 16}}
    hidden = {"visible": False}
    return go.Figure(
        layout={"title_text": title, "xaxis": hidden, "yaxis": hidden, "annotations": [note]}
    )


def _ratio_text(ratio: float | None, reference: str) -> str:
    return "no speed-up (not from compare())" if ratio is None else f"{ratio:.2f}x {reference}"


# --- colours and order ------------------------------------------------------------------------


def _family_rank(family: str) -> tuple[int, int, str]:
    """Known families in :data:`BACKEND_COLORS` order, then the others by name."""
    order = list(BACKEND_COLORS)
    return (0, order.index(family), "") if family in order else (1, 0, family)


def _family_color(family: str) -> str:
    if family in BACKEND_COLORS:
        return BACKEND_COLORS[family]
    return _OTHER_COLORS[zlib.crc32(family.encode()) % len(_OTHER_COLORS)]


def _natural_key(text: str) -> list[tuple[int, int | str]]:
    """Sorts ``"pool (num_workers=2)"`` before ``"pool (num_workers=10)"``."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text)]


def _shade(color: str, amount: float) -> str:
    """``color`` mixed with white (amount > 0) or black (amount < 0) by ``abs(amount)``."""
    channels = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    mixed = [round(c + (target - c) * abs(amount)) for c in channels]
    return "#" + "".join(f"{c:02x}" for c in mixed)
