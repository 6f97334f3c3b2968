"""Autotune: measure the ways of stepping N envs on this machine, within a time budget, and pick one.

Which backend wins depends on the env's step cost, on N and on the CPUs (the overhead model in
:mod:`vecenvs.bench.model` says why). Rather than guess, measure a short list of candidates
(:func:`candidates`, likeliest winners first), each with a warm-up and ``REPEATS`` windows of
one length sized so the whole list fits the budget. The budget is a deadline: a candidate whose
windows plus the longest startup seen so far no longer fit is reported as skipped, never
measured late. Every candidate is measured with :func:`vecenvs.bench.measure`, the engine
behind ``bench``, the notebooks and the dashboard, so the numbers mean the same everywhere.

    >>> from vecenvs.autotune import autotune
    >>> result = autotune("CartPole-v1", num_envs=4, budget_seconds=3)  # doctest: +SKIP
    >>> print(result.format_table())                                    # doctest: +SKIP
    >>> result.best.backend, result.best.kwargs                         # doctest: +SKIP
    ('multi', {})

From the command line: ``python -m vecenvs autotune --env CartPole-v1 --num-envs 128 --budget 20``.
"""

from __future__ import annotations

import itertools
import math
import textwrap
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vecenvs.bench.engine import BenchConfig, Measurement, compare, measure, validate_config
from vecenvs.bench.snippets import use_code
from vecenvs.bench.store import recording
from vecenvs.bench.sweep import TIMING, Backend, BenchEnv, check_env
from vecenvs.checks import check_seconds, check_whole_number
from vecenvs.cpus import available_cpus
from vecenvs.envspec import CHECK_SECONDS, EnvSource, describe_env, env_label
from vecenvs.factory import BACKEND_INFO
from vecenvs.table import format_table

if TYPE_CHECKING:  # only for type hints: the store is imported when used
    from vecenvs.bench.store import ResultsStore

__all__ = [
    "AutotuneProgress",
    "AutotuneResult",
    "Candidate",
    "autotune",
    "candidates",
    "validate_autotune",
]

#: Timed windows per candidate: the median of three outvotes one disturbed window.
REPEATS = 3

#: Window length bounds, in seconds: shorter is mostly noise, longer buys little for a choice.
MIN_WINDOW_SECONDS = 0.05
MAX_WINDOW_SECONDS = 1.0

#: Startup guessed for a candidate's processes before any has been measured (making the envs
#: and forking takes ~10-50 ms a process on our 2-core VM).
GUESSED_STARTUP_SECONDS_PER_PROCESS = 0.05

#: One process per env is a candidate while N is at most this many times the CPUs: beyond,
#: its startup alone eats the budget, and it loses.
SUBPROC_MAX_ENVS_PER_CPU = 4

#: A close call: the two fastest within this factor of each other are measured again, side by
#: side, before one is chosen (see :func:`autotune`).
CLOSE_CALL = 1.25

#: The columns of :meth:`AutotuneResult.format_table`.
HEADER = (
    "candidate",
    "mode",
    "K",
    "envs/K",
    "shm",
    "steps/s (median ± std)",
    "x loop",
    "startup s",
)


@dataclass(frozen=True)
class Candidate(Backend):
    """One way of stepping the envs: a sweep's :class:`~vecenvs.bench.sweep.Backend` (labelled
    ``"pool (num_workers=2)"``), plus what autotune needs to know of it."""

    @property
    def backend(self) -> str:
        """The backend's name, e.g. ``"multi"``, ``"subproc"``, ``"pool"`` or ``"pool-async"``."""
        return self.name

    def processes(self, num_envs: int) -> int:
        """Worker processes it starts: what its startup costs, roughly."""
        if self.backend == "subproc":
            return num_envs
        if self.backend == "pool":
            return self.kwargs["num_workers"] - 1  # the caller steps one chunk itself
        if self.backend == "pool-async":
            return self.kwargs["num_workers"]
        return 0

    def describe(self, num_envs: int) -> dict[str, Any]:
        """What kind of configuration this is, for the table: lanes, envs each, memory, mode."""
        lanes = {"multi": 1, "subproc": num_envs}.get(
            self.backend, self.kwargs.get("num_workers", 1)
        )
        return {
            "backend": self.backend,
            "workers": lanes,
            "envs_per_worker": math.ceil(num_envs / lanes),
            # Only the pools can choose; None where there is nothing to share (or it's a pipe per env).
            "shared_memory": self.kwargs.get("shared_memory", True)
            if self.backend in ("pool", "pool-async")
            else None,
            "mode": "async" if self.backend == "pool-async" else "sync",
        }


