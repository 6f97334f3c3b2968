"""The student's side: imports a student's exercise files and does what the checks ask.

    python -m exercises.sandbox.runner FD SUBMISSION_FOLDER

:mod:`exercises.sandbox.client` starts this in the sandbox, ``FD`` its end of a socket to the
checks. It says ``{"hello": pid}`` before importing anything of the student's, then answers one
:mod:`~exercises.sandbox.wire` message at a time, each naming its target with a ``wire.Expr``:

    {"op": "get", "target": ...}                 -> {"value": data} or {"callable": {...}}
    {"op": "call", "target": ..., "keep": bool}  -> {"value": data} or {"handle": n, "type": name}
    {"op": "clean"}                              -> kills every process the student's code started

or ``{"error": ...}`` when the file is missing, does not import, lacks the name, or its code
raised. ``keep`` keeps the result here as object ``n`` (a vector env the checks step). A reply
also says which of the course's own functions the student's code called while answering
(``"shipped"``, :mod:`~exercises.sandbox.tracing`), and for a file imported meanwhile, which
its import called (``"imported": {file: [...]}``). The student's files import each other by
name (``from q2_overhead import fit_model``): their folder is on ``sys.path``, last. Nothing
this process says is trusted: the student's code runs in it and could change any of it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import itertools
import os
import resource
import socket
import sys
import tempfile
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import exercises
from exercises.sandbox import network, processes, tracing, wire

#: Frames from these files are the runner's own: left out of tracebacks shown to the student.
OWN_FOLDER = str(Path(__file__).resolve().parent)
#: The largest file the student's processes may write (a runaway print loop stops there).
MAX_FILE_BYTES = 64 * 1024 * 1024


class Refusal(Exception):
    """Ends a request early with this reply (an ``{"error": ...}``)."""

    def __init__(self, reply: dict):
        super().__init__(reply.get("error"))
        self.reply = reply


class Runner:
    """Holds the student's imported files and the objects kept for the checks."""

    def __init__(self, submission: Path):
        self.submission = submission
        self.modules: dict[str, ModuleType | Refusal] = {}
        self.kept: dict[int, Any] = {}
        self.numbers = itertools.count(1)
        #: Kept objects the student's code made (a vector env), whose methods are traced; the
        #: others are the checks' own (a worker harness).
        self.students_objects: set[int] = set()
        #: file -> what its import called of the shipped code; and what was imported during
        #: the request being answered.
        self.import_calls: dict[str, list[str]] = {}
        self.imported_now: list[str] = []
        self.tracer = tracing.TRACER or tracing.Tracer({})

    def handle(self, request: dict) -> dict:
        reply = self._answer(request)
        shipped = self.tracer.take()
        if shipped:
            reply["shipped"] = shipped
        if self.imported_now:
            reply["imported"] = {name: self.import_calls[name] for name in self.imported_now}
            self.imported_now = []
        return reply

    def _answer(self, request: dict) -> dict:
        op = request.get("op")
        try:
            if op == "clean":  # between two checks
                return {"value": processes.kill_descendants()}
            if op not in ("get", "call"):
                return {"error": "bad_request", "detail": f"unknown op {op!r:.40}"}
            target = request.get("target")
            root = target.get("root") if isinstance(target, dict) else None
            value = wire.decode(target, evaluate=self.evaluate)
            if op == "get" and callable(value):
                name = getattr(value, "__qualname__", type(value).__name__)[:200]
                where = self.defined_in(value)
                return {
                    "callable": {
                        "name": name,
                        "is_class": isinstance(value, type),
                        "defined_in": where,
                        "own": "/" not in where and (self.submission / where).is_file(),
                    }
                }
            if op == "call" and request.get("keep"):
                number = next(self.numbers)
                self.kept[number] = value
                if isinstance(root, dict) and self.is_students(root):
                    self.students_objects.add(number)
                return {"handle": number, "type": type(value).__qualname__[:200]}
            # Reading the answer may run the student's code too (a property, a lazy value).
            with self.tracer.watching(isinstance(root, dict) and self.is_students(root)):
                return {"value": wire.encode(value)}
        except Refusal as refusal:
            return refusal.reply
        except wire.WireError as error:
            return {"error": "bad_request", "detail": str(error)}

    def is_students(self, root: dict) -> bool:
        """Whether an expression's root is the student's: a file of theirs, or an object their
        code made (not the toolkit, nor an object the toolkit made)."""
        return "file" in root or root.get("handle") in self.students_objects

    def evaluate(self, expr: wire.Expr) -> Any:
        """The object ``expr`` names; what the student's code does wrong becomes a Refusal."""
        root = expr.root
        if "file" in root:
            value = self.load(str(root["file"]))
        elif "handle" in root:
            if root["handle"] not in self.kept:
                raise Refusal(
                    {"error": "bad_request", "detail": f"no object {root['handle']!r:.20}"}
                )
            value = self.kept[root["handle"]]
        else:
            from exercises.sandbox import toolkit  # imported on first use: it imports gymnasium

            value = toolkit
        # The student's code is traced; the toolkit's (the checks' helpers) is not.
        with self.tracer.watching(self.is_students(root)):
            for step in expr.steps:
                try:
                    if step[0] == "attr":
                        value = getattr(value, step[1])
                    else:
                        value = value(*step[1], **step[2])
                except BaseException as error:  # no such attribute, or the student's code raised
                    if step[0] == "attr" and isinstance(error, AttributeError):
                        raise Refusal({"error": "missing", "name": step[1]}) from None
                    raise Refusal({"error": "raised", "exception": describe(error)}) from None
        return value

    def defined_in(self, function: Any) -> str:
        """Where a function's (or a class's) code was written: the name of a file of the
        student's folder, or else the module it came from (``exercises.pipe_env``...), or
        ``"?"``."""
        try:
            # Where the function it wraps is: a partial's, a decorator's (functools.cache...).
            for _ in range(100):
                if isinstance(function, functools.partial):
                    function = function.func
                elif callable(getattr(function, "__wrapped__", None)):
                    function = function.__wrapped__
                else:
                    break
            filename = getattr(getattr(function, "__code__", None), "co_filename", None)
            if filename is None:  # a class, or a callable object: its module's file
                module = sys.modules.get(str(getattr(function, "__module__", "")))
                filename = getattr(module, "__file__", None)
            if (
                isinstance(filename, str)
                and Path(filename).resolve().parent == self.submission.resolve()
            ):
                return Path(filename).name
            module = getattr(function, "__module__", None) or type(function).__module__
            return str(module)[:200]
        except Exception:  # an object of the student's may raise on any attribute read
            return "?"

    def load(self, filename: str) -> ModuleType:
        """Imports a student's file once; a failure is remembered and reported every time."""
        if filename not in self.modules:
            self.modules[filename] = self._import(filename)
        module = self.modules[filename]
        if isinstance(module, Refusal):
            raise module
        return module

    def _import(self, filename: str) -> ModuleType | Refusal:
        path = self.submission / filename
        if "/" in filename or filename.startswith(".") or not path.is_file():
            return Refusal({"error": "no_file", "file": filename})
        spec = importlib.util.spec_from_file_location(f"submission_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        self.imported_now.append(filename)
        called: set[str] = set()
        try:
            with self.tracer.watching(), self.tracer.collecting() as called:
                spec.loader.exec_module(module)
        except BaseException as error:
            del sys.modules[spec.name]
            return Refusal(
                {"error": "import_failed", "file": filename, "traceback": student_traceback(error)}
            )
        finally:
            self.import_calls[filename] = sorted(called)
        return module


def describe(error: BaseException) -> dict:
    """An exception as data: its classes (most derived first), message, traceback, attributes."""
    types = [
        f"{kind.__module__}.{kind.__qualname__}"
        for kind in type(error).__mro__
        if issubclass(kind, BaseException)
    ]
    try:
        message = str(error)
    except Exception:
        message = "(its message could not be read)"
    attributes = {}
    with contextlib.suppress(Exception):
        attributes = {
            key: value
            for key, value in vars(error).items()
            if isinstance(key, str) and not key.startswith("_")
        }
    return {
        "types": types,
        "message": message[:4000],
        "traceback": student_traceback(error),
        "attributes": wire.encode(attributes),
    }


def student_traceback(error: BaseException) -> str:
    """The traceback without the runner's own frames, at most 4000 characters."""
    try:
        summary = traceback.TracebackException.from_exception(error)
        summary.stack = traceback.StackSummary.from_list(
            [frame for frame in summary.stack if not frame.filename.startswith(OWN_FOLDER)]
        )
        text = "".join(summary.format())
    except Exception:
        text = f"{type(error).__name__} (its traceback could not be formatted)"
    return text[-4000:]


def shipped_folders() -> dict[str, str]:
    """The folders of the course's own code, as this process imports them, and their labels:
    the exercises' (the scaffolding and the toolkit) and the ``vecenvs`` package's."""
    folders = {str(Path(exercises.__file__).resolve().parent): "exercises"}
    spec = importlib.util.find_spec("vecenvs")  # (found, not imported)
    if spec is not None and spec.submodule_search_locations:
        folders[next(iter(spec.submodule_search_locations))] = "vecenvs"
    return folders


def contain_this_process() -> None:
    """Limits that the student's code inherits, set before any of it runs."""
    # A runaway print loop or file writer stops at MAX_FILE_BYTES per file (SIGXFSZ).
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    # If the machine runs out of memory, the kernel kills the student's processes first.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as file:
        file.write("1000")
    # Orphans of the student's processes come to us, so that "clean" finds them.
    processes.become_subreaper()
    # No namespace turns the network off here: a seccomp filter does, where it can.
    if os.environ.get("VECENVS_SANDBOX") in ("user", "none"):
        network.turn_off()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    channel = socket.socket(fileno=int(argv[0]))
    contain_this_process()
    # The student's files import each other by name: their folder is on sys.path, after
    # everything else (a file of theirs named like a module never hides that module).
    sys.path.append(argv[1])
    descriptor, sink = tempfile.mkstemp(prefix="traced-", suffix=".txt")
    os.close(descriptor)
    tracing.start(shipped_folders(), sink=sink)
    runner = Runner(Path(argv[1]))
    # Before any of the student's code runs: tells the checks that the sandbox itself works.
    wire.send(channel, {"hello": os.getpid()})
    while True:
        try:
            request = wire.receive(channel)
        except (EOFError, ConnectionError):
            return 0  # the checks are done with us
        except wire.WireError as error:
            request = {"op": None, "detail": str(error)}
        reply = runner.handle(request)
        reply["id"] = request.get("id")
        try:
            wire.send(channel, reply)
        except wire.WireError as error:  # an answer too large to send
            wire.send(
                channel, {"id": request.get("id"), "error": "bad_reply", "detail": str(error)}
            )
        except (BrokenPipeError, ConnectionError):
            return 0


if __name__ == "__main__":
    sys.exit(main())
