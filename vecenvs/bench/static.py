"""A still picture of a plotly figure, for wherever plotly's JavaScript does not run.

A notebook exported to HTML, a notebook viewer or a PDF shows an empty space where plotly's
JavaScript would have drawn a chart. :func:`png` draws the same figure with matplotlib (the
``notebooks`` extra installs it), and :func:`add_static_fallback` makes every figure a notebook
shows carry that picture beside the interactive version: JupyterLab picks the interactive one,
an exported page the picture.

It draws what the lab's charts use: scatter traces (lines, markers, dashes, error bars) and bar
traces (vertical or horizontal; grouped, stacked or overlaid), in subplots, on linear or log
axes, with titles, tick labels, subplot titles and one legend. Hover texts are left out; a
trace of another type is named in a note on the picture rather than silently dropped.

Example:
    >>> import plotly.graph_objects as go
    >>> from vecenvs.bench.static import png
    >>> picture = png(go.Figure(go.Bar(x=["a", "b"], y=[1, 3])))
    >>> picture[:4] == b"\\x89PNG"
    True
"""

from __future__ import annotations

import base64
import html
import importlib.util
import io
import math
import re
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["RENDERER", "add_static_fallback", "png"]

#: The name :func:`add_static_fallback` registers its plotly renderer under.
RENDERER = "vecenvs_png"

_DPI = 100
_DASHES: dict[str, Any] = {
    "solid": "-",
    "dash": "--",
    "dot": ":",
    "dashdot": "-.",
    "longdash": (0, (8, 3)),
    "longdashdot": (0, (8, 3, 2, 3)),
}
# The plot area within the picture: room for the axis titles on the left, the title above
# (pixels) and the legend below (pixels, plus a line per row of the legend).
_LEFT, _RIGHT = 0.09, 0.98
_TOP_PIXELS, _BOTTOM_PIXELS, _LEGEND_ROW_PIXELS = 80, 60, 18


