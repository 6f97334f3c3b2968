"""The overhead model: two numbers that explain most of what a backend's speed-up is.

Why is a backend with 8 worker processes not 8 times faster than a plain loop over the envs?
Because every ``step()`` call pays a price for the parallelism (sending the actions, waking the
workers, waiting for the slowest one, gathering the results) however cheap the envs are. The
seed post (a blog post that proposed a ``PoolVecEnv`` for Stable-Baselines3) sums this up as

    fps_parallel / fps_sequential  ~  N t_env / (N t_env + t_os)

for N envs whose step takes t_env, with t_os the operating system's overhead. That ratio can
never exceed 1, so it is an *efficiency*, not a speed-up: the parallelism is missing from it.
Below it is put back, and the two numbers t_env and t_os are fitted to measurements.

The derivation
--------------
One ``step()`` of N envs, on a backend that can step c envs at the same moment, takes

    t_batch = N t_env / c + t_os

- **t_env**: the time of one env step, measured by the sequential reference (gym-sync):
  t_env = 1 / its throughput in env steps per second.
- **c = min(workers, N, capacity(N))**: how many envs really step at once. ``workers`` is
  :attr:`~vecenvs.bench.engine.Measurement.workers` (1 for a loop, N for one process per env, K
  for the pool); no backend steps more envs at once than there are envs, or than the machine
  can step. **capacity(N)** is the machine's, measured by the ceiling row
  (:mod:`vecenvs.bench.ceiling`: min(K, N) processes stepping with no coordination) as its
  speed-up over the reference: on 2 CPUs often 1.7-1.9, not 2, because busy cores share caches,
  memory bandwidth and clock headroom. Without a ceiling measurement it is min(N, cpus), an
  estimate that overstates the machine once every core is busy.
- **t_os**: the backend's fixed overhead per ``step()`` call, the same whatever N is.

The loop needs N t_env for the same batch, so the speed-up over it is

    S = N t_env / t_batch = c N t_env / (N t_env + c t_os)

and the efficiency, the speed-up per envs-at-once, is

    S / c = N t_env / (N t_env + c t_os)

This is the seed's formula, with the seed's t_os equal to c times ours: while one call's
overhead runs, all c lanes wait, so c t_os of env-stepping time is lost per call. Reading it:

- N t_env much larger than c t_os (costly envs, many of them): S -> c, and the throughput
  approaches the **machine's limit**, the ceiling: capacity(N) / t_env env steps/s.
- N t_env much smaller than t_os (CartPole, few envs): S ~ N t_env / t_os, far below 1. The
  parallel backend is slower than the loop it was meant to beat.

The fit
-------
**t_env, per env** (an env id with its arguments, :attr:`BenchConfig.env_label`): the median
over that env's reference measurements of 1 / (the reference's median window throughput).
Each measured point also keeps the t_env of the reference measured at the same env and N: its
ratio was divided by that very measurement, so the fit uses that one for the point.

**t_os, per backend** (:attr:`BenchConfig.backend_label`; one number shared by every env and
every N). Solving the model for t_os turns each measured speed-up S_i into an estimate:

    t_batch_i = N_i t_env_i / S_i        (the batch time that speed-up implies)
    t_os_i    = t_batch_i - N_i t_env_i / c_i

A point's t_os_i is what t_os would be if that point alone were right. The fitted t_os is the
one whose predicted speed-ups are closest to the measured ones *as ratios*: it minimises

    sum_i (log S_predicted,i - log S_i)^2  =  sum_i log(t_batch_predicted,i / t_batch_i)^2

Why ratios: batch times range from tens of microseconds (CartPole, N=1) to a tenth of a second
(MuJoCo, N=128). Plain least squares on times would fit the slowest batches, where the overhead
is a rounding error, and ignore the small ones, where it is everything. On a log scale,
predicting half or double the measured speed-up costs the same at every N and for every env.

How: the model is not linear in t_os (it sits inside the log), so the fit is Gauss-Newton.
For small errors log(1 + x) ~ x, and the sum becomes sum_i ((t_os - t_os_i) / t_batch_i)^2, the
error of the batch time relative to itself: a weighted *linear* least squares, solved by
``numpy.linalg.lstsq`` (with w_i = 1 / t_batch_i^2 it is the weighted mean of the t_os_i). When
the model describes the data well, that is the answer. When it does not, those weights favour
the fastest batches by the square of how much faster they are: a single point with next to no
overhead (the pool with one worker steps its env in the calling process) would decide t_os for
the whole backend. So the fit repeats the linear step, each round weighting by the batch time
predicted so far and correcting for the curve of the log; a round that would make the fit worse
is shortened. It settles in a few rounds. A negative t_os makes no physical sense: t_os is kept
>= 0, and flagged ``clamped`` when that bound holds it.

**Fit quality**: R^2 of log S, predicted against measured, and the median relative error
|S_predicted - S| / S. On a log scale for the same reason as the fit (whose error is exactly
R^2's residual): speed-ups span orders of magnitude (0.05x to 2x) and their noise grows with
them, so on a linear scale the few largest speed-ups would decide R^2, and a model off by 3x at
small N would still score well. R^2 is the share of the spread of log S the model explains; it
is negative when the model does worse than a flat line at the average speed-up (a noisy,
loaded machine can do that). A backend whose speed-up hardly varies (a sequential loop) has
little spread to explain: read its median error instead.

What is fitted, and what is not
-------------------------------
- **The reference** (gym-sync) defines t_env, so its t_os is 0 and its speed-up 1 by
  definition; it gets a row, not a fit. Note that t_env includes the reference's own per-call
  bookkeeping spread over the N envs: every other t_os is overhead *beyond the reference's*.
- **Sequential loops** (``workers == 1``: ``multi``, ``sb3-dummy``) are fitted with c = 1: their
  t_os is how much more than gym-sync they spend per call. A loop leaner than gym-sync would
  need a negative t_os; it is clamped to 0, and its median error shows by how much it beats the
  reference.
- **The ceiling** is not fitted: it is the limit c is capped by (see capacity above).
  Between the values of N it was measured at, its efficiency per process (its speed-up / its
  processes) is interpolated on a log scale of N, and held constant beyond them.
- **Native backends** (EnvPool) are left out: their envs are C++ code, not the Python envs t_env
  was measured on, so the model's t_env does not describe them. They are a reference point to
  look at, not like-for-like.
- **Measurements without a ratio** (measured outside :func:`~vecenvs.bench.compare`) are left
  out: there is no reference to divide by. Everything left out is listed in
  :attr:`OverheadModel.skipped`, with the reason.

One process per env: a second variant
-------------------------------------
Backends with one process per env (``subproc``, ``gym-async``, ``sb3-subproc``) pay their
overhead *per env*: a pipe message to each process and back, and, once N exceeds the CPUs, the
operating system switching between N processes on a few cores. A constant t_os fits them
poorly when N > cpus, and the poor fit (low R^2, large median error) is itself the lesson. So
each backend also gets a second fit, ``per_env``, where the overhead grows with N:

    t_os(N) = a + b N        (a, b >= 0)

fitted the same way, each round now a least squares with two unknowns (if a or b would come
out negative it is set to 0 and the other one refitted). b is the price of one more env per call. For the pool, b should come out near 0,
its overhead being per worker, not per env; for one process per env it should not. The variant
needs measurements at two or more values of N.

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
from vecenvs.factory import NATIVE_BACKENDS
from vecenvs.table import format_table
from vecenvs.workers import available_cpus

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

#: Backends whose envs are native code, used when :mod:`vecenvs.peers` does not say.

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
    """What the model knows about one env: its step time, measured by the reference."""

    label: str
    """The env id and its arguments, e.g. ``"CartPole-v1"``."""

    t_env_seconds: float
    """One env step, in seconds: the median of 1 / the reference's throughput."""

    cpus: int
    """The CPUs of the machine that measured."""

    points: int
    """How many reference measurements t_env comes from."""

    ceiling: tuple[tuple[int, float], ...] = ()
    """The measured ceiling as ``(N, efficiency per process)`` pairs, N ascending: the
    ceiling's speed-up over the reference divided by its processes, min(K, N). Empty when no
    ceiling was measured on this env: the limit is then an estimate."""

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
        """The most env steps per second this machine gives with ``num_envs`` envs: the
        ceiling, capacity(N) / t_env."""
        return self.capacity(num_envs) / self.t_env_seconds

    @property
    def machine_limit(self) -> float:
        """The limit once every CPU is busy (N >= cpus): the ceiling measured there, or
        cpus x single-env rate as an estimate without a ceiling."""
        largest = max([self.cpus, *(n for n, _ in self.ceiling)])
        return self.limit(largest)


