"""Tests of the shared plotly figures (vecenvs.bench.figures), on made-up measurements.

No browser: the figures are checked through their data (traces, axes, legend) and by writing
them to JSON and HTML.
"""

from __future__ import annotations

import json
import random

import pytest
from plotly import graph_objects as go
from synthetic_measurements import CHEAP, COSTLY, ENV_STEP, US, measurement, synthetic

from vecenvs.bench.figures import (
    BACKEND_COLORS,
    autotune_figure,
    backend_colors,
    display_label,
    efficiency_figure,
    runs_figure,
    seeds_figure,
    seeds_figures,
    speedup_figure,
    throughput_figure,
)
from vecenvs.bench.model import fit_overhead_model

CPUS = 2
NUM_ENVS = (1, 2, 4, 8)
OVERHEADS = {"pool": (300 * US, 0.0), "subproc": (100 * US, 30 * US)}


@pytest.fixture
def data():
    # Given costly env first, to check that the figures order envs by cost themselves.
    costly_first = {COSTLY: ENV_STEP[COSTLY], CHEAP: ENV_STEP[CHEAP]}
    return synthetic(OVERHEADS, envs=costly_first, num_envs=NUM_ENVS, cpus=CPUS)


@pytest.fixture
def model(data):
    return fit_overhead_model(data, cpus=CPUS)


def legend_names(figure: go.Figure) -> list[str]:
    return [trace.name for trace in figure.data if trace.showlegend is not False]


def subplot_titles(figure: go.Figure) -> list[str]:
    return [annotation.text for annotation in figure.layout.annotations]


def axes(figure: go.Figure, kind: str) -> list:
    """Every x (or y) axis of the layout, in subplot order."""
    names = sorted(
        (name for name in figure.layout if name.startswith(kind + "axis")),
        key=lambda name: int(name[5:] or 1),
    )
    return [figure.layout[name] for name in names]


def assert_serializes(figure: go.Figure, tmp_path) -> None:
    assert json.loads(figure.to_json())["data"] is not None
    path = tmp_path / "figure.html"
    figure.write_html(path, include_plotlyjs=False)
    assert "plotly" in path.read_text().lower()


# --- the seeds' figure ------------------------------------------------------------------------


def test_seeds_figure_grid_rows_are_n_and_columns_envs_by_cost(data, tmp_path):
    figure = seeds_figure(data, cpus=CPUS)

    # 4 values of N x 2 envs, the cheap env in the first column.
    expected_titles = [f"{env}, N={n}" for n in NUM_ENVS for env in (CHEAP, COSTLY)]
    assert subplot_titles(figure) == expected_titles
    assert len(axes(figure, "x")) == len(axes(figure, "y")) == 8
    # One bar per env x N x backend (the reference included).
    assert len(figure.data) == 2 * len(NUM_ENVS) * 3
    assert all(isinstance(trace, go.Bar) for trace in figure.data)
    assert sorted(legend_names(figure)) == ["gym-sync", "pool", "subproc"]
    assert figure.layout.title.text
    assert_serializes(figure, tmp_path)


def test_seeds_figure_bars_carry_throughput_spread_and_one_colour_per_backend(data):
    figure = seeds_figure(data, cpus=CPUS)

    colours = {}
    for trace in figure.data:
        colours.setdefault(trace.legendgroup, set()).add(trace.marker.color)
        assert trace.error_y.array[0] > 0  # three windows around the mean: a real spread
    assert all(len(colour) == 1 for colour in colours.values())
    assert len({colour.pop() for colour in colours.values()}) == 3
    first_cell = [trace for trace in figure.data if trace.xaxis == "x"]
    reference = next(trace for trace in first_cell if trace.name == "gym-sync")
    assert reference.y[0] == pytest.approx(1 / ENV_STEP[CHEAP])
    assert "1.00x gym-sync" in reference.hovertemplate


def test_seeds_figure_axis_titles_have_units(data):
    figure = seeds_figure(data, cpus=CPUS)

    y_titles = [axis.title.text for axis in axes(figure, "y")]
    x_titles = [axis.title.text for axis in axes(figure, "x")]
    # Left column of each row: the throughput's unit; bottom row: what the bars are.
    assert y_titles[0::2] == ["env steps/s"] * len(NUM_ENVS)
    assert x_titles[-2:] == ["backend (see legend)"] * 2


