"""The verdict: what to use at each N, by how much, how sure; and how far to trust the overhead
model, in words.

A table of speed-ups leaves the reading to the reader, who will take 1.04x for a win. The
verdict reads it the way the measurement allows, every number from the numbers beside it
(:mod:`vecenvs.bench.ratios` defines them all):

- **The fastest** at each (env, N) has the highest throughput; never the ceiling row, which is
  the machine's limit, not something to use. Its **speed-up** over the loop is its throughput
  over the reference's, and over the **runner-up** (the second fastest) its throughput over
  theirs: the very numbers the tables show.
- **How sure** (:attr:`Verdict.confidence`) comes from the paired windows: window i of every
  backend ran in round i of :func:`~vecenvs.bench.compare`, a moment apart, so the winner's
  window / the runner-up's window of each round saw about the same machine:

  - *clear*: ahead by at least 5% (:data:`MARGIN`), and faster in every one of at least three
    rounds (two equal backends do that by chance a quarter of the time with three rounds, an
    eighth with four; the 5% keeps such a tie from being called);
  - *likely*: ahead by at least 5% and faster in more than half the rounds, but not *clear*;
  - *tie*: less than 5% apart, and no round more than 15% apart (:data:`TIE_WINDOW`): either
    will do;
  - *noisy*: the rounds disagree more than that: the windows, not the backends, decided;
  - *suspect*: what would have been *clear*, *likely* or a *tie*, where the reference's
    windows were disturbed (``REFERENCE_DISTURBED`` of :mod:`vecenvs.bench.ratios`): every
    speed-up at that N is divided by its throughput, so a call is never *clear* beside that
    flag;
  - *one window*: nothing to judge by.

  *Noisy*, *suspect* and *one window* say what to do (:attr:`Verdict.advice`): measure again
  with more windows (:attr:`Verdict.windows_to_measure`), which the dashboard does in one click.
- **Checks**: the winner's efficiency is shown only when it is a result (a disturbed ceiling,
  or a throughput above it, is flagged instead: :func:`vecenvs.bench.ratios.shown_efficiency`).

Fit quality (:func:`fit_quality`): the model's median relative error on the speed-up and its
R^2 on log speed-up (see :mod:`vecenvs.bench.model`), in one word: *good* (error <= 10% and
R^2 >= 0.8), *rough* (error <= 25% and R^2 >= 0.5), else *poor*, warning that its curve is not
to be trusted (and whether the variant whose overhead grows with N fits better). A sequential
loop (one worker) is judged on its error alone: its speed-up hardly changes with N, leaving
R^2 little spread to explain. A backend measured at too few points for the numbers the model
draws its curve from gets no word but *too few points*
(:meth:`~vecenvs.bench.model.BackendFit.enough_points`): two numbers fit two points exactly.

Example:
    >>> from vecenvs.bench import QUICK, compare
    >>> from vecenvs.bench.verdict import verdicts
    >>> results = compare("CartPole-v1", 4, ["multi"], **QUICK)
    >>> print(verdicts(results)[0].sentence())  # doctest: +SKIP
    CartPole-v1, N=4: a tie between multi at 1.02x gym-sync and gym-sync (the loop) at 1.00x: ...
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vecenvs.bench import ratios
from vecenvs.bench.engine import CEILING, DEFAULT_REFERENCE, Measurement
from vecenvs.bench.model import BackendFit, OverheadModel
from vecenvs.factory import BACKEND_INFO
from vecenvs.table import format_table

__all__ = [
    "CLEAR",
    "CONFIDENCES",
    "GOOD",
    "LIKELY",
    "NOISY",
    "ONE_WINDOW",
    "POOR",
    "ROUGH",
    "SUSPECT",
    "TIE",
    "TOO_FEW",
    "FitQuality",
    "Verdict",
    "fit_quality",
    "format_verdicts",
    "model_qualities",
    "too_few_points",
    "verdict_rows",
    "verdicts",
]

GOOD, ROUGH, POOR, TOO_FEW = "good", "rough", "poor", "too few points"
CLEAR, LIKELY, TIE, NOISY, ONE_WINDOW = "clear", "likely", "tie", "noisy", "one window"
SUSPECT = "suspect"
#: The confidence words, surest first.
CONFIDENCES = (CLEAR, LIKELY, TIE, NOISY, SUSPECT, ONE_WINDOW)
#: The checks that make a call's ratios suspect: the reference's windows (every speed-up is
#: divided by its throughput), or a contender's own.
_SUSPECT_CHECKS = (ratios.DISTURBED, ratios.REFERENCE_DISTURBED)

#: Ahead by less than this factor (5%) is not a win.
MARGIN = 1.05
#: A tie: no round further apart than this factor (15%) either way.
TIE_WINDOW = 1.15
#: The fewest rounds a clear call needs, and the most windows advice asks for (the dashboard's
#: slider goes to 10).
CLEAR_ROUNDS = 3
MOST_WINDOWS = 10

#: (word, largest median relative error, smallest R^2) from the best word down.
_QUALITY_BOUNDS = ((GOOD, 0.10, 0.8), (ROUGH, 0.25, 0.5))


@dataclass(frozen=True)
class Verdict:
    """What to use for one env and N, as the measurements allow.

    ``best``: the backend label with the highest throughput; ``speedup`` its speed-up over the
    reference, ``low`` and ``high`` the extremes of its ``windows`` paired windows.
    ``runner_up``: the second fastest (None if only one was measured), ``runner_up_speedup``
    its speed-up; ``margin`` the winner's throughput over the runner-up's, ``margin_low`` and
    ``margin_high`` the extremes of winner / runner-up window by window, ``wins`` the rounds the
    winner was faster in. ``efficiency``: the winner's share of the ceiling, None when not
    measured or flagged (``checks`` say why).
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
    margin: float | None = None
    wins: int = 0
    checks: tuple[str, ...] = field(default_factory=tuple)
    runner_up_checks: tuple[str, ...] = field(default_factory=tuple)

    @property
    def reference_disturbed(self) -> bool:
        """Whether the reference's windows were disturbed (``REFERENCE_DISTURBED`` of
        :mod:`vecenvs.bench.ratios`): every speed-up at this point is divided by its throughput,
        so every one is suspect."""
        flagged = ratios.REFERENCE_DISTURBED in (*self.checks, *self.runner_up_checks)
        own = (self.best == self.reference and ratios.DISTURBED in self.checks) or (
            self.runner_up == self.reference and ratios.DISTURBED in self.runner_up_checks
        )
        return flagged or own

    @property
    def confidence(self) -> str:
        """How sure the call is: one of :data:`CONFIDENCES` (see the module docstring)."""
        if self.runner_up is None:
            found = CLEAR if self.windows >= 2 else ONE_WINDOW
        elif self.windows < 2:
            found = ONE_WINDOW
        else:
            found = self._paired_confidence()
        # Never clear (nor likely, nor a tie) beside a flag saying its speed-ups are suspect.
        return SUSPECT if found in (CLEAR, LIKELY, TIE) and self.reference_disturbed else found

    def _paired_confidence(self) -> str:
        """What the paired windows of the winner and the runner-up say."""
        margin, low, high = self.margin or 1.0, self.margin_low or 1.0, self.margin_high or 1.0
        if margin >= MARGIN and self.wins == self.windows and self.windows >= CLEAR_ROUNDS:
            return CLEAR
        if margin >= MARGIN and self.wins > self.windows / 2:
            return LIKELY
        if margin < MARGIN and low >= 1 / TIE_WINDOW and high <= TIE_WINDOW:
            return TIE
        return NOISY

    @property
    def close(self) -> bool:
        """No winner to name: a tie, noise, suspect numbers, or a single window."""
        return self.confidence in (TIE, NOISY, SUSPECT, ONE_WINDOW)

    @property
    def windows_to_measure(self) -> int | None:
        """How many windows a new measurement should have, when this one could not decide;
        None when it did."""
        if self.confidence not in (NOISY, SUSPECT, ONE_WINDOW):
            return None
        return min(MOST_WINDOWS, max(5, 2 * self.windows))

    @property
    def advice(self) -> str:
        """What to make of it, in a few words: what to do when it is not a clear call."""
        confidence, rival = self.confidence, self.runner_up
        if confidence == ONE_WINDOW:
            return f"one window: no spread to judge by; measure {self.windows_to_measure} windows"
        if confidence == NOISY:
            return (
                f"noisy: {self.windows} windows ranged {self.margin_low:.2f}-"
                f"{self.margin_high:.2f}x {rival}; measure {self.windows_to_measure} windows"
            )
        if confidence == SUSPECT:
            return (
                f"suspect: the windows of {_name(self.reference, self.reference)} disagree, so "
                f"every speed-up here is suspect; measure again, on a quieter machine or with "
                f"{self.windows_to_measure} windows"
            )
        if confidence == TIE:
            return f"within {MARGIN - 1:.0%} of {rival} in every window: either will do"
        if confidence == LIKELY:
            return f"ahead in {self.wins} of {self.windows} windows; more windows would confirm it"
        return ""

    def sentence(self, env_name: str | None = None) -> str:
        """The verdict as one plain-text sentence (``env_name``: how to call the env)."""
        where = f"{env_name or self.env_label}, N={self.num_envs}"
        best, rival = _name(self.best, self.reference), _name(self.runner_up, self.reference)
        ceiling = "" if self.efficiency is None else f"; {self.efficiency:.0%} of the ceiling"
        flag = ratios.efficiency_flag(self.checks)
        ceiling += "" if flag is None else f"; efficiency not shown: {flag}"
        if self.runner_up is None:
            trust = f"; {self.advice}" if self.confidence in (SUSPECT, ONE_WINDOW) else ""
            return (
                f"{where}: {best} is the only backend measured: "
                f"{self.speedup:.2f}x {self.reference}{ceiling}{trust}."
            )
        versus = (
            f"{best} at {self.speedup:.2f}x {self.reference} and {rival} at "
            f"{self.runner_up_speedup:.2f}x"
        )
        confidence = self.confidence
        if confidence == TIE:
            return f"{where}: a tie between {versus}: {self.advice}."
        if confidence in (NOISY, SUSPECT, ONE_WINDOW):
            return f"{where}: no call between {versus}: {self.advice}."
        return (
            f"{where}: use {best}: {self.speedup:.2f}x {self.reference}, {self.margin:.2f}x "
            f"the runner-up {rival}; {confidence}: faster in {self.wins} of {self.windows} "
            f"paired windows{ceiling}."
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
        ranked = sorted(by_label.values(), key=lambda m: -m.throughput)
        best = ranked[0]
        paired = best.paired_ratios or [best.ratio or 0.0]
        runner = ranked[1] if len(ranked) > 1 else None
        margins = best.ratios_to(runner) if runner is not None else []
        found.append(
            Verdict(
                env_label=env_label,
                num_envs=num_envs,
                best=best.config.backend_label,
                speedup=best.ratio or 0.0,
                low=min(paired),
                high=max(paired),
                windows=len(margins) if runner is not None else len(best.throughputs),
                runner_up=None if runner is None else runner.config.backend_label,
                runner_up_speedup=None if runner is None else runner.ratio,
                margin_low=min(margins) if margins else None,
                margin_high=max(margins) if margins else None,
                efficiency=ratios.shown_efficiency(best),
                reference=reference,
                margin=None if runner is None else best.throughput / runner.throughput,
                wins=sum(margin > 1.0 for margin in margins),
                checks=tuple(best.checks),
                runner_up_checks=() if runner is None else tuple(runner.checks),
            )
        )
    return found


def verdict_rows(
    found: Iterable[Verdict], env_names: Mapping[str, str] | None = None
) -> list[dict[str, str]]:
    """The verdicts as table rows of text, one per (env, N): the page's and the terminal's
    verdict table (``env_names``: how to call each env label, e.g. the charts' short names)."""
    rows = []
    for verdict in found:
        rival = verdict.runner_up
        over_rival = "-" if rival is None else f"{verdict.margin:.2f}x {rival}"
        use = {
            TIE: f"{verdict.best} or {rival}",
            NOISY: "no call yet",
            SUSPECT: "no call yet",
            ONE_WINDOW: "no call yet",
        }
        rows.append(
            {
                "env": (env_names or {}).get(verdict.env_label, verdict.env_label),
                "N": str(verdict.num_envs),
                "use": use.get(verdict.confidence, verdict.best),
                "fastest": verdict.best,
                f"x {verdict.reference}": f"{verdict.speedup:.2f}x",
                "x runner-up": over_rival,
                "of ceiling": _efficiency_cell(verdict),
                "confidence": verdict.confidence,
                "what to do": verdict.advice,
            }
        )
    return rows


def _efficiency_cell(verdict: Verdict) -> str:
    """As :func:`vecenvs.bench.ratios.efficiency_text` writes the winner's."""
    flag = ratios.efficiency_flag(verdict.checks)
    if flag is not None:
        return f"? {flag}"
    return "-" if verdict.efficiency is None else f"{verdict.efficiency:.0%}"


@dataclass(frozen=True)
class FitQuality:
    """How well the overhead model describes one backend: a ``word`` (:data:`GOOD`,
    :data:`ROUGH`, :data:`POOR` or :data:`TOO_FEW`) and a ``sentence`` with the numbers it
    comes from and what to make of it."""

    backend: str
    word: str
    sentence: str

    @property
    def poor(self) -> bool:
        return self.word == POOR

    @property
    def trusted(self) -> bool:
        """Whether its curve may be drawn: a good or rough fit, from enough points."""
        return self.word in (GOOD, ROUGH)


def fit_quality(fit: BackendFit, variant: str = "constant") -> FitQuality:
    """:class:`FitQuality` of one backend's fit, ``variant`` (see the module docstring)."""
    chosen = fit.fit(variant)
    if not fit.enough_points(variant):
        sentence = (
            f"{fit.label}: too few points to judge the model ({fit.distinct_points} point(s) "
            f"for {fit.parameters(variant)} numbers: t_env per env and {_overhead(variant)}); its "
            "curve is not drawn. Measure at more N to test it."
        )
        return FitQuality(fit.label, TOO_FEW, sentence)
    loop = fit.workers == 1
    # A loop's R^2 is not evidence either way (see the module docstring): leave it out.
    word = _word(chosen.median_relative_error, math.nan if loop else chosen.r2)
    numbers = _numbers(chosen.median_relative_error, chosen.r2)
    sentence = f"{fit.label}: the model fits {word} ({numbers}"
    sentence += "; R² not used for a loop)" if loop else ")"
    if word == POOR:
        sentence += "; its curve is not drawn"
        per_env = fit.per_env
        if variant == "constant" and per_env is not None and fit.enough_points("per_env"):
            per_env_word = _word(per_env.median_relative_error, math.nan if loop else per_env.r2)
            if per_env_word != POOR:
                sentence += (
                    f", though an overhead growing with N fits it {per_env_word} "
                    f"({_numbers(per_env.median_relative_error, per_env.r2)})"
                )
    elif chosen.clamped:
        sentence += "; its overhead came out below zero and was set to 0"
    return FitQuality(fit.label, word, sentence + ".")


def model_qualities(model: OverheadModel, variant: str = "constant") -> list[FitQuality]:
    """:func:`fit_quality` for every fitted backend, in the model's order."""
    return [fit_quality(fit, variant) for fit in model.backends.values()]


def _overhead(variant: str) -> str:
    return "t_os" if variant == "constant" else "a and b of t_os = a + b N"


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
    """The verdict table and the model's fit quality as plain text, for a terminal."""
    rows = verdict_rows(verdicts(measurements, reference=reference))
    lines = ["Verdict (what to use at each point; every ratio is of the throughputs above):"]
    if rows:
        header = [key for key in rows[0] if key != "fastest"]
        cells = [[row[key] for key in header] for row in rows]
        lines.append(format_table(header, cells, left={0, 2, 4, 5, 6, 7}, rule=False))
    else:
        lines.append("  nothing measured with a speed-up yet")
    if model is not None:
        qualities = model_qualities(model)
        judged = [quality for quality in qualities if quality.word != TOO_FEW]
        if judged:
            lines.append("Overhead model, how well it fits:")
            lines += [f"  {'WARNING: ' * q.poor}{q.sentence}" for q in judged]
        too_few = too_few_points(model)
        if too_few is not None:
            lines.append(too_few if not judged else f"  {too_few}")
    return "\n".join(lines)


def too_few_points(model: OverheadModel, variant: str = "constant") -> str | None:
    """One line for every backend with too few points to judge its fit (None if there is
    none): the model is not shown for them, and what would let it be judged. A first quick
    run measures two values of N, which fit every backend's two numbers exactly."""
    few = [fit for fit in model.backends.values() if not fit.enough_points(variant)]
    if not few:
        return None
    points = max(fit.distinct_points for fit in few)
    numbers = max(fit.parameters(variant) for fit in few)
    whom = "" if len(few) == len(model.backends) else f" for {', '.join(f.label for f in few)}"
    more = f"{numbers + 1} or more values of N" if len(model.envs) == 1 else "more values of N"
    return (
        f"Overhead model: too few points to judge it{whom}: {points} point(s) of env and N for "
        f"{numbers} numbers (t_env per env and {_overhead(variant)}); measure at {more} to see it."
    )
