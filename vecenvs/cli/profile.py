"""The command line: ``python -m vecenvs profile`` (or just ``vecenvs profile``).

It runs one configuration under py-spy (see :mod:`vecenvs.profile`), prints where the
parent's and each worker's time goes, and writes a flame graph and py-spy's recording.
Examples::

    python -m vecenvs profile --quick                          # subproc, 8 x CartPole-v1, 2 s
    python -m vecenvs profile --backend pool --workers 2 --num-envs 128
    python -m vecenvs profile --env vecenvs/Costly-v0 --env-kwarg step_seconds=1e-3
    python -m vecenvs profile --backend gym-async --out profiles/async
    python -m vecenvs profile --env mycart.env:MyCartEnv --env-kwarg physics_steps=1000
    python -m vecenvs profile --backend pool --start-method spawn --check-timeout 120

py-spy must be allowed to read other processes (ptrace): as root, or with
``/proc/sys/kernel/yama/ptrace_scope`` at 0 on Linux, ``--cap-add SYS_PTRACE`` in Docker,
``sudo`` on macOS. If it is not, the command says so and what to do.

Exit codes: 0 done, 1 profiling failed (py-spy missing or not allowed to attach, the profiled
process crashed), 2 bad command-line input, 130 interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from vecenvs import profile as profiling
from vecenvs.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    add_command,
    add_env_options,
    config_option,
    fail,
    machine_turn,
    noting_ctrl_c,
    positive_int,
    say,
    start_method_option,
    telling_slow_checks,
)
from vecenvs.factory import BACKEND_INFO, BACKENDS

__all__ = ["add_parser"]

QUICK_SECONDS = 2

#: The backends whose worker processes ``--start-method`` starts.
_STARTING_BACKENDS = [name for name, info in BACKEND_INFO.items() if info.start_method_kwarg]

_FILES_HELP = """\
files in {directory}:
  {svg:<22}  the flame graph, coloured by category: open it in a web browser
  {speedscope:<22}  py-spy's recording (every thread): drag it into https://www.speedscope.app
  {collapsed:<22}  collapsed stacks of the table's samples: speedscope, flamegraph.pl, inferno
  {summary:<22}  the table, the processes and the configuration, as JSON"""

_LEGEND = """\
How to read the table: each process's samples (taken {rate} times a second, busy or idle) split
by what the process was doing, so each line adds up to 100% of that process's time.
  env compute     inside an env's step/reset and its wrappers: the useful work
  serialization   pickling messages and unpickling them
  pipe & shm I/O  writing to and reading from pipes, reading and writing shared memory
  waiting         blocked until another process acts (the parent waiting for answers, a
                  worker waiting for its next command)
  bookkeeping     the vector env's own work: checking actions, batching, merging infos
  other           everything else (the loop driving the env)"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "profile",
        __doc__,
        _run_profile,
        help="run one configuration under py-spy and show where each process spends its time",
        description="Run one backend on one env under py-spy, with its worker processes and "
        "their idle time, and show for the parent and each worker the share of time spent in "
        "env code, pickling, pipe and shared-memory I/O, waiting and bookkeeping. Writes a "
        "flame graph (SVG), py-spy's speedscope file and collapsed stacks.",
    )
    config = profiling.ProfileConfig
    add_env_options(parser, config)
    config_option(
        parser, config, "backend", choices=list(BACKENDS), also=f", one of {', '.join(BACKENDS)}"
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        metavar="K",
        help="worker processes of the pool backend (default: the pool's own choice)",
    )
    # None: not given, so that --quick can choose.
    config_option(
        parser, config, "seconds", default=None, shown=f"{config.seconds}, --quick: {QUICK_SECONDS}"
    )
    config_option(parser, config, "rate")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"sample for {QUICK_SECONDS} s: a first look (an explicit --seconds still wins)",
    )
    config_option(parser, config, "output_dir", shown="profiles/<date>-<time>-<backend>-<env>-N<n>")
    config_option(parser, config, "seed")
    config_option(parser, config, "nonblocking")
    start_method_option(parser, ", ".join(_STARTING_BACKENDS))
    config_option(parser, config, "check_timeout")


