"""A flame graph, coloured by what the time was spent on: as a plain SVG file, and as an
interactive plotly chart that zooms.

Each rectangle is a function, as wide as the share of its process's samples that had it on
the stack, under the functions it called; one per caller, whatever the line. A rectangle has
the colour of the category most of its samples fall in (see :mod:`vecenvs.profile.classify`),
and its tooltip gives its file and lines, samples, and the split between categories.

- :func:`flamegraph_svg`: each process has a band of the whole width, one above the other, so a
  parent among eight workers is not squeezed into a sliver. No JavaScript: any browser, or
  ``IPython.display.SVG``, shows it; the profile's file to keep and share.
- :func:`flamegraph_figure`: the same tree as plotly's icicle chart, upside down so that it
  grows upwards like a flame graph: click a box to zoom into it (a process, to give it the
  whole width), click the bottom row to zoom out. What the dashboard and the notebooks show
  (a page cannot show the SVG inline: Streamlit's ``st.html`` strips SVG elements). For
  searching, open the speedscope file in https://www.speedscope.app.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any
from xml.sax.saxutils import escape

from vecenvs.profile.breakdown import process_sort_key
from vecenvs.profile.classify import (
    CATEGORIES,
    CATEGORY_COLORS,
    RULES,
    Rule,
    classify,
    module_path,
)
from vecenvs.profile.stacks import StackSample

__all__ = ["FlameNode", "flame_tree", "flamegraph_figure", "flamegraph_svg", "write_flamegraph"]

FONT_SIZE = 12
CHAR_WIDTH = 7.0  # about how wide a character of 12 px Verdana is, to fit names in boxes
ROW_HEIGHT = 17
HEADER_HEIGHT = 62  # title, subtitle and legend
MARGIN = 10
BAND_GAP = 12  # between one process's band and the next


@dataclass
class FlameNode:
    """One rectangle: a function called along one path, and the samples that passed through."""

    name: str
    file: str = ""
    lines: set[int] = field(default_factory=set)
    samples: int = 0
    categories: Counter[str] = field(default_factory=Counter)
    children: dict[tuple[str, str], FlameNode] = field(default_factory=dict)

    @property
    def category(self) -> str:
        """The category most of this node's samples fall in (it sets the colour)."""
        return max(CATEGORIES, key=lambda category: self.categories[category])

    def depth(self) -> int:
        """How many rows the tree above this node needs."""
        return max((1 + child.depth() for child in self.children.values()), default=0)


def flame_tree(samples: Iterable[StackSample], rules: Sequence[Rule] = RULES) -> FlameNode:
    """Merge samples into a tree: root -> one node per process -> their call stacks."""
    root = FlameNode("all")
    for sample in samples:
        category = classify(sample.stack, rules)
        path = [(sample.process, "", 0), *((f.name, f.file, f.line) for f in sample.stack)]
        nodes = [root]
        for name, file, line in path:
            nodes.append(nodes[-1].children.setdefault((name, file), FlameNode(name, file)))
            if line:
                nodes[-1].lines.add(line)
        for node in nodes:
            node.samples += sample.count
            node.categories[category] += sample.count
    return root


def flamegraph_svg(
    samples: Iterable[StackSample],
    *,
    title: str = "Flame graph",
    subtitle: str = "",
    width: int = 1200,
    min_width: float = 0.3,
    rules: Sequence[Rule] = RULES,
) -> str:
    """The flame graph of ``samples`` as SVG text.

    ``width`` is in the picture's own units (it scales to the width it is shown at);
    rectangles narrower than ``min_width`` of them are left out (too thin to see, and there
    can be thousands); ``rules`` classify the samples, which colours the rectangles.
    """
    root = flame_tree(samples, rules)
    processes = sorted(root.children.values(), key=lambda node: process_sort_key(node.name))
    height = (
        HEADER_HEIGHT
        + 2 * MARGIN
        + sum(process.depth() + 1 for process in processes) * ROW_HEIGHT
        + BAND_GAP * max(0, len(processes) - 1)
    )
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        # width 100% with a viewBox: the picture scales to its container instead of being cut.
        f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" '
        f'font-family="Verdana, sans-serif" font-size="{FONT_SIZE}">\n',
        '<rect width="100%" height="100%" fill="#ffffff"/>\n',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="16">{escape(title)}</text>\n',
        f'<text x="{width / 2}" y="38" text-anchor="middle" fill="#555555">{escape(subtitle)}'
        "</text>\n",
    ]
    # The legend: one coloured square per category, with its share of all the samples drawn.
    x, y = float(MARGIN), HEADER_HEIGHT - 8
    for category in CATEGORIES:
        text = f"{category} {100 * root.categories[category] / max(root.samples, 1):.0f}%"
        parts.append(
            f'<g><rect x="{x:.1f}" y="{y - 11}" width="12" height="12" '
            f'fill="{CATEGORY_COLORS[category]}"/><text x="{x + 17:.1f}" y="{y}">{escape(text)}'
            "</text></g>\n"
        )
        x += 30 + CHAR_WIDTH * len(text)
    # One band per process, the parent first. Flame graphs grow upwards: the process on the
    # band's bottom row, callees above their callers.
    top = HEADER_HEIGHT + MARGIN
    for process in processes:
        bottom = top + process.depth() * ROW_HEIGHT
        scale = (width - 2 * MARGIN) / max(process.samples, 1)
        parts += _draw(process, float(MARGIN), bottom, scale, root, process, min_width)
        top = bottom + ROW_HEIGHT + BAND_GAP
    parts.append("</svg>\n")
    return "".join(parts)


