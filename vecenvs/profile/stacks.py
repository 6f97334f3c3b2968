"""Reading and writing sampled call stacks: py-spy's speedscope file and collapsed-stack text.

py-spy samples every thread of every process ``rate`` times a second and writes each sample
as a call stack. We record once, in speedscope format (py-spy's richest: one profile per
thread, named ``Process 2411 Thread 2411 "MainThread"``, frames with function, file and line),
and turn those same samples into everything else:

- :class:`StackSample`: one distinct stack of one thread of one process, and how many samples
  showed it. This is what the classifier, the breakdown and the flame graph work on.
- :func:`read_speedscope`: speedscope JSON -> stack samples, with each pid replaced by what the
  process is (``"parent"``, ``"worker 0"``, ...).
- :func:`write_collapsed` / :func:`read_collapsed`: Brendan Gregg's collapsed-stack text, one
  line per stack, frames outermost first, separated by ``;``, then the count::

      parent;<module> (vecenvs/profile/target.py:191);main (vecenvs/profile/target.py:178) 12

  speedscope, ``flamegraph.pl`` and ``inferno-flamegraph`` all read it. :func:`read_collapsed`
  also reads py-spy's own ``--format raw`` output, whose first frames are
  ``process 2341:"cmdline"``.

Example:
    >>> frame = Frame("CartPoleEnv.step", "/x/gymnasium/envs/classic_control/cartpole.py", 170)
    >>> sample = StackSample("worker 0", "MainThread", (frame,), count=3, pid=4908)
    >>> write_collapsed([sample])
    'worker 0;CartPoleEnv.step (/x/gymnasium/envs/classic_control/cartpole.py:170) 3\\n'
    >>> read_collapsed(write_collapsed([sample]))[0] == sample._replace(pid=None)
    True
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "MAIN_THREAD",
    "Frame",
    "StackSample",
    "read_collapsed",
    "read_samples",
    "read_speedscope",
    "write_collapsed",
]

#: The name Python gives the thread a process starts with: the one that steps the envs.
MAIN_THREAD = "MainThread"

# `Process 2411 Thread 2411 "MainThread"` (py-spy leaves the quoted name out when it has none).
_PROFILE_NAME = re.compile(r'^Process (\d+) Thread (\d+)(?: "(.*)")?$')
# The frames py-spy adds at the root of a stack for the process and its ancestors.
_PROCESS_FRAME = re.compile(r'^process (\d+):"')
# A frame in collapsed text: `name (file:line)`; the file may itself contain ':' or ' ('.
_FRAME_TEXT = re.compile(r"^(.*) \((.*):(\d+)\)$")
# The first field of our collapsed lines: `worker 0` (main thread) or `worker 0 [thread name]`.
_ROOT_TEXT = re.compile(r"^(.*?) \[(.*)\]$")


class Frame(NamedTuple):
    """One function call in a stack: which function, in which file, at which line."""

    name: str
    """The function, qualified as py-spy shows it: ``"MultiEnv.step_each"``, ``"<module>"``."""

    file: str
    """The source file, as py-spy saw it (an absolute path on the profiled machine)."""

    line: int
    """The line being run in that function when the sample was taken."""

    def text(self) -> str:
        """``"name (file:line)"``: how a frame is written in collapsed-stack text."""
        # ';' separates frames and a trailing ' <count>' ends a line in the collapsed format.
        return f"{self.name} ({self.file}:{self.line})".replace(";", ",")


class StackSample(NamedTuple):
    """One distinct call stack of one thread, and how many samples showed it."""

    process: str
    """What the process is: ``"parent"``, ``"worker 0"``, ``"helper: forkserver"``, ``"pid 42"``."""

    thread: str
    """The thread's name, e.g. ``"MainThread"`` or ``"vecenvs-orphan-watch"``."""

    stack: tuple[Frame, ...]
    """The frames, outermost first (``<module>`` ... the function running at that moment)."""

    count: int  # type: ignore[assignment]  # py-spy's word; shadows tuple.count on purpose
    """How many samples showed exactly this stack in this thread."""

    pid: int | None = None
    """The process id, when known (collapsed text does not keep it)."""

    @property
    def main_thread(self) -> bool:
        """Whether this is the process's main thread (the one that steps envs)."""
        return self.thread == MAIN_THREAD


