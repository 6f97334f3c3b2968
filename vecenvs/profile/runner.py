"""Profile one configuration with py-spy: every process, with idle time, labelled.

:func:`profile` checks everything before any process starts, starts
:mod:`vecenvs.profile.target` in a session of its own (so it and every process it starts can
be stopped together) and records once with ``py-spy record --pid P --subprocesses --idle
--format speedscope``: ``--subprocesses`` follows the workers, ``--idle`` keeps the samples
where a process sleeps (waiting for a pipe is exactly what we want to see). Whatever happens
(an error, Ctrl-C), neither py-spy, the target nor any worker is left running.

py-spy pauses each process while it reads its stack (its default, "blocking" mode): the
processes slow down a little, but every stack is consistent; with ``nonblocking`` they run
on and a few stacks come out torn (a handful per 5 s recording).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

import vecenvs
from vecenvs.bench import BenchConfig
from vecenvs.bench import validate_config as validate_bench_config
from vecenvs.bench.engine import cli_option
from vecenvs.bench.sweep import CHECK_TIMEOUT_OPTION
from vecenvs.checks import check_seconds, check_whole_number
from vecenvs.envspec import CHECK_SECONDS, check_env
from vecenvs.factory import check_backend_available
from vecenvs.profile.breakdown import Breakdown, breakdown, is_counted
from vecenvs.profile.flamegraph import write_flamegraph
from vecenvs.profile.pyspy import (
    ProfilerError,
    PySpyPermissionError,
    find_py_spy,
    is_permission_failure,
    permission_message,
)
from vecenvs.profile.stacks import StackSample, read_speedscope, write_collapsed

__all__ = [
    "Profile",
    "ProfileConfig",
    "check_output_dir",
    "default_output_dir",
    "profile",
    "validate_profile",
]

logger = logging.getLogger(__name__)

#: Extra time py-spy may take beyond the sampling itself: attaching to every worker, writing.
PY_SPY_GRACE_SECONDS = 30.0
#: How long the target may take to close its vector env and exit once told to stop.
STOP_SECONDS = 30.0
#: How long the target's leftover processes get to exit on their own before being killed.
LEFTOVER_SECONDS = 5.0
#: How long py-spy gets to write what it recorded when Ctrl-C stops it.
STOP_RECORDING_SECONDS = 5.0
#: The signal that cannot be ignored (None where there is none, as on Windows).
_SIGKILL = getattr(signal, "SIGKILL", None)

#: Called with a message and the fraction of the work done (0 to 1). Raise from it to cancel:
#: everything started so far is stopped.
ProgressCallback = Callable[[str, float], None]

#: The files of a profile, in its output directory: name (as in ``Profile.<name>_path``) -> file.
_FILES = {
    "speedscope": "speedscope.json",
    "svg": "flamegraph.svg",
    "collapsed": "stacks.collapsed.txt",
    "summary": "summary.json",
}

#: BenchConfig's command-line options, by field name, for the fields the two configs share.
_BENCH_OPTIONS = {option.name: option.metadata for option in dataclasses.fields(BenchConfig)}


@dataclass
class ProfileConfig:
    """What to profile and how: one backend, one env id, one number of envs.

    Each field's ``metadata`` is its command-line option; the env, N and the seed are given
    as in ``vecenvs bench``. The kwargs must be Python literals: they are passed on the
    profiled process's command line.
    """

    #: The env as :mod:`vecenvs.envspec` reads it: ``"CartPole-v1"``, ``"mycart:MyCart-v0"``,
    #: ``"mycart.env:MyCartEnv"`` (not a function: the profiled process makes it by name).
    env_id: str = field(default="CartPole-v1", metadata=_BENCH_OPTIONS["env_id"])
    num_envs: int = field(default=8, metadata=_BENCH_OPTIONS["num_envs"])
    #: A name from :data:`vecenvs.factory.BACKENDS`, e.g. ``"pool"`` or ``"gym-async"``.
    backend: str = field(default="subproc", metadata=cli_option("backend to profile", "NAME"))
    #: Extra arguments for the backend, e.g. ``{"num_workers": 2}``.
    backend_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Extra arguments for ``gym.make``, e.g. ``{"step_seconds": 1e-3}``.
    env_kwargs: dict[str, Any] = field(default_factory=dict, metadata=_BENCH_OPTIONS["env_kwargs"])
    #: How long py-spy samples, in whole seconds (py-spy's ``--duration`` takes no fractions).
    seconds: int = field(
        default=5,
        metadata=cli_option("how long py-spy samples, whole seconds", "S", "positive_int"),
    )
    #: Samples per second and per thread (py-spy's ``--rate``), 1 to 1000.
    rate: int = field(
        default=100,
        metadata=cli_option("samples per second, 1 to 1000", "R", "samples_per_second"),
    )
    seed: int = field(default=0, metadata=_BENCH_OPTIONS["seed"])
    #: Where the files go; created if needed. ``None``: :func:`default_output_dir`.
    output_dir: str | os.PathLike[str] | None = field(
        default=None,
        metadata=cli_option("directory for the files", "DIR", flag="--out"),
    )
    #: Stepping before py-spy starts, so the profile does not show start-up work.
    warmup_seconds: float = 0.5
    #: How long building the vector env, resetting it and warming up may take.
    start_timeout: float = 120.0
    #: Keep the samples of threads that are idle, blocked in the kernel (py-spy's ``--idle``).
    #: The lab always does: for a vector env, waiting is the story. ``False`` records what a
    #: default py-spy run shows, to compare with (notebook 5).
    idle: bool = True
    #: Sample without pausing the processes (py-spy's ``--nonblocking``).
    nonblocking: bool = field(
        default=False,
        metadata=cli_option(
            "let py-spy sample without pausing the processes: less disturbance, a few torn stacks",
            action="store_true",
        ),
    )
    #: How long the check of the env (made, reset, stepped once before anything starts) may
    #: take: an env that is slow to build needs more than the default.
    check_timeout: float = field(default=CHECK_SECONDS, metadata=CHECK_TIMEOUT_OPTION)


@dataclass
class Profile:
    """What :func:`profile` produced: the files, the breakdown, and how they were made."""

    config: ProfileConfig
    breakdown: Breakdown
    #: pid -> ``"parent"``, ``"worker 0"``, ... for the processes of the profiled run.
    processes: dict[int, str]
    #: py-spy's own recording (every thread), for https://www.speedscope.app.
    speedscope_path: Path
    svg_path: Path
    #: The counted samples as collapsed stacks (speedscope, flamegraph.pl, inferno read it).
    collapsed_path: Path
    #: This object as JSON (:meth:`to_dict`), for the dashboard and for later comparison.
    summary_path: Path
    py_spy_command: list[str]
    #: Env steps per second of the profiled loop, slowed by py-spy (so lower than the
    #: benchmark's); ``None`` if the target did not say.
    steps_per_second: float | None
    #: Every sample py-spy recorded (all threads), labelled by process.
    samples: list[StackSample] = field(repr=False, default_factory=list)

    @property
    def counted_samples(self) -> int:
        """How many samples the breakdown and the flame graph are made of."""
        return self.breakdown.samples()

    @property
    def total_samples(self) -> int:
        """How many samples py-spy recorded, every thread and helper process included."""
        return sum(sample.count for sample in self.samples)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the samples, as JSON-ready values."""
        return {
            "config": {
                key: (str(value) if isinstance(value, os.PathLike) else value)
                for key, value in dataclasses.asdict(self.config).items()
            },
            "processes": {str(pid): label for pid, label in self.processes.items()},
            "files": {name: str(getattr(self, f"{name}_path")) for name in _FILES},
            "py_spy_command": self.py_spy_command,
            "steps_per_second": self.steps_per_second,
            "counted_samples": self.counted_samples,
            "total_samples": self.total_samples,
            "breakdown": self.breakdown.to_dict(),
        }


