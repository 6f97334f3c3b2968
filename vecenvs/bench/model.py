"""The overhead model: two numbers that explain most of what a backend's speed-up is.

Why is a backend with 8 worker processes not 8 times faster than a loop over the envs? Every
``step()`` call pays for the parallelism (sending actions, waking workers, waiting for the
slowest, gathering results) however cheap the envs are. The seed post (a blog post proposing a
``PoolVecEnv`` for Stable-Baselines3) sums this up as

    fps_parallel / fps_sequential  ~  N t_env / (N t_env + t_os)

for N envs whose step takes t_env, with t_os the operating system's overhead. That ratio never
exceeds 1: it is an *efficiency*, the parallelism is missing. Below it is put back, and t_env
and t_os are fitted to measurements.

The derivation
--------------
One ``step()`` of N envs, on a backend that steps c envs at the same moment, takes

    t_batch = N t_env / c + t_os

- **t_env**: one env step, 1 / the throughput of the sequential reference (gym-sync).
- **c = min(workers, N, capacity(N))**: envs really stepping at once. ``workers`` is
  :attr:`~vecenvs.bench.engine.Measurement.workers` (1 for a loop, N for one process per env,
  K for the pool). **capacity(N)** is the machine's: the ceiling row's speed-up over the
  reference (:mod:`vecenvs.bench.ceiling`: min(K, N) processes stepping with no coordination);
  on 2 CPUs often 1.7-1.9, not 2, as busy cores share caches, memory bandwidth and clock
  headroom. Without a ceiling it is estimated as min(N, cpus), which overstates a busy machine.
- **t_os**: the backend's fixed overhead per ``step()`` call, whatever N is.

The loop needs N t_env for the same batch, so the speed-up over it and the efficiency are

    S = N t_env / t_batch = c N t_env / (N t_env + c t_os),    S / c = N t_env / (N t_env + c t_os)

The efficiency is the seed's formula, its t_os being c times ours: while one call's overhead
runs, all c lanes wait. Reading it: when N t_env >> c t_os (costly envs, many of them), S -> c
and the throughput approaches the machine's limit, the ceiling capacity(N) / t_env; when
N t_env << t_os (CartPole, few envs), S ~ N t_env / t_os, far below 1: the parallel backend is
slower than the loop it was meant to beat.

The fit
-------
**t_env, per env** (:attr:`BenchConfig.env_label`): the median over the env's reference
measurements of 1 / their median window throughput; each point uses the t_env of the reference
measured at its own env and N, the very measurement its ratio was divided by.

**t_os, per backend** (:attr:`BenchConfig.backend_label`, one number for every env and N).
Each measured speed-up S_i implies a batch time and so its own estimate of t_os:

    t_batch_i = N_i t_env_i / S_i,    t_os_i = t_batch_i - N_i t_env_i / c_i

The fitted t_os minimises sum_i (log S_predicted,i - log S_i)^2 = sum_i
log(t_batch_predicted,i / t_batch_i)^2: errors as *ratios*, because batch times span tens of
microseconds (CartPole, N=1) to a tenth of a second (MuJoCo, N=128), and plain least squares
would fit the slowest batches, where the overhead is a rounding error. The log makes it
non-linear in t_os, so the fit is Gauss-Newton: for small errors log(1 + x) ~ x, and the sum
becomes sum_i ((t_os - t_os_i) / t_batch_i)^2, a weighted linear least squares
(``numpy.linalg.lstsq``). Those weights favour the fastest batches by the square of how much
faster they are (the pool with one worker, stepping in the calling process, would decide t_os
alone), so the fit repeats the linear step, weighting by the batch time predicted so far, and
shortens a round that would make it worse. t_os is kept >= 0, flagged ``clamped`` when that
bound holds it.

**Fit quality**: R^2 of log S, predicted against measured, and the median relative error
``|S_predicted - S| / S``; on a log scale because speed-ups span 0.05x to 2x and their noise grows
with them. R^2 is negative when the model does worse than a flat line at the average; a loop,
whose speed-up hardly varies, leaves it little spread to explain: read its median error.

What is fitted, and what is not
-------------------------------
- **The reference** defines t_env (including its own per-call bookkeeping, so every other t_os
  is overhead *beyond the reference's*): t_os 0 and speed-up 1 by definition, not fitted.
- **Sequential loops** (``workers == 1``: ``multi``, ``sb3-dummy``) are fitted with c = 1; one
  leaner than gym-sync is clamped to 0, and its median error shows by how much it wins.
- **The ceiling** is not fitted: it caps c. Its efficiency per process (speed-up / processes)
  is interpolated on a log scale of N between the N it was measured at, held beyond them.
- Left out, and listed in :attr:`OverheadModel.skipped` with the reason: **native backends**
  (EnvPool steps C++ envs, not the Python envs t_env describes) and **measurements without a
  ratio** (made outside :func:`~vecenvs.bench.compare`).

What a fit can claim
--------------------
A backend's curve against N is drawn from t_env (one per env, measured by the reference) and
its overhead (t_os; a and b in the variant below). Through as many points as numbers, any
curve fits exactly: "median error 0%, R^2 1.00" from two N says nothing. So a fit is judged,
and its curve drawn, only with more distinct (env, N) points than those numbers
(:meth:`BackendFit.enough_points`): three N for one env with the constant overhead, four with
the overhead growing with N.

One process per env: a second variant
-------------------------------------
Backends with one process per env (``subproc``, ``gym-async``, ``sb3-subproc``) pay per env: a
pipe message to each process and back and, once N exceeds the CPUs, the switching between N
processes. A constant t_os fits them poorly when N > cpus, and the poor fit is itself the lesson.
So each backend with measurements at two or more N also gets a fit ``per_env``,
t_os(N) = a + b N (a, b >= 0). b, the price of one more env per call, should be near 0 for the
pool, whose overhead is per worker.

Example:
    >>> from vecenvs.bench import QUICK, compare
    >>> from vecenvs.bench.model import fit_overhead_model
    >>> results = compare("CartPole-v1", 4, ["pool"], **QUICK)  # + gym-sync, the reference
    >>> model = fit_overhead_model(results)
    >>> model.backends["pool"].t_os_seconds >= 0
    True
    >>> print(model.format_table())  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import numpy as np

from vecenvs.bench.engine import CEILING, DEFAULT_REFERENCE, BenchConfig, Measurement
from vecenvs.cpus import available_cpus
from vecenvs.factory import NATIVE_BACKENDS
from vecenvs.table import format_table

__all__ = [
    "VARIANTS",
    "BackendFit",
    "EnvFit",
    "OverheadFit",
    "OverheadModel",
    "env_step_seconds",
    "fit_overhead_model",
    "native_backends",
]

#: The two ways a backend's overhead is fitted: ``"constant"`` (t_os, the seed's model) and
#: ``"per_env"`` (t_os(N) = a + b N).
VARIANTS = ("constant", "per_env")

#: Gauss-Newton rounds of the fit (it usually settles in a handful), and the shortest step
#: tried before deciding that no step improves it.
_MAX_ROUNDS = 100
_SMALLEST_STEP = 1e-6

#: How many skipped points the "nothing to fit" error lists before "and N more".
_REASONS_SHOWN = 5

#: The columns of :meth:`OverheadModel.format_table`: (header, key of the row, format, text
#: when the value is ``None``).
_ENV_COLUMNS = (
    ("env", "env", "{}", "-"),
    ("t_env (us)", "t_env_us", "{:.1f}", "-"),
    ("1 env (steps/s)", "single_env_rate", "{:,.0f}", "-"),
    ("ceiling (steps/s)", "machine_limit", "{:,.0f}", "-"),
    ("points", "points", "{}", "-"),
)
_BACKEND_COLUMNS = (
    ("backend", "backend", "{}", "-"),
    ("workers", "workers", "{}", "N"),
    ("points", "points", "{}", "-"),
    ("t_os (us)", "t_os_us", "{:.1f}", "-"),
    ("R^2 log", "r2", "{:.3f}", "-"),
    ("med. error", "median_relative_error", "{:.1%}", "-"),
    ("a (us)", "per_env_fixed_us", "{:.1f}", "-"),
    ("b (us/env)", "per_env_us", "{:.2f}", "-"),
    ("R^2 log", "per_env_r2", "{:.3f}", "-"),
    ("med. error", "per_env_median_relative_error", "{:.1%}", "-"),
)


def native_backends() -> frozenset[str]:
    """Backend names whose envs are native (C++) code: not like-for-like with Python envs."""
    return frozenset(NATIVE_BACKENDS)


@dataclass(frozen=True)
class EnvFit:
    """What the model knows about one env (``label``: its id and arguments): its step time
    ``t_env_seconds``, the median of 1 / the reference's throughput over ``points`` reference
    measurements, on a machine of ``cpus`` CPUs.

    ``ceiling`` is the measured ceiling as ``(N, efficiency per process)`` pairs, N ascending:
    its speed-up over the reference divided by its processes, min(K, N). Empty when no ceiling
    was measured on this env: the limit is then an estimate.
    """

    label: str
    t_env_seconds: float
    cpus: int
    points: int
    ceiling: tuple[tuple[int, float], ...] = ()

    @property
    def single_env_rate(self) -> float:
        """Env steps per second of one env stepped in a loop: 1 / t_env."""
        return 1.0 / self.t_env_seconds

    @property
    def ceiling_measured(self) -> bool:
        """True when the limit comes from a measured ceiling, False when it is an estimate."""
        return bool(self.ceiling)

    def capacity(self, num_envs: float) -> float:
        """How many envs this machine steps at once, at best, with ``num_envs`` envs: the
        ceiling's speed-up over the reference (interpolated between the N it was measured
        at), or min(N, cpus) when no ceiling was measured."""
        processes = min(num_envs, self.cpus)
        if not self.ceiling:
            return processes
        return processes * _interpolate_log(self.ceiling, num_envs)

    def limit(self, num_envs: float) -> float:
        """The most env steps/s this machine gives with ``num_envs`` envs: capacity(N) / t_env."""
        return self.capacity(num_envs) / self.t_env_seconds

    @property
    def machine_limit(self) -> float:
        """The limit once every CPU is busy (N >= cpus): the ceiling measured there, or
        cpus x single-env rate as an estimate without a ceiling."""
        return self.limit(max([self.cpus, *(n for n, _ in self.ceiling)]))


@dataclass(frozen=True)
class OverheadFit:
    """One fitted overhead, t_os(N) = ``fixed_seconds`` + ``per_env_seconds`` x N, both >= 0
    (``per_env_seconds`` is 0 in the constant variant), with how well it fits: ``r2`` of log
    speed-up (NaN with fewer than two distinct speed-ups) and the ``median_relative_error`` of
    the speed-up. ``clamped``: the best fit wanted a negative overhead and 0 was used instead.
    """

    fixed_seconds: float
    per_env_seconds: float
    r2: float
    median_relative_error: float
    clamped: bool = False

    def seconds(self, num_envs: float) -> float:
        """The overhead of one ``step()`` call of ``num_envs`` envs, in seconds."""
        return self.fixed_seconds + self.per_env_seconds * num_envs


@dataclass(frozen=True)
class BackendFit:
    """One backend's fitted overhead (``label``: the backend and its arguments), from
    ``points`` measurements (env x N).

    ``workers``: how many envs it steps at once, ``None`` meaning one per env (N). ``constant``
    is the seed's model, one t_os per call; ``per_env`` is t_os(N) = a + b N, ``None`` when the
    measurements cover only one N. ``envs``: how many envs they cover; ``distinct_points``: how
    many different (env, N) (0: as many as ``points``). The properties below read the constant
    variant.
    """

    label: str
    points: int
    workers: int | None
    constant: OverheadFit
    per_env: OverheadFit | None = None
    envs: int = 1
    distinct_points: int = 0

    def __post_init__(self) -> None:
        if not self.distinct_points:
            object.__setattr__(self, "distinct_points", self.points)

    def parameters(self, variant: str = "constant") -> int:
        """The numbers its curves are drawn from: t_env of each env (the reference measured
        it, at the very points the speed-ups were divided by) and the fitted overhead, t_os
        or a and b."""
        _check_variant(variant)
        return self.envs + (1 if variant == "constant" else 2)

    def enough_points(self, variant: str = "constant") -> bool:
        """Whether the fit can say anything: more distinct (env, N) points than
        :meth:`parameters`. Two numbers go through two points exactly, whatever the model:
        a fit from so few is neither good nor poor, only untested."""
        return self.distinct_points > self.parameters(variant)

    @property
    def t_os_seconds(self) -> float:
        return self.constant.fixed_seconds

    @property
    def r2(self) -> float:
        return self.constant.r2

    @property
    def median_relative_error(self) -> float:
        return self.constant.median_relative_error

    def workers_at(self, num_envs: float) -> float:
        """How many envs this backend steps at once with ``num_envs`` envs (before the CPUs)."""
        return num_envs if self.workers is None else min(self.workers, num_envs)

    def fit(self, variant: str = "constant") -> OverheadFit:
        """The fit for ``variant`` (one of :data:`VARIANTS`).

        Raises:
            ValueError: an unknown variant, or ``"per_env"`` when it could not be fitted.
        """
        _check_variant(variant)
        if variant == "constant":
            return self.constant
        if self.per_env is None:
            raise ValueError(
                f"{self.label}: the per_env variant needs measurements at two or more values of "
                "N; use variant='constant'"
            )
        return self.per_env


@dataclass
class OverheadModel:
    """t_env per env and t_os per backend, fitted to measurements (by
    :func:`fit_overhead_model`); predicts speed-ups.

    ``cpus``: of the machine that measured, capping how many envs step at once. ``reference``:
    the sequential backend that defines t_env and the speed-ups, not in ``backends``.
    ``skipped``: the measurements left out of the fit, each with the reason.
    ``reference_points``: how many reference measurements there were.
    """

    cpus: int
    reference: str
    envs: dict[str, EnvFit]
    backends: dict[str, BackendFit]
    skipped: list[str] = field(default_factory=list)
    reference_points: int = 0

    def concurrency(
        self,
        backend_label: str,
        num_envs: float,
        workers: float | None = None,
        env_label: str | None = None,
    ) -> float:
        """c = min(workers, N, capacity(N)): how many envs step at once (``workers`` from the
        fit; capacity from ``env_label``'s ceiling, or the CPUs without one)."""
        if workers is None:
            if backend_label == self.reference:
                workers = 1
            else:
                workers = self._backend(backend_label).workers_at(num_envs)
        capacity = self.cpus if env_label is None else self._env(env_label).capacity(num_envs)
        return max(1, min(workers, num_envs, capacity))

    # predict_speedup and predict_throughput share a signature on purpose (a kept repeat): the
    # same question asked in two units, each with its own formula in its docstring.
    def predict_speedup(
        self,
        env_label: str,
        backend_label: str,
        num_envs: float,
        workers: float | None = None,
        *,
        variant: str = "constant",
    ) -> float:
        """The model's speed-up over the reference: c N t_env / (N t_env + c t_os(N)); 1.0 for
        the reference. ``workers``: how many envs the backend steps at once, by default what
        was measured; ``variant``: one of :data:`VARIANTS`.

        Raises:
            KeyError: an env or backend the model was not fitted on.
            ValueError: a bad ``num_envs`` or ``variant``.
        """
        if not num_envs > 0:
            raise ValueError(f"num_envs must be > 0, got {num_envs!r}")
        _check_variant(variant)
        t_env = self._env(env_label).t_env_seconds
        if backend_label == self.reference:
            return 1.0
        overhead = self._backend(backend_label).fit(variant).seconds(num_envs)
        c = self.concurrency(backend_label, num_envs, workers, env_label)
        return _speedup(num_envs, t_env, c, overhead)

    def predict_throughput(
        self,
        env_label: str,
        backend_label: str,
        num_envs: float,
        workers: float | None = None,
        *,
        variant: str = "constant",
    ) -> float:
        """The model's throughput in env steps/s: speed-up x single-env rate (arguments as
        for :meth:`predict_speedup`)."""
        speedup = self.predict_speedup(env_label, backend_label, num_envs, workers, variant=variant)
        return speedup * self._env(env_label).single_env_rate

    def table(self) -> list[dict[str, Any]]:
        """One JSON-ready row per backend, the reference first; times in microseconds.

        Keys: ``backend``, ``workers`` (``None`` = one per env), ``points``, ``t_os_us``,
        ``r2``, ``median_relative_error``, ``clamped``, ``enough_points`` (whether the fit can
        be judged: :meth:`BackendFit.enough_points`; None for the reference), then the per-env
        variant's
        ``per_env_fixed_us``, ``per_env_us``, ``per_env_r2``,
        ``per_env_median_relative_error`` (all ``None`` without that variant), and ``note``.
        An undefined R^2 is ``None``, not NaN, so the rows stay valid JSON.
        """
        # The reference as a fit of its own: no overhead, a speed-up of exactly 1.
        none = OverheadFit(0.0, 0.0, math.nan, 0.0)
        rows = []
        for fit in [
            BackendFit(self.reference, self.reference_points, 1, none),
            *self.backends.values(),
        ]:
            per_env = fit.per_env
            note = ""
            reference = fit.label == self.reference
            if reference:
                note = "the reference: defines t_env; speed-up 1 by definition"
            elif not fit.enough_points():
                note = (
                    f"too few points to judge: {fit.distinct_points} for {fit.parameters()} numbers"
                )
            elif fit.constant.clamped:
                note = "t_os clamped to 0: faster per call than the model allows"
            rows.append(
                {
                    "backend": fit.label,
                    "workers": fit.workers,
                    "points": fit.points,
                    "t_os_us": fit.t_os_seconds * 1e6,
                    "r2": _json_number(fit.r2),
                    "median_relative_error": fit.median_relative_error,
                    "clamped": fit.constant.clamped,
                    "enough_points": None if reference else fit.enough_points(),
                    "per_env_fixed_us": None if per_env is None else per_env.fixed_seconds * 1e6,
                    "per_env_us": None if per_env is None else per_env.per_env_seconds * 1e6,
                    "per_env_r2": None if per_env is None else _json_number(per_env.r2),
                    "per_env_median_relative_error": (
                        None if per_env is None else per_env.median_relative_error
                    ),
                    "note": note,
                }
            )
        return rows

    def env_table(self) -> list[dict[str, Any]]:
        """One JSON-ready row per env, cheapest first: ``env``, ``t_env_us``,
        ``single_env_rate`` and ``machine_limit`` (env steps/s, with every CPU busy),
        ``ceiling_measured`` (False: ``machine_limit`` is the estimate cpus x single-env rate),
        ``points``."""
        return [
            {
                "env": env.label,
                "t_env_us": env.t_env_seconds * 1e6,
                "single_env_rate": env.single_env_rate,
                "machine_limit": env.machine_limit,
                "ceiling_measured": env.ceiling_measured,
                "points": env.points,
            }
            for env in sorted(self.envs.values(), key=lambda env: env.t_env_seconds)
        ]

    def to_dict(self) -> dict[str, Any]:
        """Everything, as plain JSON-ready values (e.g. for a results store)."""
        return {
            "cpus": self.cpus,
            "reference": self.reference,
            "envs": self.env_table(),
            "backends": self.table(),
            "skipped": list(self.skipped),
        }

    @property
    def judged(self) -> bool:
        """Whether any backend's fit can be judged (:meth:`BackendFit.enough_points`): a model
        fitted through as many points as it has numbers says nothing, and is not worth showing."""
        return any(fit.enough_points() for fit in self.backends.values())

    def format_table(self) -> str:
        """The envs and the backends as aligned plain-text tables, for a terminal; a backend
        with too few points to judge its fit is named below, not shown with its numbers."""
        envs, rows = self.env_table(), self.table()
        few = [row["backend"] for row in rows if row["enough_points"] is False]
        backends = [row for row in rows if row["enough_points"] is not False]
        env_cells = _cells(envs, _ENV_COLUMNS)
        for cells, row in zip(env_cells, envs):
            cells[3] += "" if row["ceiling_measured"] else "~"
        backend_cells = _cells(backends, _BACKEND_COLUMNS)
        for cells, row in zip(backend_cells, backends):
            cells[3] += "*" if row["clamped"] else ""
        lines = [
            f"Overhead model on {self.cpus} CPU(s), relative to {self.reference}:",
            "  speed-up = c N t_env / (N t_env + c t_os), c = min(workers, N, capacity)",
            "",
            format_table([column[0] for column in _ENV_COLUMNS], env_cells, rule=False),
        ]
        if not all(row["ceiling_measured"] for row in envs):
            lines.append(
                "~: no ceiling measured: estimated as CPUs x 1 env (add the backend "
                "'ceiling' to measure it)"
            )
        lines += [
            "",
            format_table([column[0] for column in _BACKEND_COLUMNS], backend_cells, rule=False),
            "",
            "t_os: overhead per step() call, the seed's model. a + b N: the variant whose",
            "overhead grows with N (b per env). R^2 of log speed-up; med. error: median",
            "|predicted - measured| / measured speed-up. workers N: one process per env.",
        ]
        if any(row["clamped"] for row in backends):
            lines.append("*: clamped to 0 (the best fit wanted a negative overhead).")
        if few:
            lines.append(
                f"Not shown, too few points to judge their fit: {', '.join(few)} (no more (env, "
                "N) points than the numbers of their curves: t_env per env, t_os); measure at "
                "more N."
            )
        if self.skipped:
            lines.append(f"Left out of the fit ({len(self.skipped)}):")
            lines += [f"  - {reason}" for reason in self.skipped]
        return "\n".join(lines)

    def _env(self, env_label: str) -> EnvFit:
        if env_label not in self.envs:
            raise KeyError(f"no t_env for env {env_label!r}: the model knows {sorted(self.envs)}")
        return self.envs[env_label]

    def _backend(self, backend_label: str) -> BackendFit:
        if backend_label not in self.backends:
            raise KeyError(
                f"backend {backend_label!r} was not fitted: the model has {sorted(self.backends)}"
                f" and the reference {self.reference!r} (see OverheadModel.skipped for why "
                "measurements were left out)"
            )
        return self.backends[backend_label]


def env_step_seconds(
    measurements: Iterable[Measurement], *, reference: str = DEFAULT_REFERENCE
) -> dict[str, float]:
    """t_env per env label: the median over the reference's measurements of 1 / their median
    window throughput. Envs the reference was not measured on are absent. The figures use
    this too, to order envs by cost."""
    inverse_rates = defaultdict(list)
    for measurement in measurements:
        rate = _reference_rate(measurement, reference)
        if rate is not None:
            inverse_rates[measurement.config.env_label].append(1.0 / rate)
    return {label: statistics.median(values) for label, values in inverse_rates.items()}


def fit_overhead_model(
    measurements: Sequence[Measurement],
    *,
    cpus: int | None = None,
    reference: str = DEFAULT_REFERENCE,
) -> OverheadModel:
    """Fit t_env per env and t_os per backend (see the module docstring for how and why).

    ``measurements`` come from :func:`~vecenvs.bench.compare` or a sweep, the reference
    included (it gives t_env): any number of envs, N and backends, a configuration measured
    several times giving several points. ``cpus``: of the machine that measured, by default
    this one's. What was left out is in the model's ``skipped``.

    Raises:
        TypeError: an item is not a :class:`~vecenvs.bench.engine.Measurement`.
        ValueError: no measurements, no reference measurement to take t_env from, or no
            measurement of another backend that can be fitted (the error says why each was
            left out).
    """
    measurements = list(measurements)
    for item in measurements:
        if not isinstance(item, Measurement):
            hint = (
                " (use Measurement.from_dict for stored results)" if isinstance(item, dict) else ""
            )
            raise TypeError(f"expected Measurement objects, got {type(item).__name__}{hint}")
    cpus = check_cpus(cpus)
    if not measurements:
        raise ValueError("no measurements to fit: measure with compare() or a sweep first")

    env_t = env_step_seconds(measurements, reference=reference)
    if not env_t:
        raise ValueError(
            f"no usable {reference!r} measurement: t_env is measured by the reference; "
            "compare() always measures it, so pass its results here with the others"
        )
    # The reference at the same env and N: the very measurement each ratio was divided by.
    point_t = defaultdict(list)
    reference_points: defaultdict[Any, int] = defaultdict(int)
    for measurement in measurements:
        rate = _reference_rate(measurement, reference)
        if rate is not None:
            config = measurement.config
            point_t[config.env_label, config.num_envs].append(1.0 / rate)
            reference_points[config.env_label] += 1

    ceilings = _ceilings(measurements, env_t, point_t)
    envs = {
        label: EnvFit(label, t_env, cpus, reference_points[label], ceilings.get(label, ()))
        for label, t_env in env_t.items()
    }
    skipped: list[str] = []
    points_by_backend: dict[str, list[_Point]] = defaultdict(list)
    for measurement in measurements:
        config, ratio = measurement.config, measurement.ratio
        label = config.backend_label
        where = f"{label} on {config.env_label}, N={config.num_envs}"
        if label == reference:
            if _reference_rate(measurement, reference) is None:
                skipped.append(f"{where}: the reference has no positive throughput")
        elif config.backend == CEILING:
            pass  # not a backend: the limit that caps c (see _ceilings)
        elif config.backend in NATIVE_BACKENDS:
            reason = (
                f"{label}: native backend, its envs are C++ code and not the Python envs "
                "t_env was measured on (shown, not fitted)"
            )
            if reason not in skipped:
                skipped.append(reason)
        elif ratio is None:
            skipped.append(f"{where}: no ratio (measured outside compare(), no reference)")
        elif not _positive(ratio):
            skipped.append(f"{where}: ratio {ratio!r} is not a positive number")
        elif config.env_label not in env_t:
            skipped.append(f"{where}: no {reference} measurement of this env to take t_env from")
        else:
            workers = measurement.workers if measurement.workers and measurement.workers > 0 else 1
            capacity = envs[config.env_label].capacity(config.num_envs)
            c = max(1, min(workers, config.num_envs, capacity))
            t_env = _t_env_at(config, env_t, point_t)
            points_by_backend[label].append(
                _Point(config.num_envs, t_env, c, float(ratio), workers, config.env_label)
            )

    if not points_by_backend:
        message = (
            f"nothing to fit: no measurement of a backend other than the reference {reference!r}"
            " with a ratio"
        )
        if skipped:
            message += ". Left out: " + "; ".join(skipped[:_REASONS_SHOWN])
            if len(skipped) > _REASONS_SHOWN:
                message += f" (and {len(skipped) - _REASONS_SHOWN} more)"
        raise ValueError(message)

    backends = {label: _fit_backend(label, points) for label, points in points_by_backend.items()}
    return OverheadModel(cpus, reference, envs, backends, skipped, sum(reference_points.values()))


@dataclass(frozen=True)
class _Point:
    """One measured speed-up, with what the model needs to explain it."""

    num_envs: int
    t_env: float
    c: float
    speedup: float
    workers: int
    env: str = ""

    @property
    def t_batch(self) -> float:
        """The batch time the measured speed-up implies: N t_env / S."""
        return self.num_envs * self.t_env / self.speedup

    @property
    def parallel_seconds(self) -> float:
        """The env-stepping part of the batch time: N t_env / c."""
        return self.num_envs * self.t_env / self.c


def _fit_backend(label: str, points: list[_Point]) -> BackendFit:
    """Both variants of one backend's overhead, fitted to its points."""
    constant = _fit(points, per_env=False)
    per_env = _fit(points, per_env=True) if len({p.num_envs for p in points}) >= 2 else None
    # One process per env: every point has as many workers as envs (and some N above 1).
    one_per_env = all(p.workers == p.num_envs for p in points) and any(
        p.num_envs > 1 for p in points
    )
    workers = None if one_per_env else max(point.workers for point in points)
    envs = len({point.env for point in points})
    distinct = len({(point.env, point.num_envs) for point in points})
    return BackendFit(label, len(points), workers, constant, per_env, envs, distinct)


def _fit(points: list[_Point], *, per_env: bool) -> OverheadFit:
    """Least squares of log speed-up for t_os(N) = a + b N (b = 0 unless ``per_env``).

    Gauss-Newton: each round is one weighted linear least squares (:func:`_solve`). With q_i
    the batch time predicted so far (parallel work + t_os(N_i)), the log error
    log(q_i / t_batch_i) changes, to first order, by (change of t_os(N_i)) / q_i. So a round
    fits t_os(N_i) to the targets t_os_so_far(N_i) - q_i log(q_i / t_batch_i), with weights
    1 / q_i^2. The first round linearises around the measurements instead (q_i = t_batch_i),
    which gives the relative-error fit: targets t_os_i, weights 1 / t_batch_i^2.
    """
    t_batch = np.array([point.t_batch for point in points])
    work = np.array([point.parallel_seconds for point in points])
    # t_os(N_i) = columns @ (a, b): a column of ones for a, one of N for b.
    columns = np.column_stack([np.ones(len(points)), [float(p.num_envs) for p in points]])
    columns = columns if per_env else columns[:, :1]

    def cost(params: np.ndarray) -> float:
        """sum (log predicted speed-up - log measured)^2 = sum log(predicted / t_batch)^2."""
        return float(np.sum(np.log((work + columns @ params) / t_batch) ** 2))

    params, clamped = _solve(columns, t_batch - work, t_batch)
    best = cost(params)
    for _ in range(_MAX_ROUNDS):
        overhead = columns @ params
        predicted = work + overhead
        new, new_clamped = _solve(
            columns, overhead - predicted * np.log(predicted / t_batch), predicted
        )
        # A full step can overshoot when the model fits badly: halve it until the error drops.
        # Both ends satisfy a, b >= 0, so every point between them does too.
        step = 1.0
        while step >= _SMALLEST_STEP:
            trial = params + step * (new - params)
            trial_cost = cost(trial)
            if trial_cost <= best:
                break
            step /= 2
        else:
            break  # no step improves the fit: this is the minimum
        improvement = best - trial_cost
        params, best = trial, trial_cost
        clamped = new_clamped and step == 1.0
        if improvement <= 1e-12 * (1.0 + best):
            break
    fixed, per_env_seconds = float(params[0]), float(params[1]) if per_env else 0.0
    return _quality(points, fixed, per_env_seconds, clamped=clamped)


def _solve(columns: np.ndarray, targets: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, bool]:
    """Weighted least squares ``columns @ params ~ targets``, weights 1 / scale^2, params >= 0.

    :func:`numpy.linalg.lstsq` on the rows divided by ``scale``. When an unknown comes out
    negative, the constrained optimum lies on an edge: that unknown 0 and the other fitted
    alone (itself clamped at 0), the best such edge. Returns (params, clamped), ``clamped``
    True when a bound was hit.
    """
    design, target = columns / scale[:, None], targets / scale
    params = np.linalg.lstsq(design, target, rcond=None)[0]
    if np.all(params >= 0):
        return params, False
    edges = []
    for keep in range(len(params)):
        edge = np.zeros_like(params)
        edge[keep] = max(0.0, np.linalg.lstsq(design[:, [keep]], target, rcond=None)[0][0])
        edges.append(edge)
    return min(edges, key=lambda edge: float(np.sum((design @ edge - target) ** 2))), True


def _quality(points: list[_Point], fixed: float, per_env: float, *, clamped: bool) -> OverheadFit:
    """R^2 of log speed-up and the median relative error, for one fitted overhead."""
    measured = [point.speedup for point in points]
    predicted = [
        _speedup(point.num_envs, point.t_env, point.c, fixed + per_env * point.num_envs)
        for point in points
    ]
    logs = [math.log(s) for s in measured]
    mean_log = statistics.fmean(logs)
    total = sum((value - mean_log) ** 2 for value in logs)
    residual = sum((math.log(p) - value) ** 2 for p, value in zip(predicted, logs))
    # Relative to the spread of log S: with no spread there is nothing to explain (one point,
    # or all equal), and R^2 is undefined rather than 1 or minus infinity.
    r2 = 1.0 - residual / total if total > 1e-12 * len(logs) else math.nan
    errors = [abs(p - s) / s for p, s in zip(predicted, measured)]
    return OverheadFit(fixed, per_env, r2, statistics.median(errors), clamped)


def _ceilings(
    measurements: Sequence[Measurement],
    env_t: dict[str, float],
    point_t: dict[tuple[str, int], list[float]],
) -> dict[str, tuple[tuple[int, float], ...]]:
    """Env label -> the measured ceiling as (N, efficiency per process), N ascending.

    A ceiling's efficiency per process is its speed-up over the reference (its paired
    ``ratio``; else its throughput x the reference's t_env) divided by its processes. Where
    several ceilings were measured at one N (several K, or several runs), the best counts: it
    is what the machine can give.
    """
    best: dict[str, dict[int, float]] = defaultdict(dict)
    for measurement in measurements:
        config = measurement.config
        if config.backend != CEILING or config.env_label not in env_t:
            continue
        processes = max(1, min(measurement.workers or 1, config.num_envs))
        ratio = measurement.ratio
        if not _positive(ratio) and measurement.throughputs:
            ratio = measurement.median * _t_env_at(config, env_t, point_t)
        if not _positive(ratio):
            continue
        per_env = best[config.env_label]
        per_env[config.num_envs] = max(per_env.get(config.num_envs, 0.0), ratio / processes)
    return {label: tuple(sorted(values.items())) for label, values in best.items()}


def check_cpus(cpus: int | None) -> int:
    """``cpus`` checked, by default this machine's CPUs (the figures check theirs here too).

    Raises:
        ValueError: not a whole number >= 1.
    """
    if cpus is None:
        return available_cpus()
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
        raise ValueError(f"cpus must be a whole number >= 1, got {cpus!r}")
    return cpus


def _positive(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a finite number above 0 (a usable ratio)."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _t_env_at(
    config: BenchConfig, env_t: dict[str, float], point_t: dict[tuple[str, int], list[float]]
) -> float:
    """t_env for one measurement: from the reference measured at the same env and N (the very
    one its ratio was divided by), else the env's median."""
    same_point = point_t.get((config.env_label, config.num_envs))
    return statistics.median(same_point) if same_point else env_t[config.env_label]


def _interpolate_log(points: Sequence[tuple[int, float]], num_envs: float) -> float:
    """The value at ``num_envs``, linear in log N between ``points`` (N ascending), constant
    beyond the first and the last."""
    if num_envs <= points[0][0]:
        return points[0][1]
    for (low, low_value), (high, high_value) in itertools.pairwise(points):
        if num_envs <= high:
            where = math.log(num_envs / low) / math.log(high / low)
            return low_value + where * (high_value - low_value)
    return points[-1][1]


def _speedup(num_envs: float, t_env: float, c: float, t_os: float) -> float:
    """S = c N t_env / (N t_env + c t_os)."""
    work = num_envs * t_env
    return c * work / (work + c * t_os)


def _reference_rate(measurement: Measurement, reference: str) -> float | None:
    """The reference's median window throughput, or None if this isn't a usable reference."""
    if measurement.config.backend_label != reference or not measurement.throughputs:
        return None
    return measurement.median if _positive(measurement.median) else None


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _cells(
    rows: list[dict[str, Any]], columns: Sequence[tuple[str, str, str, str]]
) -> list[list[str]]:
    """The rows' cells as text, one per column (header, key, format, text when ``None``)."""
    return [
        [
            missing if row[key] is None else spec.format(row[key])
            for _, key, spec, missing in columns
        ]
        for row in rows
    ]
