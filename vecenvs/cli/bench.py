"""The command line: ``python -m vecenvs bench`` (or just ``vecenvs bench``).

It measures, with :mod:`vecenvs.bench`, every requested backend for every (env, N) pair and
prints one table per pair. Examples::

    python -m vecenvs bench --quick                      # a first look, about a minute
    python -m vecenvs bench --num-envs 16 --backend pool --workers 2
    python -m vecenvs bench --env vecenvs/Costly-v0 --env-kwarg step_seconds=1e-3
    python -m vecenvs bench --json results.json          # also save every number

gymnasium's ``gym-sync`` is always measured as well, in the same run, and every speed is also
given as a ratio to it: "3.1x gym-sync" means something on any machine, "250,000 steps/s" only
on this one.

Exit codes: 0 done, 1 a backend failed while being measured, 2 bad command-line input,
130 interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import ast
import json
import multiprocessing
import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

import vecenvs
from vecenvs import bench
from vecenvs.cli.common import fail, non_negative_float, positive_float, positive_int, unique
from vecenvs.factory import BACKENDS

__all__ = ["add_parser", "format_table"]

#: What ``bench`` measures when no ``--backend`` is given (gym-sync is added as the reference).
DEFAULT_BACKENDS = ("multi", "subproc", "pool", "gym-async", "gym-async-shm")
DEFAULT_ENVS = ("CartPole-v1",)
DEFAULT_NUM_ENVS = (8, 128)

#: Backends that start one worker process per env: worth a warning when N is large.
ONE_PROCESS_PER_ENV = ("subproc", "gym-async", "gym-async-shm")


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Add the ``bench`` command to the ``vecenvs`` parser."""
    bench_parser = commands.add_parser(
        "bench",
        help="measure how many env steps per second each backend delivers",
        description=(
            "Measure the env steps per second of each backend, for each env and each number of "
            "envs, and compare them with gymnasium's SyncVectorEnv measured in the same run."
        ),
    )
    bench_parser.set_defaults(run=_run_bench, parser=bench_parser)
    add = bench_parser.add_argument
    add("--env", action="append", metavar="ID",
        help=f"gymnasium env id; repeat for several (default: {', '.join(DEFAULT_ENVS)})")
    add("--num-envs", action="append", type=positive_int, metavar="N",
        help="number of envs stepped together; repeat for several "
             f"(default: {' and '.join(map(str, DEFAULT_NUM_ENVS))})")
    add("--backend", action="append", choices=list(BACKENDS), metavar="NAME",
        help=f"backend to measure, one of {', '.join(BACKENDS)}; repeat for several "
             f"(default: {', '.join(DEFAULT_BACKENDS)}; {bench.DEFAULT_REFERENCE} is always "
             "measured too, as the reference)")
    add("--workers", type=positive_int, metavar="K",
        help="worker processes of the pool backend (default: the pool's own choice)")
    add("--start-method", choices=multiprocessing.get_all_start_methods(),
        help="how worker processes are started, for subproc, pool and gym-async(-shm) "
             "(default: Python's default on this system)")
    add("--seconds", type=positive_float, metavar="S",
        help=f"length of each timed window (default: {bench.BenchConfig.measure_seconds:g}, "
             f"--quick: {bench.QUICK['measure_seconds']:g})")
    add("--warmup", type=non_negative_float, metavar="S",
        help=f"untimed stepping before the first window (default: "
             f"{bench.BenchConfig.warmup_seconds:g}, --quick: {bench.QUICK['warmup_seconds']:g})")
    add("--repeats", type=positive_int, metavar="R",
        help=f"timed windows per backend (default: {bench.BenchConfig.repeats}, "
             f"--quick: {bench.QUICK['repeats']})")
    add("--quick", action="store_true",
        help="short warm-up and windows: a rough first look (explicit --seconds, --warmup and "
             "--repeats still win)")
    add("--sequential", action="store_true",
        help="measure the backends one after the other instead of interleaving their windows "
             "(uses less memory: only one backend's processes exist at a time)")
    add("--env-kwarg", action="append", type=_env_kwarg, metavar="KEY=VALUE", default=[],
        help="argument for gym.make, for every --env; VALUE is a Python literal (1e-3, True, "
             "'text'), anything else is taken as a string; repeat for several")
    add("--seed", type=int, default=bench.BenchConfig.seed,
        help="seed of the resets and sampled actions (default: %(default)s)")
    add("--json", metavar="PATH", help="also write every measurement to this JSON file")


