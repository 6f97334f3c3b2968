"""A flame graph as a plain SVG, coloured by what the time was spent on.

Each rectangle is a function, as wide as the share of its process's samples in which it was
on the stack; the functions it called sit on top of it. Each process (``parent``, ``worker 0``,
...) has a band of its own, the whole width of the picture, one above the other: a parent with
a few samples among eight workers' is not squeezed into a sliver, and no process falls off the
right edge of a narrow window. The picture scales to the width it is shown at. Usual flame graphs pick random warm colours; here a rectangle has the colour of
the category most of its samples fall in (env compute, serialization, pipe I/O, waiting,
bookkeeping: see :mod:`vecenvs.profile.classify`), and a legend says which is which. Hover
over a rectangle for its function, file and lines, samples, and how its samples split
between categories.

Samples of the same function in the same caller are merged whatever the line, so a function
is one rectangle, not one per line it was seen on (the tooltip lists the lines).

It is plain SVG, without JavaScript: any browser opens it, and a notebook can show it with
``IPython.display.SVG``. For zooming and searching, open the speedscope file or the collapsed
stacks in https://www.speedscope.app.

Example:
    >>> from vecenvs.profile.stacks import Frame, StackSample
    >>> env = Frame("CartPoleEnv.step", "/x/gymnasium/envs/classic_control/cartpole.py", 170)
    >>> svg = flamegraph_svg([StackSample("worker 0", "MainThread", (env,), 5)])
    >>> svg.startswith("<?xml") and "CartPoleEnv.step" in svg
    True
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from xml.sax.saxutils import escape, quoteattr

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

__all__ = ["FlameNode", "flame_tree", "flamegraph_svg", "write_flamegraph"]

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


def flame_tree(samples: Iterable[StackSample], rules: Sequence[Rule] = RULES) -> FlameNode:
    """Merge samples into a tree: root -> one node per process -> their call stacks."""
    root = FlameNode("all")
    for sample in samples:
        category = classify(sample.stack, rules)
        path = [(sample.process, "", 0)] + [(f.name, f.file, f.line) for f in sample.stack]
        node = root
        node.samples += sample.count
        node.categories[category] += sample.count
        for name, file, line in path:
            node = node.children.setdefault((name, file), FlameNode(name, file))
            node.samples += sample.count
            node.categories[category] += sample.count
            if line:
                node.lines.add(line)
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

    Args:
        samples: the samples to draw (the runner passes those the breakdown counts).
        title: the first line at the top.
        subtitle: a second line, e.g. the configuration and the sampling rate.
        width: the picture's width in its own units (it scales to the width it is shown at).
        min_width: rectangles narrower than this many pixels are left out (too thin to see,
            and there can be thousands).
        rules: the classification rules that colour the rectangles.
    """
    root = flame_tree(samples, rules)
    total = max(root.samples, 1)
    processes = [
        root.children[key]
        for key in sorted(root.children, key=lambda key: process_sort_key(key[0]))
    ]
    height = (
        HEADER_HEIGHT
        + 2 * MARGIN
        + sum(_depth(process) + 1 for process in processes) * ROW_HEIGHT
        + BAND_GAP * max(0, len(processes) - 1)
    )

    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        # width 100% with a viewBox: the picture scales to its container instead of being cut.
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" '
            f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" '
            f'font-family="Verdana, sans-serif" font-size="{FONT_SIZE}">\n'
        ),
        '<rect width="100%" height="100%" fill="#ffffff"/>\n',
        (
            f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="16">{escape(title)}'
            "</text>\n"
        ),
        (
            f'<text x="{width / 2}" y="38" text-anchor="middle" fill="#555555">{escape(subtitle)}'
            "</text>\n"
        ),
        *_legend(root, y=HEADER_HEIGHT - 8),
    ]
    # One band per process, the parent first. Flame graphs grow upwards: the process on the
    # band's bottom row, callees above their callers.
    top = HEADER_HEIGHT + MARGIN
    for process in processes:
        bottom = top + _depth(process) * ROW_HEIGHT
        scale = (width - 2 * MARGIN) / max(process.samples, 1)
        parts.extend(_draw(process, float(MARGIN), bottom, scale, total, process, min_width))
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
    total: int,
    process: FlameNode,
    min_width: float,
) -> list[str]:
    """The SVG of ``node`` at (x, y) and, above it, of everything it called."""
    box_width = node.samples * scale
    if box_width < min_width:
        return []
    parts = [
        "<g>",
        f"<title>{escape(_tooltip(node, total, process))}</title>",
        (
            f'<rect x="{x:.2f}" y="{y}" width="{box_width:.2f}" height="{ROW_HEIGHT - 1}" '
            f'fill="{CATEGORY_COLORS[node.category]}" rx="2"/>'
        ),
    ]
    fits = int((box_width - 6) / CHAR_WIDTH)
    if fits >= 3:
        label = node.name if len(node.name) <= fits else node.name[: fits - 2] + ".."
        parts.append(f'<text x="{x + 3:.2f}" y="{y + ROW_HEIGHT - 5}">{escape(label)}</text>')
    parts.append("</g>\n")
    child_x = x
    for key in sorted(node.children):  # alphabetical, as flamegraph.pl does
        child = node.children[key]
        parts.extend(_draw(child, child_x, y - ROW_HEIGHT, scale, total, process, min_width))
        child_x += child.samples * scale
    return parts


def _tooltip(node: FlameNode, total: int, process: FlameNode) -> str:
    """``function / file:lines / samples and shares / category split`` for a rectangle."""
    lines = [node.name]
    if node.file:
        seen = sorted(node.lines)
        shown = ", ".join(map(str, seen[:6])) + (", ..." if len(seen) > 6 else "")
        lines.append(f"{module_path(node.file)}:{shown}")
    share_of_process = f", {100 * node.samples / process.samples:.1f}% of {process.name}"
    lines.append(
        f"{node.samples} sample{'s' * (node.samples != 1)}, "
        f"{100 * node.samples / total:.1f}% of all" + ("" if node is process else share_of_process)
    )
    lines.append(
        ", ".join(
            f"{category} {100 * count / node.samples:.0f}%"
            for category, count in node.categories.most_common()
        )
    )
    return "\n".join(lines)


def _legend(root: FlameNode, y: float) -> list[str]:
    """One coloured square per category, with its share of all the samples drawn."""
    parts, x = [], float(MARGIN)
    for category in CATEGORIES:
        share = root.categories[category] / max(root.samples, 1)
        text = f"{category} {100 * share:.0f}%"
        parts.append(
            f'<g><rect x="{x:.1f}" y="{y - 11}" width="12" height="12" '
            f"fill={quoteattr(CATEGORY_COLORS[category])}/>"
            f'<text x="{x + 17:.1f}" y="{y}">{escape(text)}</text></g>\n'
        )
        x += 30 + CHAR_WIDTH * len(text)
    return parts


def _depth(node: FlameNode) -> int:
    """How many rows the tree needs (the root itself is not drawn)."""
    if not node.children:
        return 0
    return 1 + max(_depth(child) for child in node.children.values())