def validate_profile(config: ProfileConfig) -> None:
    """Check a configuration before anything starts; raise ValueError naming the bad value.

    The env is made once here (and closed), as the benchmark's sweep does, so that a misspelt
    env argument fails with the env's own one-line complaint, not a crash report from inside
    the profiled process.
    """
    if not isinstance(config.env_id, str):
        raise ValueError(
            f"env_id {config.env_id!r:.60} is not a name: the profiled process is started with "
            "its name on its command line; give an id, 'module:EnvId' or 'package.module:Class'"
        )
    # The env, backend, N and seed are checked exactly as the benchmark checks them.
    shared = ("env_id", "num_envs", "backend", "backend_kwargs", "env_kwargs", "seed")
    validate_bench_config(BenchConfig(**{name: getattr(config, name) for name in shared}))
    check_backend_available(config.backend)  # a peer whose library is missing: say what to install
    # A whole number is kept as a plain int: it goes into JSON.
    config.seconds = check_whole_number("seconds", config.seconds)  # py-spy: whole seconds
    config.rate = check_whole_number("rate", config.rate, 1, 1000)
    check_seconds("warmup_seconds", config.warmup_seconds, zero_ok=True)
    check_seconds("start_timeout", config.start_timeout)
    check_seconds("check_timeout", config.check_timeout)
    for name in ("env_kwargs", "backend_kwargs"):
        for key, value in getattr(config, name).items():
            if not isinstance(key, str) or not key.isidentifier():
                raise ValueError(f"{name} key {key!r}: expected a Python name")
            if not _is_literal(value):
                raise ValueError(
                    f"{name}[{key!r}] = {value!r:.60} cannot be passed to the profiled process: "
                    "expected a Python literal (a number, string, bool, None, or a list, tuple "
                    "or dict of them)"
                )
    # Made, reset, stepped and checked once here: an env that fails says why in one line.
    check_env(config.env_id, config.env_kwargs, timeout=config.check_timeout)
    if config.output_dir is not None:
        if not isinstance(config.output_dir, (str, os.PathLike)):
            raise ValueError(f"output_dir must be a path, got {config.output_dir!r}")
        check_output_dir(config.output_dir)


