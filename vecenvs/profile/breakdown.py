"""Where each process's time went: the share of its samples in each category.

py-spy samples every thread of every process at the same rate, busy or idle (``--idle``), so
a process's samples are its wall-clock time: "38% of the parent's samples are waiting" means
the parent spent about 38% of the time waiting.

Only the **main thread** of the parent and of each worker is counted: it steps the envs.
Other threads (the workers' ``vecenvs-orphan-watch``, the target's ``vecenvs-profile-stop``)
and helper processes (multiprocessing's fork server and resource tracker) would each add a
process's worth of idle samples and drown the picture; they are listed in
:attr:`Breakdown.excluded`, not dropped silently.
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

#: A table or chart with more workers than this shows them pooled, as one "workers" line.
MAX_WORKERS_SHOWN = 8


@dataclass(frozen=True)
class BreakdownRow:
    """One process's samples in one category: ``share`` is ``samples`` / all of that process's
    counted samples (0 to 1); ``thread`` is always the main thread; ``process`` is
    ``"parent"``, ``"worker 0"``, ... (or ``"pid 4242"`` for a process without a label)."""

    process: str
    thread: str
    category: str
    samples: int
    share: float


@dataclass(frozen=True)
class ExcludedThread:
    """A thread whose samples are not in the breakdown, and why."""

    process: str
    thread: str
    samples: int
    reason: str


@dataclass
class Breakdown:
    """One row per process and category (zeros included, so every chart has every category),
    processes in the order parent, worker 0, worker 1, ...; and what was left out."""

    rows: list[BreakdownRow]
    excluded: list[ExcludedThread] = field(default_factory=list)

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
        """The rows as plain dicts: ready for ``json.dump``, pandas or plotly."""
        return [dataclasses.asdict(row) for row in self.rows]

    def by_process(self) -> dict[str, dict[str, float]]:
        """``{process: {category: share}}``, each process's shares summing to 1."""
        shares: dict[str, dict[str, float]] = {}
        for row in self.rows:
            shares.setdefault(row.process, {})[row.category] = row.share
        return shares

    def by_role(self) -> dict[str, dict[str, float]]:
        """``{"parent": {...}, "workers": {...}}``: the workers' samples pooled together (128
        nearly identical lines say less than one). A role with no process is left out."""
        pooled: dict[str, Counter[str]] = defaultdict(Counter)
        for row in self.rows:
            pooled["parent" if row.process == "parent" else "workers"][row.category] += row.samples
        roles = sorted(pooled, key=lambda role: role != "parent")
        return {role: _shares(pooled[role]) for role in roles}

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready values."""
        return {"rows": self.table(), "excluded": [dataclasses.asdict(x) for x in self.excluded]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Breakdown:
        """The breakdown :meth:`to_dict` described (e.g. read back from a results store)."""
        return cls(
            rows=[BreakdownRow(**row) for row in data["rows"]],
            excluded=[ExcludedThread(**item) for item in data.get("excluded", [])],
        )

    def format_table(self, max_workers: int = MAX_WORKERS_SHOWN) -> str:
        """A plain-text table: one line per process, one column per category (% of that
        process's samples). More than ``max_workers`` workers are shown as one pooled line."""
        header = ("process", "samples", *CATEGORIES)
        body = [
            (name, str(total), *(f"{100 * share[category]:.1f}%" for category in CATEGORIES))
            for name, (share, total) in self._shown(max_workers).items()
        ]
        return format_table(header, body)

    def _shown(self, max_workers: int) -> dict[str, tuple[dict[str, float], int]]:
        """What a table or chart shows: name -> (shares, samples), workers pooled if many."""
        shares, workers = self.by_process(), self.workers
        if len(workers) <= max_workers:
            return {process: (shares[process], self.samples(process)) for process in shares}
        shown = {"parent": (shares["parent"], self.samples("parent"))} if "parent" in shares else {}
        total = sum(self.samples(worker) for worker in workers)
        shown[f"workers (all {len(workers)})"] = (self.by_role()["workers"], total)
        return shown


def is_counted(sample: StackSample) -> bool:
    """Whether a sample counts in the breakdown: a main thread, not of a helper process."""
    return sample.main_thread and not sample.process.startswith("helper")


def breakdown(samples: Iterable[StackSample], rules: Sequence[Rule] = RULES) -> Breakdown:
    """Classify every counted sample (of :func:`~vecenvs.profile.stacks.read_speedscope`'s)
    and add up each process's shares."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    threads: dict[str, str] = {}
    excluded: Counter[tuple[str, str, str]] = Counter()
    for sample in samples:
        if is_counted(sample):
            counts[sample.process][classify(sample.stack, rules)] += sample.count
            threads[sample.process] = sample.thread
        else:
            helper = sample.process.startswith("helper")
            reason = "a helper process, not a worker" if helper else "not the main thread"
            excluded[(sample.process, sample.thread, reason)] += sample.count
    rows = []
    for process in sorted(counts, key=process_sort_key):
        shares, thread = _shares(counts[process]), threads[process]
        rows += [
            BreakdownRow(process, thread, category, counts[process][category], shares[category])
            for category in CATEGORIES
        ]
    left_out = sorted(excluded.items(), key=lambda item: process_sort_key(item[0][0]))
    return Breakdown(
        rows,
        [ExcludedThread(process, thread, n, reason) for (process, thread, reason), n in left_out],
    )


def breakdown_figure(
    result: Breakdown, *, title: str | None = None, max_workers: int = MAX_WORKERS_SHOWN
) -> Any:
    """A plotly figure: one stacked horizontal bar per process, one colour per category.

    More than ``max_workers`` workers are drawn as one pooled bar. plotly is imported here, so
    that reading profiles does not pay for it.
    """
    import plotly.graph_objects as go

    shares = {name: share for name, (share, _) in result._shown(max_workers).items()}
    processes = list(shares)[::-1]  # plotly draws the first bar at the bottom: parent on top
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
