"""The checks' side: a student's code in a sandboxed process of its own, reached by requests.

The checks never import a student's file. They start :mod:`exercises.sandbox.runner` in a
sandbox and ask it to call the student's functions; what comes back is plain data
(:mod:`exercises.sandbox.wire`), judged here::

    student = StudentProcess(Path("my-work"), isolation.choose())
    split_envs = student.module("q1_chunks.py").get("split_envs")   # a RemoteFunction
    split_envs.call_within(10.0, 10, 3)     # [range(0, 3), range(3, 6), range(6, 10)]
    student.stop()

Every request has a deadline. When the student's process misses one, dies, or answers something
unreadable, it is stopped with everything it started, and the request raises a
:class:`StudentCodeFailed` whose message is written for the student; the next request starts a
fresh process. Objects kept over there (a :class:`RemoteObject`) die with their process.

Given an :class:`OwnWork`, the answers must be the student's own work: a function the checks
ask for must be written in the student's files, and the code it runs (and, for a value, the
code its file ran to compute it) may call only the parts of the course's own code that the
question hands out (:mod:`exercises.sandbox.tracing` notes what it calls). Otherwise the request
raises :class:`StudentDelegated`, saying what was called.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exercises.sandbox import isolation, processes, tracing, wire
from exercises.sandbox.wire import Expr

#: Seconds a request may take unless the check says otherwise.
DEFAULT_SECONDS = 10.0
#: Extra seconds for the first request of a fresh process (Python starts, imports numpy...).
STARTUP_SECONDS = 10.0

#: The checks' helpers, named from here and built in the student's process:
#: ``toolkit.env_fns("CartPole-v1", 3)`` is a name, evaluated over there when sent.
toolkit = Expr.toolkit()


class StudentCodeFailed(Exception):
    """The student's code gave no usable answer; the message says why, for the student."""


class StudentTimeout(StudentCodeFailed):
    """The student's code did not answer in time; its process was stopped."""


class StudentError(StudentCodeFailed):
    """The student's code raised an exception, described as data: ``types`` (qualified class
    names, most derived first), ``message``, ``traceback`` (without the runner's frames) and
    ``attributes`` (its public ones: ``env_index`` of a ``WorkerError``...)."""

    def __init__(self, doing: str, description: dict):
        self.types = [str(name) for name in description.get("types", [])][:50] or ["?"]
        self.message = str(description.get("message", ""))
        self.traceback = str(description.get("traceback", ""))
        try:
            attributes = wire.decode(description.get("attributes"))
        except wire.WireError:
            attributes = {}
        self.attributes = attributes if isinstance(attributes, dict) else {}
        super().__init__(f"{doing} raised {self.type_name}: {self.message}\n{self.traceback}")

    @property
    def type_name(self) -> str:
        """The exception's class name, e.g. ``"ValueError"``."""
        return self.types[0].rsplit(".", 1)[-1]

    def is_a(self, name: str) -> bool:
        """Whether it is an instance of the class ``name`` (``"ValueError"`` or
        ``"exercises.pipe_env.WorkerError"``)."""
        return any(kind == name or kind.rsplit(".", 1)[-1] == name for kind in self.types)


class StudentDelegated(StudentCodeFailed):
    """The answer is the course's own code, not the student's: it earns nothing."""


@dataclass(frozen=True)
class OwnWork:
    """What a question's answer may call of the course's own code, as
    :mod:`~exercises.sandbox.tracing` names it (``"exercises/pipe_env.py: answer"``): entries
    that start with one of ``allowed`` (``""`` allows all), unless they start with one of
    ``refused`` or name one of them (``"basic_worker"``). Switching the tracing off is refused
    everywhere."""

    allowed: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()

    def refuses(self, entry: str) -> bool:
        if entry == tracing.SWITCHED_OFF:
            return True
        name = entry.partition(": ")[2]
        if entry.startswith(self.refused) or set(name.split(".")) & set(self.refused):
            return True
        return not entry.startswith(self.allowed)

    def refused_of(self, entries: Iterable[Any]) -> list[str]:
        """The entries this question's answer may not have (at most 3, each cut short)."""
        return [str(entry)[:100] for entry in entries if self.refuses(str(entry))][:3]


class SandboxFailed(RuntimeError):
    """The sandbox did not start (before any of the student's code ran): not the student's fault."""


