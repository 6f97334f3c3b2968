"""Sampled call stacks: reading py-spy's speedscope and raw files, writing collapsed stacks.

We record once, in py-spy's speedscope format (one profile per thread, named
``Process 2411 Thread 2411 "MainThread"``, frames with function, file and line), and make
everything else from those samples. Collapsed stacks are Brendan Gregg's text format, which
speedscope, ``flamegraph.pl`` and ``inferno-flamegraph`` read: one line per stack, frames
outermost first, separated by ``;``, then the count; our first field names the process::

    parent;<module> (vecenvs/profile/target.py:191);main (vecenvs/profile/target.py:178) 12

:func:`read_collapsed` also reads py-spy's own ``--format raw``, whose first frames are
``process 2341:"cmdline"``.
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
# The frames py-spy adds at the root of a stack for the process and its ancestors; in the raw
# format a command line may contain ';' (python -c "a; b"): read up to the closing quote.
_PROCESS_FRAME = re.compile(r'^process (\d+):"')
_RAW_PROCESS = re.compile(r'process (\d+):"(?:[^"\\]|\\.)*"(?:;|$)')
_RAW_THREAD = re.compile(r"thread \([^)]*\)(?:: ([^;]*))?(?:;|$)")
# A frame in collapsed text: `name (file:line)`; the file may itself contain ':' or ' ('.
_FRAME_TEXT = re.compile(r"^(.*) \((.*):(\d+)\)$")
# The first field of our collapsed lines: `worker 0` (main thread) or `worker 0 [thread name]`.
_ROOT_TEXT = re.compile(r"^(.*?) \[(.*)\]$")


class Frame(NamedTuple):
    """One function call in a stack: the function as py-spy names it (``"MultiEnv.step_each"``,
    ``"<module>"``), its source file as py-spy saw it, and the line being run."""

    name: str
    file: str
    line: int

    def text(self) -> str:
        """``"name (file:line)"``, with ``;`` (the collapsed format's separator) made ``,``."""
        return f"{self.name} ({self.file}:{self.line})".replace(";", ",")


class StackSample(NamedTuple):
    """One distinct call stack (frames outermost first) of one thread, and how many samples
    showed it. ``process`` says what the process is: ``"parent"``, ``"worker 0"``,
    ``"helper: forkserver"``, ``"pid 42"``; ``pid`` is None where unknown (collapsed text)."""

    process: str
    thread: str
    stack: tuple[Frame, ...]
    count: int  # type: ignore[assignment]  # py-spy's word; shadows tuple.count on purpose
    pid: int | None = None

    @property
    def main_thread(self) -> bool:
        """Whether this is the process's main thread (the one that steps envs)."""
        return self.thread == MAIN_THREAD


def read_speedscope(
    source: str | PathLike[str] | Mapping[str, Any],
    processes: Mapping[int, str] | None = None,
) -> list[StackSample]:
    """The samples of a ``py-spy record --format speedscope`` file (a path or its parsed JSON),
    one per distinct (process, thread, stack), in file order.

    ``processes`` maps pid -> label (``{2411: "parent"}``); other pids become ``"pid 2416"``.
    Raises ValueError if it is not a py-spy speedscope file.
    """
    document = source
    if not isinstance(document, Mapping):
        document = json.loads(Path(document).read_text(encoding="utf-8"))
    try:
        shared_frames = document["shared"]["frames"]
        profiles = document["profiles"]
    except (KeyError, TypeError):
        raise ValueError("not a speedscope file: expected 'shared.frames' and 'profiles'") from None
    frames = [Frame(f["name"], f.get("file") or "", int(f.get("line") or 0)) for f in shared_frames]
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
        process = _label(pid, processes)
        for indices, count in Counter(tuple(indices) for indices in profile["samples"]).items():
            stack = tuple(frames[index] for index in indices)
            # Drop the `process <pid>:"cmdline"` frames py-spy puts at the root of each stack.
            while stack and not stack[0].file and _PROCESS_FRAME.match(stack[0].name):
                stack = stack[1:]
            samples.append(StackSample(process, thread, stack, count, pid))
    return samples


def write_collapsed(samples: Iterable[StackSample]) -> str:
    """Collapsed-stack text, one line per sample: ``process;frame;frame;... count``.

    A flame graph drawn from it splits by process at its root; a thread other than the main
    thread is written ``worker 0 [vecenvs-orphan-watch]``.
    """
    lines = []
    for sample in samples:
        root = sample.process if sample.main_thread else f"{sample.process} [{sample.thread}]"
        frames = [root.replace(";", ","), *(frame.text() for frame in sample.stack)]
        lines.append(f"{';'.join(frames)} {sample.count}\n")
    return "".join(lines)


def read_collapsed(text: str, processes: Mapping[int, str] | None = None) -> list[StackSample]:
    """Parse collapsed-stack text: ours (:func:`write_collapsed`) or py-spy's ``--format raw``
    (whose pids ``processes`` labels, as in :func:`read_speedscope`).

    Raises ValueError, with the line number, for a line that is not ``frames count``.
    """
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
        process, thread, pid, rest = _collapsed_root(stack_text, processes)
        stack = tuple(_parse_frame(part) for part in rest.split(";")) if rest else ()
        counts[(process, thread, stack, pid)] += int(count_text)
    return [
        StackSample(process, thread, stack, count, pid)
        for (process, thread, stack, pid), count in counts.items()
    ]


def read_samples(
    path: str | PathLike[str], processes: Mapping[int, str] | None = None
) -> list[StackSample]:
    """Samples from a file, speedscope JSON or collapsed text, told apart by their content."""
    text = Path(path).read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        return read_speedscope(json.loads(text), processes)
    return read_collapsed(text, processes)


def _label(pid: int, processes: Mapping[int, str] | None) -> str:
    return (processes or {}).get(pid, f"pid {pid}")


def _collapsed_root(
    stack_text: str, processes: Mapping[int, str] | None
) -> tuple[str, str, int | None, str]:
    """Split the root of a collapsed line: (process, thread, pid, the rest of the frames)."""
    if not _PROCESS_FRAME.match(stack_text):  # ours: `worker 0 [thread];frames`
        root, _, rest = stack_text.partition(";")
        match = _ROOT_TEXT.match(root)
        if match is not None:
            return match[1], match[2], None, rest
        return root, MAIN_THREAD, None, rest
    # py-spy's raw format: `process 1:"cmd";process 2:"cmd";[thread (0x..): name;]frames`.
    pid, rest, thread = None, stack_text, MAIN_THREAD
    while (match := _RAW_PROCESS.match(rest)) is not None:
        pid, rest = int(match.group(1)), rest[match.end() :]
    if (match := _RAW_THREAD.match(rest)) is not None:
        thread, rest = match.group(1) or thread, rest[match.end() :]
    return ("pid None" if pid is None else _label(pid, processes)), thread, pid, rest


def _parse_frame(text: str) -> Frame:
    """``"name (file:line)"`` -> ``Frame``; a bare name (flamegraph.pl style) gets no file."""
    match = _FRAME_TEXT.match(text)
    return Frame(match[1], match[2], int(match[3])) if match else Frame(text, "", 0)
