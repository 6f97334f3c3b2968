"""The measuring engine: how many env steps per second does a backend deliver?

Every speed the lab reports (CLI, notebooks, dashboard) is measured here, the same way:

1. **Startup**: build the vector env (:func:`vecenvs.make_vec`) and reset it once: starting
   128 processes is not free, and every training run pays it again.
2. **Actions**: sample a ring of actions *before* any timing: sampling one costs about as much
   as a CartPole step, so sampling in the timed loop would measure the sampler too.
3. **Warm-up**: untimed stepping for ``warmup_seconds`` (lazy imports, cold caches).
4. **Timed windows**: ``repeats`` windows of about ``measure_seconds``, each stepping until its
   time is up: throughput = ``num_envs * steps / elapsed`` env steps per second. Their spread
   (``std``) says whether a 5% difference between two backends means anything.

An async backend (EnvPool's ``send``/``recv`` with ``batch_size < num_envs``, e.g.
``pool-async``) is stepped as it is meant to be: "recv the first ``batch_size`` envs ready, send
them actions"; what is in flight at the deadline is received untimed and uncounted, so every
window starts with every env idle. CPU time, processes and memory are recorded too: a backend
can be fast by keeping every core busy.

Example:
    >>> from vecenvs.bench import QUICK, BenchConfig, compare, measure
    >>> measure(BenchConfig("CartPole-v1", num_envs=8, backend="gym-async", **QUICK)).mean > 0
    True
    >>> results = compare("CartPole-v1", 8, ["gym-async"], **QUICK)  # + gym-sync, the reference
    >>> [(r.config.backend, r.ratio) for r in results][-1]
    ('gym-sync', 1.0)
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import psutil

from vecenvs.bench import ceiling, ratios
from vecenvs.bench.ceiling import ACTION_RING_SIZE
from vecenvs.bench.machine import cpu_seconds
from vecenvs.bench.ratios import DEFAULT_REFERENCE
from vecenvs.bench.store import RunCancelled
from vecenvs.checks import check_seconds, check_whole_number
from vecenvs.envspec import EnvSource, describe_env, env_label, resolve_env
from vecenvs.factory import (
    BACKEND_INFO,
    BACKENDS,
    WORKER_BACKENDS,
    available_backends,
    check_backend_can_run,
    describe_backend,
    make_vec,
)
from vecenvs.multi_env import tree_map
from vecenvs.table import describe_kwargs

__all__ = [
    "ACTION_RING_SIZE",
    "CEILING",
    "DEFAULT_REFERENCE",
    "QUICK",
    "BenchConfig",
    "Measurement",
    "MeasurementCancelled",
    "compare",
    "compare_configs",
    "describe",
    "describe_kwargs",
    "in_words",
    "measurable_backends",
    "measure",
    "short_env_labels",
    "validate_config",
]

#: The row that is the machine's limit, not a vector env (:mod:`vecenvs.bench.ceiling`).
CEILING = ceiling.NAME

#: Short timing for tests and a first look (``BenchConfig(..., **QUICK)``): rough numbers, don't
#: trust a few percent. Three windows, so that the median window outvotes a disturbed one.
QUICK: dict[str, Any] = {"warmup_seconds": 0.1, "measure_seconds": 0.15, "repeats": 3}


def cli_option(
    help: str, metavar: str | None = None, type: str | None = None, **argparse: Any
) -> dict[str, Any]:
    """A config field's command-line option, for ``field(metadata=...)``: its help, metavar,
    argparse type (a name in ``vecenvs.cli.common.ARGUMENT_TYPES``, which this module may not
    import) and any other ``add_argument`` keyword, or ``flag`` when it is not ``--<name>``."""
    named = {"help": help, "metavar": metavar, "type": type}
    return {key: value for key, value in named.items() if value is not None} | argparse


@dataclass
class BenchConfig:
    """What to measure and for how long: one backend, one env id, one number of envs.

    A field's ``metadata`` is its command-line option (:func:`cli_option`): ``vecenvs.cli``
    builds the option, default included, from the field, so the two can't drift apart.
    """

    # Any form vecenvs.envspec reads: "CartPole-v1", "mycart:MyCart-v0", "mycart.env:MyCartEnv",
    # or (from Python) a function that makes an env.
    env_id: EnvSource = field(
        default="CartPole-v1",
        metadata=cli_option(
            "the env: a registered id (CartPole-v1), gymnasium's module:EnvId form "
            "(mycart:MyCart-v0, the module imported first) or an entry point "
            "package.module:ClassOrFunction",
            "ENV",
            flag="--env",
        ),
    )
    num_envs: int = field(
        default=8, metadata=cli_option("number of envs stepped together", "N", "positive_int")
    )
    backend: str = DEFAULT_REFERENCE  # a name from vecenvs.factory.BACKENDS, or "ceiling"
    backend_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {"num_workers": 2}
    env_kwargs: dict[str, Any] = field(
        default_factory=dict,
        metadata=cli_option(
            "argument for the env (gym.make's, or the entry point's); VALUE is a Python "
            "literal (1e-3, True, 'text'), anything else is taken as a string",
            "KEY=VALUE",
            "env_kwarg",
            flag="--env-kwarg",
        ),
    )
    warmup_seconds: float = field(
        default=1.0,
        metadata=cli_option(
            "untimed stepping before the first window", "S", "non_negative_float", flag="--warmup"
        ),
    )
    # The last step of a window may run a little over it.
    measure_seconds: float = field(
        default=2.0,
        metadata=cli_option("length of each timed window", "S", "positive_float", flag="--seconds"),
    )
    repeats: int = field(
        default=3, metadata=cli_option("timed windows per backend", "R", "positive_int")
    )
    # The same seed for every backend: they all see the same episodes and actions.
    seed: int = field(
        default=0, metadata=cli_option("seed of the resets and sampled actions", type="int")
    )

    @property
    def backend_label(self) -> str:
        """The backend and its arguments, e.g. ``"pool (num_workers=2)"``: one row of a table."""
        return self.backend + describe_kwargs(self.backend_kwargs)

    @property
    def env_label(self) -> str:
        """The env id and its arguments, e.g. ``"vecenvs/Costly-v0 (step_seconds=0.001)"``."""
        return env_label(self.env_id) + describe_kwargs(self.env_kwargs)


@dataclass
class Measurement:
    """What :func:`measure` found for one :class:`BenchConfig`.

    Throughputs are in individual env steps per second: one ``step()`` of 8 envs counts 8.

    Memory: summed RSS over-counts the pages forked workers share with this process; the
    workers' summed USS (the pages only they hold) is what they really cost. This process's USS
    is left out: it drops whenever any backend forks, so in :func:`compare` it would depend on
    which backends were built before.
    """

    config: BenchConfig
    throughputs: list[float]  # env steps per second of each timed window, in order
    window_steps: list[int]  # step() (or an async backend's recv()) calls in each window
    window_seconds: list[float]  # each window from its first step to the end of its last
    startup_seconds: float  # building the vector env and resetting it once
    parent_cpu_seconds: float  # user + system CPU time of this process during the windows
    children_cpu_seconds: float  # ... and of the backend's worker processes
    child_processes: int  # processes the backend started (0 for the in-process backends)
    rss_bytes: int  # after startup, this process + the backend's (over-counts shared pages)
    children_uss_bytes: int | None  # the backend's processes' USS summed; None if the OS won't say
    # Envs stepped at the same moment: 1 for the loops, N for one process per env, K for the
    # pool (the calling process counts when it steps envs too).
    workers: int = 1
    peak_rss_bytes: int = 0  # the largest rss_bytes: after startup and after each window
    # What the env was (vecenvs.envspec.EnvName.to_dict()): registered id, module:id, entry
    # point or factory, its module and that module's package version, where known.
    env: dict[str, Any] | None = None
    # The numbers below are set by compare() (and vecenvs.bench.ratios.relate for stored runs),
    # each defined once in vecenvs.bench.ratios.
    # Window by window, throughput / the reference's in the same round of compare() (empty
    # outside it): a round's windows run back to back, so each pair saw about the same load.
    # Not the speed-up: its spread, which says how far to trust it.
    paired_ratios: list[float] = field(default_factory=list)
    # The speed-up: this throughput / the reference's, at the same point; None outside compare.
    ratio: float | None = None
    # Share of the machine's ceiling reached: this throughput / the ceiling's at the same point,
    # if it was measured (else None). 1.0: no coordination cost at all.
    efficiency: float | None = None
    # What is wrong with these numbers, if anything (vecenvs.bench.ratios.CHECKS): e.g.
    # "ceiling disturbed", when the efficiency must not be shown as a result.
    checks: list[str] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        """The throughput every table, chart and ratio uses: the median window, in env steps/s
        (:func:`vecenvs.bench.ratios.throughput`)."""
        return ratios.throughput(self)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.throughputs)

    @property
    def std(self) -> float:
        """Sample standard deviation of the window throughputs (0.0 with a single window)."""
        return statistics.stdev(self.throughputs) if len(self.throughputs) > 1 else 0.0

    @property
    def median(self) -> float:
        """Median window throughput: less swayed than the mean by one disturbed window."""
        return statistics.median(self.throughputs)

    def ratios_to(self, other: Measurement) -> list[float]:
        """Window by window, this throughput / ``other``'s in the same round of :func:`compare`."""
        return [own / theirs for own, theirs in zip(self.throughputs, other.throughputs)]

    @property
    def processes(self) -> int:
        """This process plus the backend's."""
        return 1 + self.child_processes

    @property
    def timed_seconds(self) -> float:
        return sum(self.window_seconds)

    @property
    def cores_busy(self) -> float:
        """Average number of CPU cores kept busy during the timed windows (CPU time / wall time)."""
        return (self.parent_cpu_seconds + self.children_cpu_seconds) / self.timed_seconds

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        """Rebuild a measurement from :meth:`to_dict`'s output (e.g. read back from a store).

        Derived numbers are recomputed, and unknown keys ignored, so results written by an older
        or newer vecenvs still load.
        """
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        config = data["config"]
        values["config"] = BenchConfig(
            **{f.name: config[f.name] for f in dataclasses.fields(BenchConfig) if f.name in config}
        )
        if values.get("startup_seconds") is None:  # JSON has no NaN: stores write null
            values["startup_seconds"] = math.nan
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Everything, derived numbers included, as plain JSON-ready values."""
        data = dataclasses.asdict(self)
        data["config"]["env_id"] = env_label(self.config.env_id)  # a factory: its name only
        derived = (
            "throughput",
            "mean",
            "std",
            "median",
            "processes",
            "timed_seconds",
            "cores_busy",
        )
        for name in derived:
            data[name] = getattr(self, name)
        return data


def validate_config(config: BenchConfig) -> None:
    """Check a configuration before any env is built; raise ValueError naming the bad value."""
    names = [*BACKENDS, CEILING]  # installed or not: a missing one is told what to install below
    if config.backend not in names:
        raise ValueError(f"unknown backend {config.backend!r}; expected one of: {', '.join(names)}")
    # A registered id, 'module:EnvId' (the module imported here), an entry point or a factory;
    # an unknown id keeps gymnasium's "did you mean" (vecenvs.envspec says the rest).
    resolve_env(config.env_id)
    check_whole_number("num_envs", config.num_envs)
    check_whole_number("repeats", config.repeats)
    check_whole_number("seed", config.seed, minimum=None)
    check_seconds("measure_seconds", config.measure_seconds)
    # A zero warm-up is a legitimate choice (e.g. to see the cold start); a negative one is not.
    check_seconds("warmup_seconds", config.warmup_seconds, zero_ok=True)
    for name in ("backend_kwargs", "env_kwargs"):
        if not isinstance(getattr(config, name), Mapping):
            raise ValueError(f"{name} must be a dict, got {getattr(config, name)!r}")
    workers = config.backend_kwargs.get("num_workers")
    if config.backend in WORKER_BACKENDS and isinstance(workers, int) and workers > config.num_envs:
        raise ValueError(
            f"{config.backend} with num_workers={workers} cannot step N={config.num_envs} env(s): each "
            f"worker needs at least one env; use N >= {workers}, or leave num_workers out "
            "(the pool then takes min(CPUs, N))"
        )
    if config.backend == CEILING:
        ceiling.check_kwargs(config.backend_kwargs, config.num_envs)
        return
    # A peer whose library is missing says what to install; envpool refuses envs it has no C++
    # version of, and env arguments.
    check_backend_can_run(config.backend, config.env_id, config.env_kwargs)


def measure(config: BenchConfig) -> Measurement:
    """Measure one backend: startup, warm-up, then ``config.repeats`` timed windows.

    The vector env is always closed before returning, also when stepping fails. Raises
    ValueError for a bad configuration (see :func:`validate_config`), before building anything.
    """
    validate_config(config)
    return _measure([config])[0]


def compare(
    env_id: EnvSource,
    num_envs: int,
    backends: Sequence[str | tuple[str, Mapping[str, Any]]],
    *,
    reference: str = DEFAULT_REFERENCE,
    backend_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    warmup_seconds: float = BenchConfig.warmup_seconds,
    measure_seconds: float = BenchConfig.measure_seconds,
    repeats: int = BenchConfig.repeats,
    seed: int = BenchConfig.seed,
    interleave: bool = True,
    on_window: Callable[[], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> list[Measurement]:
    """Measure several backends in one run and give each its speed relative to ``reference``.

    A speed alone says little (it depends on the machine); "3.1x gym-sync, measured a moment
    ago here" says a lot, so the reference is always measured too, added last when missing.
    ``backends`` are names, or ``(name, kwargs)`` pairs to measure one backend several ways;
    ``backend_kwargs`` (``{"pool": {"num_workers": 2}}``) adds to every entry of that name.

    The timed windows are **interleaved** by default: every backend is built and warmed up,
    then the windows go round-robin (A, B, C, then B, C, A...), so the drift of a shared
    machine's load is spread over all backends, not charged to whichever ran in the busy
    minute. The price: all their processes exist at once (hundreds at N=128 with one per env);
    ``interleave=False`` measures the backends one after the other instead. Each ``ratio`` is
    its throughput (the median window) / the reference's, and ``paired_ratios`` the window by
    window ratios that say how far to trust it (:mod:`vecenvs.bench.ratios` defines both).

    ``on_window`` is called after every timed window; ``on_stage`` is told what happens between
    them, e.g. ``"starting subproc (2 of 4)"``; ``cancel`` is checked between them, and True
    closes every env and raises :class:`MeasurementCancelled`. Returns one :class:`Measurement`
    per backend, in order; raises ValueError for a bad argument, before building anything.
    """
    configs, reference_index = compare_configs(
        env_id,
        num_envs,
        backends,
        reference=reference,
        backend_kwargs=backend_kwargs,
        env_kwargs=env_kwargs,
        warmup_seconds=warmup_seconds,
        measure_seconds=measure_seconds,
        repeats=repeats,
        seed=seed,
    )
    groups = [configs] if interleave else [[config] for config in configs]
    results = [r for group in groups for r in _measure(group, on_window, cancel, on_stage)]
    # Speed-ups, efficiencies and their checks, defined once for the whole lab.
    ratios.relate_point(results, results[reference_index])
    return results


# compare()'s first six parameters again, kept on purpose: a sweep checks every point of its
# grid with this before it measures any, and compare() must not build envs to be checked.
def compare_configs(
    env_id: EnvSource,
    num_envs: int,
    backends: Sequence[str | tuple[str, Mapping[str, Any]]],
    *,
    reference: str = DEFAULT_REFERENCE,
    backend_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    **timing: Any,
) -> tuple[list[BenchConfig], int]:
    """What :func:`compare` would measure, checked (ValueError naming a bad argument): one
    :class:`BenchConfig` per backend, the reference added last when missing, and the
    reference's index. ``timing`` is the configs' other fields; a sweep checks every point of
    its grid with this before measuring any."""
    entries = [
        (entry, {}) if isinstance(entry, str) else (entry[0], dict(entry[1])) for entry in backends
    ]
    if not entries:
        raise ValueError("backends is empty; expected at least one backend name")
    if reference not in BACKENDS:
        raise ValueError(
            f"unknown reference backend {reference!r}; expected one of: {', '.join(BACKENDS)}"
        )
    # The reference is the entry named so with no arguments of its own (backend_kwargs may
    # still give it some, e.g. {"pool": {"num_workers": 2}} with reference="pool").
    if (reference, {}) not in entries:
        entries.append((reference, {}))
    backend_kwargs = dict(backend_kwargs or {})
    stray = sorted(set(backend_kwargs) - {name for name, _ in entries})
    if stray:
        # Most likely a typo in a backend name: silently ignoring it would measure the wrong thing.
        raise ValueError(f"backend_kwargs given for backend(s) not being measured: {stray}")
    configs = [
        BenchConfig(
            env_id=env_id,
            num_envs=num_envs,
            backend=name,
            backend_kwargs={**backend_kwargs.get(name, {}), **kwargs},
            env_kwargs=dict(env_kwargs or {}),
            **timing,
        )
        for name, kwargs in entries
    ]
    labels = [config.backend_label for config in configs]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ValueError(f"backend(s) listed more than once: {', '.join(duplicates)}")
    for config in configs:
        validate_config(config)
    return configs, entries.index((reference, {}))


class MeasurementCancelled(RunCancelled):
    """Raised by :func:`compare` (and the sweeps built on it) when its ``cancel()`` said so."""


def _measure(
    configs: list[BenchConfig],
    on_window: Callable[[], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> list[Measurement]:
    """Build every backend, warm each up, then time their windows round-robin: with one config
    this is :func:`measure`, with several :func:`compare`'s interleaving."""

    def stage(message: str | None = None) -> None:
        """Stop here if cancelled, else say what comes next."""
        if cancel is not None and cancel():
            raise MeasurementCancelled("the measurement was cancelled")
        if on_stage is not None and message is not None:
            on_stage(message)

    with ExitStack() as stack:  # closes every env built so far, whatever goes wrong
        runs = []
        for index, config in enumerate(configs, start=1):
            of = f" ({index} of {len(configs)})" if len(configs) > 1 else ""
            stage(f"starting {config.backend_label}{of}")
            runs.append(stack.enter_context(_Run(config)))
        for run in runs:
            stage(f"warming up {run.config.backend_label}")
            run.warm_up()
        stage("timing")
        for round_index in range(configs[0].repeats):
            start = round_index % len(runs)
            for run in runs[start:] + runs[:start]:
                stage()
                run.time_window()
                if on_window is not None:
                    on_window()
        return [run.result for run in runs]


