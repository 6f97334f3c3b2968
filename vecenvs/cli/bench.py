"""``python -m vecenvs bench``: measure backends side by side, sweep a grid, fit the model.

It measures, with :mod:`vecenvs.bench`, every requested backend at every point of the grid
(env x env arguments x N), prints one table per point as it is measured, then the speed-ups
and the fitted overhead model, and saves everything in the results store. Examples::

    python -m vecenvs bench --quick                      # a first look, about 15 seconds
    python -m vecenvs bench --num-envs 16 --backend pool --workers 1 --workers 2
    python -m vecenvs bench --env vecenvs/Costly-v0 --env-kwarg step_seconds=1e-4 \\
        --env-kwarg step_seconds=1e-3                    # a repeated key is a grid
    python -m vecenvs bench --preset seeds --html seeds.html   # the seeds' figure, ~10 min
    python -m vecenvs bench --json results.json          # also save every number as JSON
    python -m vecenvs bench --env mycart:MyCart-v0 --env-kwarg physics_steps=1000  # your env

``gym-sync`` is always measured too, in the same run, and every speed is also given as a ratio
to it: "3.1x gym-sync" means something on any machine, "250,000 steps/s" only on this one. So
is, by default, the ``ceiling`` (:mod:`vecenvs.bench.ceiling`), and each row's share of it.

Exit codes: 0 done, 1 a backend failed while being measured, 2 bad command-line input,
130 interrupted with Ctrl-C (what was measured by then is kept in the store and ``--json``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import vecenvs
from vecenvs import bench
from vecenvs.bench import ratios
from vecenvs.bench.store import utc_now
from vecenvs.bench.sweep import (
    Backend,
    BenchEnv,
    SweepConfig,
    SweepProgress,
    env_grid,
    run_sweep,
    validate_sweep,
)
from vecenvs.bench.verdict import format_verdicts
from vecenvs.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    add_command,
    add_env_options,
    add_output_options,
    config_option,
    fail,
    measuring,
    open_outputs,
    positive_int,
    saved_as,
    say,
    start_method_option,
    telling_slow_checks,
    unique,
    write_json,
)
from vecenvs.cpus import available_cpus, cpu_count
from vecenvs.factory import BACKEND_INFO, BACKENDS, ONE_PROCESS_PER_ENV, WORKER_BACKENDS
from vecenvs.pool import workers_for
from vecenvs.table import format_table as format_columns

__all__ = ["add_parser", "format_table"]

#: What ``bench`` measures by default (gym-sync is added as the reference).
DEFAULT_BACKENDS = ("multi", "subproc", "pool", "gym-async", "gym-async-shm", bench.CEILING)
DEFAULT_ENVS = ("CartPole-v1",)
DEFAULT_NUM_ENVS = (8, 128)
#: The backends whose worker processes take ``worker_threads`` (see vecenvs.threads): ours
#: that start processes, and the ceiling.
THREADED_BACKENDS = frozenset(
    [
        *(n for n, i in BACKEND_INFO.items() if i.family == "ours" and i.processes != "none"),
        bench.CEILING,
    ]
)
#: The presets' costliest env, left out of them when MuJoCo is not installed.
HUMANOID = "HumanoidStandup-v5"

#: ``--preset seeds``: the grid of the seeds' figure, envs from cheap to costly, N on both
#: sides of the CPUs (on 64 CPUs or more, N = 2 x CPUs is added for the "beyond" side).
SEEDS_PRESET: dict[str, Any] = {
    "envs": ("CartPole-v1", "Acrobot-v1", HUMANOID),
    "num_envs": (1, 2, 4, 16, 64),
    "backends": ("multi", "subproc", "pool", "gym-async", bench.CEILING),
}

#: ``--preset core16`` / ``core2``: the table of the core's targets (issue 15 of this project):
#: each env at the N the targets name, every contender and the ceiling, in one run.
_CORE_BACKENDS = ("pool", "pool-async", "gym-async-shm", bench.CEILING)
CORE_PRESETS: dict[str, dict[str, Any]] = {
    "core16": {
        "points": [
            (BenchEnv("CartPole-v1"), (64, 256, 1024)),
            (BenchEnv("Acrobot-v1"), (64, 256)),
            (BenchEnv(HUMANOID), (64,)),
            (BenchEnv("vecenvs/Costly-v0", {"step_seconds": 1e-4, "cost_kind": "busy"}), (64, 256)),
        ],
        "backends": _CORE_BACKENDS,
        "workers": (4, 8, 16),
        "measure_seconds": 1.0,
        "repeats": 3,
    },
    "core2": {
        "points": [
            (BenchEnv("CartPole-v1"), (32, 128)),
            (BenchEnv("Acrobot-v1"), (128,)),
            (BenchEnv(HUMANOID), (32,)),
        ],
        "backends": _CORE_BACKENDS,
        "workers": (2,),
        "measure_seconds": 2.0,
        "repeats": 5,
    },
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "bench",
        __doc__,
        _run_bench,
        help="measure how many env steps per second each backend delivers",
        description="Measure the env steps per second of each backend, for each env and each "
        "number of envs, and compare them with gymnasium's SyncVectorEnv measured in the same "
        "run. Every option that can be repeated builds a grid: all combinations are measured. "
        "Results are saved in the results store (see `vecenvs results --help`).",
    )
    add_env_options(
        parser,
        bench.BenchConfig,
        grid={"env_id": DEFAULT_ENVS, "num_envs": DEFAULT_NUM_ENVS},
        kwarg_help="; given to every --env; repeat a KEY with other values to measure each (e.g. "
        "the teaching env's step_seconds or obs_size)",
    )
    add = parser.add_argument
    add(
        "--backend",
        action="append",
        choices=[*BACKENDS, bench.CEILING],
        metavar="NAME",
        help=f"backend to measure, one of {', '.join([*BACKENDS, bench.CEILING])}; repeat for "
        f"several (default: {', '.join(DEFAULT_BACKENDS)}; {bench.DEFAULT_REFERENCE} is "
        f"always measured too, as the reference; {bench.CEILING} is the machine's limit: "
        "min(CPUs, N) processes stepping with no coordination)",
    )
    add(
        "--workers",
        action="append",
        type=positive_int,
        metavar="K",
        help="processes of the pool backends, threads of envpool (default: their own choice); "
        "repeat to measure the pool with each K",
    )
    add(
        "--worker-threads",
        action="append",
        type=worker_threads,
        metavar="T",
        help="BLAS/OpenMP/torch threads per worker process of subproc, pool, pool-async, ray "
        "and the ceiling (default 1; 'none' leaves them alone); repeat to measure each, side "
        "by side (e.g. --worker-threads 1 --worker-threads none)",
    )
    start_method_option(
        parser, "subproc, pool, pool-async, gym-async(-shm), sb3-subproc and the ceiling"
    )
    config_option(parser, SweepConfig, "check_timeout")
    add(
        "--preset",
        choices=["seeds", *CORE_PRESETS],
        help="a ready-made grid: 'seeds' = the seeds' figure (CartPole-v1, Acrobot-v1 and "
        "HumanoidStandup-v5 with N=1..64, and 2 x CPUs where that is more, "
        "multi/subproc/pool/gym-async); 'core16' and 'core2' = the core's targets on 16 and 2 "
        "cores (the pool at several K, the async pool, gym-async-shm and the ceiling, each env "
        "at its own N); --env, --num-envs, --backend and --workers still override its parts "
        "(a preset's K above the smallest N is left out, with a note)",
    )
    timing = parser.add_argument_group("timing")
    for name in ("measure_seconds", "warmup_seconds", "repeats"):
        # None: not given, so that --quick and --preset can choose.
        shown = f"{getattr(bench.BenchConfig, name):g}, --quick: {bench.QUICK[name]:g}"
        config_option(timing, bench.BenchConfig, name, default=None, shown=shown)
    timing.add_argument(
        "--quick",
        action="store_true",
        help="short warm-up and windows: a rough first look (explicit --seconds, --warmup and "
        "--repeats still win)",
    )
    config_option(timing, SweepConfig, "interleave")
    config_option(timing, bench.BenchConfig, "seed")
    output = add_output_options(parser, "also write every measurement to this JSON file")
    output.add_argument(
        "--html",
        metavar="PATH",
        help="also write the charts (the seeds' figure, throughput and speed-up "
        "with the model's curves) to this HTML file",
    )


def worker_threads(text: str) -> int | None:
    """argparse type of ``--worker-threads``: a whole number >= 1, or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number >= 1, or 'none' to leave the threads alone; got {text!r}"
        ) from None


