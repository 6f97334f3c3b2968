"""Where each process's time went: the share of its samples in each category.

py-spy samples every thread of every process at the same rate, busy or idle (``--idle``), so
a process's samples are its wall-clock time, and "38% of the parent's samples are waiting"
means the parent spent about 38% of the time waiting.

Only the **main thread** of the parent and of each worker is counted: that is the thread that
steps envs. Other threads (our workers' ``vecenvs-orphan-watch``, which sleeps and checks once
a second that the parent is alive; the profiled loop's ``vecenvs-profile-stop``) and helper
processes (multiprocessing's fork server and resource tracker) would each add a process's
worth of idle samples and drown the picture. They are not thrown away silently: they are
listed in :attr:`Breakdown.excluded`.

Example:
    >>> from vecenvs.profile.stacks import Frame, StackSample
    >>> env = Frame("CartPoleEnv.step", "/x/gymnasium/envs/classic_control/cartpole.py", 170)
    >>> poll = Frame("Doorbell.sleep", "/x/vecenvs/workers.py", 590)
    >>> result = breakdown([StackSample("parent", "MainThread", (poll,), 3),
    ...                     StackSample("worker 0", "MainThread", (env,), 1)])
    >>> result.by_process()["parent"]["waiting"]
    1.0
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vecenvs.profile.classify import CATEGORIES, CATEGORY_COLORS, RULES, Rule, classify
from vecenvs.profile.stacks import StackSample
from vecenvs.table import format_table

__all__ = [
    "Breakdown",
    "BreakdownRow",
    "ExcludedThread",
    "breakdown",
    "breakdown_figure",
    "is_counted",
    "process_sort_key",
]

#: A table with more workers than this shows them pooled, as one "workers" line.
MAX_WORKERS_SHOWN = 8


@dataclass(frozen=True)
class BreakdownRow:
    """One process's samples in one category."""

    process: str
    """``"parent"``, ``"worker 0"``, ... (or ``"pid 4242"`` for a process without a label)."""

    thread: str
    """The thread counted: always the main thread."""

    category: str
    """One of :data:`vecenvs.profile.classify.CATEGORIES`."""

    samples: int
    """How many of this process's samples fell in this category."""

    share: float
    """``samples`` / all of this process's counted samples, from 0 to 1."""


@dataclass(frozen=True)
class ExcludedThread:
    """A thread whose samples are not in the breakdown, and why."""

    process: str
    thread: str
    samples: int
    reason: str


