"""A test mode of the pools' shared memory: record, per process, the order of its accesses to
shared memory and of its barriers, then check them against the ordering points of
docs/memory-ordering.md.

x86-64 keeps stores in order and loads in order, so on the machine the tests run on a missing
``publish()`` or ``observe()`` changes nothing anyone can see. What can be seen is the program
order each process runs in: which shared words and arrays it reads and writes, and where its
barriers are. On arm64 that order is all there is: two accesses are ordered only where a
barrier stands between them. So :func:`recording` replaces, before the workers fork, the
shared area's words by proxies and its arrays by a numpy subclass that log every access, and
the barriers by functions that log where they were called from; :func:`violations` then checks
every process's log against :data:`ORDERING_POINTS` and :data:`SLEEP_HANDSHAKES`. Removing a
barrier from the code removes its events from the log, so a test can try the removal of each
barrier call on a log recorded once (:func:`without`).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import vecenvs
from vecenvs import doorbell, shm, workers

PACKAGE = Path(vecenvs.__file__).parent

# ----------------------------------------------------------------- the rules


@dataclass(frozen=True)
class Point:
    """An ordering point: ``writer`` accesses ``data``, then writes ``word`` to say so; ``reader``
    reads ``word``, then accesses ``data``. The writer needs a release (``publish()``, or the
    full ``fence()``) between any access to the data and a later write of the word, the reader an
    acquire (``observe()`` or ``fence()``) between a read of the word and any later access to the
    data (accesses, not only writes and reads: the reader's reads of results must be over before
    the writer may overwrite them)."""

    name: str
    word: str
    data: frozenset[str]
    writer: str  # "parent" or "worker"
    reader: str


@dataclass(frozen=True)
class Handshake:
    """Going to sleep (Dekker's pattern): the ``sleeper`` writes its ``flag`` (1), then reads the
    ``words`` it waits for; the other side writes one of the words, then reads the flag to see
    whether to ring. Each side needs a ``fence()`` between its write and its read."""

    name: str
    flag: str
    words: frozenset[str]
    sleeper: str
    waker: str


RESULTS = frozenset(
    {"observations", "rewards", "terminations", "truncations", "infos", "env_reply", "finished_at"}
)
ORDERING_POINTS = (
    Point(
        "a round given (the generation word)",
        "GENERATION",
        RESULTS | {"actions", "STEPS", "MESSAGES", "requested", "REPLIES"},
        "parent",
        "worker",
    ),
    Point("a round done (a worker's done word)", "DONE", RESULTS | {"actions", "REPLIES"}, "worker", "parent"),
    Point("an env asked (the async pool's requested word)", "requested", RESULTS | {"actions"}, "parent", "worker"),
    Point("an env done (the async pool's done word per env)", "env_done", RESULTS | {"actions"}, "worker", "parent"),
    Point("the workers' doorbell rung", "WORKERS_BELL", frozenset({"GENERATION"}), "parent", "worker"),
    Point("the parent's doorbell rung", "PARENT_BELL", frozenset({"DONE", "env_done"}), "worker", "parent"),
)  # fmt: skip
SLEEP_HANDSHAKES = (
    Handshake("a worker falls asleep", "SLEEPING", frozenset({"GENERATION"}), "worker", "parent"),
    Handshake(
        "the parent falls asleep", "PARENT_SLEEPING", frozenset({"DONE", "env_done"}), "parent", "worker"
    ),
)  # fmt: skip

# ----------------------------------------------------------------- the log

#: An event: ``(kind, what, value)``: kind "R" or "W" with the word or array's name (and the
#: value written, for words), or "P", "O", "F" (publish, observe, fence) with the call's site.
Event = tuple[str, str, Any]


class _Log:
    """Each process's events, appended to a file of its own (workers are forked, and end with
    ``os._exit``: nothing buffered would survive)."""

    def __init__(self, folder: str):
        self.folder, self.parent = folder, os.getpid()
        self.files: dict[int, int] = {}

    def __call__(self, kind: str, what: str, value: Any = None) -> None:
        pid = os.getpid()
        if pid not in self.files:
            path = os.path.join(
                self.folder, f"{'parent' if pid == self.parent else 'worker'}-{pid}"
            )
            self.files[pid] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(self.files[pid], f"{kind}\t{what}\t{value}\n".encode())

    def clear(self) -> None:
        """Forgets what was logged so far (the processes go on logging)."""
        for name in os.listdir(self.folder):
            os.truncate(os.path.join(self.folder, name), 0)

    def read(self) -> dict[str, list[Event]]:
        """Every process's events: ``{"parent-<pid>" or "worker-<pid>": events}``."""
        logs = {}
        for name in sorted(os.listdir(self.folder)):
            with open(os.path.join(self.folder, name)) as file:
                logs[name] = [tuple(line.rstrip("\n").split("\t")) for line in file]
        return logs


