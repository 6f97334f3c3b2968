"""Charts of the measurements and of the overhead model, as plotly figures.

The notebooks and the dashboard draw the same charts from the same functions, so a chart means
the same thing wherever it is seen. Every function takes measurements (from
:func:`~vecenvs.bench.compare`, a sweep, or a results store) and returns a
``plotly.graph_objects.Figure``:

- :func:`seeds_figure` / :func:`seeds_figures`: the seed post's figure (``shared/seeds/000``):
  a grid of bar charts, rows = number of envs N, columns = envs from cheap to costly, one bar per
  backend. Split into "N <= CPUs" (every backend can run all its envs at once) and "N > CPUs".
- :func:`throughput_figure`: env steps/s against N, one panel per env, with the machine's limit
  (CPUs x single-env rate) and, given a fitted model, its predicted curves.
- :func:`speedup_figure`: the same as a speed-up over the sequential reference.
- :func:`efficiency_figure`: throughput as a share of the machine's limit.

They are pure functions of the data: call them again with more measurements and they draw the
new picture (the dashboard redraws this way as results arrive). The order of envs, backends and
traces depends only on the data, never on the order results arrived in; where one configuration
(env, N, backend) was measured more than once, the last measurement in the sequence is drawn.
Colours are per backend family (every ``pool (...)`` is a shade of green), the same in every
chart.

Example:
    >>> from vecenvs.bench import QUICK, compare
    >>> from vecenvs.bench.figures import throughput_figure
    >>> from vecenvs.bench.model import fit_overhead_model
    >>> results = compare("CartPole-v1", 2, ["pool"], **QUICK)
    >>> figure = throughput_figure(results, fit_overhead_model(results))
    >>> figure.write_html("throughput.html")  # doctest: +SKIP
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plotly import graph_objects as go
from plotly.subplots import make_subplots

from vecenvs.bench.engine import DEFAULT_REFERENCE, BenchConfig, Measurement
from vecenvs.bench.model import OverheadModel, env_step_seconds, native_backends
from vecenvs.workers import available_cpus

__all__ = [
    "BACKEND_COLORS",
    "CASES",
    "autotune_figure",
    "backend_colors",
    "display_label",
    "efficiency_figure",
    "runs_figure",
    "seeds_figure",
    "seeds_figures",
    "speedup_figure",
    "throughput_figure",
]

#: Backend family -> colour, in the order backends are listed in legends: the reference, the
#: sequential loops (blues), one process per env (oranges and reds), the pool (green), the
#: native peer (purple).
BACKEND_COLORS: dict[str, str] = {
    "gym-sync": "#4d4d4d",
    "multi": "#1f77b4",
    "sb3-dummy": "#17becf",
    "subproc": "#ff7f0e",
    "gym-async": "#d62728",
    "gym-async-shm": "#e377c2",
    "sb3-subproc": "#8c564b",
    "pool": "#2ca02c",
    "pool-async": "#98df8a",  # the pool's light green: the same processes, stepped async
    "ray": "#8c6d31",  # ochre: the pool's design on Ray actors
    "envpool": "#9467bd",
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
_LEVEL_STYLE = {"color": "#7f7f7f", "dash": "dashdot", "width": 1}
_CURVE_POINTS = 48


def display_label(config: BenchConfig) -> str:
    """The backend's name in legends: its label, marked when its envs are native code."""
    label = config.backend_label
    if config.backend not in native_backends():
        return label
    arguments = label[len(config.backend):].strip(" ()")
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

    Columns go from the cheapest env to the costliest (by the reference's single-env rate;
    envs without a reference measurement come last). Each bar is the mean throughput over the
    timed windows, its error bar their standard deviation; hovering shows the speed-up over
    the reference. A backend not measured in a cell leaves its slot empty.

    Args:
        measurements: any number of envs, N and backends.
        cpus: what "N <= CPUs" means; by default this machine's CPUs.
        case: ``"all"``, ``"within"`` (N <= cpus) or ``"beyond"`` (N > cpus).
        reference: the sequential reference, used to order the envs by cost.

    Raises:
        ValueError: an unknown ``case`` or a bad ``cpus``.
    """
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; expected one of {CASES}")
    cpus = _check_cpus(cpus)
    keep = {
        "all": lambda n: True,
        "within": lambda n: n <= cpus,
        "beyond": lambda n: n > cpus,
    }[case]
    data = _Data.of([m for m in measurements if keep(m.config.num_envs)], reference)
    where = {"all": "", "within": f", N <= {cpus} CPUs", "beyond": f", N > {cpus} CPUs"}[case]
    title = f"Throughput by env cost (columns) and number of envs (rows){where}"
    if not data.latest:
        return _empty_figure(title, f"no measurements{where} yet")

    rows, columns = data.num_envs, data.envs
    height = 230 * len(rows) + 170
    figure = make_subplots(
        rows=len(rows),
        cols=len(columns),
        subplot_titles=[f"{env}, N={n}" for n in rows for env in columns],
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
                        y=[measurement.mean],
                        error_y={"type": "data", "array": [measurement.std], "visible": True},
                        name=data.names[label],
                        legendgroup=label,
                        showlegend=label not in shown,
                        marker_color=data.colors[label],
                        hovertemplate=(
                            f"{data.names[label]}<br>{env}, N={num_envs}<br>"
                            f"{measurement.mean:,.0f} ± {measurement.std:,.0f} env steps/s<br>"
                            f"{_ratio_text(measurement.ratio, reference)}<extra></extra>"
                        ),
                    ),
                    row=row,
                    col=column,
                )
                shown.add(label)
            figure.update_xaxes(
                categoryorder="array",
                categoryarray=categories,
                showticklabels=False,
                row=row,
                col=column,
            )
        figure.update_yaxes(title_text=_STEPS_PER_SECOND, row=row, col=1)
    for column in range(1, len(columns) + 1):
        figure.update_xaxes(title_text="backend (see legend)", row=len(rows), col=column)
    figure.update_annotations(font_size=13)  # the cell titles
    figure.update_layout(
        title_text=title,
        barmode="overlay",  # one bar per category: "group" would leave a slot per trace
        height=height,
        legend_title_text="backend",
        uirevision=f"seeds-{case}",  # keeps the user's zoom and legend clicks across redraws
    )
    return figure


def seeds_figures(
    measurements: Sequence[Measurement],
    *,
    cpus: int | None = None,
    reference: str = DEFAULT_REFERENCE,
) -> dict[str, go.Figure]:
    """The seed post's two figures: ``"within"`` (N <= CPUs) and ``"beyond"`` (N > CPUs).

    A case with no measurements is left out of the dict.
    """
    cpus = _check_cpus(cpus)
    figures = {}
    for case in ("within", "beyond"):
        keep = [m for m in measurements if (m.config.num_envs <= cpus) == (case == "within")]
        if keep:
            figures[case] = seeds_figure(keep, cpus=cpus, case=case, reference=reference)
    return figures


def throughput_figure(
    measurements: Sequence[Measurement],
    model: OverheadModel | None = None,
    *,
    cpus: int | None = None,
    variant: str = "constant",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """Env steps/s against N, one panel per env, with the machine's limit and the model.

    Points are the mean over the timed windows, error bars their standard deviation. The dotted
    line is the machine's limit, CPUs x single-env rate: no backend stepping these Python envs
    can go above it. Given a fitted ``model``, each fitted backend gets a dashed curve of
    what the model predicts; without one, each backend's points are joined by a thin line.

    Args:
        measurements: any number of envs, N and backends.
        model: from :func:`~vecenvs.bench.model.fit_overhead_model`, for the curves.
        cpus: for the machine's limit; by default the model's, else this machine's.
        variant: the model's ``"constant"`` or ``"per_env"`` overhead.
        reference: the sequential reference (its throughput gives the single-env rate).
    """
    title = "Throughput against the number of envs"
    data = _Data.of(measurements, reference)
    if not data.latest:
        return _empty_figure(title, "no measurements yet")
    cpus = model.cpus if model is not None and cpus is None else _check_cpus(cpus)
    figure = _facets(data, title, f"throughput ({_STEPS_PER_SECOND}, log scale)", log_y=True)
    for column, env in enumerate(data.envs, start=1):
        for label in data.backends:
            points = data.series(env, label)
            if points:
                _add_points(
                    figure, data, label, points, [m.mean for m in points], column,
                    errors=[m.std for m in points], lines=model is None,
                    unit=_STEPS_PER_SECOND,
                )
        t_env = _t_env(data, model, env)
        if t_env is not None:
            limit = cpus / t_env
            _add_level(
                figure, data, column, limit, "machine limit: CPUs x single-env rate",
                f"limit: {cpus} CPU(s) x {1 / t_env:,.0f}/s", _LIMIT_STYLE,
            )
    if model is not None:
        _add_curves(figure, data, model, variant, lambda env, label, n: model.predict_throughput(
            env, label, n, variant=variant))
    return figure


def speedup_figure(
    measurements: Sequence[Measurement],
    model: OverheadModel | None = None,
    *,
    cpus: int | None = None,
    variant: str = "constant",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """Speed-up over the sequential reference against N, one panel per env.

    A point is a measurement's ``ratio``: the median, over the timed windows, of its throughput
    divided by the reference's measured right next to it. The reference itself is the line at
    1x; the dotted line at CPUs x is the most any backend can gain on these Python envs (EnvPool,
    stepping native envs, may cross it: it is not like-for-like). Measurements without a ratio
    are not drawn.

    Args: as for :func:`throughput_figure`.
    """
    title = f"Speed-up over {reference} against the number of envs"
    with_ratio = [m for m in measurements if m.ratio is not None]
    data = _Data.of(with_ratio, reference)
    backends = [label for label in data.backends if label != reference]
    if not backends:
        return _empty_figure(title, "no measurements with a speed-up yet (from compare())")
    cpus = model.cpus if model is not None and cpus is None else _check_cpus(cpus)
    y_title = f"speed-up over {reference} (x, log scale)"
    figure = _facets(data, title, y_title, log_y=True)
    for column, env in enumerate(data.envs, start=1):
        for label in backends:
            points = data.series(env, label)
            if points:
                _add_points(
                    figure, data, label, points, [m.ratio for m in points], column,
                    errors=None, lines=model is None, unit=f"x {reference}",
                )
        _add_level(figure, data, column, 1.0, f"{reference} (the reference): 1x", "",
                   _LEVEL_STYLE)
        _add_level(figure, data, column, float(cpus), "machine limit: CPUs x",
                   f"limit: {cpus}x", _LIMIT_STYLE)
    if model is not None:
        _add_curves(figure, data, model, variant, lambda env, label, n: model.predict_speedup(
            env, label, n, variant=variant), skip=(reference,))
    return figure


def efficiency_figure(
    measurements: Sequence[Measurement],
    model: OverheadModel,
    *,
    variant: str = "constant",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """Throughput as a percentage of the machine's limit (CPUs x single-env rate), per env.

    100% would be every CPU stepping envs all the time with no overhead at all. The model gives
    the limit (its t_env and CPUs), so envs it was not fitted on are not drawn. EnvPool can go
    above 100%: its native envs step faster than the Python ones the limit is computed from.

    Args:
        measurements: any number of envs, N and backends.
        model: from :func:`~vecenvs.bench.model.fit_overhead_model`.
        variant: the model's ``"constant"`` or ``"per_env"`` overhead, for the curves.
        reference: the sequential reference.
    """
    title = "Efficiency: throughput as a share of the machine's limit"
    data = _Data.of([m for m in measurements if m.config.env_label in model.envs], reference)
    if not data.latest:
        return _empty_figure(title, "no measurements of an env the model knows yet")
    y_title = "share of the machine limit (%, CPUs x single-env rate)"
    figure = _facets(data, title, y_title, log_y=False)
    for column, env in enumerate(data.envs, start=1):
        limit = model.envs[env].machine_limit
        for label in data.backends:
            points = data.series(env, label)
            if points:
                _add_points(
                    figure, data, label, points, [100 * m.mean / limit for m in points], column,
                    errors=[100 * m.std / limit for m in points], lines=False, unit="%",
                )
        _add_level(figure, data, column, 100.0, "machine limit: 100%", "", _LIMIT_STYLE)
    _add_curves(figure, data, model, variant, lambda env, label, n: (
        100 * model.predict_throughput(env, label, n, variant=variant)
        / model.envs[env].machine_limit
    ))
    figure.update_yaxes(rangemode="tozero")
    return figure


def runs_figure(
    runs: Mapping[str, Sequence[Measurement]],
    *,
    metric: str = "throughput",
    reference: str = DEFAULT_REFERENCE,
) -> go.Figure:
    """Several runs overlaid: one panel per env, a colour per backend, a line style per run.

    For comparing a run today with last week's, or one machine with another.

    Args:
        runs: run name (e.g. ``"#12 laptop"``) -> that run's measurements.
        metric: ``"throughput"`` (env steps/s) or ``"speedup"`` (over ``reference``).
        reference: the sequential reference of the runs.
    """
    if metric not in ("throughput", "speedup"):
        raise ValueError(f"metric must be 'throughput' or 'speedup', got {metric!r}")
    speedup = metric == "speedup"
    title = ("Speed-up" if speedup else "Throughput") + " of the selected runs"
    every = [m for measurements in runs.values() for m in measurements
             if not speedup or (m.ratio is not None and m.config.backend != reference)]
    data = _Data.of(every, reference)
    if not data.latest:
        return _empty_figure(title, "no measurements in the selected runs")
    y_title = (f"speed-up over {reference} (x, log scale)" if speedup
               else f"throughput ({_STEPS_PER_SECOND}, log scale)")
    figure = _facets(data, title, y_title, log_y=True)
    unit = f"x {reference}" if speedup else _STEPS_PER_SECOND
    dashes = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
    drawn = {id(m) for m in every}
    for index, (run, measurements) in enumerate(runs.items()):
        run_data = _Data.of([m for m in measurements if id(m) in drawn], reference)
        for column, env in enumerate(data.envs, start=1):
            for label in run_data.backends:
                points = run_data.series(env, label)
                if not points:
                    continue
                name = f"{data.names[label]} · {run}"
                figure.add_trace(
                    go.Scatter(
                        x=[m.config.num_envs for m in points],
                        y=[m.ratio if speedup else m.mean for m in points],
                        mode="lines+markers",
                        line={"color": data.colors[label], "width": 1.5,
                              "dash": dashes[index % len(dashes)]},
                        marker={"color": data.colors[label], "size": 7},
                        name=name, legendgroup=name,
                        showlegend=not _in_legend(figure, name),
                        hovertemplate=f"{name}<br>N=%{{x}}<br>%{{y:,.3~g}} {unit}<extra></extra>",
                    ),
                    row=1, col=column,
                )
    figure.update_layout(legend_title_text="backend · run")
    return figure


def autotune_figure(table: Sequence[Mapping[str, Any]], *, title: str | None = None) -> go.Figure:
    """Autotune's candidates as horizontal bars of throughput, fastest on top, the winner marked.

    Args:
        table: :attr:`vecenvs.autotune.AutotuneResult.table` (or the ``"table"`` of its
            ``to_dict()``, as the results store keeps it): rows with ``label``,
            ``steps_per_second``, ``std`` and ``vs_loop``.
        title: the chart's title.
    """
    title = title or "Autotune: throughput of each candidate"
    if not table:
        return _empty_figure(title, "no candidate measured yet")
    rows = sorted(table, key=lambda row: row["steps_per_second"])  # plotly draws bottom-up
    best = rows[-1]["label"]
    colors = [_family_color(str(row["label"]).split(" ")[0]) for row in rows]
    figure = go.Figure(go.Bar(
        x=[row["steps_per_second"] for row in rows],
        y=[("★ " if row["label"] == best else "") + row["label"] for row in rows],
        error_x={"type": "data", "array": [row["std"] or 0 for row in rows], "visible": True},
        orientation="h",
        marker_color=colors,
        text=["" if row["vs_loop"] is None else f"{row['vs_loop']:.2f}x loop" for row in rows],
        textposition="auto",
        name="median throughput",
        hovertemplate="%{y}<br>%{x:,.0f} env steps/s<extra></extra>",
    ))
    figure.update_layout(
        title_text=title, showlegend=True,
        xaxis_title=f"throughput ({_STEPS_PER_SECOND}, median of the timed windows)",
        yaxis_title="candidate (★ = chosen)",
        height=max(280, 90 + 45 * len(rows)),
    )
    return figure


# --- the data behind a figure -------------------------------------------------------------


@dataclass
class _Data:
    """Measurements sorted out for drawing: the last per configuration, in a stable order."""

    latest: dict[tuple[str, int, str], Measurement]
    envs: list[str]
    backends: list[str]
    num_envs: list[int]
    names: dict[str, str]
    colors: dict[str, str]
    t_env: dict[str, float]

    @classmethod
    def of(cls, measurements: Iterable[Measurement], reference: str) -> _Data:
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
        families = {m.config.backend_label: m.config.backend for m in latest.values()}
        backends = sorted(families, key=lambda label: (_family_rank(families[label]),
                                                       _natural_key(label)))
        names = {m.config.backend_label: display_label(m.config) for m in latest.values()}
        return cls(
            latest=latest,
            envs=envs,
            backends=backends,
            num_envs=sorted({n for _, n, _ in latest}),
            names=names,
            colors=backend_colors(latest.values()),
            t_env=t_env,
        )

    def series(self, env: str, label: str) -> list[Measurement]:
        """One backend's measurements of one env, by N."""
        keys = sorted(key for key in self.latest if key[0] == env and key[2] == label)
        return [self.latest[key] for key in keys]

    def span(self, env: str | None = None) -> tuple[int, int]:
        """The smallest and largest N measured (of ``env``, or of any env)."""
        ns = [n for e, n, _ in self.latest if env is None or e == env]
        return min(ns), max(ns)