def png(figure: Any, *, width: int | None = None, height: int | None = None) -> bytes:
    """``figure`` (a plotly ``Figure`` or its ``to_dict()``) as a PNG image drawn by matplotlib,
    ``width`` x ``height`` pixels: by default the figure's own, else 900 x 450.

    Raises:
        ImportError: matplotlib is not installed.
    """
    from matplotlib.figure import Figure

    spec = figure if isinstance(figure, Mapping) else figure.to_dict()
    layout = spec.get("layout", {})
    traces = list(spec.get("data", []))
    width = width or layout.get("width") or 900
    height = height or layout.get("height") or 450
    picture = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)  # savefig draws with Agg
    shown = [t for t in traces if t.get("name") and t.get("showlegend") is not False]
    names = {_plain(t.get("name")) for t in shown}
    columns = max(1, min(len(names), int(width // 260)))
    legend_rows = -(-len(names) // columns)
    # Horizontal bars are labelled on the left with their categories: give them room.
    labelled = any(t.get("type") == "bar" and t.get("orientation") == "h" for t in traces)
    bottom = (_BOTTOM_PIXELS + _LEGEND_ROW_PIXELS * legend_rows) / height
    area = (0.3 if labelled else _LEFT, _RIGHT, bottom, 1 - _TOP_PIXELS / height)

    axes: dict[tuple[str, str], Any] = {}  # one per (x axis, y axis) pair the traces use
    legend: dict[str, Any] = {}
    skipped: list[str] = []
    bars: dict[tuple[str, str], list[dict]] = {}
    for trace in traces:
        kind = trace.get("type", "scatter")
        where = (trace.get("xaxis") or "x", trace.get("yaxis") or "y")
        if where not in axes:
            axes[where] = _add_axes(picture, layout, where, area)
        if kind == "scatter":
            _scatter(axes[where], trace, legend)
        elif kind == "bar":
            bars.setdefault(where, []).append(trace)
        else:
            skipped.append(kind)
    for where, group in bars.items():
        _bars(axes[where], group, layout.get("barmode") or "group", legend)
    for (x_name, y_name), ax in axes.items():
        _style_axis(ax, "x", _axis(layout, x_name))
        _style_axis(ax, "y", _axis(layout, y_name))

    title = _plain((layout.get("title") or {}).get("text"))
    if title:
        picture.suptitle(title, fontsize=12, x=_LEFT, y=1 - 20 / height, ha="left", va="top")
    for note in layout.get("annotations", []):
        _annotate(picture, note, area)
    if skipped:
        note = f"(not drawn here: {', '.join(sorted(set(skipped)))} traces)"
        picture.text(0.5, 0.5, note, ha="center", va="center", color="#7f7f7f")
    if legend:
        picture.legend(
            list(legend.values()),
            list(legend),
            loc="lower left",
            ncol=columns,
            fontsize=8,
            frameon=False,
            bbox_to_anchor=(0.01, 0.0),
        )
    buffer = io.BytesIO()
    picture.savefig(buffer, format="png")
    return buffer.getvalue()


def add_static_fallback() -> bool:
    """From now on, every plotly figure shown in this notebook also carries a PNG picture.

    Registers a plotly renderer that adds ``image/png`` (:func:`png`) to each figure's output,
    beside plotly's own (``plotly_mimetype``): JupyterLab shows the interactive figure, and a
    notebook exported with ``jupyter nbconvert --to html`` (or shown where no JavaScript runs)
    shows the picture. Returns False, with a warning, when matplotlib is missing.
    """
    import plotly.io as pio
    from plotly.io._base_renderers import MimetypeRenderer

    if importlib.util.find_spec("matplotlib") is None:
        warnings.warn(
            "matplotlib is not installed: figures stay interactive only, and an "
            "exported HTML page will not show them (pip install matplotlib)",
            stacklevel=2,
        )
        return False

    class _PictureRenderer(MimetypeRenderer):
        """plotly's renderer interface: a figure's dict in, a piece of its output out."""

        def to_mimebundle(self, fig_dict: dict) -> dict[str, str]:
            try:
                picture = png(fig_dict)
            except Exception as error:  # the interactive figure must not fail with its picture
                warnings.warn(
                    f"no still picture of this figure: {type(error).__name__}: {error}",
                    stacklevel=2,
                )
                return {}
            return {"image/png": base64.b64encode(picture).decode("ascii")}

    pio.renderers[RENDERER] = _PictureRenderer()
    names = [name for name in (pio.renderers.default or "").split("+") if name]
    if "plotly_mimetype" not in names:
        names.insert(0, "plotly_mimetype")
    if RENDERER not in names:
        names.append(RENDERER)
    pio.renderers.default = "+".join(names)
    return True


# --- layout -----------------------------------------------------------------------------------


def _axis(layout: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The layout of a trace's axis: ``"x2"`` is the layout's ``"xaxis2"``."""
    return layout.get(name[0] + "axis" + name[1:], {})


def _add_axes(
    picture: Any, layout: Mapping[str, Any], where: tuple[str, str], area: tuple[float, ...]
) -> Any:
    """A matplotlib axes for one (x axis, y axis) pair, placed by the plotly axes' domains
    within ``area`` (left, right, bottom, top)."""
    (x0, x1), (y0, y1) = (_axis(layout, name).get("domain") or (0.0, 1.0) for name in where)
    (left, bottom), (right, top) = _place(area, x0, y0), _place(area, x1, y1)
    return picture.add_axes([left, bottom, right - left, top - bottom])


def _place(area: tuple[float, ...], x: float, y: float) -> tuple[float, float]:
    """plotly's paper coordinates (0-1 over the plot area) as the picture's."""
    left, right, bottom, top = area
    return left + x * (right - left), bottom + y * (top - bottom)


def _style_axis(ax: Any, which: str, axis: Mapping[str, Any]) -> None:
    """A plotly axis's scale, title, range and ticks on ``ax``'s ``which`` ("x" or "y") axis."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    def set_(name: str, *args: Any, **kwargs: Any) -> None:  # set_("scale", ...): ax.set_xscale
        getattr(ax, f"set_{which}{name}")(*args, **kwargs)

    log, ticker = axis.get("type") == "log", getattr(ax, f"{which}axis")
    ticks, texts = axis.get("tickvals"), axis.get("ticktext")
    if log:
        set_("scale", "log")
        if ticks is None:  # 2, 3, 500, not 2 x 10^0
            ticker.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.4g}"))
            ticker.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:,.4g}"))
    title = _plain((axis.get("title") or {}).get("text"))
    if title:
        set_("label", title, fontsize=8)
    span = axis.get("range")
    if span and all(isinstance(v, (int, float)) for v in span):
        # plotly gives a log axis's range in powers of ten
        set_("lim", *([10.0**v for v in span] if log else span))
    if ticks is not None and all(isinstance(v, (int, float)) for v in ticks):
        set_("ticks", list(ticks))
        if texts is not None:
            set_("ticklabels", [_plain(str(t)) for t in texts])
        ticker.set_minor_formatter(NullFormatter())
    if axis.get("showticklabels") is False:
        ax.tick_params(axis=which, labelbottom=False, labelleft=False)
    ax.tick_params(axis=which, labelsize=8)
    ax.grid(True, which="major", axis=which, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)


def _annotate(picture: Any, note: Mapping[str, Any], area: tuple[float, ...]) -> None:
    """A plotly annotation in paper coordinates (subplot titles, "nothing to draw" notes)."""
    text = _plain(note.get("text"))
    if not text or note.get("xref", "paper") != "paper" or note.get("yref", "paper") != "paper":
        return
    x, y = _place(area, float(note.get("x", 0.5)), float(note.get("y", 0.5)))
    ha, va = note.get("xanchor"), note.get("yanchor")
    ha = ha if ha in ("left", "right") else "center"
    va = va if va in ("top", "bottom") else "center"
    picture.text(x, y, text, fontsize=9, ha=ha, va=va)


def _plain(text: Any) -> str:
    """plotly's bit of HTML (``<br>``, ``<b>``, entities) as plain text."""
    if not text:
        return ""
    text = re.sub(r"<br\s*/?>", "\n", str(text))
    return html.unescape(re.sub(r"<[^>]+>", "", text)).replace("\u200b", "")


# --- traces -----------------------------------------------------------------------------------


def _array(values: Any) -> list[Any]:
    """A trace's data as a list: plotly's ``to_dict`` sends numpy arrays as typed arrays
    (``{"dtype": "f8", "bdata": base64}``), lists stay lists."""
    if isinstance(values, Mapping) and "bdata" in values:
        import numpy as np

        array = np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
        if values.get("shape"):
            array = array.reshape([int(size) for size in str(values["shape"]).split(",")])
        return array.tolist()
    if values is None:
        return []
    return list(values)


def _numbers(values: Any) -> list[float]:
    return [math.nan if v is None else v for v in _array(values)]


def _color(style: Mapping[str, Any] | None) -> str | None:
    """A line's or marker's one colour; None when it has none or one per point."""
    color = (style or {}).get("color")
    return color if isinstance(color, str) else None


def _scatter(ax: Any, trace: Mapping[str, Any], legend: dict[str, Any]) -> None:
    mode = trace.get("mode") or "lines+markers"
    line, marker = trace.get("line") or {}, trace.get("marker") or {}
    xs, ys = _array(trace.get("x")), _numbers(trace.get("y"))
    style = {
        "linestyle": _DASHES.get(line.get("dash") or "solid", "-") if "lines" in mode else "none",
        "linewidth": line.get("width") or 1.5,
        "marker": "o" if "markers" in mode else None,
        "markersize": (marker.get("size") or 6) * 0.75,
        "color": _color(line) or _color(marker),
        "alpha": trace.get("opacity") or 1.0,
    }
    errors = (trace.get("error_y") or {}).get("array")
    if errors is not None and xs:
        handle = ax.errorbar(xs, ys, yerr=_numbers(errors), capsize=2, elinewidth=0.8, **style)[0]
    else:
        (handle,) = ax.plot(xs, ys if xs else [], **style)
    _legend_entry(legend, trace, handle)


def _bars(ax: Any, traces: list[dict], mode: str, legend: dict[str, Any]) -> None:
    """Bar traces sharing one axes pair, placed as plotly would for ``barmode`` ``mode``."""
    horizontal = traces[0].get("orientation") == "h"
    category_key, value_key = ("y", "x") if horizontal else ("x", "y")
    categories = list(dict.fromkeys(c for t in traces for c in _array(t.get(category_key))))
    numeric = all(isinstance(c, (int, float)) for c in categories)
    position = {c: (c if numeric else index) for index, c in enumerate(categories)}
    slots = len(traces) if mode == "group" else 1
    width = 0.8 / slots
    stacked: dict[Any, float] = {}
    for index, trace in enumerate(traces):
        cats, values = _array(trace.get(category_key)), _numbers(trace.get(value_key))
        offset = (index - (slots - 1) / 2) * width if mode == "group" else 0.0
        where = [position[c] + offset for c in cats]
        extent: dict[str, Any] = {"height" if horizontal else "width": width}
        if mode == "stack":
            extent["left" if horizontal else "bottom"] = [stacked.get(c, 0.0) for c in cats]
            for c, v in zip(cats, values):
                stacked[c] = stacked.get(c, 0.0) + (0.0 if math.isnan(v) else v)
        errors = _numbers((trace.get(f"error_{value_key}") or {}).get("array"))
        if errors:  # xerr for horizontal bars, yerr for vertical ones
            extent[f"{value_key}err"] = errors
        draw = ax.barh if horizontal else ax.bar
        alpha = trace.get("opacity") or 1.0
        container = draw(where, values, color=_color(trace.get("marker")), alpha=alpha, **extent)
        for text, spot in zip(_array(trace.get("text")), where):  # labels at each bar's base
            if text:
                ax.annotate(
                    _plain(text),
                    (0, spot) if horizontal else (spot, 0),
                    fontsize=7,
                    va="center" if horizontal else "bottom",
                    ha="left" if horizontal else "center",
                    xytext=(3, 0) if horizontal else (0, 3),
                    textcoords="offset points",
                )
        _legend_entry(legend, trace, container)
    if not numeric:
        ticks, labels = [position[c] for c in categories], [_plain(str(c)) for c in categories]
        slanted = len(categories) > 4
        if horizontal:
            ax.set_yticks(ticks, labels)
        else:
            ax.set_xticks(ticks, labels, rotation=20 * slanted, ha="right" if slanted else "center")


def _legend_entry(legend: dict[str, Any], trace: Mapping[str, Any], handle: Any) -> None:
    name = _plain(trace.get("name"))
    if name and trace.get("showlegend") is not False and name not in legend:
        legend[name] = handle
