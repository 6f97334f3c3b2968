"""One set of numbers: how every throughput, speed-up and efficiency the lab shows is computed.

A page that prints "1.79x gym-sync" beside throughputs of 15,718 and 8,761 env steps/s must mean
15,718 / 8,761, whichever table, chart, verdict, command or export shows it. So each number is
defined here, once, and everything else reads it from here:

- **throughput** of a measurement: the median of its timed windows, in env steps/s
  (:attr:`~vecenvs.bench.Measurement.throughput`). The median, not the mean: with three or more
  windows one stalled window does not move it (with two, the median is their mean).
- **speed-up** over the reference (:attr:`~vecenvs.bench.Measurement.ratio`): its throughput
  divided by the reference's throughput at the same point (same run, env and N): the ratio of
  the two numbers shown side by side.
- **efficiency** (:attr:`~vecenvs.bench.Measurement.efficiency`): its throughput divided by the
  ceiling's at the same point (the highest, where several K were measured).
- **paired ratios** (:attr:`~vecenvs.bench.Measurement.paired_ratios`): window i divided by the
  reference's window i, timed a moment apart in the same round of
  :func:`~vecenvs.bench.compare`. They are not the answer but its spread: how far to trust it
  (the verdict's confidence, :mod:`vecenvs.bench.verdict`).

Until this module, a speed-up was the median of the paired ratios: with two windows and one of
the ceiling's stalled, a page said 2.37x beside throughputs whose ratio was 1.79x, and 100% of a
ceiling the table showed 35% higher.

**Checks.** A number that breaks a definition is flagged (:attr:`Measurement.checks`), never shown
as a result: :func:`shown_efficiency` is None for a flagged efficiency, and
:func:`efficiency_text` says why instead of a percentage.

- :data:`DISTURBED`: its own fastest window is :data:`DISTURBED_SPREAD` times its slowest or more:
  a window saw another machine (another program, a stall).
- :data:`REFERENCE_DISTURBED`, :data:`CEILING_DISTURBED`: the reference's, or the ceiling's,
  windows are so: every speed-up, or efficiency, at that point is suspect.
- :data:`ABOVE_CEILING`: an efficiency above 100% for a backend stepping the same Python envs as
  the ceiling, which no backend can beat by definition (EnvPool, stepping its own C++ envs, may:
  it is not like-for-like, and is not flagged).

Example:
    >>> from vecenvs.bench import QUICK, compare
    >>> results = compare("CartPole-v1", 4, ["multi"], **QUICK)  # + gym-sync, the reference
    >>> multi, loop = results
    >>> multi.ratio == multi.throughput / loop.throughput
    True
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar

from vecenvs.bench import ceiling
from vecenvs.factory import NATIVE_BACKENDS

__all__ = [
    "ABOVE_CEILING",
    "CEILING_DISTURBED",
    "CHECKS",
    "DEFAULT_REFERENCE",
    "DISTURBED",
    "DISTURBED_SPREAD",
    "REFERENCE_DISTURBED",
    "changes",
    "efficiency_flag",
    "efficiency_text",
    "explain",
    "measurement_row",
    "relate",
    "relate_point",
    "shown_efficiency",
    "spread",
    "throughput",
]

#: The backend every other one is compared with: gymnasium's plain sequential vector env.
#: Everywhere the lab says "the loop", it means this one.
DEFAULT_REFERENCE = "gym-sync"

#: A measurement whose fastest window is at least this many times its slowest was disturbed: on
#: our busy 2-core VM, windows of one backend differ by 5-30%; a stalled one, by 2-4x.
DISTURBED_SPREAD = 1.5

DISTURBED = "disturbed"
REFERENCE_DISTURBED = "reference disturbed"
CEILING_DISTURBED = "ceiling disturbed"
ABOVE_CEILING = "above the ceiling"

#: Each check, and what it means, in the words tables and pages use.
CHECKS = {
    DISTURBED: "its windows disagree: the fastest was {spread:.1f}x the slowest",
    REFERENCE_DISTURBED: "the reference's windows disagree, so its speed-ups are suspect",
    CEILING_DISTURBED: "the ceiling's windows disagree, so its efficiency is not shown",
    ABOVE_CEILING: "faster than the ceiling, which none can be: the ceiling was measured low",
}


class Measurement(Protocol):
    """What this module reads and sets of a measurement (:class:`vecenvs.bench.Measurement` is
    one): the engine, which makes them, stands above this module, not below it."""

    config: Any  # a BenchConfig: env_label, num_envs, backend, backend_label, backend_kwargs
    throughputs: list[float]
    paired_ratios: list[float]
    ratio: float | None
    efficiency: float | None
    checks: list[str]

    @property
    def std(self) -> float: ...

    def ratios_to(self, other: Any) -> list[float]: ...


#: A measurement of whichever class, handed back as it came.
M = TypeVar("M", bound=Measurement)

#: The checks that keep an efficiency from being shown as a result, the cause before what
#: follows from it (a disturbed ceiling is why a backend seems to beat it).
_EFFICIENCY_CHECKS = (CEILING_DISTURBED, ABOVE_CEILING)


def throughput(measurement: Measurement) -> float:
    """The throughput every page shows: the median window, in env steps/s (NaN without one)."""
    values = measurement.throughputs
    return statistics.median(values) if values else math.nan


def spread(measurement: Measurement) -> float:
    """Fastest window / slowest (1.0 for a single window; infinite if one stepped nothing)."""
    values = measurement.throughputs
    if len(values) < 2:
        return 1.0
    return max(values) / min(values) if min(values) > 0 else math.inf


def relate_point(measurements: Sequence[M], reference: M | None) -> Sequence[M]:
    """Give the measurements of one point (one env and N, measured together) their speed-up
    over ``reference`` (one of them, or None), paired ratios, efficiency and checks, in place.

    Without a reference, speed-ups are left as they are (None after :func:`~vecenvs.bench.measure`);
    without a ceiling, efficiencies too.
    """
    ceilings = [m for m in measurements if m.config.backend == ceiling.NAME]
    # Several ceilings (e.g. K=2 and K=16): the highest is what the machine gives.
    top = max(ceilings, key=throughput) if ceilings else None
    for measurement in measurements:
        checks = []
        if _disturbed(measurement):
            checks.append(DISTURBED)
        if reference is not None and reference.throughputs:
            measurement.paired_ratios = measurement.ratios_to(reference)
            measurement.ratio = throughput(measurement) / throughput(reference)
            if measurement is not reference and _disturbed(reference):
                checks.append(REFERENCE_DISTURBED)
        if top is not None and top.throughputs:
            measurement.efficiency = throughput(measurement) / throughput(top)
            if measurement.config.backend != ceiling.NAME:
                if _disturbed(top):
                    checks.append(CEILING_DISTURBED)
                native = measurement.config.backend in NATIVE_BACKENDS
                if measurement.efficiency > 1.0 and not native:
                    checks.append(ABOVE_CEILING)
        measurement.checks = checks
    return measurements


def relate(measurements: Iterable[M], *, reference: str = DEFAULT_REFERENCE) -> list[M]:
    """:func:`relate_point` for every point (env, N) of one run, the reference being the
    measurement of the backend ``reference`` (with no arguments of its own, where several);
    returns the measurements, in order.

    For measurements read back from a results store: a run saved before this module computed
    its ratios another way shows the same numbers as a new one. Give it one run at a time.
    """
    measurements = list(measurements)
    points: dict[tuple[str, int], list[M]] = {}
    for measurement in measurements:
        config = measurement.config
        points.setdefault((config.env_label, config.num_envs), []).append(measurement)
    for group in points.values():
        candidates = [m for m in group if m.config.backend == reference]
        chosen = min(candidates, key=lambda m: len(m.config.backend_kwargs), default=None)
        relate_point(group, chosen)
    return measurements


def efficiency_flag(checks: Iterable[str]) -> str | None:
    """The check that keeps an efficiency from being a result, if one of ``checks`` does."""
    checks = set(checks)
    return next((check for check in _EFFICIENCY_CHECKS if check in checks), None)


def shown_efficiency(measurement: Measurement) -> float | None:
    """The efficiency to show as a result: None when there is none, or a check flags it."""
    return None if efficiency_flag(measurement.checks) else measurement.efficiency


def efficiency_text(measurement: Measurement) -> str:
    """The efficiency as a table shows it: ``"74%"``, ``"-"`` without a ceiling, or the check
    that keeps it from being a result (``"? ceiling disturbed"``)."""
    flag = efficiency_flag(measurement.checks)
    if flag is not None:
        return f"? {flag}"
    if measurement.efficiency is None:
        return "-"
    return f"{measurement.efficiency:.0%}"


def explain(measurement: Measurement) -> list[str]:
    """Each check of ``measurement`` in words, e.g. ``"its windows disagree: the fastest was
    2.6x the slowest"``."""
    return [CHECKS[check].format(spread=spread(measurement)) for check in measurement.checks]