# --- drawing helpers --------------------------------------------------------------------------


def _facets(data: _Data, title: str, y_title: str, *, log_y: bool) -> go.Figure:
    """One panel per env, N on a log x axis ticked at the measured N."""
    columns = len(data.envs)
    figure = make_subplots(
        rows=1,
        cols=columns,
        subplot_titles=data.envs,
        horizontal_spacing=min(0.08, 0.3 / columns),
    )
    ticks = data.num_envs
    figure.update_xaxes(
        type="log", title_text=_N_AXIS, tickvals=ticks, ticktext=[str(n) for n in ticks]
    )
    figure.update_yaxes(type="log" if log_y else "linear")
    figure.update_yaxes(title_text=y_title, row=1, col=1)
    figure.update_annotations(font_size=13)  # the panel titles
    figure.update_layout(
        title_text=title,
        height=480,
        uirevision=title,  # keeps the user's zoom and legend clicks across redraws
    )
    return figure


def _add_points(
    figure: go.Figure,
    data: _Data,
    label: str,
    points: list[Measurement],
    values: list[float],
    column: int,
    *,
    errors: list[float] | None,
    lines: bool,
    unit: str,
) -> None:
    """One backend's measured points in one panel (its legend entry only in the first)."""
    name = data.names[label]
    figure.add_trace(
        go.Scatter(
            x=[m.config.num_envs for m in points],
            y=values,
            error_y=None if errors is None else {"type": "data", "array": errors, "visible": True},
            mode="lines+markers" if lines else "markers",
            line={"color": data.colors[label], "width": 1},
            marker={"color": data.colors[label], "size": 8},
            name=name,
            legendgroup=label,
            showlegend=not _in_legend(figure, label),
            hovertemplate=f"{name}<br>N=%{{x}}<br>%{{y:,.3~g}} {unit}<extra></extra>",
        ),
        row=1,
        col=column,
    )