def _run_profile(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    backend_kwargs: dict[str, Any] = {}
    if args.workers is not None and args.backend == "pool":
        backend_kwargs["num_workers"] = args.workers
    keyword = BACKEND_INFO[args.backend].start_method_kwarg
    if args.start_method is not None and keyword is not None:
        backend_kwargs[keyword] = args.start_method
    config = profiling.ProfileConfig(
        env_id=args.env_id,
        num_envs=args.num_envs,
        backend=args.backend,
        backend_kwargs=backend_kwargs,
        env_kwargs=dict(args.env_kwargs),
        seconds=args.seconds or (QUICK_SECONDS if args.quick else profiling.ProfileConfig.seconds),
        rate=args.rate,
        seed=args.seed,
        nonblocking=args.nonblocking,
        check_timeout=args.check_timeout,
    )
    config.output_dir = (
        args.output_dir if args.output_dir is not None else profiling.default_output_dir(config)
    )
    try:
        with telling_slow_checks(parser):
            profiling.validate_profile(config)
    except ValueError as error:
        return fail(parser, error, code=EXIT_BAD_INPUT)
    if args.workers is not None and args.backend != "pool":
        say(
            f"{parser.prog}: note: --workers only applies to the pool backend, not to "
            f"{args.backend}"
        )
    if args.start_method is not None and keyword is None:
        say(
            f"{parser.prog}: note: --start-method only applies to backends that start worker "
            f"processes ({', '.join(_STARTING_BACKENDS)}), not to {args.backend}"
        )

    say(
        f"profiling {config.backend} stepping {config.num_envs} x {config.env_id}: "
        f"py-spy samples for {config.seconds} s (plus start-up)..."
    )
    pressed = lambda: False  # noqa: E731 - until the block below says otherwise
    try:
        with noting_ctrl_c() as pressed, machine_turn(parser):
            result = profiling.profile(config)
    except KeyboardInterrupt:
        return _interrupted(parser, config)
    except Exception as error:
        if pressed():  # Ctrl-C reached py-spy or the profiled process first
            return _interrupted(parser, config)
        if isinstance(error, profiling.ProfilerError):  # py-spy missing or not allowed, ...
            return fail(parser, error, code=EXIT_FAILED)
        raise

    print(
        f"{config.backend} stepping {config.num_envs} x {config.env_id}: share of each "
        "process's time"
    )
    print(result.breakdown.format_table())
    if result.steps_per_second is not None:
        print(
            f"\nunder the profiler: {result.steps_per_second:,.0f} env steps/s (py-spy slows "
            "the processes down; `vecenvs bench` measures speed)"
        )
    excluded = result.breakdown.excluded
    if excluded:
        names = sorted(
            {
                item.thread if item.reason == "not the main thread" else item.process
                for item in excluded
            }
        )
        print(
            f"not in the table: {len(excluded)} other thread(s) or helper process(es) "
            f"({', '.join(names)}); they are in the speedscope file"
        )
    print(f"\n{_LEGEND.format(rate=config.rate)}\n")
    print(
        _FILES_HELP.format(
            directory=result.svg_path.parent,
            svg=result.svg_path.name,
            speedscope=result.speedscope_path.name,
            collapsed=result.collapsed_path.name,
            summary=result.summary_path.name,
        )
    )
    return EXIT_OK


def _interrupted(parser: argparse.ArgumentParser, config: profiling.ProfileConfig) -> int:
    """Say that Ctrl-C stopped the profile, and where py-spy's recording so far is."""
    recording = Path(str(config.output_dir)) / "speedscope.json"
    kept = (
        f"; py-spy's recording so far is in {recording}, for https://www.speedscope.app"
        if _has_samples(recording)
        else ""
    )
    say(f"{parser.prog}: interrupted (every process it started has been stopped{kept})")
    return EXIT_INTERRUPTED


def _has_samples(path: Path) -> bool:
    """Whether py-spy's speedscope file at ``path`` holds any sample (stopped at once, it is
    written with none)."""
    try:
        profiles = json.loads(path.read_text(encoding="utf-8")).get("profiles") or []
    except (OSError, ValueError, AttributeError):
        return False
    return any(isinstance(p, dict) and p.get("samples") for p in profiles)