@dataclass
class Breakdown:
    """The share of each category in each process's samples.

    ``rows`` has one row per process and category (zeros included, so every chart has every
    category), processes in the order parent, worker 0, worker 1, ...
    """

    rows: list[BreakdownRow]
    """One row per (process, category)."""

    excluded: list[ExcludedThread] = field(default_factory=list)
    """Threads and processes whose samples were left out (see the module docstring)."""

    @property
    def processes(self) -> list[str]:
        """The processes counted, parent first, then the workers in order."""
        return list(dict.fromkeys(row.process for row in self.rows))

    @property
    def workers(self) -> list[str]:
        """The processes other than the parent."""
        return [process for process in self.processes if process != "parent"]

    def samples(self, process: str | None = None) -> int:
        """How many samples were counted, in ``process`` or in all of them."""
        return sum(row.samples for row in self.rows if process in (None, row.process))

    def table(self) -> list[dict[str, Any]]:
        """The rows as plain dicts (``process``, ``thread``, ``category``, ``samples``,
        ``share``): ready for ``json.dump``, a pandas DataFrame or a plotly chart."""
        return [dataclasses.asdict(row) for row in self.rows]

    def by_process(self) -> dict[str, dict[str, float]]:
        """``{process: {category: share}}``, each process's shares summing to 1."""
        shares: dict[str, dict[str, float]] = {}
        for row in self.rows:
            shares.setdefault(row.process, {})[row.category] = row.share
        return shares

    def by_role(self) -> dict[str, dict[str, float]]:
        """``{"parent": {...}, "workers": {...}}``: the workers' samples pooled together.

        With 128 workers, one line for all of them says more than 128 nearly identical ones.
        A role with no process (no workers, for ``multi``) is left out.
        """
        pooled: dict[str, Counter[str]] = defaultdict(Counter)
        for row in self.rows:
            pooled["parent" if row.process == "parent" else "workers"][row.category] += row.samples
        return {
            role: _shares(counts)
            for role, counts in sorted(pooled.items(), key=lambda item: item[0] != "parent")
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready values."""
        return {
            "rows": self.table(),
            "excluded": [dataclasses.asdict(item) for item in self.excluded],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Breakdown:
        """The breakdown :meth:`to_dict` described (e.g. read back from a results store)."""
        return cls(
            rows=[BreakdownRow(**row) for row in data["rows"]],
            excluded=[ExcludedThread(**item) for item in data.get("excluded", [])],
        )

    def format_table(self, max_workers: int = MAX_WORKERS_SHOWN) -> str:
        """A plain-text table: one line per process, one column per category (% of that
        process's samples). More than ``max_workers`` workers are shown as one pooled line.
        """
        shares = self.by_process()
        lines_for = [
            (process, shares[process], self.samples(process))
            for process in self.processes
            if process == "parent" or len(self.workers) <= max_workers
        ]
        if self.workers and len(self.workers) > max_workers:
            pooled = self.by_role()["workers"]
            total = sum(self.samples(worker) for worker in self.workers)
            lines_for.append((f"workers (all {len(self.workers)})", pooled, total))
        header = ("process", "samples", *CATEGORIES)
        body = [
            (name, str(total), *(f"{100 * share[category]:.1f}%" for category in CATEGORIES))
            for name, share, total in lines_for
        ]
        return format_table(header, body)


def is_counted(sample: StackSample) -> bool:
    """Whether a sample counts in the breakdown: a main thread, not of a helper process."""
    return sample.main_thread and not sample.process.startswith("helper")


def breakdown(samples: Iterable[StackSample], rules: Sequence[Rule] = RULES) -> Breakdown:
    """Classify every counted sample and add up each process's shares.

    Args:
        samples: what :func:`vecenvs.profile.stacks.read_speedscope` returned.
        rules: the classification rules (default :data:`vecenvs.profile.classify.RULES`).
    """
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    threads: dict[str, str] = {}
    excluded: Counter[tuple[str, str, str]] = Counter()
    for sample in samples:
        if not is_counted(sample):
            reason = (
                "a helper process, not a worker"
                if sample.process.startswith("helper")
                else "not the main thread"
            )
            excluded[(sample.process, sample.thread, reason)] += sample.count
            continue
        counts[sample.process][classify(sample.stack, rules)] += sample.count
        threads[sample.process] = sample.thread

    rows = []
    for process in sorted(counts, key=process_sort_key):
        total = sum(counts[process].values())
        for category in CATEGORIES:
            samples_in = counts[process][category]
            rows.append(
                BreakdownRow(process, threads[process], category, samples_in, samples_in / total)
            )
    return Breakdown(
        rows=rows,
        excluded=[
            ExcludedThread(process, thread, count, reason)
            for (process, thread, reason), count in sorted(
                excluded.items(), key=lambda item: process_sort_key(item[0][0])
            )
        ],
    )


def breakdown_figure(
    result: Breakdown, *, title: str | None = None, max_workers: int = MAX_WORKERS_SHOWN
) -> Any:
    """A plotly figure: one stacked horizontal bar per process, one colour per category.

    More than ``max_workers`` workers are drawn as one pooled bar. Needs plotly (a dependency
    of vecenvs, imported here so that reading profiles does not pay for it).
    """
    import plotly.graph_objects as go

    shares = result.by_process()
    if len(result.workers) > max_workers:
        shares = {"parent": shares["parent"]} if "parent" in shares else {}
        shares[f"workers (all {len(result.workers)})"] = result.by_role()["workers"]
    # Plotly draws the first bar at the bottom: reverse, so the parent is on top.
    processes = list(shares)[::-1]
    figure = go.Figure()
    for category in CATEGORIES:
        figure.add_bar(
            name=category,
            y=processes,
            x=[100 * shares[process][category] for process in processes],
            orientation="h",
            marker_color=CATEGORY_COLORS[category],
            hovertemplate="%{y}: %{x:.1f}% " + category + "<extra></extra>",
        )
    figure.update_layout(
        barmode="stack",
        title=title or "Where each process spends its time",
        xaxis_title="share of samples, % (of that process's wall-clock time)",
        yaxis_title="process",
        xaxis_range=[0, 100],
        legend_title="category",
        height=max(260, 60 + 28 * len(processes)),
    )
    return figure


def process_sort_key(process: str) -> tuple[int, int, str]:
    """Sort processes as parent, worker 0, worker 1, ..., worker 10, then anything else."""
    if process == "parent":
        return (0, 0, "")
    match = re.fullmatch(r"(worker|pid) (\d+)", process)
    if match is not None:
        return (1 if match.group(1) == "worker" else 2, int(match.group(2)), "")
    return (3, 0, process)


def _shares(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {category: (counts[category] / total if total else 0.0) for category in CATEGORIES}