def read_speedscope(
    source: str | PathLike[str] | Mapping[str, Any],
    processes: Mapping[int, str] | None = None,
) -> list[StackSample]:
    """The samples of a speedscope file written by ``py-spy record --format speedscope``.

    Args:
        source: the file's path, or its already-parsed JSON.
        processes: pid -> label (``{2411: "parent", 2415: "worker 0"}``); a pid not in it
            is labelled ``"pid 2416"``.

    Returns:
        One :class:`StackSample` per distinct (process, thread, stack), in file order.

    Raises:
        ValueError: the file is not a py-spy speedscope file.
    """
    if isinstance(source, Mapping):
        document = source
    else:
        with open(source, encoding="utf-8") as file:
            document = json.load(file)
    try:
        shared_frames = document["shared"]["frames"]
        profiles = document["profiles"]
    except (KeyError, TypeError):
        raise ValueError("not a speedscope file: expected 'shared.frames' and 'profiles'") from None
    frames = [Frame(f["name"], f.get("file") or "", int(f.get("line") or 0)) for f in shared_frames]
    labels = dict(processes or {})

    samples: list[StackSample] = []
    for profile in profiles:
        match = _PROFILE_NAME.match(profile.get("name", ""))
        if match is None:
            raise ValueError(
                f"speedscope profile named {profile.get('name')!r}: expected py-spy's "
                "'Process <pid> Thread <tid> \"<name>\"'"
            )
        pid, thread_id = int(match.group(1)), int(match.group(2))
        thread = match.group(3) or (MAIN_THREAD if thread_id == pid else f"thread {thread_id}")
        process = labels.get(pid, f"pid {pid}")
        counts = Counter(tuple(indices) for indices in profile["samples"])
        for indices, count in counts.items():
            stack = tuple(frames[index] for index in indices)
            samples.append(StackSample(process, thread, _without_process_frames(stack), count, pid))
    return samples


def write_collapsed(samples: Iterable[StackSample]) -> str:
    """Collapsed-stack text, one line per sample: ``process;frame;frame;... count``.

    The first field names the process (``parent``, ``worker 0``), so a flame graph drawn from
    the file splits by process at its root. A thread other than the main thread is written
    as ``worker 0 [vecenvs-orphan-watch]``.
    """
    lines = []
    for sample in samples:
        root = sample.process if sample.main_thread else f"{sample.process} [{sample.thread}]"
        frames = [root.replace(";", ","), *(frame.text() for frame in sample.stack)]
        lines.append(f"{';'.join(frames)} {sample.count}\n")
    return "".join(lines)


def read_collapsed(text: str, processes: Mapping[int, str] | None = None) -> list[StackSample]:
    """Parse collapsed-stack text: ours (:func:`write_collapsed`) or py-spy's ``--format raw``.

    Args:
        text: the file's contents.
        processes: for py-spy's raw format, pid -> label as in :func:`read_speedscope`.

    Raises:
        ValueError: a line that is not ``frames count``.
    """
    labels = dict(processes or {})
    counts: Counter[tuple[str, str, tuple[Frame, ...], int | None]] = Counter()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        stack_text, _, count_text = line.rstrip().rpartition(" ")
        if not stack_text or not count_text.isdigit():
            raise ValueError(
                f"collapsed stacks, line {number}: expected 'frame;frame;... count', "
                f"got {line[:80]!r}"
            )
        process, thread, pid, rest = _collapsed_root(stack_text, labels)
        stack = tuple(_parse_frame(part) for part in rest.split(";")) if rest else ()
        counts[(process, thread, stack, pid)] += int(count_text)
    return [
        StackSample(process, thread, stack, count, pid)
        for (process, thread, stack, pid), count in counts.items()
    ]


def _without_process_frames(stack: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """Drop the ``process <pid>:"cmdline"`` frames py-spy puts at the root of each stack."""
    start = 0
    while start < len(stack) and not stack[start].file and _PROCESS_FRAME.match(stack[start].name):
        start += 1
    return stack[start:]


def _collapsed_root(stack_text: str, labels: Mapping[int, str]) -> tuple[str, str, int | None, str]:
    """Split the root of a collapsed line: (process, thread, pid, the rest of the frames)."""
    if _PROCESS_FRAME.match(stack_text):
        # py-spy's raw format: `process 1:"cmd";process 2:"cmd";[thread (0x..): name;]frames`.
        # A command line may itself contain ';' (python -c "a; b"), so each process frame is
        # consumed up to its closing quote rather than split on ';'.
        pid = None
        rest = stack_text
        while (match := re.match(r'process (\d+):"(?:[^"\\]|\\.)*"(?:;|$)', rest)) is not None:
            pid = int(match.group(1))
            rest = rest[match.end() :]
        thread = MAIN_THREAD
        thread_match = re.match(r"thread \([^)]*\)(?:: ([^;]*))?(?:;|$)", rest)
        if thread_match is not None:
            thread = thread_match.group(1) or thread
            rest = rest[thread_match.end() :]
        label = f"pid {pid}" if pid is None else labels.get(pid, f"pid {pid}")
        return label, thread, pid, rest
    root, _, rest = stack_text.partition(";")
    match = _ROOT_TEXT.match(root)
    if match is not None:
        return match.group(1), match.group(2), None, rest
    return root, MAIN_THREAD, None, rest


def _parse_frame(text: str) -> Frame:
    """``"name (file:line)"`` -> ``Frame``; a bare name (flamegraph.pl style) gets no file."""
    match = _FRAME_TEXT.match(text)
    if match is None:
        return Frame(text, "", 0)
    return Frame(match.group(1), match.group(2), int(match.group(3)))


def read_samples(
    path: str | PathLike[str], processes: Mapping[int, str] | None = None
) -> list[StackSample]:
    """Samples from a file, speedscope JSON or collapsed text, told apart by their content."""
    text = Path(path).read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        return read_speedscope(json.loads(text), processes)
    return read_collapsed(text, processes)