def candidates(num_envs: int, cpus: int | None = None) -> list[Candidate]:
    """The configurations worth measuring for ``num_envs`` envs on ``cpus`` CPUs, likeliest first.

    The loop; the pool with K = CPUs, then K = the smaller powers of two (never more than N),
    and at K = CPUs also without shared memory; the async pool at K = CPUs with half the envs
    per batch; one process per env while N is at most ``SUBPROC_MAX_ENVS_PER_CPU`` x CPUs.

    Example:
        >>> [c.label for c in candidates(8, cpus=2)]  # doctest: +NORMALIZE_WHITESPACE
        ['multi', 'pool (num_workers=2)', 'pool-async (num_workers=2, batch_size=4)',
         'pool (num_workers=2, shared_memory=False)', 'subproc']
    """
    cpus = cpus or available_cpus()
    top = min(cpus, num_envs)
    powers = itertools.takewhile(lambda k: k < top, (2**i for i in itertools.count(1)))
    found = [Candidate("multi")]
    if top >= 2:
        found.append(Candidate("pool", {"num_workers": top}))
    if num_envs >= 2:
        found.append(
            Candidate("pool-async", {"num_workers": max(1, top), "batch_size": num_envs // 2})
        )
    found += [Candidate("pool", {"num_workers": k}) for k in reversed(list(powers))]
    if top >= 2:
        found.append(Candidate("pool", {"num_workers": top, "shared_memory": False}))
    if num_envs <= SUBPROC_MAX_ENVS_PER_CPU * cpus:
        found.append(Candidate("subproc"))
    return found


@dataclass
class AutotuneProgress:
    """What ``on_result`` is told after each candidate has been measured."""

    measurement: Measurement  # the candidate just measured
    done: int  # candidates measured so far, this one included
    total: int  # candidates planned
    elapsed_seconds: float  # since autotune started


@dataclass
class AutotuneResult:
    """What :func:`autotune` measured, and the winner."""

    env_label: str  # e.g. "vecenvs/Costly-v0 (step_seconds=0.001)"
    num_envs: int
    cpus: int  # CPUs this process could use
    budget_seconds: float
    elapsed_seconds: float = 0.0  # the time it really took
    measurements: list[Measurement] = field(default_factory=list)  # in the order measured
    skipped: list[Candidate] = field(default_factory=list)  # no time left, or cancel said stop
    cancelled: bool = False
    run_id: int | None = None  # the run's id in the results store, when one was given
    # After a close call, the two fastest measured again side by side with the loop (windows
    # interleaved, see :func:`vecenvs.bench.compare`), each ``ratio`` its speed-up over the
    # loop in those paired windows. Empty when the call was clear, or no time was left.
    head_to_head: list[Measurement] = field(default_factory=list)
    # What the env is (vecenvs.envspec.EnvName.to_dict()) and its arguments: what the lines
    # to paste (:meth:`use_code`) name.
    env: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> Candidate:
        """The winner of the head-to-head if there was one, else the highest median."""
        if not self.measurements:
            raise ValueError("nothing was measured: raise the budget")
        finalists = [m for m in self.head_to_head if m.ratio is not None]
        if finalists:
            return _candidate(max(finalists, key=lambda m: m.ratio or 0.0))
        return _candidate(max(self.measurements, key=lambda m: m.median))

    @property
    def table(self) -> list[dict[str, Any]]:
        """One row per candidate measured, the winner first, then fastest first, with its
        speed-up over the loop (and, for the finalists of a close call, the head-to-head's)."""
        loop = next((m.median for m in self.measurements if m.config.backend == "multi"), None)
        best = self.best if self.measurements else None
        head_to_head = {_candidate(m).label: m.ratio for m in self.head_to_head}
        rows = []
        for m in sorted(self.measurements, key=lambda m: (_candidate(m) != best, -m.median)):
            candidate = _candidate(m)
            rows.append(
                {
                    "label": candidate.label,
                    **candidate.describe(self.num_envs),
                    "steps_per_second": m.median,
                    "std": m.std,
                    "vs_loop": None if loop is None else m.median / loop,
                    "head_to_head_vs_loop": head_to_head.get(candidate.label),
                    "startup_seconds": m.startup_seconds,
                }
            )
        return rows

    def format_table(self) -> str:
        """The table as text, the winner first and marked."""
        cells = [
            (
                ("* " if index == 0 else "  ") + row["label"],
                row["mode"],
                str(row["workers"]),
                str(row["envs_per_worker"]),
                {True: "yes", False: "no", None: "-"}[row["shared_memory"]],
                f"{row['steps_per_second']:,.0f} ± {row['std']:,.0f}",
                "-" if row["vs_loop"] is None else f"{row['vs_loop']:.2f}",
                f"{row['startup_seconds']:.2f}",
            )
            for index, row in enumerate(self.table)
        ]
        title = (
            f"autotune: {self.env_label}, N={self.num_envs}, {self.cpus} CPUs, "
            f"{self.elapsed_seconds:.1f} s of a {self.budget_seconds:g} s budget"
        )
        lines = [format_table(HEADER, cells, title=title, rule=False)]
        if self.skipped:
            lines.append("not measured (budget): " + ", ".join(c.label for c in self.skipped))
        if self.head_to_head:
            ratios = [f"{_candidate(m).label} {m.ratio:.2f}x" for m in self.head_to_head]
            lines.append(
                "close call, measured again side by side with the loop: " + ", ".join(ratios)
            )
        if self.measurements:
            lines.append(f"best: {self.best.label}")
        return "\n".join(lines)

    def sb3_choice(self) -> Candidate | None:
        """The fastest candidate SB3 can train on (every env in lock-step): the best, unless
        that is the async pool; None when none such was measured."""
        trainable = [m for m in self.measurements if BACKEND_INFO[m.config.backend].trainable]
        if not trainable:
            return None
        best = self.best
        if BACKEND_INFO[best.backend].trainable:
            return best
        return _candidate(max(trainable, key=lambda m: m.median))

    def use_code(self, *, sb3: bool = False) -> str:
        """The lines to paste: :func:`vecenvs.make_vec` with the winner, or with ``sb3`` the
        fastest SB3 can train on wrapped by :func:`vecenvs.sb3.to_sb3` ("" if none)."""
        choice = self.sb3_choice() if sb3 else self.best
        if choice is None:
            return ""
        env = self.env or {"text": self.env_label, "kind": "registered"}
        return use_code(env, self.num_envs, choice.backend, choice.kwargs, self.env_kwargs, sb3=sb3)

    def format_recommendation(self) -> str:
        """What to use on this machine, then the exact lines to paste (plain and for SB3)."""
        if not self.measurements:
            return "nothing was measured: raise the budget"
        best = self.best
        shape = best.describe(self.num_envs)
        lines = [
            f"use on this machine ({self.cpus} CPUs, N={self.num_envs}): {best.label}, "
            f"K={shape['workers']} x {shape['envs_per_worker']} envs; paste:",
            "",
            textwrap.indent(self.use_code(), "    "),
        ]
        sb3 = self.sb3_choice()
        if sb3 is not None:
            note = "" if sb3 == best else f" ({best.backend} can't train: the fastest that can)"
            lines += [
                "",
                f"for Stable-Baselines3, e.g. PPO('MlpPolicy', vec_env){note}:",
                "",
                textwrap.indent(self.use_code(sb3=True), "    "),
            ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON-ready values."""
        best = self.best if self.measurements else None
        return {
            "env": self.env_label,
            "num_envs": self.num_envs,
            "cpus": self.cpus,
            "budget_seconds": self.budget_seconds,
            "elapsed_seconds": self.elapsed_seconds,
            "best": None
            if best is None
            else {"backend": best.backend, "kwargs": dict(best.kwargs), "label": best.label},
            "env_source": self.env,
            "env_kwargs": self.env_kwargs,
            "use_code": self.use_code() if best else "",
            "sb3_code": self.use_code(sb3=True) if best else "",
            "table": self.table,
            "skipped": [c.label for c in self.skipped],
            "cancelled": self.cancelled,
            "head_to_head": [
                {"label": _candidate(m).label, "vs_loop": m.ratio} for m in self.head_to_head
            ],
            "measurements": [m.to_dict() for m in self.measurements],
        }


def autotune(
    env: EnvSource,
    num_envs: int,
    budget_seconds: float = 20.0,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    candidates_to_try: list[Candidate] | None = None,
    seed: int = 0,
    on_result: Callable[[AutotuneProgress], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    store: ResultsStore | None = None,
    label: str | None = None,
    run_id: int | None = None,
    start_method: str | None = None,
    check_timeout: float = CHECK_SECONDS,
) -> AutotuneResult:
    """Measure the candidates for ``num_envs`` copies of ``env`` within ``budget_seconds``.

    ``env`` is any form :mod:`vecenvs.envspec` reads: a registered id, ``"module:EnvId"``, an
    entry point ``"package.module:Class"`` or a function that makes one env (workers unpickle it
    with dill, under every start method). It is checked once first (made, reset, stepped,
    gymnasium's env checker), and a broken env is refused in one line. The budget is a deadline for the whole search, every process's startup included.
    ``candidates_to_try`` defaults to :func:`candidates` for N and this machine. ``on_result``
    gets an :class:`AutotuneProgress` after each candidate; ``cancel`` is checked before each,
    and True stops the search with what it measured (``cancelled=True``). ``store`` saves the
    run (kind ``"autotune"``) candidate by candidate, under ``label``, or into its run
    ``run_id`` already started by the caller (the dashboard's job runner does).
    ``start_method`` (``"fork"``, ``"spawn"``, ``"forkserver"``; None: Python's default) is how
    every candidate that starts processes starts them, as measured and as the lines to paste
    say. ``check_timeout``: the seconds the check of the env may take (an env slow to build
    needs more); the budget starts after it.

    Raises ValueError for a bad argument, before anything is measured.
    """
    env_id = env
    env_kwargs = dict(env_kwargs or {})
    planned, configs = _plan(
        env_id,
        num_envs,
        budget_seconds,
        env_kwargs,
        candidates_to_try,
        seed,
        start_method=start_method,
        check_timeout=check_timeout,
    )
    started = time.perf_counter()  # the search: the check above has its own deadline
    deadline = started + budget_seconds
    settings: dict[str, Any] = {
        "env_id": env_label(env_id),
        "env": describe_env(env_id).to_dict(),
        "env_kwargs": env_kwargs,
        "num_envs": num_envs,
        "budget_seconds": budget_seconds,
        "candidates": [c.label for c in planned],
        "check_timeout": check_timeout,
    }
    with recording(store, "autotune", settings, label=label, run_id=run_id) as run:
        result = AutotuneResult(
            configs[0].env_label,
            num_envs,
            available_cpus(),
            budget_seconds,
            run_id=run.id,
            env=settings["env"],
            env_kwargs=env_kwargs,
        )
        try:
            for index, (candidate, config) in enumerate(zip(planned, configs)):
                if cancel is not None and cancel():
                    result.cancelled = run.cancelled = True
                    result.skipped += planned[index:]
                    break
                if time.perf_counter() + _cost(candidate, config, result) > deadline:
                    result.skipped.append(candidate)
                    continue
                measurement = measure(config)
                result.measurements.append(measurement)
                run.add(measurement)
                if on_result is not None:
                    elapsed = time.perf_counter() - started
                    done = len(result.measurements)
                    on_result(AutotuneProgress(measurement, done, len(planned), elapsed))
            if not result.cancelled:
                result.head_to_head = _head_to_head(result, configs[0], deadline, cancel)
        finally:
            result.elapsed_seconds = time.perf_counter() - started
            if result.measurements:  # the table and the winner; the measurements are saved rows
                run.summary = {k: v for k, v in result.to_dict().items() if k != "measurements"}
    return result


def validate_autotune(
    env_id: EnvSource,
    num_envs: int,
    budget_seconds: float = 20.0,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    start_method: str | None = None,
    check_timeout: float = CHECK_SECONDS,
) -> None:
    """Check :func:`autotune`'s arguments without measuring anything (the dashboard does, before
    it queues a search). Raises ValueError naming the bad value."""
    _plan(
        env_id,
        num_envs,
        budget_seconds,
        dict(env_kwargs or {}),
        None,
        0,
        start_method=start_method,
        check_timeout=check_timeout,
    )


def _plan(
    env_id: EnvSource,
    num_envs: int,
    budget_seconds: float,
    env_kwargs: dict[str, Any],
    candidates_to_try: list[Candidate] | None,
    seed: int,
    *,
    start_method: str | None = None,
    check_timeout: float = CHECK_SECONDS,
) -> tuple[list[Candidate], list[BenchConfig]]:
    """The candidates and their configs, every one checked: a typo fails before anything runs."""
    check_seconds("budget_seconds", budget_seconds)
    check_seconds("check_timeout", check_timeout)
    check_whole_number("num_envs", num_envs)
    planned = list(candidates_to_try) if candidates_to_try is not None else candidates(num_envs)
    if not planned:
        raise ValueError("candidates_to_try is empty; expected at least one candidate")
    if start_method is not None:  # each backend that starts processes, under its own keyword
        planned = [_started_by(candidate, start_method) for candidate in planned]
    window = _window_seconds(budget_seconds, planned, num_envs)
    timing: dict[str, Any] = {
        "warmup_seconds": window,
        "measure_seconds": window,
        "repeats": REPEATS,
        "seed": seed,
    }
    configs = [
        BenchConfig(env_id, num_envs, c.backend, dict(c.kwargs), env_kwargs, **timing)
        for c in planned
    ]
    for config in configs:
        validate_config(config)
    check_env(BenchEnv(env_id, env_kwargs), check_timeout)
    return planned, configs


def _started_by(candidate: Candidate, start_method: str) -> Candidate:
    """``candidate`` with ``start_method`` among its arguments, under the name its backend
    gives it (``start_method``, gymnasium's ``context``); as it is for one that starts none."""
    keyword = BACKEND_INFO[candidate.backend].start_method_kwarg
    if keyword is None:
        return candidate
    return Candidate(candidate.name, {**candidate.kwargs, keyword: start_method})


def _window_seconds(budget_seconds: float, planned: list[Candidate], num_envs: int) -> float:
    """One window length for every candidate, so that all of them fit the budget.

    Each candidate costs a warm-up and ``REPEATS`` windows of this length, plus its startup
    (guessed from its processes); half the budget is kept back for startups and surprises, and
    room is left for a head-to-head of three (two finalists and the loop) after a close call.
    """
    startups = sum(
        GUESSED_STARTUP_SECONDS_PER_PROCESS * (1 + c.processes(num_envs)) for c in planned
    )
    measuring = max(budget_seconds / 2 - startups, 0.0)
    slots = len(planned) + (3 if len(planned) > 1 else 0)
    window = measuring / (slots * (REPEATS + 1))
    return min(max(window, MIN_WINDOW_SECONDS), MAX_WINDOW_SECONDS)


def _cost(candidate: Candidate, config: BenchConfig, result: AutotuneResult) -> float:
    """How long measuring ``candidate`` should take: its windows plus its startup, scaled from
    the slowest startup per process measured so far (or guessed before any)."""
    done = result.measurements
    per_process = [
        m.startup_seconds / m.processes for m in done if not math.isnan(m.startup_seconds)
    ]
    startup_each = max(per_process, default=GUESSED_STARTUP_SECONDS_PER_PROCESS)
    windows = config.warmup_seconds + config.repeats * config.measure_seconds
    return windows + (1 + candidate.processes(result.num_envs)) * startup_each


def is_close_call(fastest: float, second: float) -> bool:
    """Whether the two fastest medians (env steps/s) are within :data:`CLOSE_CALL` of each
    other, too close to pick one without measuring them again side by side."""
    return fastest < CLOSE_CALL * second


def _head_to_head(
    result: AutotuneResult, config: BenchConfig, deadline: float, cancel: Callable[[], bool] | None
) -> list[Measurement]:
    """Measure the two fastest again, interleaved with the loop, if theirs was a close call.

    The candidates were measured one after another, so a change in the machine's load between
    two of them can flip a close call. Measured side by side, window by window, each against
    the loop in the same round (:func:`vecenvs.bench.compare`), the drift cancels out.
    """
    ranked = sorted(result.measurements, key=lambda m: m.median, reverse=True)
    if len(ranked) < 2 or not is_close_call(ranked[0].median, ranked[1].median):
        return []
    loop = Candidate("multi")
    entries = [c for c in map(_candidate, ranked[:2]) if c != loop]
    cost = sum(_cost(c, config, result) for c in [*entries, loop])
    if time.perf_counter() + cost > deadline or (cancel is not None and cancel()):
        return []
    return compare(
        config.env_id,
        config.num_envs,
        [(c.backend, dict(c.kwargs)) for c in entries],
        reference="multi",
        env_kwargs=config.env_kwargs,
        **{name: getattr(config, name) for name in TIMING},
    )


def _candidate(measurement: Measurement) -> Candidate:
    return Candidate(measurement.config.backend, dict(measurement.config.backend_kwargs))
