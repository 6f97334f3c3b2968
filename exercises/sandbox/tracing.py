"""Which of the course's own code a student's answer calls: ``vecenvs`` and the exercises' files.

An answer that only calls what the course ships (``Breakdown.by_role()`` as question 5's shares,
``split_evenly`` as question 1's split, ``basic_worker`` as question 4's worker) computes nothing
itself. While the runner evaluates a check's request on the student's code, a profile hook
(``sys.setprofile``, and ``threading.setprofile`` for the threads that code starts) notes every
function of the shipped code *entered from code that is not shipped*: the student's, the standard
library's, a third party's, the runner's. Each entry is a file and a name::

    vecenvs/profile/breakdown.py: Breakdown.by_role

Calls inside shipped code are one entry (``by_role`` calling ``_shares`` is ``by_role``), and
module bodies are none (importing ``vecenvs`` is not using it). The checks decide which entries
a question's answer may have (``exercises/checks/conftest.py``): question 3 may use its
scaffolding, question 5 nothing.

A process forked while the hook is on keeps it and writes what it notes to a file that the
runner reads after each request (question 4's worker runs in one). Like everything the student's
process says, the entries are that process's word: code written to switch the hook off can do so,
and is noted when it does (``sys.setprofile`` replaced). What the hook catches is an answer that
calls the package, however it imports it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

#: The entry noted when the student's code replaces or removes the hook.
SWITCHED_OFF = "sys.setprofile: the course's call tracing was switched off"
#: The runner's own modules: neither shipped answers nor the student's code.
HARNESS = ("runner.py", "wire.py", "tracing.py", "processes.py", "client.py", "isolation.py")


class Tracer:
    """Notes the shipped functions that non-shipped code enters while :meth:`watching`."""

    def __init__(self, roots: dict[str, str], sink: str | None = None):
        #: folder -> the label its files get (``/packages/vecenvs`` -> ``vecenvs``): each
        #: as given and resolved (a link to the package is run by either path).
        self.roots: list[tuple[str, str]] = []
        for folder, label in roots.items():
            for path in {os.path.abspath(folder), str(Path(folder).resolve())}:
                self.roots.append((path.rstrip(os.sep) + os.sep, label))
        harness_folder = os.path.dirname(os.path.abspath(__file__)) + os.sep
        self.harness = {os.path.join(harness_folder, name) for name in HARNESS}
        self.labels: dict[CodeType, str | None] = {}
        self.found: set[str] = set()
        self.sink = sink  # where a forked process writes what it notes
        self.sink_read = 0
        self.pid = os.getpid()
        self.depth = 0  # watching() nests

    def label(self, code: CodeType) -> str | None:
        """``"vecenvs/x.py: name"`` for a function of the shipped code, ``""`` for its module
        and class bodies (run by importing it), None for any other code (cached)."""
        try:
            return self.labels[code]
        except KeyError:
            pass
        found = None
        filename = code.co_filename
        if filename not in self.harness:
            for folder, prefix in self.roots:
                if filename.startswith(folder):
                    relative = filename[len(folder) :].replace(os.sep, "/")
                    name = getattr(code, "co_qualname", code.co_name)  # (3.11+)
                    found = f"{prefix}/{relative}: {name}"
                    break
        if found is not None and code.co_name == "<module>":
            found = ""
        self.labels[code] = found
        return found

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        try:
            code = frame.f_code
            label = self.labels[code] if code in self.labels else self.label(code)
            if not label:
                return  # not shipped code, or a module's body (an import)
            back = frame.f_back
            if back is not None and self.label(back.f_code) is not None:
                return  # shipped code calling shipped code: one entry already
            self.note(label)
        except Exception:  # (a hook that raises is switched off by Python)
            return

    def note(self, label: str) -> None:
        if label in self.found:
            return
        self.found.add(label)
        if self.sink and os.getpid() != self.pid:  # a forked process: tell the runner
            with contextlib.suppress(OSError), open(self.sink, "a", encoding="utf-8") as file:
                file.write(label + "\n")

    @contextlib.contextmanager
    def watching(self, on: bool = True) -> Iterator[None]:
        """Traces the student's code in this block (``on``), or pauses tracing in it (a check's
        own helpers, evaluated for arguments)."""
        previous = sys.getprofile()
        previous_threads = getattr(threading, "_profile_hook", None)
        hook = self.hook if on else None
        sys.setprofile(hook)
        threading.setprofile(hook)  # type: ignore[arg-type]
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if on and sys.getprofile() != self.hook:
                self.note(SWITCHED_OFF)
            sys.setprofile(previous)
            threading.setprofile(previous_threads)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def collecting(self) -> Iterator[set[str]]:
        """Notes what the block's code enters into a set of its own (an import's, kept apart
        from the request's)."""
        saved, self.found = self.found, set()
        collected = self.found
        try:
            yield collected
        finally:
            self.found = saved

    def take(self) -> list[str]:
        """What was noted since the last call (here, and by forked processes), sorted."""
        found, self.found = self.found, set()
        return sorted(found | set(self._from_sink()))

    def _from_sink(self) -> list[str]:
        """The whole lines forked processes wrote since the last look."""
        if not self.sink:
            return []
        try:
            with open(self.sink, "rb") as file:
                file.seek(self.sink_read)
                data = file.read(1 << 20)
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.sink_read += end
        return [line for line in data[:end].decode("utf-8", "replace").splitlines() if line]


#: The runner's tracer (None outside the runner: the toolkit used elsewhere traces nothing).
TRACER: Tracer | None = None


def start(roots: dict[str, str], sink: str | None = None) -> Tracer:
    """Makes this process's tracer (the runner calls it before any of the student's code runs)."""
    global TRACER
    TRACER = Tracer(roots, sink)
    return TRACER


def watch_this_process() -> None:
    """Traces from now on, in this thread and the threads it starts: for a process forked to
    run a student's function (question 4's worker), which never returns to the runner."""
    if TRACER is not None:
        sys.setprofile(TRACER.hook)
        threading.setprofile(TRACER.hook)  # type: ignore[arg-type]