class _Run:
    """One open vector env being measured, built on entry and closed on exit; what it finds
    goes straight into :attr:`result`. :func:`compare` keeps several open at once."""

    def __init__(self, config: BenchConfig):
        self.config = config
        self.envs: Any = None  # a vector env, or the ceiling's processes (ceiling.Ceiling)
        self.children: list[psutil.Process] = []
        self.async_batch_size: int | None = None
        self.result = Measurement(config, [], [], [], math.nan, 0.0, 0.0, 0, 0, None)
        self.result.env = describe_env(config.env_id).to_dict()

    def __enter__(self) -> _Run:
        config, result = self.config, self.result
        # The backend's processes are the ones that appear while it is built: not all our
        # children, which in compare() include the other backends' processes.
        me = psutil.Process()
        before = {process.pid for process in me.children(recursive=True)}
        try:
            start = time.perf_counter()
            what, kwargs = (config.env_id, config.num_envs), config.backend_kwargs
            if config.backend == CEILING:  # not a vector env: processes that step on their own
                self.envs = ceiling.Ceiling(
                    *what, env_kwargs=config.env_kwargs, seed=config.seed, **kwargs
                )
            else:
                self.envs = make_vec(*what, config.backend, env_kwargs=config.env_kwargs, **kwargs)
                self.envs.reset(seed=config.seed)
            result.startup_seconds = time.perf_counter() - start

            self.children = [p for p in me.children(recursive=True) if p.pid not in before]
            result.child_processes = len(self.children)
            result.rss_bytes = result.peak_rss_bytes = _memory([me, *self.children]) or 0
            result.children_uss_bytes = _memory(self.children, unique=True)
            # The pool (and EnvPool) say how many lanes step at once; otherwise every worker
            # process steps one env's share, and an in-process backend is one lane.
            result.workers = getattr(self.envs, "num_workers", None) or max(1, len(self.children))
            if config.backend == CEILING:
                return self  # its processes sampled their own actions

            # Seeded, so every backend is sent exactly the same actions.
            self.envs.action_space.seed(config.seed)
            self.actions = [self.envs.action_space.sample() for _ in range(ACTION_RING_SIZE)]
            self.async_batch_size = _async_batch_size(self.envs)
            if self.async_batch_size is not None:  # send() takes batch_size actions at a time
                batch = gym.vector.utils.batch_space(
                    self.envs.single_action_space, self.async_batch_size
                )
                batch.seed(config.seed)
                self.batch_actions = [batch.sample() for _ in range(ACTION_RING_SIZE)]
                self.async_idle = np.arange(config.num_envs)
        except BaseException:
            # A `with` block whose __enter__ fails never calls __exit__: close here, or the
            # worker processes already started would outlive the error.
            self.close()
            raise
        return self

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        if error is None:
            self.close()
            return
        try:
            self.close()
        except Exception:
            # The error on its way out says what went wrong; closing after it may fail because
            # of it (Ctrl-C reached gymnasium's workers too, and closing writes to their
            # pipes: BrokenPipeError), and must not take its place. (A Ctrl-C while closing
            # still goes up: the user's interrupt wins.)
            pass

    def close(self) -> None:
        """Close the vector env (its worker processes end with it); safe to call twice. A
        close that fails half-way still leaves none of the backend's processes running."""
        if self.envs is not None:
            envs, self.envs = self.envs, None
            try:
                envs.close()
            except BaseException:
                _end(self.children)
                raise

    def warm_up(self) -> None:
        if self.config.warmup_seconds > 0:
            self._step_for(self.config.warmup_seconds)

    def time_window(self) -> None:
        """Run one timed window and record its throughput and CPU use."""
        # CPU times are read outside the timed loop: for 128 processes that takes a few
        # milliseconds, which must not count as stepping time.
        processes = [psutil.Process(), *self.children]
        before = cpu_seconds(processes)
        steps, env_steps, elapsed = self._step_for(self.config.measure_seconds)
        after = cpu_seconds(processes)

        result = self.result
        result.peak_rss_bytes = max(result.peak_rss_bytes, _memory(processes) or 0)
        result.window_steps.append(steps)
        result.window_seconds.append(elapsed)
        result.throughputs.append(env_steps / elapsed)
        # A process that ended mid-window has no "after": leave it out rather than guess.
        used = {pid: after[pid] - before[pid] for pid in before.keys() & after.keys()}
        result.parent_cpu_seconds += used.pop(processes[0].pid, 0.0)
        result.children_cpu_seconds += sum(used.values())

    def _step_for(self, seconds: float) -> tuple[int, int, float]:
        """Step until ``seconds`` have passed; return (batches, env steps, seconds it really took)."""
        if self.async_batch_size is not None:
            return self._send_recv_for(seconds)
        if self.config.backend == CEILING:
            env_steps, elapsed = self.envs.run_for(seconds)
            # "Batches": rounds of all N envs, for the window_steps column.
            return env_steps // self.config.num_envs, env_steps, elapsed
        # Local names: attribute look-ups in a loop this tight would show in the numbers for
        # cheap envs like CartPole.
        step, actions, clock = self.envs.step, self.actions, time.perf_counter
        ring_size, steps = len(actions), 0
        start = now = clock()
        deadline = start + seconds
        # The clock costs well under a microsecond, a step tens of them: read it every step.
        while now < deadline:
            step(actions[steps % ring_size])
            steps += 1
            now = clock()
        return steps, steps * self.config.num_envs, now - start

    def _send_recv_for(self, seconds: float) -> tuple[int, int, float]:
        """:meth:`_step_for` for an async backend: recv a batch, send it its actions, repeat."""
        send, recv = self.envs.send, self.envs.recv
        actions, batch_size = self.batch_actions, self.async_batch_size
        assert batch_size is not None, "only for a backend with send() and recv()"
        ring_size, clock, batches = len(actions), time.perf_counter, 0
        start = now = clock()
        deadline = start + seconds
        idle = self.async_idle  # every env that has no action pending gets one: all are busy
        send(tree_map(lambda leaf: leaf[idle], self.actions[0]), idle)
        while now < deadline:
            env_ids = recv()[4]["env_id"]
            send(actions[batches % ring_size], env_ids)
            batches += 1
            now = clock()
        elapsed = now - start
        # Untimed and uncounted (at most N steps): collect what is in flight, so that the next
        # window starts with every env idle, as the lock-step loop's do. When batch_size does
        # not divide N, the last few envs stay in flight until next time.
        returned = [recv()[4]["env_id"] for _ in range(self.config.num_envs // batch_size)]
        self.async_idle = np.concatenate(returned)
        return batches, batches * batch_size, elapsed


def short_env_labels(configs: Iterable[BenchConfig]) -> dict[str, str]:
    """Env label -> a short name for charts and tables: the id, plus only the arguments whose
    values differ between the configs of that id, numbers to 3 significant digits (all of them
    in full when two would then look the same).

    Example:
        >>> configs = [BenchConfig("vecenvs/Costly-v0", env_kwargs={"step_seconds": s,
        ...            "cost_kind": "busy"}) for s in (1e-5, 9.999999999999999e-05)]
        >>> list(short_env_labels(configs).values())
        ['vecenvs/Costly-v0 step_seconds=1e-05', 'vecenvs/Costly-v0 step_seconds=0.0001']
    """
    by_id: dict[str, dict[str, Mapping[str, Any]]] = {}
    for config in configs:
        by_id.setdefault(env_label(config.env_id), {})[config.env_label] = config.env_kwargs
    names = {}
    for env_id, variants in by_id.items():
        keys = dict.fromkeys(key for kwargs in variants.values() for key in kwargs)  # in order
        differing = [k for k in keys if len({repr(kw.get(k)) for kw in variants.values()}) > 1]
        for label, kwargs in variants.items():
            values = [(key, kwargs.get(key)) for key in differing]
            shown = [f"{k}={format(v, '.3g') if isinstance(v, float) else v}" for k, v in values]
            names[label] = " ".join([env_id, *shown])
    if len(set(names.values())) < len(names):
        return {label: label for label in names}
    return names


def measurable_backends() -> list[str]:
    """What the benchmark can measure here: the installed backends and the ceiling."""
    return [*available_backends(), CEILING]


def describe(name: str) -> str:
    """How tables and the dashboard name a backend of the benchmark (the ceiling included)."""
    if name == CEILING:
        return ceiling.DESCRIPTION
    if name == DEFAULT_REFERENCE:
        return f"{describe_backend(name)} (the loop: the reference)"
    return describe_backend(name)


def in_words(name: str) -> str:
    """A backend of the benchmark named once in plain words, for a legend or a tooltip:
    ``"multi: every env in this process, one after the other"``."""
    if name == CEILING:
        return ceiling.DESCRIPTION
    info = BACKEND_INFO.get(name)
    if info is None:
        return name
    if name == DEFAULT_REFERENCE:
        return (
            f"{name} (the loop, the reference): {info.description.removesuffix(' (the reference)')}"
        )
    return f"{name}: {info.description}"


def _async_batch_size(envs: gym.vector.VectorEnv) -> int | None:
    """``batch_size`` if ``envs`` has EnvPool's async API with batches smaller than all envs
    (else None: the plain ``step()`` loop is used)."""
    size = getattr(envs, "batch_size", None)
    async_api = callable(getattr(envs, "send", None)) and callable(getattr(envs, "recv", None))
    return size if async_api and isinstance(size, int) and 0 < size < envs.num_envs else None


def _memory(processes: Iterable[psutil.Process], unique: bool = False) -> int | None:
    """Summed RSS of ``processes``, or with ``unique`` their USS (``None`` if any can't report
    it); processes that have ended are skipped."""
    total = 0
    for process in processes:
        try:
            # USS needs a walk of the memory map: fine once after startup, not per step.
            total += process.memory_full_info().uss if unique else process.memory_info().rss
        except psutil.NoSuchProcess:
            pass
        except (psutil.AccessDenied, AttributeError, NotImplementedError):
            if unique:
                return None
            raise
    return total


def _end(processes: Iterable[psutil.Process], grace_seconds: float = 3.0) -> None:
    """Terminate those of ``processes`` still running, then kill what is left after
    ``grace_seconds``: what a vector env whose close failed half-way leaves behind."""
    alive = []
    for process in processes:
        try:
            process.terminate()
            alive.append(process)
        except psutil.Error:  # already gone (or its pid reused: psutil checks the start time)
            pass
    _, left = psutil.wait_procs(alive, timeout=grace_seconds)
    for process in left:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=grace_seconds)