class StudentProcess:
    """One student's folder, run in a sandboxed process started when first needed (each start
    copies the folder to a fresh workspace)."""

    def __init__(
        self,
        submission: Path,
        sandbox: isolation.Sandbox,
        own_work: OwnWork | None = None,
        student_id: str = "",
    ):
        self.submission = Path(submission)
        self.sandbox = sandbox
        self.own_work = own_work
        #: Whose work it is, told to their process as $VECENVS_STUDENT (Part B's letters).
        self.student_id = student_id
        #: file -> what importing it called of the course's own code (this process's import)
        self.import_calls: dict[str, list[str]] = {}
        #: An answer ("q2_overhead.py: break_even_num_envs") once found delegating -> why: its
        #: later calls fail too, even those that happen not to reach the course's code (the
        #: checks run in a fixed order, so a regrade finds the same).
        self.delegated: dict[str, str] = {}
        self._origins: dict[tuple[int, int], str] = {}  # kept object -> the answer that made it
        self.generation = 0  # counts starts: an object kept by an earlier process is gone
        # Files whose import missed its deadline: not tried again (each try would hang again).
        self.hung_imports: set[str] = set()
        self._imported: set[str] = set()
        self._process: subprocess.Popen | None = None
        self._channel: socket.socket | None = None
        self._workspace: Path | None = None
        self._fresh = False
        self._next_id = 0
        self._spared: set[int] = set()

    def start(self) -> None:
        """Starts the student's process now, if it is not running (requests do it when needed).
        Raises SandboxFailed when the sandbox cannot start Python (its own error went to stderr).
        """
        if self._process is not None:
            return
        # A process already running here (multiprocessing's fork server, in a test session) is
        # not the student's: stop() spares it.
        self._spared = processes.descendants()
        self._workspace = Path(tempfile.mkdtemp(prefix="student-"))
        isolation.prepare_workspace(self.submission, self._workspace)
        ours, theirs = socket.socketpair()
        inside = isolation.paths(self.sandbox, self._workspace)["submission"]
        program = [sys.executable, "-m", "exercises.sandbox.runner", str(theirs.fileno()), inside]
        self.sandbox.hand_over(self._workspace)
        command, environment, folder = self.sandbox.command(self._workspace, program)
        if self.student_id:
            environment["VECENVS_STUDENT"] = self.student_id
        try:
            # A session of its own: its process group is what stop() kills.
            self._process = subprocess.Popen(
                command,
                env=environment,
                cwd=folder,
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                **self.sandbox.popen_options(),
            )
        finally:
            theirs.close()
        self._channel = ours
        self.generation += 1
        self._imported = set()
        self.import_calls = {}
        self._fresh = True
        try:
            if "hello" not in wire.receive(self._channel, time.perf_counter() + STARTUP_SECONDS):
                raise wire.WireError("no hello")
        except (TimeoutError, EOFError, OSError, wire.WireError) as error:
            how = "it did not start in time" if isinstance(error, TimeoutError) else self._ending()
            self.stop()
            raise SandboxFailed(
                f"the {self.sandbox.kind} sandbox could not start Python ({how}); its own "
                "error is above. (--sandbox none runs student code without one.)"
            ) from None

    def module(self, filename: str) -> RemoteModule:
        """The student's file ``filename`` (imported over there when first used)."""
        return RemoteModule(self, filename)

    def build(self, expr: Expr, seconds: float = DEFAULT_SECONDS) -> RemoteObject:
        """Evaluates ``expr`` over there and keeps the result there, as a :class:`RemoteObject`."""
        return self.ask("call", expr, f"building {expr!r}", seconds, keep=True)

    def ask(
        self, op: str, target: Expr, doing: str, seconds: float = DEFAULT_SECONDS, **fields: Any
    ) -> Any:
        """Sends one request about ``target``; returns data, a :class:`RemoteFunction` (a
        callable, for ``op="get"``) or a :class:`RemoteObject` (with ``keep=True``)."""
        filename = target.root.get("file")
        importing = op == "get" and filename is not None and len(target.steps) == 1
        if filename in self.hung_imports:
            raise StudentTimeout(
                f"importing {filename} did not finish earlier, within "
                f"{DEFAULT_SECONDS:g} s: does it wait for something at import?"
            )
        if "handle" in target.root and target.root.get("generation") != self.generation:
            raise StudentCodeFailed(f"{doing}: the process holding that object was stopped earlier")
        answer = self._answer_of(target)
        if answer in self.delegated:
            raise StudentDelegated(self.delegated[answer])
        try:
            reply = self._exchange(
                {"op": op, "target": wire.encode(_as_sent(target)), **fields}, doing, seconds
            )
        except StudentTimeout:
            if importing and filename not in self._imported:
                self.hung_imports.add(filename)
            raise
        imported = reply.get("imported")
        if isinstance(imported, dict):
            for name, entries in imported.items():
                if isinstance(entries, list):
                    self.import_calls[str(name)] = [str(entry) for entry in entries]
        # Before anything else: a delegating answer that raised the expected error is not right.
        self._check_own_work(reply, doing, answer)
        if "error" in reply:
            raise self._failure(reply, target, doing)
        if importing:
            self._imported.add(filename)
        if isinstance(reply.get("callable"), dict):
            info = reply["callable"]
            if self.own_work is not None and info.get("own") is not True and filename:
                name = (
                    target.steps[-1][1] if target.steps and target.steps[-1][0] == "attr" else "?"
                )
                why = (
                    f"{name} comes from {str(info.get('defined_in', '?'))[:80]}, not from "
                    f"{filename}: the exercise is to write it yourself, in your files; what "
                    "the course ships earns nothing as an answer"
                )
                if answer:
                    self.delegated[answer] = why
                raise StudentDelegated(why)
            return RemoteFunction(
                self,
                target,
                str(info.get("name", "?")),
                info.get("is_class") is True,
                str(info.get("defined_in", "?"))[:200],
            )
        if type(reply.get("handle")) is int:
            if answer:
                self._origins[(self.generation, reply["handle"])] = answer
            handle = Expr({"handle": reply["handle"], "generation": self.generation})
            return RemoteObject(self, handle, str(reply.get("type", "?")))
        if "value" not in reply:
            raise StudentCodeFailed(f"{doing}: the answer could not be read")
        if op == "get" and filename and self.own_work is not None:  # a value the file computed
            refused = self.own_work.refused_of(self.import_calls.get(filename, []))
            if refused:
                name = target.steps[-1][1] if target.steps else filename
                raise StudentDelegated(
                    f"{filename} called the course's own code as it ran ({'; '.join(refused)}), "
                    f"and {name} is one of the values it computed: what the course's code "
                    "computes earns nothing as an answer; compute it with your own functions"
                )
        try:
            return wire.decode(reply["value"])
        except wire.WireError as error:
            raise StudentCodeFailed(f"{doing}: the answer could not be read ({error})") from None

    def _answer_of(self, target: Expr) -> str | None:
        """The answer a request is about: a file's function or class (``"q1_chunks.py:
        split_by_cost"``), also through an object it made; None for the checks' own helpers."""
        root = target.root
        if "file" in root and target.steps and target.steps[0][0] == "attr":
            return f"{root['file']}: {target.steps[0][1]}"
        if "handle" in root:
            return self._origins.get((root.get("generation"), root.get("handle")))  # type: ignore[arg-type]
        return None

    def _check_own_work(self, reply: dict, doing: str, answer: str | None = None) -> None:
        """Raises StudentDelegated when the student's code called what it may not (and
        remembers it of ``answer``)."""
        shipped = reply.get("shipped")
        if self.own_work is None or not isinstance(shipped, list):
            return
        refused = self.own_work.refused_of(shipped)
        if refused:
            why = (
                f"{doing} called the course's own code ({'; '.join(refused)}), which does what "
                "this question asks you to write: an answer that calls it earns nothing. Write "
                "it yourself (the standard library and numpy are yours to use)"
            )
            if answer:
                self.delegated[answer] = why
            raise StudentDelegated(why)

    def clean_up(self) -> None:
        """Kills the processes the student's code started and left running (between checks).
        Raises StudentDelegated when a process of theirs (a worker) was found calling what its
        question's answer may not."""
        if self._process is None:
            return
        try:
            reply = self._exchange({"op": "clean"}, "cleaning up", DEFAULT_SECONDS)
        except StudentCodeFailed:
            self.stop()
            return
        self._check_own_work(reply, "a process your code started")

    def stop(self) -> None:
        """Ends the student's process and everything it started; safe to call twice."""
        # Its process group: bwrap or unshare (whose death ends the sandbox and every process in
        # it), or with no sandbox the runner and what stayed in its group; then what left it.
        process, self._process = self._process, None
        processes.end_group(process, spare=self._spared)
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._workspace is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)
            self._workspace = None

    def _exchange(self, message: dict, doing: str, seconds: float) -> dict:
        """Sends ``message`` and waits for its reply; on any trouble, stops the process."""
        self.start()
        self._next_id += 1
        message["id"] = self._next_id
        deadline = time.perf_counter() + seconds + (STARTUP_SECONDS if self._fresh else 0.0)
        answered = False
        try:
            wire.send(self._channel, message)
            reply = wire.receive(self._channel, deadline)
            if reply.get("id") != message["id"]:
                raise wire.WireError("a reply to another request")
            answered = True
            self._fresh = False
            return reply
        except TimeoutError:
            raise StudentTimeout(
                f"{doing} did not return within {seconds:g} s: is something waiting "
                "forever (a recv() without a deadline, a loop that never ends)?"
            ) from None
        except (EOFError, OSError):
            raise StudentCodeFailed(
                f"the process running your code ended ({self._ending()}) during {doing}: look "
                "for sys.exit, os._exit, os.kill or a crash in native code"
            ) from None
        except wire.WireError as error:
            raise StudentCodeFailed(
                f"during {doing}, your code's process sent something that is not an answer "
                f"({error}): does your code write to file descriptors it does not own?"
            ) from None
        finally:
            if not answered:  # also when the check itself was interrupted (pytest-timeout)
                self.stop()

    def _ending(self) -> str:
        """How the process ended, for a message (waits a moment for it to finish ending)."""
        try:
            code = self._process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "it closed its connection to the checks"
        # bwrap and unshare report a signal that killed their child as 128 + its number.
        wrapped = self.sandbox.kind in ("bwrap", "unshare")
        if code > 128 and wrapped and code - 128 in signal.valid_signals():
            code = -(code - 128)  # as if it had been killed directly
        return f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"

    def _failure(self, reply: dict, target: Expr, doing: str) -> StudentCodeFailed:
        kind = reply.get("error")
        filename = str(reply.get("file", target.root.get("file", "?")))
        if kind == "no_file":
            return StudentCodeFailed(
                f"{filename} not found in {self.submission}: copy "
                f"exercises/student/{filename} there and fill it in"
            )
        if kind == "import_failed":
            return StudentCodeFailed(
                f"importing {filename} failed; fix this first:\n{reply.get('traceback', '')}"
            )
        if kind == "missing":
            owner = repr(Expr(target.root, target.steps[:-1])) if target.steps else filename
            return StudentCodeFailed(
                f"{owner} has no {str(reply.get('name'))!r}: did you rename or delete it?"
            )
        if kind == "raised" and isinstance(reply.get("exception"), dict):
            error = StudentError(doing, reply["exception"])
            if error.is_a("builtins.NotImplementedError"):  # the placeholder is still there
                return StudentCodeFailed(f"not done yet: {error.message}")
            return error
        return StudentCodeFailed(f"{doing}: {str(reply.get('detail', kind))[:300]}")