def write_flamegraph(samples: Iterable[StackSample], path: str | PathLike[str], **options) -> None:
    """Write :func:`flamegraph_svg` to ``path`` (options as there)."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(flamegraph_svg(samples, **options))


def _draw(
    node: FlameNode,
    x: float,
    y: float,
    scale: float,
    root: FlameNode,
    process: FlameNode,
    min_width: float,
) -> list[str]:
    """The SVG of ``node`` at (x, y) and, above it, of everything it called."""
    box_width = node.samples * scale
    if box_width < min_width:
        return []
    parts = [
        f"<g><title>{escape(_tooltip(node, root, process))}</title>"
        f'<rect x="{x:.2f}" y="{y}" width="{box_width:.2f}" height="{ROW_HEIGHT - 1}" '
        f'fill="{CATEGORY_COLORS[node.category]}" rx="2"/>'
    ]
    fits = int((box_width - 6) / CHAR_WIDTH)
    if fits >= 3:
        label = node.name if len(node.name) <= fits else node.name[: fits - 2] + ".."
        parts.append(f'<text x="{x + 3:.2f}" y="{y + ROW_HEIGHT - 5}">{escape(label)}</text>')
    parts.append("</g>\n")
    for key in sorted(node.children):  # alphabetical, as flamegraph.pl does
        child = node.children[key]
        parts += _draw(child, x, y - ROW_HEIGHT, scale, root, process, min_width)
        x += child.samples * scale
    return parts


def _tooltip(node: FlameNode, root: FlameNode, process: FlameNode) -> str:
    """``function / file:lines / samples and shares / category split`` for a rectangle."""
    lines = [node.name]
    if node.file:
        seen = sorted(node.lines)
        shown = ", ".join(map(str, seen[:6])) + (", ..." if len(seen) > 6 else "")
        lines.append(f"{module_path(node.file)}:{shown}")
    shares = f"{node.samples} sample{'s' * (node.samples != 1)}, "
    shares += f"{100 * node.samples / max(root.samples, 1):.1f}% of all"
    if node is not process:
        shares += f", {100 * node.samples / process.samples:.1f}% of {process.name}"
    lines.append(shares)
    split = node.categories.most_common()
    lines.append(", ".join(f"{c} {100 * count / node.samples:.0f}%" for c, count in split))
    return "\n".join(lines)


def flamegraph_figure(
    samples: Iterable[StackSample],
    *,
    title: str = "Flame graph",
    min_share: float = 0.002,
    max_depth: int = 16,
    height: int = 720,
    rules: Sequence[Rule] = RULES,
) -> Any:
    """The flame graph of ``samples`` as a plotly icicle chart (see the module docstring).

    Boxes with less than ``min_share`` of all samples are left out (too thin to see, and there
    can be thousands); ``max_depth`` rows are shown at a time (click to go deeper). The title
    carries the colour key: each category and its share of the samples. plotly is imported
    here, so that reading profiles does not pay for it.
    """
    import plotly.graph_objects as go

    root = flame_tree(samples, rules)
    smallest = min_share * root.samples
    ids: list[str] = []
    labels: list[str] = []
    parents: list[str] = []
    values: list[int] = []
    colors: list[str] = []
    tooltips: list[str] = []

    def add(node: FlameNode, node_id: str, parent_id: str, process: FlameNode | None) -> None:
        ids.append(node_id)
        labels.append(html.escape(node.name, quote=False))  # plotly reads tags in labels
        parents.append(parent_id)
        values.append(node.samples)
        colors.append(CATEGORY_COLORS[node.category])
        text = _tooltip(node, root, process or node) if node is not root else _root_tooltip(root)
        tooltips.append(html.escape(text, quote=False).replace("\n", "<br>"))
        children = sorted(node.children.items())  # alphabetical, as in the SVG
        if process is None and node is not root:
            process = node
        for index, (_, child) in enumerate(children):
            if child.samples >= smallest:
                add(child, f"{node_id}/{index}", node_id, process)

    processes = sorted(root.children.values(), key=lambda node: process_sort_key(node.name))
    ids.append("all")
    labels.append("all processes (click to zoom out)")
    parents.append("")
    values.append(root.samples)
    colors.append("#eeeeee")
    tooltips.append(html.escape(_root_tooltip(root), quote=False).replace("\n", "<br>"))
    for index, process in enumerate(processes):
        if process.samples >= smallest:
            add(process, f"all/{index}", "all", None)

    key = " · ".join(
        f'<span style="color:{CATEGORY_COLORS[category]}">■</span> {html.escape(category)} '
        f"{100 * root.categories[category] / max(root.samples, 1):.0f}%"
        for category in CATEGORIES
        if root.categories[category]
    )
    figure = go.Figure(
        go.Icicle(
            ids=ids,
            labels=labels,
            parents=parents,
            values=values,
            branchvalues="total",
            marker={"colors": colors, "line": {"color": "#ffffff", "width": 1}},
            customdata=tooltips,
            hovertemplate="%{customdata}<extra></extra>",
            textinfo="label",
            tiling={"orientation": "v", "flip": "y"},  # callers below callees: a flame graph
            maxdepth=max_depth,
            sort=False,
        )
    )
    figure.update_layout(
        title_text=f"{html.escape(title, quote=False)}<br><sup>{key}</sup>",
        height=height,
        margin={"t": 80, "l": 10, "r": 10, "b": 10},
        uniformtext={"minsize": 9, "mode": "hide"},  # no text smaller than boxes allow
    )
    return figure


def _root_tooltip(root: FlameNode) -> str:
    split = ", ".join(
        f"{category} {100 * count / max(root.samples, 1):.0f}%"
        for category, count in root.categories.most_common()
    )
    return f"all processes\n{root.samples} samples\n{split}"
