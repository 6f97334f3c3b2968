"""``python -m vecenvs autotune``: measure the ways of stepping N envs here and say which is fastest.

It runs :func:`vecenvs.autotune.autotune` (the loop, the pool at several worker counts, with and
without shared memory, the async pool, and one process per env while N is small), within a time
budget that is a real deadline, prints the table with the winner first, and saves the run in
the results store, and ends with what to use: the backend and K, and the lines to paste
(``make_vec(...)``, and for Stable-Baselines3 the ``to_sb3`` wrapper). ``--env`` takes your own
env as gymnasium names it: ``mymodule:MyEnv-v0`` (the module imported first) or an entry point
``mypkg.envs:MyEnv`` with ``--env-kwarg`` s. Examples::

    python -m vecenvs autotune --env CartPole-v1 --num-envs 128 --budget 20
    python -m vecenvs autotune --env vecenvs/Costly-v0 --env-kwarg step_seconds=1e-3 --num-envs 16
    python -m vecenvs autotune --env mycart:MyCart-v0 --env-kwarg physics_steps=1000
    python -m vecenvs autotune --num-envs 4 --budget 5 --no-store --json autotune.json
    python -m vecenvs autotune --env mycart:MyCart-v0 --start-method spawn --check-timeout 120

Exit codes: 0 done, 1 a backend failed while being measured, 2 bad command-line input,
130 interrupted with Ctrl-C (what was measured by then is kept in the store and ``--json``).
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

from vecenvs.autotune import AutotuneProgress, AutotuneResult, autotune
from vecenvs.bench import BenchConfig, Measurement, SweepConfig
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
    positive_float,
    saved_as,
    say,
    start_method_option,
    telling_slow_checks,
    write_json,
)
from vecenvs.cpus import available_cpus
from vecenvs.envspec import describe_env

__all__ = ["add_parser"]


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "autotune",
        __doc__,
        _run_autotune,
        help="find the fastest way to step N envs on this machine, within a time budget",
        description="Measure the sequential loop, the pool (several worker counts, with and "
        "without shared memory), the async pool and one process per env, for one env and one "
        "N, within a time budget, and print them fastest first.",
    )
    add_env_options(parser, BenchConfig, num_envs=16)
    parser.add_argument(
        "--budget",
        type=positive_float,
        default=inspect.signature(autotune).parameters["budget_seconds"].default,
        metavar="S",
        help="seconds the whole search may take, process startup included (default: %(default)g)",
    )
    config_option(parser, BenchConfig, "seed")
    start_method_option(parser, "the pool, the async pool and subproc")
    config_option(parser, SweepConfig, "check_timeout")
    add_output_options(parser, "also write the result (table and measurements) as JSON")


def _run_autotune(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    env_kwargs: dict[str, Any] = {}
    for key, value in args.env_kwargs:
        if key in env_kwargs and env_kwargs[key] != value:
            return fail(
                parser,
                f"--env-kwarg {key} given twice ({env_kwargs[key]!r} and {value!r}); "
                "autotune measures one env: give each key once",
                code=EXIT_BAD_INPUT,
            )
        env_kwargs[key] = value
    try:
        store = open_outputs(args, "json")
    except ValueError as error:
        return fail(parser, error, code=EXIT_BAD_INPUT)

    measured: list[Measurement] = []

    def show(progress: AutotuneProgress) -> None:
        measurement = progress.measurement
        measured.append(measurement)
        say(
            f"  [{progress.done}/{progress.total}] {measurement.config.backend_label}: "
            f"{measurement.median:,.0f} steps/s"
        )

    def keep(how: str) -> list[str] | None:
        """Stopped early: the candidates measured so far are in the store; they, and the best
        of them, go to --json."""
        if not measured:
            return None
        places = [] if store is None else [str(store.path)]
        if not args.json:
            return places
        partial = AutotuneResult(
            measured[0].config.env_label,
            args.num_envs,
            available_cpus(),
            args.budget,
            measurements=measured,
            cancelled=True,
            env=describe_env(args.env_id).to_dict(),
            env_kwargs=env_kwargs,
        )
        write_json(args.json, {**partial.to_dict(), "stopped": how})
        return [*places, args.json]

    with (
        measuring(parser, store, bad_input=(ValueError,), keep=keep) as interrupted,
        telling_slow_checks(parser),
    ):
        result = autotune(
            args.env_id,
            args.num_envs,
            args.budget,
            env_kwargs=env_kwargs,
            seed=args.seed,
            on_result=show,
            store=store,
            label=args.label,
            start_method=args.start_method,
            check_timeout=args.check_timeout,
            cancel=interrupted,
        )

    print(result.format_table())
    print()
    print(result.format_recommendation())
    if args.json:
        write_json(args.json, result.to_dict())
        print(f"\nwrote the result to {args.json}")
    saved_as(result.run_id, args)
    return EXIT_OK