def _add_level(
    figure: go.Figure,
    data: _Data,
    column: int,
    level: float,
    name: str,
    text: str,
    style: dict,
) -> None:
    """A horizontal line across the measured N (one legend entry per kind), labelled at its end.

    A scatter line rather than a plotly shape: it gets a legend entry, and its label sits at
    the right place on log axes too.
    """
    low, high = data.span()
    group = "level: " + name
    figure.add_trace(
        go.Scatter(
            x=[low, high],
            y=[level, level],
            mode="lines+text" if text else "lines",
            text=["", text],
            textposition="top left",
            textfont={"size": 11},
            line=style,
            name=name,
            legendgroup=group,
            showlegend=not _in_legend(figure, group),
            hovertemplate=f"{name}: %{{y:,.4~g}}<extra></extra>",
        ),
        row=1,
        col=column,
    )


def _add_curves(figure, data: _Data, model: OverheadModel, variant: str, predict, skip=()):
    """The model's dashed curve for every fitted backend and env, over the measured N."""
    drawn = False
    for column, env in enumerate(data.envs, start=1):
        if env not in model.envs:
            continue
        grid = _grid(*data.span(env), model.cpus)
        for label in data.backends:
            fitted = label in model.backends or label == model.reference
            if label in skip or not fitted:
                continue
            fit = model.backends.get(label)
            if fit is not None and variant == "per_env" and fit.per_env is None:
                continue  # measured at one N only: no per-env fit to draw
            name = data.names[label]
            figure.add_trace(
                go.Scatter(
                    x=grid,
                    y=[predict(env, label, n) for n in grid],
                    mode="lines" if len(grid) > 1 else "markers",
                    line={"color": data.colors[label], "dash": "dash", "width": 1.5},
                    marker={"color": data.colors[label], "symbol": "line-ew-open", "size": 14},
                    name=f"{name} (model)",
                    legendgroup=label,
                    showlegend=False,
                    hovertemplate=f"model, {name}<br>N=%{{x:.3~g}}<br>%{{y:,.3~g}}<extra></extra>",
                ),
                row=1,
                col=column,
            )
            drawn = True
    if drawn:
        # The curves share their backend's legend entry (clicking it hides both); this entry
        # only says what a dashed line is.
        figure.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines",
                line={"color": "#7f7f7f", "dash": "dash", "width": 1.5},
                name=f"model prediction ({variant.replace('_', '-')} t_os), dashed",
                legendgroup="model",
                hoverinfo="skip",
            )
        )


def _in_legend(figure: go.Figure, group: str) -> bool:
    """Whether a trace of ``group`` already has a legend entry."""
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


def _empty_figure(title: str, message: str) -> go.Figure:
    """A figure that says there is nothing to draw yet (the dashboard before the first result)."""
    figure = go.Figure()
    figure.update_layout(
        title_text=title,
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[
            {"text": message, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
             "showarrow": False, "font": {"size": 16}}
        ],
    )
    return figure


def _ratio_text(ratio: float | None, reference: str) -> str:
    return "no speed-up (not from compare())" if ratio is None else f"{ratio:.2f}x {reference}"


def _check_cpus(cpus: int | None) -> int:
    if cpus is None:
        return available_cpus()
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
        raise ValueError(f"cpus must be a whole number >= 1, got {cpus!r}")
    return cpus


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
    channels = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    mixed = [round(c + (target - c) * abs(amount)) for c in channels]
    return "#" + "".join(f"{c:02x}" for c in mixed)