def _run_bench(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The ``bench`` command: validate everything, then measure and print table after table."""
    env_ids = unique(args.env or DEFAULT_ENVS)
    num_envs_list = unique(args.num_envs or DEFAULT_NUM_ENVS)
    backends = unique(args.backend or DEFAULT_BACKENDS)
    timing = {
        "warmup_seconds": bench.BenchConfig.warmup_seconds,
        "measure_seconds": bench.BenchConfig.measure_seconds,
        "repeats": bench.BenchConfig.repeats,
        **(bench.QUICK if args.quick else {}),
    }
    for option, key in (("warmup", "warmup_seconds"), ("seconds", "measure_seconds"),
                        ("repeats", "repeats")):
        if getattr(args, option) is not None:
            timing[key] = getattr(args, option)
    env_kwargs = dict(args.env_kwarg)
    backend_kwargs = _backend_kwargs(backends, args.workers, args.start_method)

    # Check every combination before measuring any: a typo in the last --env must not surface
    # only after ten minutes of measuring the first.
    try:
        for env_id in env_ids:
            for num_envs in num_envs_list:
                for backend in (*backends, bench.DEFAULT_REFERENCE):
                    bench.validate_config(bench.BenchConfig(
                        env_id=env_id, num_envs=num_envs, backend=backend,
                        backend_kwargs=backend_kwargs.get(backend, {}), env_kwargs=env_kwargs,
                        seed=args.seed, **timing,
                    ))
        if args.json:
            _check_writable(args.json)
    except ValueError as error:
        return fail(parser, error, code=2)
    if args.workers is not None and "pool" not in backends:
        print(f"{parser.prog}: note: --workers only applies to the pool backend, which is not "
              "being measured", file=sys.stderr)

    all_results: list[bench.Measurement] = []
    for env_id in env_ids:
        for num_envs in num_envs_list:
            measured = [*backends, *([] if bench.DEFAULT_REFERENCE in backends
                                     else [bench.DEFAULT_REFERENCE])]
            seconds = len(measured) * (timing["warmup_seconds"]
                                       + timing["repeats"] * timing["measure_seconds"])
            print(f"measuring {env_id} with N={num_envs}: {', '.join(measured)} "
                  f"(about {seconds:.0f} s plus startup)...", file=sys.stderr, flush=True)
            try:
                results = bench.compare(
                    env_id, num_envs, backends, backend_kwargs=backend_kwargs,
                    env_kwargs=env_kwargs, seed=args.seed, interleave=not args.sequential,
                    **timing,
                )
            except KeyboardInterrupt:
                print(f"{parser.prog}: interrupted", file=sys.stderr)
                return 130
            except Exception as error:  # a backend crashed or could not be built
                return fail(parser, f"measuring {env_id} with N={num_envs} failed: "
                                     f"{type(error).__name__}: {error}", code=1)
            all_results.extend(results)
            print(format_table(results, interleaved=not args.sequential), flush=True)
            print(flush=True)

    print(_LEGEND)
    if args.json:
        _write_json(args.json, all_results)
        print(f"\nwrote {len(all_results)} measurements to {args.json}")
    return 0


def format_table(
    results: Sequence[bench.Measurement],
    *,
    reference: str = bench.DEFAULT_REFERENCE,
    interleaved: bool = True,
) -> str:
    """A plain-text table of one :func:`vecenvs.bench.compare` run (one env id, one N).

    Args:
        results: what :func:`vecenvs.bench.compare` returned.
        reference: the backend the ratios are relative to, for the column title.
        interleaved: whether the windows were interleaved, for the title line.
    """
    first = results[0].config
    cpus = os.cpu_count() or 1
    title = (
        f"{first.env_id}, N={first.num_envs}: {first.repeats} x {first.measure_seconds:g} s "
        f"windows per backend after {first.warmup_seconds:g} s warm-up, "
        f"{'interleaved' if interleaved else 'one backend after the other'}; {cpus} CPUs"
    )
    header = ("backend", "steps/s (mean ± std)", f"x {reference}", "startup s", "procs",
              "RSS MB", "workers USS MB", "CPU s parent", "CPU s children")
    rows = [
        (
            r.config.backend + _describe_kwargs(r.config.backend_kwargs),
            f"{r.mean:,.0f} ± {r.std:,.0f}",
            "-" if r.ratio is None else f"{r.ratio:.2f}",
            f"{r.startup_seconds:.2f}",
            str(r.processes),
            f"{r.rss_bytes / 2**20:.0f}",
            "?" if r.children_uss_bytes is None else f"{r.children_uss_bytes / 2**20:.0f}",
            f"{r.parent_cpu_seconds:.2f}",
            f"{r.children_cpu_seconds:.2f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                              for i, (h, w) in enumerate(zip(header, widths)))]
    lines.append("-" * len(lines[1]))
    for row in rows:
        lines.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))))

    many = [r.config.backend for r in results
            if r.config.backend in ONE_PROCESS_PER_ENV and r.config.num_envs > cpus]
    if many:
        lines.append(
            f"note: {', '.join(many)} start{'s' if len(many) == 1 else ''} one process per env: "
            f"N={first.num_envs} means {first.num_envs} processes sharing {cpus} CPUs "
            "(see the startup and memory columns)."
        )
    return "\n".join(lines)


_LEGEND = """\
How to read the tables:
  steps/s         individual env steps per second (one step() of N envs counts N), mean ± std
                  of the timed windows; a difference smaller than the std is noise.
  x gym-sync      steps/s divided by gym-sync's, measured in the same run on this machine.
  startup s       time to build the vector env and reset it once.
  procs           processes involved: this one plus the backend's workers.
  RSS MB          memory of those processes; memory they share is counted once per process,
                  so this is too much.
  workers USS MB  memory the worker processes hold alone, summed: what the extra processes
                  really cost (0 when the envs run inside this process).
  CPU s           CPU time during the timed windows, in this process and in the workers: more
                  CPU seconds than wall seconds means several cores were busy."""


def _backend_kwargs(backends: Sequence[str], workers: int | None,
                    start_method: str | None) -> dict[str, dict[str, Any]]:
    """Translate --workers and --start-method into each backend's own argument names."""
    kwargs: dict[str, dict[str, Any]] = {}
    for backend in backends:
        own: dict[str, Any] = {}
        if backend == "pool" and workers is not None:
            own["num_workers"] = workers
        if start_method is not None:
            if backend in ("subproc", "pool"):
                own["start_method"] = start_method
            elif backend in ("gym-async", "gym-async-shm"):
                own["context"] = start_method  # gymnasium's name for the same thing
        if own:
            kwargs[backend] = own
    return kwargs


def _describe_kwargs(kwargs: dict[str, Any]) -> str:
    """``{"num_workers": 2}`` -> ``" (num_workers=2)"``, shown next to the backend's name."""
    if not kwargs:
        return ""
    return " (" + ", ".join(f"{key}={value}" for key, value in kwargs.items()) + ")"


def _write_json(path: str, results: Sequence[bench.Measurement]) -> None:
    """Write the measurements with enough about the machine to interpret them later."""
    document = {
        "vecenvs_version": vecenvs.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "results": [result.to_dict() for result in results],
    }
    with open(path, "w", encoding="utf-8") as file:
        json.dump(document, file, indent=2)
        file.write("\n")


def _check_writable(path: str) -> None:
    """Fail now, not after the measuring, if ``path`` can't be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"--json {path!r} is a directory; expected a file name")
    if not os.path.isdir(directory):
        raise ValueError(f"--json {path!r}: directory {directory!r} does not exist")
    if not os.access(directory, os.W_OK):
        raise ValueError(f"--json {path!r}: directory {directory!r} is not writable")


def _env_kwarg(text: str) -> tuple[str, Any]:
    """``"step_seconds=1e-3"`` -> ``("step_seconds", 0.001)``."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY a Python name, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError):
        # So that render_mode=rgb_array works without shell-quoting the quotes.
        value = raw
    return key, value