def measurement_row(
    measurement: Measurement, *, reference: str = DEFAULT_REFERENCE, env_name: str | None = None
) -> dict[str, Any]:
    """One measurement as a row of the tables beside the charts: its throughput, speed-up and
    efficiency as text, as every table writes them (``env_name``: how to call the env)."""
    config = measurement.config
    return {
        "env": env_name or config.env_label,
        "N": config.num_envs,
        "backend": config.backend_label,
        "env steps/s": f"{throughput(measurement):,.0f}",
        "± std": f"{measurement.std:,.0f}",
        f"x {reference}": "-" if measurement.ratio is None else f"{measurement.ratio:.2f}x",
        "of ceiling": efficiency_text(measurement),
        "checks": ", ".join(measurement.checks),
    }


def changes(now: Iterable[M], then: Iterable[M]) -> list[dict[str, Any]]:
    """What changed from one run (``then``) to another (``now``): a row for every (env, N,
    backend) measured in both, in ``now``'s order, with both throughputs, ``change`` (now /
    then: 1.10 is 10% faster), both speed-ups over their own run's reference, and the checks
    of either. Give each run's measurements through :func:`relate` first."""
    before = {_key(m): m for m in then}
    rows = []
    for measurement in now:
        earlier = before.get(_key(measurement))
        if earlier is None:
            continue
        config = measurement.config
        rows.append(
            {
                "env": config.env_label,
                "num_envs": config.num_envs,
                "backend": config.backend_label,
                "then": throughput(earlier),
                "now": throughput(measurement),
                "change": throughput(measurement) / throughput(earlier)
                if throughput(earlier) > 0
                else math.nan,
                "speedup_then": earlier.ratio,
                "speedup_now": measurement.ratio,
                "checks": sorted(set(earlier.checks) | set(measurement.checks)),
            }
        )
    return rows


def _key(measurement: Measurement) -> tuple[str, int, str]:
    config = measurement.config
    return config.env_label, config.num_envs, config.backend_label


def _disturbed(measurement: Measurement) -> bool:
    return spread(measurement) >= DISTURBED_SPREAD
