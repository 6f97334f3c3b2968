"""The verdict: what to use at each N, by how much, or "too close to call"; and how far to
trust the overhead model, in words.

A table of speed-ups leaves the reading to the reader, who will take 1.04x for a win. The
verdict reads it the way the measurement allows, every word from the numbers beside it:

- **The fastest** at each (env, N) has the highest speed-up over the reference (the median of
  its paired windows, :attr:`~vecenvs.bench.Measurement.ratio`); never the ceiling row, which
  is the machine's limit, not something to use.
- **Its interval** is the range of its paired ratios: window i of every backend ran in round i
  of :func:`~vecenvs.bench.compare`, a moment apart, so each ratio saw about the same machine.
- **Too close to call** when the winner and a rival, compared window by window in the same
  rounds, do not agree in every round (the range of winner / rival includes 1), or when a
  single window leaves no spread to judge by. With three windows "every round agreed" happens
  by chance a quarter of the time for two equal backends: more windows make the call firmer.

Fit quality (:func:`fit_quality`): the model's median relative error on the speed-up and its
R^2 on log speed-up (see :mod:`vecenvs.bench.model`), in one word: *good* (error <= 10% and
R^2 >= 0.8), *rough* (error <= 25% and R^2 >= 0.5), else *poor*, warning that its curve is not
to be trusted (and whether the variant whose overhead grows with N fits better). A sequential
loop (one worker) is judged on its error alone: its speed-up hardly changes with N, leaving
R^2 little spread to explain.

Example:
    >>> from vecenvs.bench import QUICK, compare
    >>> from vecenvs.bench.verdict import verdicts
    >>> results = compare("CartPole-v1", 4, ["multi"], **QUICK)
    >>> print(verdicts(results)[0].sentence())  # doctest: +SKIP
    CartPole-v1, N=4: too close to call between multi (1.02x gym-sync) and gym-sync (1.00x) ...
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from vecenvs.bench.engine import CEILING, DEFAULT_REFERENCE, Measurement
from vecenvs.bench.model import BackendFit, OverheadModel
from vecenvs.factory import BACKEND_INFO

__all__ = [
    "GOOD",
    "POOR",
    "ROUGH",
    "FitQuality",
    "Verdict",
    "fit_quality",
    "format_verdicts",
    "model_qualities",
    "verdicts",
]

GOOD, ROUGH, POOR = "good", "rough", "poor"

#: (word, largest median relative error, smallest R^2) from the best word down.
_QUALITY_BOUNDS = ((GOOD, 0.10, 0.8), (ROUGH, 0.25, 0.5))


@dataclass(frozen=True)
class Verdict:
    """What to use for one env and N, as the paired windows allow.

    ``best``: the backend label with the highest ``speedup`` over the reference (the median of
    its paired windows), ``low`` and ``high`` the extremes of its ``windows`` paired windows.
    ``runner_up``: the closest rival, the other backend whose best round came nearest to (or
    beat) the winner's, None if only one was measured; ``margin_low`` and ``margin_high`` the
    extremes over the rounds of best / rival (both windows of the same round).
    ``efficiency``: the best backend's share of the ceiling, when measured beside it.
    """

    env_label: str
    num_envs: int
    best: str
    speedup: float
    low: float
    high: float
    windows: int
    runner_up: str | None
    runner_up_speedup: float | None
    margin_low: float | None
    margin_high: float | None
    efficiency: float | None
    reference: str = DEFAULT_REFERENCE

    @property
    def close(self) -> bool:
        """Too close to call: one window only, or a round in which the runner-up kept up."""
        rival_kept_up = self.runner_up is not None and (self.margin_low or 0.0) <= 1.0
        return self.windows < 2 or rival_kept_up

    def sentence(self, env_name: str | None = None) -> str:
        """The verdict as one plain-text sentence (``env_name``: how to call the env)."""
        where = f"{env_name or self.env_label}, N={self.num_envs}"
        spread = (
            f" ({self.low:.2f}-{self.high:.2f}x over {self.windows} paired windows)"
            if self.windows > 1
            else " (one timed window: no spread to judge by)"
        )
        share = self.efficiency
        ceiling = "" if share is None else f"; {share:.0%} of the machine's ceiling"
        best, rival = _name(self.best, self.reference), _name(self.runner_up, self.reference)
        if self.runner_up is None:
            return (
                f"{where}: {best} is the only backend measured:"
                f" {self.speedup:.2f}x {self.reference}{spread}{ceiling}."
            )
        if self.close:
            why = (
                "a single window cannot tell them apart"
                if self.windows < 2
                else f"window by window it was {self.margin_low:.2f}-{self.margin_high:.2f}x the "
                "other, so not faster in every round"
            )
            return (
                f"{where}: too close to call between {best} at {self.speedup:.2f}x "
                f"{self.reference} and {rival} at {self.runner_up_speedup:.2f}x: {why}."
            )
        return (
            f"{where}: use {best}: {self.speedup:.2f}x {self.reference}{spread}, faster than "
            f"every other backend in every round, {self.margin_low:.2f}-{self.margin_high:.2f}x "
            f"its closest rival, {rival}{ceiling}."
        )


def verdicts(
    measurements: Iterable[Measurement], *, reference: str = DEFAULT_REFERENCE
) -> list[Verdict]:
    """One :class:`Verdict` per (env, N) with measured speed-ups, in the order first measured.

    Measurements without a ratio (not from :func:`~vecenvs.bench.compare`) and the ceiling are
    not candidates. Where one configuration was measured twice, the later measurement counts.
    """
    points: dict[tuple[str, int], dict[str, Measurement]] = {}
    for measurement in measurements:
        config = measurement.config
        if config.backend == CEILING or measurement.ratio is None:
            continue
        point = (config.env_label, config.num_envs)
        points.setdefault(point, {})[config.backend_label] = measurement
    found = []
    for (env_label, num_envs), by_label in points.items():
        # (Every measurement here has a ratio: see above.)
        ranked = sorted(by_label.values(), key=lambda m: (-(m.ratio or 0.0), -m.median))
        best = ranked[0]
        ratios = best.paired_ratios or [best.ratio or 0.0]
        # The rival is the one that came closest in its worst round for the winner, not merely
        # the second by median: a backend third by median may still have won one round.
        rivals = [(other, best.ratios_to(other)) for other in ranked[1:]]
        runner, margins = min(
            rivals, key=lambda rival: min(rival[1], default=math.inf), default=(None, [])
        )
        found.append(
            Verdict(
                env_label=env_label,
                num_envs=num_envs,
                best=best.config.backend_label,
                speedup=best.ratio or 0.0,
                low=min(ratios),
                high=max(ratios),
                windows=min(len(ratios), len(margins)) if runner is not None else len(ratios),
                runner_up=None if runner is None else runner.config.backend_label,
                runner_up_speedup=None if runner is None else runner.ratio,
                margin_low=min(margins) if margins else None,
                margin_high=max(margins) if margins else None,
                efficiency=best.efficiency,
                reference=reference,
            )
        )
    return found


@dataclass(frozen=True)
class FitQuality:
    """How well the overhead model describes one backend: a ``word`` (:data:`GOOD`,
    :data:`ROUGH` or :data:`POOR`) and a ``sentence`` with the numbers it comes from and what
    to make of it."""

    backend: str
    word: str
    sentence: str

    @property
    def poor(self) -> bool:
        return self.word == POOR


def fit_quality(fit: BackendFit) -> FitQuality:
    """:class:`FitQuality` of one backend's constant-overhead fit (see the module docstring)."""
    loop = fit.workers == 1
    # A loop's R^2 is not evidence either way (see the module docstring): leave it out.
    r2 = math.nan if loop else fit.r2
    word = _word(fit.median_relative_error, r2)
    numbers = _numbers(fit.median_relative_error, fit.r2)
    sentence = f"{fit.label}: the model fits {word} ({numbers}"
    sentence += "; R² not used for a loop)" if loop else ")"
    if word == POOR:
        sentence += "; do not trust its curve"
        per_env = fit.per_env
        if per_env is not None:
            per_env_word = _word(per_env.median_relative_error, math.nan if loop else per_env.r2)
            if per_env_word != POOR:
                sentence += (
                    f", though an overhead growing with N fits it {per_env_word} "
                    f"({_numbers(per_env.median_relative_error, per_env.r2)})"
                )
    elif fit.constant.clamped:
        sentence += "; its overhead came out below zero and was set to 0"
    return FitQuality(fit.label, word, sentence + ".")


