"""Pieces every ``python -m vecenvs`` command shares: its parser, the options built from the
config dataclasses (:func:`config_option`, so the command line can't drift from the configs),
argument types, error reporting and output. Every command checks all of its input before doing
any work and reports a bad value as one line, with exit code 2 (argparse's convention).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import shutil
import signal
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

#: Exit codes shared by every command.
EXIT_OK = 0
EXIT_FAILED = 1  # the work itself failed (a backend crashed, py-spy could not attach, ...)
EXIT_BAD_INPUT = 2  # bad command-line input: nothing was run
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report it


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line (argparse adds the usage on top)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def add_command(
    commands: argparse._SubParsersAction,
    name: str,
    doc: str,
    run: Callable[[argparse.Namespace, argparse.ArgumentParser], int] | None,
    *,
    help: str,
    description: str,
) -> argparse.ArgumentParser:
    """Add command ``name``, run by ``run(args, parser)`` (None: its actions are), whose
    ``--help`` ends with the examples of its module docstring ``doc`` (the block after its
    first ``::``)."""
    examples = doc.split("::", 1)[1].strip("\n").split("\n\n")[0] if "::" in doc else ""
    width = shutil.get_terminal_size().columns - 2  # as argparse wraps its own text
    parser = commands.add_parser(
        name,
        help=help,
        description="\n\n".join(
            textwrap.fill(
                " ".join(paragraph.split()), width, break_on_hyphens=False, break_long_words=False
            )
            for paragraph in description.split("\n\n")
        ),
        epilog=examples and "examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run, parser=parser)
    return parser


def config_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    config: type,
    name: str,
    *,
    also: str = "",
    shown: object = None,
    **kwargs: Any,
) -> None:
    """Add the option that sets field ``name`` of the dataclass ``config``.

    Flag (default ``--name-with-dashes``), metavar, help and type come from the field's
    ``metadata``, the default from the field; the value is ``args.<name>``. ``kwargs``
    override them (``action="append"``, ``default=None``: "not given"); ``also`` is added to
    the help, before ``(default: ...)``, which names ``shown`` or else the default
    (``shown=""``: no default to name).
    """
    [field] = [field for field in dataclasses.fields(config) if field.name == name]
    options = {"default": field.default, **field.metadata, **kwargs}
    flag = options.pop("flag", "--" + name.replace("_", "-"))
    if isinstance(options.get("type"), str):
        options["type"] = ARGUMENT_TYPES[options["type"]]
    if options.get("action") not in ("store_true", "store_false") and shown != "":
        if shown is None:
            shown = field.default if options["default"] is None else options["default"]
        also += f" (default: {f'{shown:g}' if isinstance(shown, float) else shown})"
    parser.add_argument(flag, dest=name, help=options.pop("help") + also, **options)


def add_env_options(
    parser: argparse.ArgumentParser,
    config: type,
    *,
    grid: dict[str, Sequence[Any]] | None = None,
    kwarg_help: str = "; repeat for several",
    num_envs: int | None = None,
) -> None:
    """``--env``, ``--num-envs`` and ``--env-kwarg``. With ``grid`` (bench's sweep) the first
    two may be repeated, defaulting to its values; ``num_envs`` is a command's own default N."""
    for name in ("env_id", "num_envs"):
        if grid is not None:
            repeat: dict[str, Any] = {"action": "append", "default": None}
            shown = " and ".join(map(str, grid[name]))
            config_option(parser, config, name, also="; repeat for several", shown=shown, **repeat)
        elif name == "num_envs" and num_envs is not None:
            config_option(parser, config, name, default=num_envs)
        else:
            config_option(parser, config, name)
    config_option(
        parser, config, "env_kwargs", action="append", default=[], also=kwarg_help, shown=""
    )


class Stop(Exception):
    """Ends a command early: :func:`vecenvs.cli.main` prints ``vecenvs <command>: <message>``
    and returns ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@contextlib.contextmanager
def measuring(
    parser: argparse.ArgumentParser,
    store: Any,
    *,
    bad_input: tuple[type[Exception], ...] = (),
    keep: Callable[[str], list[str] | None] | None = None,
) -> Iterator[Callable[[], bool]]:
    """Measure in this machine's turn (see :func:`machine_turn`), then close ``store``.

    Ctrl-C and a failure stop the command (exit codes 130 and 1; ``bad_input`` exceptions: 2).
    Ctrl-C is "interrupted" however it lands: in a terminal it reaches every process of the
    command, and a library's worker may die of it first, so that the error this process sees
    is a broken pipe; one pressed while measuring makes any error an interruption. ``keep``
    (told ``"interrupted"`` or ``"failed"``) saves what was measured so far and returns where
    it is (the store, files it wrote), or None when nothing was measured yet: the message says
    which. It gives the block a function saying whether Ctrl-C was pressed, to pass as the
    measuring's ``cancel``: an interrupt that lands while a process forks is swallowed there
    (Python ignores exceptions in its at-fork hooks), and would otherwise be lost.
    """

    def saved(how: str) -> str:
        places = None if keep is None else keep(how)
        if places is None:
            return "" if keep is None else " (nothing had been measured yet)"
        return f" (what was measured so far is saved in {' and '.join(places)})" if places else ""

    try:
        with noting_ctrl_c() as pressed, machine_turn(parser):
            yield pressed
            if pressed():  # the measuring stopped early (its cancel said so), not raising
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise Stop(f"interrupted{saved('interrupted')}", EXIT_INTERRUPTED) from None
    except Exception as error:
        if pressed():  # the interrupt, seen as the error it caused first
            raise Stop(f"interrupted{saved('interrupted')}", EXIT_INTERRUPTED) from None
        if isinstance(error, bad_input):  # checked before anything was measured
            raise Stop(f"error: {error}", EXIT_BAD_INPUT) from None
        # A backend crashed or could not be built.
        message = f"error: measuring failed: {type(error).__name__}: {error}"
        raise Stop(message + saved("failed"), EXIT_FAILED) from None
    finally:
        if store is not None:
            store.close()


@contextlib.contextmanager
def noting_ctrl_c() -> Iterator[Callable[[], bool]]:
    """Within the ``with`` block, SIGINT still raises KeyboardInterrupt (or does whatever its
    handler did), and the function given says whether it came. Where this process ignores
    SIGINT (started in the background) or is not in its main thread, nothing changes."""
    pressed = False
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield lambda: False
        return

    def handler(signum: int, frame: Any) -> None:
        nonlocal pressed
        pressed = True
        previous(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: pressed
    finally:
        signal.signal(signal.SIGINT, previous)


#: A check of an env taking longer than this (in one phase) says so on stderr.
SLOW_CHECK_SECONDS = 3.0


@contextlib.contextmanager
def telling_slow_checks(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Within the ``with`` block, a check of an env (:func:`vecenvs.envspec.check_env`) whose
    phase (making it, reset, a step) takes more than ``SLOW_CHECK_SECONDS`` says on stderr,
    once per phase, what it is doing and its time limit: a slow constructor is not a hang."""
    from vecenvs.envspec import CheckProgress, reporting_checks

    said: set[tuple[str, str]] = set()

    def tell(progress: CheckProgress) -> None:
        key = (progress.env, progress.phase)
        if progress.phase_seconds >= SLOW_CHECK_SECONDS and key not in said:
            said.add(key)
            say(f"{parser.prog}: {progress}; --check-timeout sets the limit")

    with reporting_checks(tell):
        yield


def start_method_option(parser: argparse.ArgumentParser, backends: str) -> None:
    """``--start-method``: how worker processes are started, for ``backends`` (in words)."""
    parser.add_argument(
        "--start-method",
        choices=multiprocessing.get_all_start_methods(),
        help=f"how worker processes are started, for {backends} (default: Python's default on "
        "this system; spawn is macOS's, forkserver Python 3.14's on Linux)",
    )


def say(text: str) -> None:
    """Print ``text`` on stderr at once: progress, notes and waits, apart from the results."""
    print(text, file=sys.stderr, flush=True)


def fail(parser: argparse.ArgumentParser, message: object, *, code: int) -> int:
    """Print ``message`` as ``vecenvs <command>: error: ...`` and return ``code``."""
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return code


@contextlib.contextmanager
def machine_turn(parser: argparse.ArgumentParser) -> Iterator[None]:
    """:func:`vecenvs.bench.jobs.machine_turn`, saying on stderr when it waits."""
    from vecenvs.bench.jobs import machine_turn as take_turn

    def waiting(holder: str) -> None:
        say(
            f"{parser.prog}: another benchmark is running on this machine (pid {holder}); "
            "waiting for it to finish (Ctrl-C to stop waiting)"
        )

    with take_turn(waiting):
        yield


def add_output_options(parser: argparse.ArgumentParser, json_help: str) -> argparse._ArgumentGroup:
    """The "output" group: ``--store``, ``--no-store`` and ``--label`` (where a measuring
    command saves its run) and ``--json PATH``, helped by ``json_help``."""
    group = parser.add_argument_group("output")
    group.add_argument(
        "--store",
        metavar="PATH",
        help="SQLite results store to save the run in (default: $VECENVS_STORE, "
        "else ~/.local/share/vecenvs/results.sqlite)",
    )
    group.add_argument("--no-store", action="store_true", help="do not save the run")
    group.add_argument("--label", help="a name for the run in the store")
    group.add_argument("--json", metavar="PATH", help=json_help)
    return group


def open_outputs(args: argparse.Namespace, *options: str) -> Any:
    """Check that the files of ``options`` (e.g. ``"json"``) can be written and open the store
    (None with ``--no-store``), so a bad path fails before any measuring; ValueError naming the
    first problem."""
    from vecenvs.bench.store import ResultsStore, StoreError

    for option in options:
        if getattr(args, option):
            check_writable(getattr(args, option), f"--{option}")
    try:
        return None if args.no_store else ResultsStore(args.store)
    except StoreError as error:
        raise ValueError(str(error)) from None


def write_json(path: str, document: Any) -> None:
    """Write ``document`` to ``path`` as indented JSON (anything else as its ``str``)."""
    with open(path, "w", encoding="utf-8") as file:
        json.dump(document, file, indent=2, default=str)
        file.write("\n")


def saved_as(run_id: int | None, args: argparse.Namespace) -> None:
    """Say which run the results were saved as, and the command that shows it."""
    if run_id is not None:
        store = "" if args.store is None else f" --store {args.store}"
        print(f"\nsaved as run {run_id}: `python -m vecenvs results show {run_id}{store}`")


def check_writable(path: str, option: str) -> None:
    """Fail now, not after the measuring, if ``path`` can't be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{option} {path!r} is a directory; expected a file name")
    if not os.path.isdir(directory):
        raise ValueError(f"{option} {path!r}: directory {directory!r} does not exist")
    if not os.access(directory, os.W_OK):
        raise ValueError(f"{option} {path!r}: directory {directory!r} is not writable")


def unique(values: Sequence[Any]) -> list[Any]:
    """Drop repeats, keep the order: ``--num-envs 8 --num-envs 8`` measures N=8 once."""
    return list(dict.fromkeys(values))


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """argparse type: any finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def env_kwarg(text: str) -> tuple[str, Any]:
    """argparse type for ``--env-kwarg``: ``"step_seconds=1e-3"`` -> ``("step_seconds", 0.001)``."""
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


def samples_per_second(text: str) -> int:
    """argparse type: samples per second, a whole number from 1 to 1000."""
    value = positive_int(text)
    if value > 1000:
        raise argparse.ArgumentTypeError(f"expected at most 1000 samples per second, got {text!r}")
    return value


#: The argparse types a config field's ``metadata`` names: the configs can't import the
#: command line, so they say the type's name and this module supplies it.
ARGUMENT_TYPES: dict[str, Callable[[str], Any]] = {
    "int": int,
    "positive_int": positive_int,
    "positive_float": positive_float,
    "non_negative_float": non_negative_float,
    "env_kwarg": env_kwarg,
    "samples_per_second": samples_per_second,
}