def _run_bench(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        config, notes = _sweep_config(args)
        with telling_slow_checks(parser):
            validate_sweep(config)
        store = open_outputs(args, "json", "html")
    except ValueError as error:  # every bad input, named, before anything is measured
        return fail(parser, error, code=EXIT_BAD_INPUT)
    # Every default below (the pool's K, the ceiling's processes) follows from this count.
    say(f"CPUs: {cpu_count()}")
    for note in notes:
        say(f"{parser.prog}: note: {note}")
    if args.workers and not WORKER_BACKENDS & {b.name for b in config.backend_specs()}:
        say(
            f"{parser.prog}: note: --workers only applies to the pool backend, which is not "
            "being measured"
        )
    if args.worker_threads and not THREADED_BACKENDS & {b.name for b in config.backend_specs()}:
        say(
            f"{parser.prog}: note: --worker-threads only applies to "
            f"{', '.join(sorted(THREADED_BACKENDS))}, none of which is being measured"
        )

    points = config.points()
    per_backend = config.warmup_seconds + config.repeats * config.measure_seconds
    say(
        f"measuring {len(points)} point(s) x {len(config.backend_specs())} backends, "
        f"about {len(points) * len(config.backend_specs()) * per_backend:.0f} s plus startup"
        f"{'' if store is None else f'; saving to {store.path}'}"
    )

    measured: list[bench.Measurement] = []

    def show(progress: SweepProgress) -> None:
        measured.extend(progress.measurements)
        _write(
            format_table(
                progress.measurements, reference=config.reference, interleaved=config.interleave
            )
            + "\n"
        )

    def keep(how: str) -> list[str] | None:
        """Stopped early: the points measured so far are in the store, and go to --json."""
        if not measured:
            return None
        places = [] if store is None else [str(store.path)]
        if args.json:
            _write_json(args.json, measured, {**facts, "stopped": how, "finished": utc_now()})
            places.append(args.json)
        return places

    # Before measuring: the load the run started under. (main() sets args.argv.)
    facts = provenance(["vecenvs", *getattr(args, "argv", sys.argv[1:])])
    with measuring(parser, store, keep=keep) as interrupted:
        result = run_sweep(
            config,
            on_result=show,
            store=store,
            label=args.label,
            progress=True,
            cancel=interrupted,
        )
    finished(facts)["elapsed_seconds"] = result.elapsed_seconds

    model = _fit(result)
    report = [_LEGEND, format_speedups(result.measurements, reference=config.reference)]
    # A model fitted through as many points as it has numbers says nothing (a first --quick run
    # measures two N): the verdict says so in one line instead.
    report += [model.format_table()] if model is not None and model.judged else []
    report += [format_verdicts(result.measurements, model, reference=config.reference)]
    print("\n\n".join(report))
    if args.json:
        _write_json(args.json, result.measurements, facts)
        print(f"\nwrote {len(result.measurements)} measurements to {args.json}")
    if args.html:
        _write_html(args.html, result, model)
        print(f"\nwrote the charts to {args.html} (open it in a browser)")
    saved_as(result.run_id, args)
    return EXIT_OK


def _without_mujoco(preset: str | None) -> str:
    """The note of a preset that leaves out its MuJoCo env, and how to put it back."""
    return (
        f"--preset {preset}: {HUMANOID} left out, MuJoCo is not installed (install it with "
        "pip install -e '.[mujoco]' in the clone, or make bench)"
    )


def _sweep_config(args: argparse.Namespace) -> tuple[SweepConfig, list[str]]:
    """The command line as a (not yet validated) :class:`SweepConfig`: each part as given, else
    as the preset says, else the default; and notes on how a preset was fitted to this machine
    and to the N given (K above the smallest N left out, N added beyond the CPUs)."""
    preset: dict[str, Any] = (
        SEEDS_PRESET if args.preset == "seeds" else CORE_PRESETS.get(args.preset, {})
    )
    cpus, notes = available_cpus(), []
    mujoco = importlib.util.find_spec("mujoco") is not None
    only = None
    if "points" in preset and not (args.env_id or args.num_envs):  # each env at its own N
        wanted = [(env, ns) for env, ns in preset["points"] if mujoco or env.env_id != HUMANOID]
        if len(wanted) < len(preset["points"]):
            notes.append(_without_mujoco(args.preset))
        points = [(env, n) for env, ns in wanted for n in ns]
        envs = [env for env, _ in wanted]
        num_envs = sorted({n for _, n in points})
        only = [(env.label, n) for env, n in points]
    else:
        env_ids = unique(args.env_id or preset.get("envs") or DEFAULT_ENVS)
        if not (args.env_id or mujoco) and HUMANOID in env_ids:
            env_ids = [env_id for env_id in env_ids if env_id != HUMANOID]
            notes.append(_without_mujoco(args.preset))
        grid: dict[str, list[Any]] = {}
        for key, value in args.env_kwargs:  # a key given several times: each value is measured
            values = grid.setdefault(key, [])
            if value not in values:  # (not unique(): a value may be a list, which can't hash)
                values.append(value)
        envs = [spec for env_id in env_ids for spec in env_grid(env_id, **grid)]
        num_envs = unique(args.num_envs or preset.get("num_envs") or DEFAULT_NUM_ENVS)
        if args.preset == "seeds" and not args.num_envs and max(num_envs) <= cpus:
            num_envs.append(2 * cpus)  # the figure has two halves: N within and beyond the CPUs
            notes.append(
                f"--preset seeds: N={2 * cpus} added, so that some N is beyond this machine's "
                f"{cpus} CPUs"
            )

    workers = unique(args.workers or preset.get("workers") or [])
    if workers and not args.workers:  # the preset's K: never more workers than envs
        workers, preset_notes = _fit_workers(args.preset, workers, min(num_envs), cpus)
        notes += preset_notes
    backends: list[Backend] = []
    for name in unique(args.backend or preset.get("backends") or DEFAULT_BACKENDS):
        own: dict[str, Any] = {}
        keyword = "start_method" if name == bench.CEILING else BACKEND_INFO[name].start_method_kwarg
        if args.start_method is not None and keyword is not None:
            own[keyword] = args.start_method
        variants = [own]
        if args.worker_threads and name in THREADED_BACKENDS:
            variants = [{**own, "worker_threads": t} for t in unique(args.worker_threads)]
        for kwargs in variants:
            if (name in WORKER_BACKENDS or name == "envpool") and workers:  # envpool: C++ threads
                backends.extend(Backend(name, {"num_workers": k, **kwargs}) for k in workers)
            else:
                backends.append(Backend(name, kwargs))

    timing = {}  # given, else --quick's, else the preset's, else BenchConfig's
    for name in ("warmup_seconds", "measure_seconds", "repeats"):
        timing[name] = getattr(args, name)
        if timing[name] is None:
            default = preset.get(name, getattr(bench.BenchConfig, name))
            timing[name] = bench.QUICK[name] if args.quick else default
    config = SweepConfig(
        envs=envs,
        num_envs=num_envs,
        backends=backends,
        seed=args.seed,
        interleave=args.interleave,
        only=only,
        check_timeout=args.check_timeout,
        **timing,
    )
    return config, notes


def _fit_workers(
    preset: str, workers: list[int], smallest_n: int, cpus: int
) -> tuple[list[int], list[str]]:
    """A preset's K values that fit its smallest N (each worker needs an env), and notes saying
    which were left out, and when its K are more than this machine's CPUs."""
    kept = [k for k in workers if k <= smallest_n]
    notes = []
    if len(kept) < len(workers):
        left_out = ", ".join(f"K={k}" for k in workers if k > smallest_n)
        instead = "" if kept else "; the pool takes its own K instead (one per CPU, at most N)"
        notes.append(
            f"--preset {preset}: {left_out} left out: the smallest N is {smallest_n}, and each "
            f"worker needs at least one env{instead}"
        )
    if any(k > cpus for k in kept):
        above = ", ".join(f"K={k}" for k in kept if k > cpus)
        notes.append(
            f"--preset {preset}: {above} are more workers than the {cpus} CPUs this process may "
            "use: measured as given, the machine oversubscribed"
        )
    return kept, notes


def _fit(result):
    try:
        return result.model()
    except ValueError:  # e.g. only the reference was measured
        return None


def format_speedups(
    results: Sequence[bench.Measurement], *, reference: str = bench.DEFAULT_REFERENCE
) -> str:
    """One line per backend, one column per (env, N): the speed-up over ``reference``, the
    quickest way to see which backends stay below 1.0x and how that moves with N and env cost."""
    points = list(dict.fromkeys((r.config.env_label, r.config.num_envs) for r in results))
    backends = list(dict.fromkeys(r.config.backend_label for r in results))
    ratios = {
        (r.config.backend_label, r.config.env_label, r.config.num_envs): r.ratio for r in results
    }
    header = ["backend", *(f"{env} N={n}" for env, n in points)]
    rows = [
        [backend, *(_times(ratios.get((backend, env, n))) for env, n in points)]
        for backend in backends
    ]
    title = f"speed-up over {reference} (throughput / {reference}'s, at the same point):"
    return format_columns(header, rows, title=title, rule=False)


def _times(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _write(text: str) -> None:
    """Print without tearing the progress bar (tqdm redraws it below the text)."""
    from tqdm.auto import tqdm

    tqdm.write(text, file=sys.stdout)
    sys.stdout.flush()


def _load_average() -> float | None:
    """The 1-minute load average, None where the OS has none (Windows)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _commit() -> str | None:
    """The git commit the package was loaded from ("+" appended when its files were changed
    since), or None outside a git checkout (an installed wheel)."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(vecenvs.__file__)))

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", "-C", folder, *arguments],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()

    try:
        # Only the package's own checkout: an installed copy may sit inside another repository.
        if os.path.realpath(git("rev-parse", "--show-toplevel")) != os.path.realpath(folder):
            return None
        commit = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", "vecenvs")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+" if changed else "")


def provenance(command: Sequence[str]) -> dict[str, Any]:
    """What a results file says about how it was made: when, the command, the load, the commit.
    :func:`finished` completes it after the run. (Also the measuring scripts' in ``tests/``.)"""
    return {
        "started": utc_now(),
        "command": shlex.join(command),
        "commit": _commit(),
        "load_before": _load_average(),
    }


def finished(facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` from :func:`provenance`, with when the run finished and the load then."""
    facts.update(finished=utc_now(), load_after=_load_average())
    return facts


def _write_json(
    path: str, results: Sequence[bench.Measurement], provenance: dict[str, Any] | None = None
) -> None:
    from vecenvs.bench.machine import machine_info

    document = {
        "run": provenance or {},
        "vecenvs_version": vecenvs.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "machine": machine_info(),
        "results": [result.to_dict() for result in results],
    }
    write_json(path, document)


def _write_html(path: str, result, model) -> None:
    """Write the sweep's charts into one self-contained HTML page (plotly.js embedded once)."""
    from vecenvs.bench import figures

    charts = [
        *figures.seeds_figures(result.measurements, cpus=result.cpus).values(),
        figures.throughput_figure(result.measurements, model),
        figures.speedup_figure(result.measurements, model),
        figures.efficiency_figure(result.measurements, model),
    ]
    with open(path, "w", encoding="utf-8") as file:
        file.write("<html><head><meta charset='utf-8'><title>vecenvs bench</title></head><body>")
        for index, chart in enumerate(charts):
            file.write(chart.to_html(full_html=False, include_plotlyjs=index == 0))
        file.write("</body></html>\n")


def format_table(
    results: Sequence[bench.Measurement],
    *,
    reference: str = bench.DEFAULT_REFERENCE,
    interleaved: bool = True,
) -> str:
    """A plain-text table of one :func:`vecenvs.bench.compare` run (one env id, one N);
    ``reference`` titles the ratio column, ``interleaved`` says how the windows were timed."""
    first = results[0].config
    cpus = available_cpus()
    title = (
        f"{first.env_id}, N={first.num_envs}: {first.repeats} x {first.measure_seconds:g} s "
        f"windows per backend after {first.warmup_seconds:g} s warm-up, "
        f"{'interleaved' if interleaved else 'one backend after the other'}; {cpus} CPUs"
    )
    mb = 2**20
    columns: dict[str, Callable[[bench.Measurement], str]] = {
        "backend": lambda r: r.config.backend_label,
        "steps/s (median ± std)": lambda r: f"{r.throughput:,.0f} ± {r.std:,.0f}",
        f"x {reference}": lambda r: "-" if r.ratio is None else f"{r.ratio:.2f}",
        "of ceiling": ratios.efficiency_text,
        "checks": lambda r: ", ".join(c for c in r.checks if c != ratios.CEILING_DISTURBED),
        "startup s": lambda r: f"{r.startup_seconds:.2f}",
        "procs": lambda r: str(r.processes),
        "RSS MB": lambda r: f"{r.rss_bytes / mb:.0f}",
        "workers USS MB": lambda r: (
            "?" if r.children_uss_bytes is None else f"{r.children_uss_bytes / mb:.0f}"
        ),
        "CPU s parent": lambda r: f"{r.parent_cpu_seconds:.2f}",
        "CPU s children": lambda r: f"{r.children_cpu_seconds:.2f}",
    }
    header = list(columns)
    rows = [[cell(r) for cell in columns.values()] for r in results]
    lines = format_columns(header, rows, title=title).split("\n")

    many = [
        r.config.backend
        for r in results
        if r.config.backend in ONE_PROCESS_PER_ENV and r.config.num_envs > cpus
    ]
    if many:
        lines.append(
            f"note: {', '.join(many)} start{'s' if len(many) == 1 else ''} one process per env: "
            f"N={first.num_envs} means {first.num_envs} processes sharing {cpus} CPUs "
            "(see the startup and memory columns)."
        )
    # The pools (and the ceiling) not told K take one worker per CPU, but never more than N.
    capped = [
        r.config.backend
        for r in results
        if (r.config.backend in WORKER_BACKENDS or r.config.backend == bench.CEILING)
        and "num_workers" not in r.config.backend_kwargs
    ]
    workers = workers_for(first.num_envs, cpus=cpus)
    if capped and workers.capped:
        lines.append(f"note: {', '.join(capped)}, not told K: {workers}.")
    return "\n".join(lines)


_LEGEND = """\
How to read the tables:
  steps/s         individual env steps per second (one step() of N envs counts N): the median
                  timed window, ± the windows' std; a difference smaller than the std is noise.
  x gym-sync      steps/s divided by gym-sync's, measured in the same run on this machine.
  of ceiling      steps/s as a share of the ceiling's (min(CPUs, N) processes stepping their
                  share of the envs with no coordination): the efficiency. "?" and a reason
                  instead when it is not a result (above the ceiling, or a disturbed ceiling).
  checks          what is wrong with a row's numbers: "disturbed" when its fastest window was
                  1.5x its slowest or more (vecenvs/bench/ratios.py defines every number).
  startup s       time to build the vector env and reset it once.
  procs           processes involved: this one plus the backend's workers.
  RSS MB          memory of those processes; memory they share is counted once per process,
                  so this is too much.
  workers USS MB  memory the worker processes hold alone, summed: what the extra processes
                  really cost (0 when the envs run inside this process).
  CPU s           CPU time during the timed windows, in this process and in the workers: more
                  CPU seconds than wall seconds means several cores were busy."""