class TracedWords:
    """Words of shared memory (a ``memoryview``), each access logged under the word's name."""

    def __init__(self, view: memoryview, names: list[str], log: _Log):
        self.view, self.names, self.log = view, names, log

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return TracedWords(self.view[index], self.names[index], self.log)
        self.log("R", self.names[index])
        return self.view[index]

    def __setitem__(self, index: int, value: int) -> None:
        self.log("W", self.names[index], value)
        self.view[index] = value

    def __len__(self) -> int:
        return len(self.view)

    def __iter__(self) -> Iterator[int]:  # (Python's min, any and sum read every word)
        return (self[index] for index in range(len(self.view)))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        for index in range(len(self.view)):
            self.log("R", self.names[index])
        return np.asarray(self.view, dtype=dtype)


class TracedArray(np.ndarray):
    """A numpy view of shared memory whose reads and writes are logged under its ``name``.

    Only reads and writes of its memory are: a view of it is traced too (it is the same memory),
    a copy or the result of a computation is a plain array."""

    name: str | None = None
    log: _Log | None = None

    @classmethod
    def of(cls, array: np.ndarray, name: str, log: _Log) -> TracedArray:
        traced = array.view(cls)
        traced.name, traced.log = name, log
        return traced

    def __array_finalize__(self, obj: Any) -> None:
        shared = isinstance(obj, TracedArray) and np.may_share_memory(_plain(self), _plain(obj))
        self.name = obj.name if shared else None
        self.log = obj.log if shared else None

    def _note(self, kind: str) -> None:
        if self.name is not None and self.log is not None:
            self.log(kind, self.name)

    def __getitem__(self, index: Any) -> Any:
        value = super().__getitem__(index)
        if not (isinstance(value, TracedArray) and value.name is not None):
            self._note("R")  # a value or a copy: read now (a view is read when it is)
        return value

    def __setitem__(self, index: Any, value: Any) -> None:
        _note_all("R", value)
        self._note("W")
        super().__setitem__(index, value)

    def __array_ufunc__(
        self, ufunc: Any, method: str, *inputs: Any, out: Any = None, **kwargs: Any
    ) -> Any:
        _note_all("R", inputs)
        if out is not None:
            _note_all("W", out)
            kwargs["out"] = tuple(_plain(o) for o in out)
        result = getattr(ufunc, method)(*(_plain(i) for i in inputs), **kwargs)
        return out[0] if out is not None and len(out) == 1 else result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.copyto:  # copyto(destination, source): one write, one read
            _note_all("W", args[0])
            _note_all("R", args[1:])
        else:
            _note_all("R", args)
            _note_all("W", kwargs.get("out"))
        args = tuple(_plain(a) for a in args)
        kwargs = {k: _plain(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def copy(self, *args: Any, **kwargs: Any) -> np.ndarray:  # type: ignore[override]
        self._note("R")
        return _plain(self).copy(*args, **kwargs)

    def tolist(self) -> Any:
        self._note("R")
        return _plain(self).tolist()

    def astype(self, *args: Any, **kwargs: Any) -> np.ndarray:  # type: ignore[override]
        self._note("R")
        return _plain(self).astype(*args, **kwargs)


def _plain(value: Any) -> Any:
    if isinstance(value, TracedArray):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _note_all(kind: str, values: Any) -> None:
    if isinstance(values, TracedArray):
        values._note(kind)
    elif isinstance(values, (list, tuple)):
        for value in values:
            _note_all(kind, value)


# ----------------------------------------------------------------- recording

HEADER = {
    workers.GENERATION: "GENERATION",
    workers.STEPS: "STEPS",
    workers.PARENT_SLEEPING: "PARENT_SLEEPING",
}
LINE = {
    workers.MESSAGES: "MESSAGES",
    workers.DONE: "DONE",
    workers.REPLIES: "REPLIES",
    workers.SLEEPING: "SLEEPING",
}
ENV_WORDS = ("env_done", "env_reply", "requested", "finished_at")  # EnvWords' fields, in order


def _names(known: dict[int, str], size: int) -> list[str]:
    return [known.get(index, f"word{index}") for index in range(size)]


def _trace_area(area: shm.SharedArea, log: _Log) -> None:
    """Replaces the area's words and arrays by traced ones (in this process)."""
    area.header = TracedWords(area.header, _names(HEADER, len(area.header)), log)  # type: ignore[assignment]
    bells = _names({0: "WORKERS_BELL", 16: "PARENT_BELL"}, len(area.bells))
    area.worker_bell.words = area.parent_bell.words = TracedWords(area.bells, bells, log)  # type: ignore[assignment]
    area.env_words = [TracedArray.of(a, name, log) for a, name in zip(area.env_words, ENV_WORDS)]
    if area.has_data:
        trace = functools.partial(_traced_tree, log=log)
        area.observations = trace(area.observations, "observations")
        area.actions = trace(area.actions, "actions")
        area.rewards = trace(area.rewards, "rewards")
        area.terminations = trace(area.terminations, "terminations")
        area.truncations = trace(area.truncations, "truncations")
    area._trace_log = log  # type: ignore[attr-defined]


def _traced_tree(tree: Any, name: str, log: _Log) -> Any:
    if tree is None:
        return None
    return vecenvs.multi_env.tree_map(lambda leaf: TracedArray.of(leaf, name, log), tree)


@contextlib.contextmanager
def recording() -> Iterator[_Log]:
    """Pools made inside (with ``start_method="fork"``) log their accesses and barriers: read
    them with ``log.read()`` after the pool is closed."""
    folder = tempfile.mkdtemp(prefix="vecenvs-ordering-")
    log = _Log(folder)
    saved = (
        shm.SharedArea._allocate, shm.SharedArea.line, shm.SharedArea.column,
        shm.SharedArea.words, shm.SharedArea.info_arrays,
        doorbell._RELEASE, doorbell._ACQUIRE, doorbell._FULL,
    )  # fmt: skip
    allocate, line, column, words, info_arrays = saved[:5]

    def traced_allocate(self: shm.SharedArea, allocator: Any) -> None:
        allocate(self, allocator)
        if allocator.memory is not None:
            _trace_area(self, log)

    def traced_line(self: shm.SharedArea, worker_index: int) -> Any:
        return TracedWords(line(self, worker_index), _names(LINE, shm.LINE), log)

    def traced_column(self: shm.SharedArea, word: int, first: int = 0) -> Any:
        return TracedArray.of(column(self, word, first), LINE[word], log)

    def traced_words(self: shm.SharedArea, word: int, first: int = 0) -> Any:
        view = words(self, word, first)
        return TracedWords(view, [LINE[word]] * len(view), log)

    def traced_info_arrays(self: shm.SharedArea, layout: Any) -> Any:
        arrays = info_arrays(self, layout)
        return {
            k: (TracedArray.of(v, "infos", log), TracedArray.of(m, "infos", log))
            for k, (v, m) in arrays.items()
        }

    def barrier(kind: str) -> Any:
        def record() -> None:
            caller = sys._getframe(2)  # record <- publish/observe/fence <- the call's site
            log(kind, f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}")

        return record

    shm.SharedArea._allocate = traced_allocate  # type: ignore[method-assign]
    shm.SharedArea.line = traced_line  # type: ignore[method-assign]
    shm.SharedArea.column = traced_column  # type: ignore[method-assign]
    shm.SharedArea.words = traced_words  # type: ignore[method-assign]
    shm.SharedArea.info_arrays = traced_info_arrays  # type: ignore[method-assign]
    doorbell._RELEASE, doorbell._ACQUIRE, doorbell._FULL = barrier("P"), barrier("O"), barrier("F")
    try:
        yield log
    finally:
        (
            shm.SharedArea._allocate, shm.SharedArea.line, shm.SharedArea.column,  # type: ignore[method-assign]
            shm.SharedArea.words, shm.SharedArea.info_arrays,  # type: ignore[method-assign]
            doorbell._RELEASE, doorbell._ACQUIRE, doorbell._FULL,
        ) = saved  # fmt: skip


# ----------------------------------------------------------------- checking


def violations(logs: dict[str, list[Event]]) -> list[str]:
    """Every place where a process's log breaks an ordering point or a sleep handshake: one line
    each, naming the process, the rule and the two accesses."""
    found = []
    for process, events in logs.items():
        role = process.split("-")[0]
        for point in ORDERING_POINTS:
            if role == point.writer:  # a release between its accesses to the data and the word
                found += _unordered(
                    process, point.name, events, (point.data, "any"), ({point.word}, "W"), "PF"
                )
            if role == point.reader:  # an acquire between the word and its accesses to the data
                found += _unordered(
                    process, point.name, events, ({point.word}, "R"), (point.data, "any"), "OF"
                )
        for shake in SLEEP_HANDSHAKES:
            if role == shake.sleeper:  # "I sleep", then "is it there?"
                found += _unordered(
                    process, shake.name, events, ({shake.flag}, "W1"), (shake.words, "R"), "F"
                )
            if role == shake.waker:  # "it is there", then "does anyone sleep?"
                found += _unordered(
                    process, shake.name, events, (shake.words, "W"), ({shake.flag}, "R"), "F"
                )
    return found  # fmt: skip


def _unordered(
    process: str, rule: str, events: list[Event], first: Any, then: Any, barriers: str
) -> list[str]:
    """Each access ``first = (names, kind)`` followed by an access ``then`` with none of
    ``barriers`` between (once per barrier-free stretch)."""
    found, pending = [], None  # pending: the index of an access of `first` not yet ordered
    for index, (kind, what, value) in enumerate(events):
        if kind in barriers:
            pending = None
        elif pending is not None and _is(then, kind, what, value):
            pair = f"{events[pending][:2]} then {(kind, what)} (event {index})"
            found.append(f"{process}: {rule}: {pair} with no {'/'.join(barriers)} between")
            pending = None
        if _is(first, kind, what, value):
            pending = index
    return found


def _is(access: tuple[Any, str], kind: str, what: str, value: str) -> bool:
    """Whether the event is an access of ``(names, kind)``: kind "R", "W", "any", or "W1" (a
    write of a flag that says "asleep")."""
    names, wanted = access
    if kind not in "RW" or what not in names:
        return False
    if wanted == "W1":
        return kind == "W" and value not in ("0", "None")
    return wanted in ("any", kind)


def without(logs: dict[str, list[Event]], site: str) -> dict[str, list[Event]]:
    """The logs as they would be without the barrier call at ``site`` (``"file.py:line"``)."""
    return {
        p: [e for e in events if not (e[0] in "POF" and e[1] == site)] for p, events in logs.items()
    }


def barrier_sites() -> list[str]:
    """Every call of publish(), observe() and fence() in the package, as ``"file.py:line"``."""
    sites = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                function = node.func
                name = (
                    function.id
                    if isinstance(function, ast.Name)
                    else getattr(function, "attr", None)
                )
                if name in ("publish", "observe", "fence") and not node.args:
                    sites.append(f"{path.name}:{node.lineno}")
    return sites


def function_at(site: str) -> str:
    """The function (``Class.method`` or ``function``) holding the call at ``site``."""
    file, line = site.split(":")
    tree = ast.parse((PACKAGE / file).read_text())
    found = ""

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef) and (
                child.lineno <= int(line) <= (child.end_lineno or child.lineno)
            ):
                found = f"{prefix}{child.name}"
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found