def _is_literal(value: Any) -> bool:
    """Whether ``value`` survives ``repr`` -> ``ast.literal_eval`` (how it reaches the target)."""
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def check_output_dir(path: str | os.PathLike[str]) -> None:
    """Raise ValueError unless ``path`` is a writable directory or can be created as one."""
    existing = Path(path)
    while not existing.exists():  # the directory itself, or the nearest ancestor that exists
        existing = existing.parent
    if not existing.is_dir():
        where = "it exists" if existing == Path(path) else f"{str(existing)!r} exists"
        raise ValueError(f"output directory {str(path)!r}: {where} and is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(
            f"output directory {str(path)!r} is not writable "
            f"({str(existing)!r} does not let us write in it)"
        )


def default_output_dir(config: ProfileConfig, now: datetime.datetime | None = None) -> Path:
    """``profiles/<date>-<time>-<backend>-<env>-N<n>``, relative to the current directory."""
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    env = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.env_id)
    return Path("profiles") / f"{stamp}-{config.backend}-{env}-N{config.num_envs}"


def profile(
    config: ProfileConfig,
    *,
    py_spy: str | os.PathLike[str] | None = None,
    on_progress: ProgressCallback | None = None,
) -> Profile:
    """Run ``config`` under py-spy and say where each process's time goes.

    The files go to ``config.output_dir``; ``py_spy`` is the executable (default: see
    :func:`find_py_spy`); ``on_progress(message, fraction_done)`` is called along the way:
    raise from it (e.g. ``KeyboardInterrupt``) to cancel.

    Raises:
        ValueError: a bad configuration; nothing was started.
        PySpyNotFoundError: py-spy is not installed; nothing was started.
        PySpyPermissionError: py-spy may not attach to processes here (see the message).
        ProfilerError: the profiled process failed (e.g. the env crashed) or py-spy did.
    """
    validate_profile(config)
    executable = find_py_spy(py_spy)
    report = on_progress or (lambda message, fraction: None)
    output_dir = Path(
        config.output_dir if config.output_dir is not None else default_output_dir(config)
    )
    check_output_dir(output_dir)
    created = not output_dir.exists()
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _profile(config, executable, output_dir, report)
    except BaseException:
        if created and not any(output_dir.iterdir()):
            output_dir.rmdir()  # a failed run leaves no empty directory behind
        raise


