"""The still pictures of plotly figures (vecenvs.bench.static): what an exported notebook shows."""

from __future__ import annotations

import base64
import io

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from synthetic_measurements import synthetic

from vecenvs.bench import figures, fit_overhead_model
from vecenvs.bench.static import RENDERER, add_static_fallback, png

matplotlib_image = pytest.importorskip("matplotlib.image")


def ink(picture: bytes) -> float:
    """The share of the picture's pixels that are not white."""
    pixels = matplotlib_image.imread(io.BytesIO(picture))
    return float((pixels[..., :3].min(axis=-1) < 0.9).mean())


def test_a_figure_becomes_a_png_with_what_it_draws():
    empty = png(go.Figure())
    one_bar = png(go.Figure(go.Bar(x=["a"], y=[1.0])))
    assert empty[:8] == one_bar[:8] == b"\x89PNG\r\n\x1a\n"
    assert ink(one_bar) > ink(empty) + 0.05, "a tall bar should cover part of the picture"


@pytest.mark.parametrize(
    "draw",
    [
        lambda ms, model: figures.seeds_figure(ms, cpus=2),
        lambda ms, model: figures.speedup_figure(ms, model),
        lambda ms, model: figures.throughput_figure(ms, model),
        lambda ms, model: figures.efficiency_figure(ms, model),
        lambda ms, model: figures.autotune_figure(
            [
                {
                    "label": "pool (num_workers=2)",
                    "steps_per_second": 1e5,
                    "std": 3e3,
                    "vs_loop": 1.3,
                },
                {"label": "multi", "steps_per_second": 7e4, "std": 1e3, "vs_loop": 1.0},
            ]
        ),
    ],
    ids=["seeds", "speedup", "throughput", "efficiency", "autotune"],
)
def test_the_labs_charts_are_drawn(draw):
    measurements = synthetic({"pool": (50e-6, 0.0), "subproc": (100e-6, 60e-6)}, ceiling=0.9)
    figure = draw(measurements, fit_overhead_model(measurements, cpus=2))
    assert ink(png(figure)) > 0.03


def test_numpy_data_is_drawn_as_plotly_sends_it():
    """plotly's to_dict sends numpy arrays as base64 typed arrays, not lists."""
    import numpy as np

    figure = go.Figure(go.Scatter(x=np.arange(6), y=np.arange(6.0) ** 2, mode="lines+markers"))
    assert "bdata" in str(figure.to_dict()["data"][0]["y"])
    assert ink(png(figure.to_dict())) > ink(png(go.Figure())) + 0.005


def test_an_unknown_trace_type_is_named_not_dropped_silently():
    with_pie = png(go.Figure(go.Pie(values=[1, 2])))
    assert ink(with_pie) > 0.0  # the note saying what was not drawn


def test_the_fallback_adds_a_picture_to_every_figure_shown():
    before = pio.renderers.default
    try:
        assert add_static_fallback()
        assert RENDERER in pio.renderers.default.split("+")
        bundle = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))._repr_mimebundle_()
        assert "application/vnd.plotly.v1+json" in bundle, "the interactive figure stays"
        assert base64.b64decode(bundle["image/png"])[:4] == b"\x89PNG"
        add_static_fallback()  # twice: still one picture
        assert pio.renderers.default.split("+").count(RENDERER) == 1
    finally:
        pio.renderers.default = before