def _as_sent(value: Any) -> Any:
    """Arguments may be remote things (sent as their names) or data (sent as is)."""
    if isinstance(value, (RemoteFunction, RemoteObject)):
        value = value.expr
    if isinstance(value, Expr):
        steps = (s if s[0] == "attr" else ("call", *_as_sent(s[1:])) for s in value.steps)
        return Expr(value.root, tuple(steps))
    if isinstance(value, list):
        return [_as_sent(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_as_sent(item) for item in value)
    if isinstance(value, dict):
        return {key: _as_sent(item) for key, item in value.items()}
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class RemoteModule:
    """A student's file, as the checks see it: ``get(name)`` is an attribute of it."""

    def __init__(self, student: StudentProcess, filename: str):
        self.student = student
        self.filename = filename

    def get(self, name: str, seconds: float = DEFAULT_SECONDS) -> Any:
        """``module.name``: data, or a :class:`RemoteFunction` for a function or class."""
        target = getattr(Expr.file(self.filename), name)
        return self.student.ask("get", target, f"importing {self.filename}", seconds)


class RemoteFunction:
    """A function or class in the student's process. Calling it calls it over there; the result
    comes back as data (an instance of a class stays there, as a :class:`RemoteObject`)."""

    def __init__(
        self, student: StudentProcess, expr: Expr, name: str, is_class: bool, defined_in: str = "?"
    ):
        self.student = student
        self.expr = expr
        self.__name__ = name.rsplit(".", 1)[-1]
        self.is_class = is_class
        #: Where its code was written, as the student's process says: one of the student's
        #: files (``"q4_worker_errors.py"``) or a module's name (``"exercises.pipe_env"``).
        self.defined_in = defined_in

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call_within(DEFAULT_SECONDS, *args, **kwargs)

    def call_within(self, seconds: float, *args: Any, **kwargs: Any) -> Any:
        """Calls it with a deadline of ``seconds``."""
        parts = [*map(_short, args), *(f"{key}={_short(v)}" for key, v in kwargs.items())]
        doing = f"{self.__name__}({', '.join(parts)})"  # split_envs(10, 3)
        target = self.expr(*args, **kwargs)
        return self.student.ask("call", target, doing, seconds, keep=self.is_class)

    def __repr__(self) -> str:
        return f"<the student's {self.__name__}>"


class RemoteObject:
    """An object kept in the student's process; each attribute read is a request."""

    def __init__(self, student: StudentProcess, expr: Expr, type_name: str):
        self.student = student
        self.expr = expr
        self.type_name = type_name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.student.ask("get", getattr(self.expr, name), f"reading {self.type_name}.{name}")

    def __repr__(self) -> str:
        return f"<the student's {self.type_name} object>"