def _profile(
    config: ProfileConfig, executable: str, output_dir: Path, report: ProgressCallback
) -> Profile:
    paths = {f"{name}_path": output_dir / file_name for name, file_name in _FILES.items()}
    with _Target(config) as target:
        what = f"{config.backend} with {config.num_envs} x {config.env_id}"
        report(f"starting {what} (build, reset, warm-up)", 0.0)
        processes = target.wait_ready()
        command = [executable, "record", "--pid", str(target.pid), "--subprocesses"]
        command += ["--idle"] if config.idle else []
        command += ["--format", "speedscope", "--rate", str(config.rate)]
        command += ["--duration", str(config.seconds), "--output", str(paths["speedscope_path"])]
        command += ["--nonblocking"] if config.nonblocking else []
        _record(command, config.seconds, target, report)
        report("stopping the profiled processes", 0.9)
        steps_per_second = target.stop()

    report("classifying the samples, writing the flame graph", 0.95)
    samples = read_speedscope(paths["speedscope_path"], processes)
    counted = [sample for sample in samples if is_counted(sample)]
    if not counted:
        raise ProfilerError(
            "py-spy recorded no samples of the parent or its workers "
            f"(see {paths['speedscope_path']})"
        )
    result = Profile(
        config=config,
        breakdown=breakdown(samples),  # (it leaves out, and lists, what is not counted)
        processes=processes,
        py_spy_command=command,
        steps_per_second=steps_per_second,
        samples=samples,
        **paths,
    )
    result.collapsed_path.write_text(write_collapsed(counted), encoding="utf-8")
    workers = len(result.breakdown.workers)
    write_flamegraph(
        counted,
        result.svg_path,
        title=f"{config.backend} stepping {config.num_envs} x {config.env_id}",
        subtitle=(
            f"py-spy, {config.rate} samples/s for {config.seconds} s, "
            f"idle {'included' if config.idle else 'left out'}; "
            f"main threads of the parent and {workers} worker{'s' * (workers != 1)}; "
            f"{result.counted_samples} samples; colour = what most samples of a box "
            "were doing"
        ),
    )
    summary = json.dumps(result.to_dict(), indent=2) + "\n"
    result.summary_path.write_text(summary, encoding="utf-8")
    report("done", 1.0)
    return result


def _record(command: list[str], seconds: int, target: _Target, report: ProgressCallback) -> None:
    """Run py-spy record, reporting progress; raise a clear error if it fails."""
    pipe = subprocess.PIPE
    spy = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe, text=True, errors="replace"
    )
    start, limit = time.perf_counter(), seconds + PY_SPY_GRACE_SECONDS
    try:
        while True:
            try:
                output, errors = spy.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.perf_counter() - start
                if elapsed > limit:
                    raise ProfilerError(
                        f"py-spy did not finish within {limit:.0f} s "
                        f"(sampling {seconds} s): {' '.join(command)}"
                    ) from None
                report(
                    f"sampling with py-spy ({int(min(elapsed, seconds))} of {seconds} s)",
                    0.1 + 0.8 * min(elapsed / seconds, 1.0),
                )
    except KeyboardInterrupt:
        _stop_recording(spy)  # what py-spy recorded so far is kept: its file is written
        raise
    finally:
        if spy.poll() is None:  # interrupted or too slow: py-spy must not outlive us
            spy.kill()
            spy.wait()
    if spy.returncode != 0:
        said = (errors or "").strip() or (output or "").strip() or "(no output)"
        if is_permission_failure(said):
            raise PySpyPermissionError(permission_message(said, target.pid))
        target.raise_if_dead("while py-spy was recording")
        raise ProfilerError(f"py-spy failed with exit code {spy.returncode}: {said}")
    output_path = Path(command[command.index("--output") + 1])
    if not output_path.is_file():
        raise ProfilerError(f"py-spy exited without writing {output_path}: {output.strip()}")


