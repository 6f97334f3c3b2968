"""Sweeps: measure a whole grid of envs x N x backends in one go, with live progress.

At each point of the grid (one env with its arguments, one N) every backend is measured with
:func:`vecenvs.bench.compare`, interleaved with the sequential reference, so every measurement
carries its speed-up over the loop measured a moment before on the same machine. A sweep is
what the seeds' figure and the overhead model (:mod:`vecenvs.bench.model`) are made of.

The CLI shows a progress bar (``progress=True``); the dashboard and the notebooks redraw on
``on_result`` and stop early with ``cancel``; a :class:`~vecenvs.bench.store.ResultsStore`
saves every point as soon as it is measured, so a sweep cut short keeps what it measured.

Example:
    >>> from vecenvs.bench import QUICK
    >>> from vecenvs.bench.sweep import SweepConfig, run_sweep
    >>> config = SweepConfig(envs=["CartPole-v1"], num_envs=[2, 4], backends=["multi"], **QUICK)
    >>> result = run_sweep(config)
    >>> sorted({(m.config.backend, m.config.num_envs) for m in result.measurements})
    [('gym-sync', 2), ('gym-sync', 4), ('multi', 2), ('multi', 4)]
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vecenvs.bench.engine import (
    CEILING,
    DEFAULT_REFERENCE,
    BenchConfig,
    Measurement,
    MeasurementCancelled,
    cli_option,
    compare,
    compare_configs,
)
from vecenvs.bench.store import recording
from vecenvs.checks import check_seconds
from vecenvs.cpus import available_cpus
from vecenvs.envspec import CHECK_SECONDS, EnvName, EnvSource, env_label
from vecenvs.envspec import check_env as check_env_once
from vecenvs.factory import BACKEND_INFO
from vecenvs.table import describe_kwargs

if TYPE_CHECKING:  # only for type hints: the store and the model are imported when used
    from vecenvs.bench.model import OverheadModel
    from vecenvs.bench.store import ResultsStore

__all__ = [
    "CHECK_TIMEOUT_OPTION",
    "TIMING",
    "Backend",
    "BenchEnv",
    "SweepConfig",
    "SweepProgress",
    "SweepResult",
    "check_env",
    "env_grid",
    "run_sweep",
    "validate_sweep",
]


#: The settings a sweep passes to every measurement unchanged (:attr:`SweepConfig.timing`).
TIMING = ("warmup_seconds", "measure_seconds", "repeats", "seed")

#: The command-line option of every config's ``check_timeout`` (bench, profile, autotune).
CHECK_TIMEOUT_OPTION = cli_option(
    "seconds the check of the env may take: it is made, reset and stepped once, in a process "
    "of its own, before anything is measured; raise it for an env that is slow to build",
    "SECONDS",
    "positive_float",
    flag="--check-timeout",
)


@dataclass(frozen=True)
class BenchEnv:
    """One env of a sweep: a gymnasium id and its ``gym.make`` arguments, e.g.
    ``BenchEnv("vecenvs/Costly-v0", {"step_seconds": 1e-3})`` (not ``EnvSpec``: that is
    gymnasium's registry entry for an id)."""

    env_id: EnvSource  # any form vecenvs.envspec reads, e.g. "mycart:MyCart-v0"
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``"vecenvs/Costly-v0 (step_seconds=0.001)"``: how tables and charts name it."""
        return env_label(self.env_id) + describe_kwargs(self.kwargs)


@dataclass(frozen=True)
class Backend:
    """One backend of a sweep: a name from ``vecenvs.BACKENDS`` and its arguments, e.g.
    ``Backend("pool", {"num_workers": 2})``."""

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``"pool (num_workers=2)"``: how tables and charts name it."""
        return self.name + describe_kwargs(self.kwargs)


@dataclass
class SweepConfig:
    """The grid to measure and how long to measure each point (the timing fields are
    :class:`BenchConfig`'s)."""

    envs: Sequence[EnvSource | BenchEnv]  # :func:`env_grid` expands argument grids into BenchEnvs
    num_envs: Sequence[int]  # the values of N, e.g. [1, 2, 8, 32, 128]
    backends: Sequence[str | Backend]  # the reference is added when missing
    reference: str = DEFAULT_REFERENCE  # the sequential loop every speed-up is relative to
    warmup_seconds: float = BenchConfig.warmup_seconds
    measure_seconds: float = BenchConfig.measure_seconds
    repeats: int = BenchConfig.repeats
    seed: int = BenchConfig.seed
    # Round-robin the windows of the backends at a point (see :func:`compare`).
    interleave: bool = field(
        default=True,
        metadata=cli_option(  # the command line's option: --sequential turns it off
            "measure the backends one after the other instead of interleaving their windows "
            "(uses less memory: only one backend's processes exist at a time)",
            flag="--sequential",
            action="store_false",
        ),
    )
    # Measure only these (env label, N) points of the grid (None: all): for a table whose envs
    # are measured at different N, as the core's targets are.
    only: Sequence[tuple[str, int]] | None = None
    # How long the check of each env (:func:`check_env`, before anything is measured) may take:
    # an env that is slow to build needs more than the default.
    check_timeout: float = field(default=CHECK_SECONDS, metadata=CHECK_TIMEOUT_OPTION)

    def env_specs(self) -> list[BenchEnv]:
        return [env if isinstance(env, BenchEnv) else BenchEnv(env) for env in self.envs]

    def backend_specs(self) -> list[Backend]:
        """The backends as :class:`Backend` s, the reference last if it was not listed."""
        backends = [Backend(b) if isinstance(b, str) else b for b in self.backends]
        if not any(b.name == self.reference and not b.kwargs for b in backends):
            backends.append(Backend(self.reference))
        return backends

    def points(self) -> list[tuple[BenchEnv, int]]:
        """Every (env, N) pair, env by env, N ascending: the order they are measured in."""
        points = [(env, n) for env in self.env_specs() for n in sorted(set(self.num_envs))]
        if self.only is not None:
            wanted = {(label, n) for label, n in self.only}
            points = [(env, n) for env, n in points if (env.label, n) in wanted]
        return points

    def processes_at_once(self, cpus: int | None = None) -> int:
        """The most worker processes that exist at once while measuring one point: every
        backend's when interleaved, the largest one's otherwise (to warn before starting 512
        processes on 2 CPUs). N for one process per env, K (default min(CPUs, N)) for the pools,
        Ray and the ceiling, none for the in-process loops and EnvPool's threads."""
        cpus, at_once = cpus or available_cpus(), sum if self.interleave else max
        counts = [[_processes(b, n, cpus) for b in self.backend_specs()] for _, n in self.points()]
        return max((at_once(point) for point in counts), default=0)

    @property
    def timing(self) -> dict[str, Any]:
        """How each point is measured: the fields :class:`BenchConfig` shares."""
        return {name: getattr(self, name) for name in TIMING}

    @property
    def windows(self) -> int:
        """How many timed windows the whole sweep has: the length of its progress bar."""
        return len(self.points()) * len(self.backend_specs()) * self.repeats

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON-ready values (what a results store records)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data.update(
            envs=[
                {"env_id": env_label(e.env_id), "kwargs": dict(e.kwargs)} for e in self.env_specs()
            ],
            num_envs=sorted(set(self.num_envs)),
            backends=[{"name": b.name, "kwargs": dict(b.kwargs)} for b in self.backend_specs()],
        )
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepConfig:
        """The config :meth:`to_dict` described; keys this version does not know are ignored."""
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        values.update(
            envs=[BenchEnv(e["env_id"], dict(e.get("kwargs") or {})) for e in data["envs"]],
            num_envs=list(data["num_envs"]),
            backends=[Backend(b["name"], dict(b.get("kwargs") or {})) for b in data["backends"]],
        )
        return cls(**values)


@dataclass
class SweepProgress:
    """What ``on_result`` is told each time a point of the grid has been measured."""

    point: tuple[BenchEnv, int]
    measurements: list[Measurement]  # one per backend, the reference last
    points_done: int  # this one included
    points_total: int
    elapsed_seconds: float  # since the sweep started


@dataclass
class SweepResult:
    """Everything a sweep measured, in the order it was measured."""

    config: SweepConfig
    measurements: list[Measurement]  # fewer than the grid when cancelled
    cancelled: bool
    elapsed_seconds: float  # the whole sweep, building the envs included
    cpus: int  # CPUs this process could use: what "N above the CPUs" means here
    run_id: int | None = None  # the run's id in the results store, when one was given

    def model(self) -> OverheadModel:
        """Fit the overhead model (:func:`vecenvs.bench.model.fit_overhead_model`) to this sweep."""
        from vecenvs.bench.model import fit_overhead_model

        return fit_overhead_model(
            self.measurements, cpus=self.cpus, reference=self.config.reference
        )


def env_grid(env_id: str, **kwarg_values: Sequence[Any]) -> list[BenchEnv]:
    """Every combination of argument values for one env, as :class:`BenchEnv` s.

    Example:
        >>> [spec.label for spec in env_grid("vecenvs/Costly-v0", step_seconds=[1e-5, 1e-3])]
        ['vecenvs/Costly-v0 (step_seconds=1e-05)', 'vecenvs/Costly-v0 (step_seconds=0.001)']
    """
    combinations = itertools.product(*kwarg_values.values())
    return [BenchEnv(env_id, dict(zip(kwarg_values, values))) for values in combinations]


def validate_sweep(config: SweepConfig) -> None:
    """Check the whole grid before anything is measured, so the last point's typo fails now.

    Every (env, N, backend) is checked as :func:`vecenvs.bench.validate_config` does, and each
    env with :func:`check_env`. Raises ValueError.
    """
    envs, backends = config.env_specs(), config.backend_specs()
    for name, values in (("envs", envs), ("num_envs", config.num_envs), ("backends", backends)):
        if not values:
            raise ValueError(f"{name} is empty; expected at least one")
    check_seconds("check_timeout", config.check_timeout)
    for env in envs:
        for num_envs in config.num_envs:
            compare_configs(
                env.env_id,
                num_envs,
                [(backend.name, backend.kwargs) for backend in backends],
                reference=config.reference,
                env_kwargs=env.kwargs,
                **config.timing,
            )
        check_env(env, config.check_timeout)


def check_env(env: BenchEnv, timeout: float = CHECK_SECONDS) -> EnvName:
    """Make ``env`` once, reset it, step it, compare what it returns with its spaces and run
    gymnasium's env checker on it, within ``timeout`` seconds
    (:func:`vecenvs.envspec.check_env`), so that a misspelt env argument, a step that raises or
    an observation of the wrong dtype fails now, in one line (an ``EnvError``, a ValueError),
    not inside N worker processes half an hour from now. Returns what the env is, for the
    results store."""
    return check_env_once(env.env_id, env.kwargs, timeout=timeout)


def run_sweep(
    config: SweepConfig,
    *,
    on_result: Callable[[SweepProgress], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    store: ResultsStore | None = None,
    label: str | None = None,
    run_id: int | None = None,
    progress: bool = False,
    on_window: Callable[[], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> SweepResult:
    """Measure every point of ``config``'s grid (see the module docstring).

    ``on_result`` gets a :class:`SweepProgress` after each point; ``on_window`` is called after
    each of the ``config.windows`` timed windows; ``on_stage`` is told what happens between
    windows, e.g. ``"CartPole-v1, N=64: starting subproc (2 of 4)"``; ``progress`` shows a tqdm
    bar on stderr. When ``cancel()`` returns True (checked between windows) every env is closed
    and what was measured so far is returned with ``cancelled=True``.

    ``store`` saves the run point by point with this machine's description, under ``label``, or
    into its run ``run_id`` already started by the caller (the dashboard's job runner does, to
    tell the page which run to watch); the run is marked done, cancelled or failed at the end.

    Raises ValueError for a bad configuration, before measuring anything, and whatever a backend
    raised while being measured (the run is then marked failed).
    """
    validate_sweep(config)
    points = config.points()
    backends = [(b.name, b.kwargs) for b in config.backend_specs()]
    bar = None
    if progress:  # tqdm hides its bar when stderr is not a terminal (e.g. in CI logs)
        from tqdm.auto import tqdm

        bar = tqdm(total=config.windows, unit="window", disable=None, leave=False)

    def window_done() -> None:
        if bar is not None:
            bar.update(1)
        if on_window is not None:
            on_window()

    where = ""  # the point being measured: stage() tells on_stage which

    def stage(message: str) -> None:
        if on_stage is not None:
            on_stage(f"{where}: {message}")

    started = time.perf_counter()
    measurements: list[Measurement] = []
    with recording(store, "sweep", config.to_dict(), label=label, run_id=run_id) as run:
        run.summary = _summary(measurements, config)
        try:
            for done, (env, num_envs) in enumerate(points, start=1):
                where = f"{env.label}, N={num_envs}"
                if bar is not None:
                    bar.set_description(where)
                results = compare(
                    env.env_id,
                    num_envs,
                    backends,
                    reference=config.reference,
                    env_kwargs=env.kwargs,
                    interleave=config.interleave,
                    on_window=window_done,
                    cancel=cancel,
                    on_stage=stage,
                    **config.timing,
                )
                measurements.extend(results)
                for result in results:
                    run.add(result)
                run.summary = _summary(measurements, config)
                if on_result is not None:
                    elapsed = time.perf_counter() - started
                    on_result(SweepProgress((env, num_envs), results, done, len(points), elapsed))
        except MeasurementCancelled:
            run.cancelled = True
        finally:
            if bar is not None:
                bar.close()
    elapsed = time.perf_counter() - started
    return SweepResult(config, measurements, run.cancelled, elapsed, available_cpus(), run.id)


def _processes(backend: Backend, num_envs: int, cpus: int) -> int:
    """How many processes ``backend`` starts for ``num_envs`` envs (see processes_at_once)."""
    kind = "workers" if backend.name == CEILING else BACKEND_INFO[backend.name].processes
    workers = min(int(backend.kwargs.get("num_workers") or cpus), num_envs)
    return {"per-env": num_envs, "workers": workers}.get(kind, 0)


def _summary(measurements: list[Measurement], config: SweepConfig) -> dict[str, Any] | None:
    """The fitted overhead model, for the store; None when there is too little to fit."""
    try:
        model = SweepResult(config, measurements, False, 0.0, available_cpus()).model()
    except ValueError:  # e.g. nothing, or only the reference, measured: nothing to fit
        return None
    return {"overhead_model": model.table()}