@dataclass(frozen=True)
class OverheadFit:
    """One fitted overhead: t_os(N) = ``fixed_seconds`` + ``per_env_seconds`` x N."""

    fixed_seconds: float
    """The part paid once per ``step()`` call, in seconds (>= 0)."""

    per_env_seconds: float
    """The part paid per env per call, in seconds (>= 0; always 0 in the constant variant)."""

    r2: float
    """R^2 of log speed-up, predicted vs measured; NaN with fewer than two distinct speed-ups."""

    median_relative_error: float
    """Median over the points of |predicted speed-up - measured| / measured."""

    clamped: bool = False
    """True when the best fit wanted a negative overhead and 0 was used instead."""

    def seconds(self, num_envs: float) -> float:
        """The overhead of one ``step()`` call of ``num_envs`` envs, in seconds."""
        return self.fixed_seconds + self.per_env_seconds * num_envs


@dataclass(frozen=True)
class BackendFit:
    """One backend's fitted overhead, with how well the model describes its measurements."""

    label: str
    """The backend and its arguments, e.g. ``"pool (num_workers=2)"``."""

    points: int
    """How many measurements (env x N) the fit used."""

    workers: int | None
    """How many envs it steps at once, from the measurements; ``None`` means one per env (N)."""

    constant: OverheadFit
    """The seed's model: one t_os per call, whatever N."""

    per_env: OverheadFit | None = None
    """t_os(N) = a + b N; ``None`` when the measurements cover only one N."""

    @property
    def t_os_seconds(self) -> float:
        """The constant variant's overhead per ``step()`` call, in seconds."""
        return self.constant.fixed_seconds

    @property
    def r2(self) -> float:
        """The constant variant's R^2 (see :attr:`OverheadFit.r2`)."""
        return self.constant.r2

    @property
    def median_relative_error(self) -> float:
        """The constant variant's median relative error of the speed-up."""
        return self.constant.median_relative_error

    def workers_at(self, num_envs: float) -> float:
        """How many envs this backend steps at once with ``num_envs`` envs (before the CPUs)."""
        if self.workers is None:
            return num_envs
        return min(self.workers, num_envs)

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
    """t_env per env and t_os per backend, fitted to measurements; predicts speed-ups.

    Build one with :func:`fit_overhead_model`.
    """

    cpus: int
    """The CPUs of the machine that measured: caps how many envs step at once."""

    reference: str
    """The sequential backend that defines t_env and the speed-ups (``"gym-sync"``)."""

    envs: dict[str, EnvFit]
    """Env label -> its step time, from the reference."""

    backends: dict[str, BackendFit]
    """Backend label -> its fitted overhead (the reference is not in here: see ``reference``)."""

    skipped: list[str] = field(default_factory=list)
    """Measurements left out of the fit, each with the reason."""

    reference_points: int = 0
    """How many reference measurements there were."""

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
        """The model's speed-up over the reference: c N t_env / (N t_env + c t_os(N)).

        Args:
            env_label: an env in :attr:`envs`.
            backend_label: a backend in :attr:`backends`, or the reference (always 1.0).
            num_envs: N.
            workers: how many envs the backend steps at once; by default what was measured.
            variant: ``"constant"`` (the seed's t_os) or ``"per_env"`` (t_os = a + b N).

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
        """The model's throughput in env steps/s: speed-up x single-env rate.

        Takes the same arguments as :meth:`predict_speedup`.
        """
        speedup = self.predict_speedup(env_label, backend_label, num_envs, workers, variant=variant)
        return speedup * self._env(env_label).single_env_rate

    def table(self) -> list[dict[str, Any]]:
        """One JSON-ready row per backend, the reference first; times in microseconds.

        Keys: ``backend``, ``workers`` (``None`` = one per env), ``points``, ``t_os_us``,
        ``r2``, ``median_relative_error``, ``clamped``, then the per-env variant's
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
            if fit.label == self.reference:
                note = "the reference: defines t_env; speed-up 1 by definition"
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

    def format_table(self) -> str:
        """The envs and the backends as aligned plain-text tables, for a terminal."""
        envs, backends = self.env_table(), self.table()
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
        if self.skipped:
            lines.append(f"Left out of the fit ({len(self.skipped)}):")
            lines += [f"  - {reason}" for reason in self.skipped]
        return "\n".join(lines)

    def _env(self, env_label: str) -> EnvFit:
        try:
            return self.envs[env_label]
        except KeyError:
            raise KeyError(
                f"no t_env for env {env_label!r}: the model knows {sorted(self.envs)}"
            ) from None

    def _backend(self, backend_label: str) -> BackendFit:
        try:
            return self.backends[backend_label]
        except KeyError:
            raise KeyError(
                f"backend {backend_label!r} was not fitted: the model has {sorted(self.backends)}"
                f" and the reference {self.reference!r} (see OverheadModel.skipped for why "
                "measurements were left out)"
            ) from None