@pytest.mark.parametrize("case, rows", [("within", (1, 2)), ("beyond", (4, 8))])
def test_seeds_figure_splits_n_at_the_cpus(data, case, rows):
    figure = seeds_figure(data, cpus=CPUS, case=case)

    assert subplot_titles(figure) == [f"{env}, N={n}" for n in rows for env in (CHEAP, COSTLY)]
    assert f"{CPUS} CPUs" in figure.layout.title.text


def test_seeds_figures_gives_both_cases_and_skips_an_empty_one(data):
    both = seeds_figures(data, cpus=CPUS)
    small = seeds_figures([m for m in data if m.config.num_envs <= CPUS], cpus=CPUS)

    assert set(both) == {"within", "beyond"}
    assert set(small) == {"within"}
    with pytest.raises(ValueError, match="case"):
        seeds_figure(data, cpus=CPUS, case="inside")


def test_seeds_figure_with_nothing_to_draw_says_so():
    figure = seeds_figure([], cpus=CPUS, case="beyond")

    assert len(figure.data) == 0
    assert "no measurements" in figure.layout.annotations[0].text


# --- throughput, speed-up, efficiency ---------------------------------------------------------


def test_throughput_figure_without_model(data, tmp_path):
    figure = throughput_figure(data, cpus=CPUS)

    points = [trace for trace in figure.data if trace.mode == "lines+markers"]
    limits = [trace for trace in figure.data if trace.name.startswith("limit estimate")]
    assert len(points) == 2 * 3  # per env, per backend
    assert len(limits) == 2
    # No ceiling measured: the estimate min(N, CPUs) x the single-env rate, one legend entry.
    cheap_limit = next(trace for trace in limits if trace.xaxis == "x")
    assert list(cheap_limit.y) == pytest.approx([min(n, CPUS) / ENV_STEP[CHEAP] for n in NUM_ENVS])
    assert "no ceiling measured" in cheap_limit.name
    names = legend_names(figure)
    assert len(names) == len(set(names)) == 4  # three backends + the limit
    assert subplot_titles(figure) == [CHEAP, COSTLY]
    assert all("number of envs N" in axis.title.text for axis in axes(figure, "x"))
    assert all(axis.type == "log" for axis in axes(figure, "x"))
    assert "env steps/s" in axes(figure, "y")[0].title.text
    assert not any("(model)" in trace.name for trace in figure.data)
    assert_serializes(figure, tmp_path)