def model_qualities(model: OverheadModel) -> list[FitQuality]:
    """:func:`fit_quality` for every fitted backend, in the model's order."""
    return [fit_quality(fit) for fit in model.backends.values()]


def _word(error: float, r2: float) -> str:
    for word, largest_error, smallest_r2 in _QUALITY_BOUNDS:
        if error <= largest_error and (math.isnan(r2) or r2 >= smallest_r2):
            return word
    return POOR


def _numbers(error: float, r2: float) -> str:
    r2_text = "R² undefined: too little spread" if math.isnan(r2) else f"R² {r2:.2f}"
    return f"median error {error:.0%}, {r2_text}"


#: References that are a plain sequential loop, called "the loop" in sentences: the backends
#: that start no process and step gymnasium's envs (envpool's threads step its own).
_LOOPS = frozenset(i.name for i in BACKEND_INFO.values() if i.processes == "none" and not i.native)


def _name(label: str | None, reference: str) -> str | None:
    """The reference is named as such: ``gym-sync (the loop)``, ``pool (the reference)``."""
    if label != reference:
        return label
    return f"{label} (the loop)" if reference in _LOOPS else f"{label} (the reference)"


def format_verdicts(
    measurements: Iterable[Measurement],
    model: OverheadModel | None = None,
    *,
    reference: str = DEFAULT_REFERENCE,
) -> str:
    """The verdicts and the model's fit quality as plain text, for a terminal."""
    lines = ["Verdict (from the paired windows):"]
    lines += [f"  {verdict.sentence()}" for verdict in verdicts(measurements, reference=reference)]
    if model is not None:
        lines.append("Overhead model, how well it fits:")
        lines += [f"  {'WARNING: ' * q.poor}{q.sentence}" for q in model_qualities(model)]
    return "\n".join(lines)