def env_step_seconds(
    measurements: Iterable[Measurement], *, reference: str = DEFAULT_REFERENCE
) -> dict[str, float]:
    """t_env per env label: the median over the reference's measurements of 1 / throughput.

    The throughput of each reference measurement is its median window. Envs the reference was
    not measured on are absent. The figures use this too, to order envs by cost.
    """
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

    Args:
        measurements: from :func:`~vecenvs.bench.compare` or a sweep, the reference included
            (it gives t_env). Any number of envs, N and backends; a configuration measured
            several times gives several points.
        cpus: the CPUs of the machine that measured; by default this machine's.
        reference: the sequential backend the ratios are relative to.

    Returns:
        The fitted :class:`OverheadModel`; what was left out is in its ``skipped``.

    Raises:
        TypeError: an item is not a :class:`~vecenvs.bench.engine.Measurement`.
        ValueError: no measurements, no reference measurement to take t_env from, or no
            measurement of another backend that can be fitted (the error says why each was
            left out).
    """
    measurements = list(measurements)
    for item in measurements:
        if not isinstance(item, Measurement):
            hint = ""
            if isinstance(item, dict):
                hint = " (use Measurement.from_dict for stored results)"
            raise TypeError(f"expected Measurement objects, got {type(item).__name__}{hint}")
    if cpus is None:
        cpus = available_cpus()
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
        raise ValueError(f"cpus must be a whole number >= 1, got {cpus!r}")
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

    ceilings = _ceilings(measurements, env_t, point_t, cpus)
    envs = {
        label: EnvFit(label, t_env, cpus, reference_points[label], ceilings.get(label, ()))
        for label, t_env in env_t.items()
    }
    natives = native_backends()
    skipped: list[str] = []
    points_by_backend: dict[str, list[_Point]] = defaultdict(list)
    for measurement in measurements:
        config = measurement.config
        label = config.backend_label
        where = f"{label} on {config.env_label}, N={config.num_envs}"
        if label == reference:
            if _reference_rate(measurement, reference) is None:
                skipped.append(f"{where}: the reference has no positive throughput")
            continue
        if config.backend == CEILING:
            continue  # not a backend: the limit that caps c (see _ceilings)
        if config.backend in natives:
            reason = (
                f"{label}: native backend, its envs are C++ code and not the Python envs "
                "t_env was measured on (shown, not fitted)"
            )
            if reason not in skipped:
                skipped.append(reason)
            continue
        ratio = measurement.ratio
        if ratio is None:
            skipped.append(f"{where}: no ratio (measured outside compare(), no reference)")
            continue
        if not _positive(ratio):
            skipped.append(f"{where}: ratio {ratio!r} is not a positive number")
            continue
        if config.env_label not in env_t:
            skipped.append(f"{where}: no {reference} measurement of this env to take t_env from")
            continue
        t_env = _t_env_at(config, env_t, point_t)
        workers = measurement.workers if measurement.workers and measurement.workers > 0 else 1
        capacity = envs[config.env_label].capacity(config.num_envs)
        points_by_backend[label].append(
            _Point(
                num_envs=config.num_envs,
                t_env=t_env,
                c=max(1, min(workers, config.num_envs, capacity)),
                speedup=float(ratio),
                workers=workers,
            )
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
    return OverheadModel(
        cpus=cpus,
        reference=reference,
        envs=envs,
        backends=backends,
        skipped=skipped,
        reference_points=sum(reference_points.values()),
    )


@dataclass(frozen=True)
class _Point:
    """One measured speed-up, with what the model needs to explain it."""

    num_envs: int
    t_env: float
    c: float
    speedup: float
    workers: int

    @property
    def t_batch(self) -> float:
        """The batch time the measured speed-up implies: N t_env / S."""
        return self.num_envs * self.t_env / self.speedup

    @property
    def parallel_seconds(self) -> float:
        """The env-stepping part of the batch time: N t_env / c."""
        return self.num_envs * self.t_env / self.c

    @property
    def t_os(self) -> float:
        """This point's own estimate of the overhead: t_batch - N t_env / c."""
        return self.t_batch - self.parallel_seconds


def _fit_backend(label: str, points: list[_Point]) -> BackendFit:
    """Both variants of one backend's overhead, fitted to its points."""
    constant = _fit(points, per_env=False)
    per_env = _fit(points, per_env=True) if len({p.num_envs for p in points}) >= 2 else None
    # One process per env: every point has as many workers as envs (and some N above 1).
    one_per_env = all(p.workers == p.num_envs for p in points) and any(
        p.num_envs > 1 for p in points
    )
    workers = None if one_per_env else max(point.workers for point in points)
    return BackendFit(label, len(points), workers, constant, per_env)


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
    cpus: int,
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
    rate = measurement.median
    return rate if math.isfinite(rate) and rate > 0 else None


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