def _stop_recording(spy: subprocess.Popen) -> None:
    """Ctrl-C while py-spy records: it stops on SIGINT and writes what it recorded so far
    (Ctrl-C in a terminal reached it already; sent here otherwise), given a few seconds."""
    try:
        spy.wait(0.5)
    except subprocess.TimeoutExpired:
        spy.send_signal(signal.SIGINT)
    try:
        spy.wait(STOP_RECORDING_SECONDS)
    except subprocess.TimeoutExpired:
        pass  # killed by the caller


class _Target:
    """The profiled process (``python -m vecenvs.profile.target``), started at once, and
    everything it starts. Leaving its ``with`` block, however it is left, stops them all."""

    def __init__(self, config: ProfileConfig):
        self.config = config
        backend_kwargs = dict(config.backend_kwargs)
        workers = backend_kwargs.pop("num_workers", None)
        # --max-seconds is a safety net: it stops by itself if nobody stops it (we died, say).
        max_seconds = config.seconds + PY_SPY_GRACE_SECONDS + STOP_SECONDS
        command = [sys.executable, "-m", "vecenvs.profile.target", "--env", config.env_id]
        command += ["--num-envs", str(config.num_envs), "--backend", config.backend]
        command += ["--seed", str(config.seed), "--warmup", repr(float(config.warmup_seconds))]
        command += ["--max-seconds", repr(max_seconds)]
        command += ["--workers", str(workers)] if workers is not None else []
        command += [f"--env-kwarg={key}={value!r}" for key, value in config.env_kwargs.items()]
        command += [f"--backend-kwarg={key}={value!r}" for key, value in backend_kwargs.items()]
        # The target must import this very vecenvs, even from a checkout that is not installed.
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(vecenvs.__file__)))
        python_path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
        # Errors go to a file, not a pipe: a pipe nobody reads fills up and blocks the writer.
        # (Closed by __exit__.)
        self.stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env={**os.environ, "PYTHONPATH": python_path},
            # A session of its own: the target and all its workers form one process group,
            # which can be stopped as a whole, and a Ctrl-C in our terminal reaches only us.
            start_new_session=hasattr(os, "killpg"),
        )
        self.pid = self.process.pid
        self.lines: queue.Queue[str | None] = queue.Queue()  # its stdout; None at the end
        self.tracked: list[psutil.Process] = []  # the target and its workers and helpers
        try:
            self.tracked.append(psutil.Process(self.pid))
            threading.Thread(
                target=self._read_lines, name="vecenvs-profile-target-stdout", daemon=True
            ).start()
        except BaseException as error:  # no `with` block yet to stop the target: stop it here
            self.__exit__(type(error))
            raise

    def __enter__(self) -> _Target:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        try:
            if self.process.poll() is None:
                if exc_type is None:
                    self._ask_to_stop()
                # Something failed, or Ctrl-C: don't wait for a build or a step to finish.
                self._wait_exit(STOP_SECONDS if exc_type is None else 0.0)
            # Give its workers a moment to end, then kill the rest.
            deadline = time.perf_counter() + LEFTOVER_SECONDS
            while time.perf_counter() < deadline and any(map(_alive, self.tracked)):
                time.sleep(0.05)
            for process in filter(_alive, self.tracked):
                with contextlib.suppress(psutil.Error):
                    process.kill()  # psutil checks the pid was not reused meanwhile
            # And anything else left in its session (a helper we never saw): all of it was
            # started by the target, nothing else is in that group.
            self._signal_group(_SIGKILL)
        finally:
            self.stderr.close()

    def _read_lines(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _next_message(self, deadline: float, key: str) -> dict[str, Any] | None:
        """The next JSON line with ``key`` (other lines are an env's own prints: skipped);
        None if the target's stdout ended. Raises ProfilerError at the deadline."""
        while (remaining := deadline - time.perf_counter()) > 0:
            try:
                line = self.lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line is None:
                return None
            with contextlib.suppress(json.JSONDecodeError):
                message = json.loads(line)
                if isinstance(message, dict) and key in message:
                    return message
        raise ProfilerError(f"the profiled process did not answer in time ({key!r})")

    def wait_ready(self) -> dict[int, str]:
        """Wait for the ready line; return pid -> label of the run's processes."""
        config = self.config
        try:
            message = self._next_message(
                time.perf_counter() + config.start_timeout + config.warmup_seconds, "ready"
            )
        except ProfilerError:
            raise ProfilerError(
                f"the profiled process was not ready after {config.start_timeout:g} s "
                "(building the vector env, resetting it and warming up): raise start_timeout "
                "for a slow env or a large N"
            ) from None
        if message is None:
            self._wait_exit(5.0)
            self.raise_if_dead("before it was ready")
            raise ProfilerError("the profiled process closed its output before it was ready")
        if not message["ready"]:
            raise ProfilerError(
                f"building {config.backend} with {config.num_envs} x {config.env_id} failed: "
                f"{message.get('error')}"
            )
        processes = {int(pid): label for pid, label in message["processes"].items()}
        for pid in processes.keys() - {self.pid}:
            with contextlib.suppress(psutil.NoSuchProcess):
                self.tracked.append(psutil.Process(pid))
        return processes

    def stop(self) -> float | None:
        """Ask the target to stop and wait for it; return its steps/s if it said.

        Raises ProfilerError if the target crashed while it was being profiled (an env raised,
        say): the samples would show a run that did not go as asked.
        """
        self._ask_to_stop()
        message = None
        try:
            message = self._next_message(time.perf_counter() + STOP_SECONDS, "done")
        except ProfilerError:
            logger.warning(
                "the profiled process did not stop within %g s: killing it", STOP_SECONDS
            )
        self._wait_exit(5.0)
        if message is None:
            self.raise_if_dead("while it was being profiled")
            return None
        return message.get("steps_per_second")

    def raise_if_dead(self, when: str) -> None:
        """Raise ProfilerError, with the end of the target's error output, if it has exited
        on its own (killed by us for being slow to stop does not count: its samples are fine)."""
        if self.process.poll() is None or self.process.returncode < 0:
            return
        self.stderr.flush()
        self.stderr.seek(0)
        lines = self.stderr.read().strip().splitlines()[-15:]
        tail = ". Its error output ends with:\n" + "\n".join(lines) if lines else ""
        raise ProfilerError(
            f"the profiled process exited with code {self.process.returncode} {when}{tail}"
        )

    def _ask_to_stop(self) -> None:
        """Close the target's stdin: its signal to close the vector env and exit."""
        with contextlib.suppress(OSError, ValueError):  # already gone, or already closed
            assert self.process.stdin is not None
            self.process.stdin.write("stop\n")
            self.process.stdin.close()

    def _wait_exit(self, seconds: float) -> None:
        """Wait for the target to exit; after ``seconds``, stop its whole process group."""
        for signal_number, wait in ((None, seconds), (signal.SIGTERM, 3.0), (_SIGKILL, 3.0)):
            self._signal_group(signal_number)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=wait)
                return

    def _signal_group(self, signal_number: int | None) -> None:
        """Send ``signal_number`` to the target's whole session (None: nothing)."""
        if signal_number is None:
            return
        if hasattr(os, "killpg"):
            with contextlib.suppress(ProcessLookupError, PermissionError):  # an empty group
                os.killpg(self.process.pid, signal_number)
        elif self.process.poll() is None:
            self.process.kill()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