def test_throughput_figure_draws_the_model_beside_the_points(data, model):
    figure = throughput_figure(data, model)

    curves = [trace for trace in figure.data if trace.name.endswith("(model)")]
    # Every backend, the reference included (its throughput does not grow with N), per env.
    assert len(curves) == 2 * 3
    assert all(trace.line.dash == "dash" and trace.showlegend is False for trace in curves)
    pool_curve = next(t for t in curves if t.name == "pool (model)" and t.xaxis == "x2")
    n = pool_curve.x[len(pool_curve.x) // 2]
    assert pool_curve.y[len(pool_curve.x) // 2] == pytest.approx(
        model.predict_throughput(COSTLY, "pool", n)
    )
    assert min(pool_curve.x) == 1 and max(pool_curve.x) == 8
    names = legend_names(figure)
    assert len(names) == len(set(names))
    assert any("model prediction" in name for name in names)


def test_speedup_figure(data, model, tmp_path):
    figure = speedup_figure(data, model)

    points = [trace for trace in figure.data if trace.mode == "markers"]
    curves = [trace for trace in figure.data if trace.name.endswith("(model)")]
    # The reference is the line at 1x, not points or a curve.
    assert sorted({trace.name for trace in points}) == ["pool", "subproc"]
    assert sorted({trace.name for trace in curves}) == ["pool (model)", "subproc (model)"]
    pool = next(trace for trace in points if trace.name == "pool" and trace.xaxis == "x")
    expected = [m.ratio for m in data if m.config.backend == "pool" and m.config.env_id == CHEAP]
    assert list(pool.y) == pytest.approx(expected)
    levels = {
        trace.name: trace.y[-1]
        for trace in figure.data
        if trace.name.startswith(("gym-sync", "limit estimate"))
    }
    assert levels == {
        "gym-sync (the loop, the reference): 1x": 1.0,
        "limit estimate: min(N, CPUs) x one env's rate (no ceiling measured)": CPUS,
    }
    assert "speed-up over gym-sync (x" in axes(figure, "y")[0].title.text
    assert_serializes(figure, tmp_path)


def test_speedup_figure_per_env_variant_fits_subproc_better(data, model):
    constant = speedup_figure(data, model)
    per_env = speedup_figure(data, model, variant="per_env")

    def subproc_curve(figure):
        return next(t for t in figure.data if t.name == "subproc (model)" and t.xaxis == "x")

    # The data were made with a per-env overhead: only that variant passes through the points.
    measured = {
        m.config.num_envs: m.ratio
        for m in data
        if m.config.backend == "subproc" and m.config.env_id == CHEAP
    }
    curve = subproc_curve(per_env)
    at_eight = curve.y[list(curve.x).index(8.0)]
    assert at_eight == pytest.approx(measured[8], rel=1e-6)
    assert subproc_curve(constant).y[-1] != pytest.approx(measured[8], rel=0.01)


def test_efficiency_figure(data, model, tmp_path):
    figure = efficiency_figure(data, model)

    pool = next(
        t for t in figure.data if t.name == "pool" and t.mode == "markers" and t.xaxis == "x"
    )
    limit = model.envs[CHEAP].limit
    expected = [
        100 * m.mean / limit(m.config.num_envs)
        for m in data
        if m.config.backend == "pool" and m.config.env_id == CHEAP
    ]
    assert list(pool.y) == pytest.approx(expected)
    assert any(
        trace.name.startswith("limit estimate") and list(trace.y) == [100.0] * 4
        for trace in figure.data
    )
    assert "estimated as CPUs x one env" in figure.layout.title.text
    assert any(trace.name.endswith("(model)") for trace in figure.data)
    assert "%" in axes(figure, "y")[0].title.text
    assert_serializes(figure, tmp_path)


def test_empty_input_gives_a_figure_that_says_so(model):
    for figure in (
        throughput_figure([], cpus=CPUS),
        speedup_figure([], cpus=CPUS),
        efficiency_figure([], model),
    ):
        assert len(figure.data) == 0
        assert "no measurements" in figure.layout.annotations[0].text
        assert figure.layout.title.text


# --- labels, colours, order ---------------------------------------------------------------


def test_native_backend_is_labelled_and_gets_no_model_curve(data, model):
    envpool = measurement(CHEAP, 4, "envpool", 1e6, workers=2, ratio=10.0)
    with_kwargs = measurement(
        CHEAP, 4, "envpool", 1e6, workers=2, ratio=10.0, backend_kwargs={"num_threads": 2}
    )

    figure = speedup_figure([*data, envpool], model)

    assert display_label(envpool.config) == "envpool (native C++)"
    assert display_label(with_kwargs.config) == "envpool (native C++; num_threads=2)"
    assert display_label(data[1].config) == data[1].config.backend_label
    names = [trace.name for trace in figure.data]
    assert "envpool (native C++)" in names
    assert not any(name.startswith("envpool") and name.endswith("(model)") for name in names)


def test_backend_colours_shade_variants_of_a_family():
    runs = [
        measurement(CHEAP, 4, "pool", 1e5, workers=k, backend_kwargs={"num_workers": k})
        for k in (10, 2)
    ]
    runs += [
        measurement(CHEAP, 4, "subproc", 1e5, workers=4),
        measurement(CHEAP, 4, "ray", 1e5, workers=2),
    ]

    colours = backend_colors(runs)

    # Natural order: 2 workers before 10; the first variant gets the family colour itself.
    assert colours["pool (num_workers=2)"] == BACKEND_COLORS["pool"]
    assert colours["pool (num_workers=10)"] not in (BACKEND_COLORS["pool"], None)
    assert colours["subproc"] == BACKEND_COLORS["subproc"]
    assert colours["ray"].startswith("#") and len(colours["ray"]) == 7
    assert backend_colors(reversed(runs)) == colours


def test_figures_do_not_depend_on_the_order_results_arrived_in(data, model):
    shuffled = list(data)
    random.Random(0).shuffle(shuffled)

    for draw in (
        lambda d: seeds_figure(d, cpus=CPUS),
        lambda d: throughput_figure(d, model),
        lambda d: speedup_figure(d, model),
    ):
        assert draw(shuffled).to_json() == draw(data).to_json()


def test_a_later_measurement_of_the_same_configuration_replaces_the_earlier(data):
    again = measurement(CHEAP, 1, "pool", 12_345, workers=1, ratio=0.25)

    figure = seeds_figure([*data, again], cpus=CPUS)

    first_cell_pool = next(t for t in figure.data if t.xaxis == "x" and t.name == "pool")
    assert first_cell_pool.y[0] == pytest.approx(12_345)
    assert len(figure.data) == 2 * len(NUM_ENVS) * 3  # replaced, not added


# --- the measured ceiling ---------------------------------------------------------------------


@pytest.fixture
def with_ceiling():
    # Two busy cores give 1.6x one env's rate: the ceiling row says so.
    return synthetic(OVERHEADS, num_envs=NUM_ENVS, cpus=CPUS, ceiling=0.8)


def test_the_measured_ceiling_is_the_limit_line_not_a_backend(with_ceiling):
    model = fit_overhead_model(with_ceiling, cpus=CPUS)
    ceiling = {
        m.config.num_envs: m
        for m in with_ceiling
        if m.config.backend == "ceiling" and m.config.env_id == CHEAP
    }

    throughput = throughput_figure(with_ceiling, model)
    (line,) = [
        t for t in throughput.data if t.name.startswith("ceiling (measured)") and t.xaxis == "x"
    ]
    assert list(line.y) == pytest.approx([ceiling[n].mean for n in NUM_ENVS])
    assert not any(t.name == "ceiling" for t in throughput.data), "drawn as the limit only"
    assert not any(t.name.startswith("limit estimate") for t in throughput.data)

    speedup = speedup_figure(with_ceiling, model)
    (line,) = [
        t for t in speedup.data if t.name.startswith("ceiling (measured)") and t.xaxis == "x"
    ]
    assert list(line.y) == pytest.approx([0.8, 1.6, 1.6, 1.6])


def test_efficiency_is_the_share_of_the_ceiling_window_by_window(with_ceiling):
    paired = measurement(CHEAP, 4, "multi", 40_000, ratio=0.8)
    paired.efficiency = 0.5  # compare() measured it against the ceiling's windows
    data = [*with_ceiling, paired]

    figure = efficiency_figure(data)  # no model needed once the ceiling is measured

    assert figure.layout.title.text == "Efficiency: throughput as a share of the ceiling"
    multi = next(t for t in figure.data if t.name == "multi" and t.xaxis == "x")
    assert list(multi.y) == [50.0]
    pool = next(t for t in figure.data if t.name == "pool" and t.xaxis == "x")
    ceiling = {
        m.config.num_envs: m.mean
        for m in with_ceiling
        if m.config.backend == "ceiling" and m.config.env_id == CHEAP
    }
    expected = [
        100 * m.mean / ceiling[m.config.num_envs]
        for m in with_ceiling
        if m.config.backend == "pool" and m.config.env_id == CHEAP
    ]
    assert list(pool.y) == pytest.approx(expected)


# --- read at a glance -------------------------------------------------------------------------


def costly(step_seconds: float, backend: str = "pool", **kwargs) -> object:
    rate = 1 / step_seconds if backend == "gym-sync" else 1e4
    result = measurement("vecenvs/Costly-v0", 4, backend, rate, workers=2, ratio=1.5, **kwargs)
    result.config.env_kwargs = {
        "step_seconds": step_seconds,
        "cost_kind": "busy",
        "step_spread": 0.0,
    }
    return result


def test_panels_have_short_titles_that_fit_and_wrap_after_three():
    steps = [1e-05, 9.999999999999999e-05, 0.001, 0.01]
    data = [costly(step) for step in steps] + [costly(step, "gym-sync") for step in steps]

    figure = throughput_figure(data, cpus=CPUS)

    titles = subplot_titles(figure)
    # Cheapest first; only the argument that differs; 9.999999999999999e-05 is 0.0001.
    assert titles == [
        "vecenvs/Costly-v0 step_seconds=1e-05",
        "vecenvs/Costly-v0 step_seconds=0.0001",
        "vecenvs/Costly-v0 step_seconds=0.001",
        "vecenvs/Costly-v0 step_seconds=0.01",
    ]
    # Three panels a row at most: the fourth starts a second row.
    domains = sorted({tuple(axis.domain) for axis in axes(figure, "x")})
    assert len(domains) == 3
    assert len({tuple(axis.domain) for axis in axes(figure, "y")}) == 2
    assert figure.layout.legend.orientation == "h", "the legend sits below, not beside"


def test_log_axes_are_labelled_at_a_few_round_values(data, model):
    for figure in (throughput_figure(data, model), speedup_figure(data, model)):
        for axis in axes(figure, "y"):
            assert axis.tickvals, "plotly would label every minor tick"
            assert 2 <= len(axis.tickvals) <= 12
            for tick in axis.tickvals:
                mantissa = float(f"{tick:e}".split("e")[0])
                assert mantissa in (1.0, 2.0, 5.0), axis.tickvals
            assert all(text[-1] in "0123456789kMG" for text in axis.ticktext)


def test_history_overlay_has_a_colour_per_run_a_dash_per_backend_and_a_short_legend():
    runs = {
        f"#{index} run with a rather long label number {index}": synthetic(
            OVERHEADS, num_envs=NUM_ENVS, cpus=CPUS
        )
        for index in range(1, 4)
    }

    figure = runs_figure(runs)

    lines = [t for t in figure.data if t.x[0] is not None]
    assert len({t.line.color for t in lines}) == 3, "one colour per run"
    assert len({t.line.dash for t in lines}) == 3, "one line style per backend"
    names = legend_names(figure)
    assert len(names) == 3 + 3, "runs + backends, not runs x backends"
    assert figure.layout.legend.orientation == "h"
    titles = [t.legendgrouptitle.text for t in figure.data if t.showlegend is not False]
    assert [title for title in titles if title] == ["runs", "backends", "backends", "backends"]
    training = runs_figure(runs, what="training")
    assert axes(training, "y")[0].title.text.startswith("training throughput")


def test_names_from_the_data_are_shown_as_text_never_as_markup(tmp_path):
    hostile = '<img src="http://127.0.0.1:9/x.png"> %{x} <a href="http://example.com">a</a>'
    data = [costly(1e-3), costly(1e-3, "gym-sync")]
    data[0].config.backend_kwargs = {"label": hostile}
    data[0].config.env_kwargs["step_seconds"] = hostile
    data[1].config.env_kwargs["step_seconds"] = 1e-3

    for figure in (
        throughput_figure(data, cpus=CPUS),
        seeds_figure(data, cpus=CPUS),
        runs_figure({hostile: data}),
    ):
        shown = [trace.name or "" for trace in figure.data]
        shown += [trace.hovertemplate or "" for trace in figure.data]
        shown += [annotation.text for annotation in figure.layout.annotations]
        for text in shown:
            assert "<img" not in text and "<a href" not in text and "%{x} " not in text, text
        assert any("&lt;img" in text for text in shown)


def test_autotune_legend_matches_its_colours_and_labels_clear_the_error_bars():
    table = [
        {"label": label, "steps_per_second": rate, "std": rate / 10, "vs_loop": rate / 1e5}
        for label, rate in (
            ("pool (K=2)", 2e5),
            ("multi", 1e5),
            ("pool (K=1)", 9e4),
            ("subproc", 3e4),
        )
    ]

    figure = autotune_figure(table)

    assert [trace.name for trace in figure.data] == ["pool", "multi", "subproc"]
    for trace in figure.data:
        assert trace.marker.color == BACKEND_COLORS[trace.name]
        assert trace.textposition == "inside" and trace.insidetextanchor == "start"
        assert all(text.endswith("x multi") for text in trace.text)
    assert figure.layout.yaxis.categoryarray[-1] == "★ pool (K=2)"


def test_history_keeps_its_panel_order_and_each_backends_style_across_views():
    # The speed-up view leaves the reference out: the order of the envs (by the reference's
    # step time) and the style of each backend must not change with it.
    runs = {
        f"#{index}": synthetic(OVERHEADS, num_envs=NUM_ENVS, cpus=CPUS, ceiling=0.9)
        for index in (1, 2)
    }

    def looks(figure: go.Figure) -> tuple[list[str], dict[str, tuple]]:
        styles = {
            t.name: (t.line.dash, t.marker.symbol)
            for t in figure.data
            if t.legendgroup == "backends"
        }
        return subplot_titles(figure), styles

    (titles, styles), (speedup_titles, speedup_styles) = (
        looks(runs_figure(runs, metric=metric)) for metric in ("throughput", "speedup")
    )

    assert titles == speedup_titles == [CHEAP, COSTLY], "cheapest first, in both views"
    assert "gym-sync" in styles and "gym-sync" not in speedup_styles
    assert {name: styles[name] for name in speedup_styles} == speedup_styles
    assert styles["ceiling"] == ("dot", "diamond"), "the ceiling dotted, as in every chart"
    assert len(set(styles.values())) == len(styles), "one style per backend"


def test_no_model_curve_where_the_fit_is_poor_or_from_too_few_points():
    def curves(figure: go.Figure) -> set[str]:
        return {t.name for t in figure.data if t.line.dash == "dash" and "(model)" in t.name}

    # subproc's overhead grows with N: up to N=64 the constant model fits it poorly, the
    # per-env one well.
    data = synthetic(OVERHEADS, cpus=CPUS)
    model = fit_overhead_model(data, cpus=CPUS)
    assert curves(speedup_figure(data, model)) == {"pool (model)"}
    assert curves(speedup_figure(data, model, variant="per_env")) == {
        "pool (model)",
        "subproc (model)",
    }
    two_n = [m for m in data if m.config.num_envs in (4, 8) and m.config.env_label == CHEAP]
    assert curves(speedup_figure(two_n, fit_overhead_model(two_n, cpus=CPUS))) == set()


def test_throughput_tooltips_write_numbers_as_the_tables_do(data):
    figure = throughput_figure(data)
    (pool,) = [t for t in figure.data if t.name == "pool" and t.x[0] is not None][:1]
    assert "%{y:,.0f} env steps/s" in pool.hovertemplate
    assert "pool: K processes x N/K envs each" in pool.hovertemplate, "named in plain words"
    assert "%{y:,.3~g} x gym-sync" in speedup_figure(data).data[0].hovertemplate


def test_the_flame_graph_is_an_icicle_that_grows_upwards_in_category_colours():
    from vecenvs.profile import CATEGORY_COLORS
    from vecenvs.profile.flamegraph import flamegraph_figure
    from vecenvs.profile.stacks import Frame, StackSample

    work = Frame("step", "gymnasium/envs/classic_control/cartpole.py", 10)
    wait = Frame("wait", "multiprocessing/connection.py", 5)
    main = Frame("<module> <b>", "target.py", 1)
    samples = [
        StackSample("parent", "MainThread", (main, work), 30),
        StackSample("parent", "MainThread", (main, wait), 10),
        StackSample("worker 0", "MainThread", (main, work), 40),
        StackSample("worker 0", "MainThread", (main, Frame("rare", "x.py", 1)), 0),
    ]

    figure = flamegraph_figure(samples, title="subproc <i>N=8</i>")

    (icicle,) = figure.data
    assert icicle.type == "icicle" and icicle.tiling.flip == "y", "callers below callees"
    assert icicle.ids[0] == "all" and icicle.values[0] == 80
    by_id = dict(zip(icicle.ids, icicle.values))
    for node, parent in zip(icicle.ids, icicle.parents):
        if parent:  # branchvalues="total": no box is wider than its caller
            assert by_id[node] <= by_id[parent]
    assert set(icicle.labels) >= {"parent", "worker 0", "step", "wait", "&lt;module&gt; &lt;b&gt;"}
    assert "rare" not in icicle.labels, "a box too thin to see is left out"
    colours = dict(zip(icicle.labels, icicle.marker.colors))
    assert colours["step"] == CATEGORY_COLORS["env compute"]
    assert colours["wait"] == CATEGORY_COLORS["waiting"]
    assert "subproc &lt;i&gt;N=8&lt;/i&gt;" in figure.layout.title.text
    assert "env compute 88%" in figure.layout.title.text
