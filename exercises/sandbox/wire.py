"""What crosses between the checks and a student's process: plain data, and names of things.

A student's function runs in a process of its own (:mod:`exercises.sandbox.runner`); what it
returns comes back as JSON and is rebuilt here as plain data: None, bool, int, float, str, list,
tuple, dict, range, and numpy arrays of booleans or numbers. Anything else arrives as an
:class:`Opaque`, equal to nothing but itself. Not pickle: unpickling runs code chosen by whoever
wrote the bytes, and an object a student made can lie (``__eq__`` returning True passes every
comparison); data rebuilt from JSON can only be what it says it is.

Towards the student's process a message may also carry an :class:`Expr`, the name of an object
that lives over there, which the runner evaluates. Messages are JSON objects, each sent as a
4-byte length and the UTF-8 text, at most :data:`MAX_MESSAGE` bytes.
"""

from __future__ import annotations

import base64
import json
import math
import select
import socket
import struct
import sys
import time
from typing import Any

#: The largest message either side accepts, in bytes (a student's answer is small).
MAX_MESSAGE = 32 * 1024 * 1024
#: Containers nested deeper than this arrive as Opaque (JSON parsers recurse).
MAX_DEPTH = 40
#: numpy dtype kinds that cross: booleans, signed and unsigned integers, floats.
ARRAY_KINDS = "biuf"

_HEADER = struct.Struct("!I")


class WireError(Exception):
    """A message that is not one: too long, cut short, not JSON, or not in this format."""


class Opaque:
    """What a student's code returned that is not plain data: its type name and repr only."""

    __slots__ = ("text", "type_name")

    def __init__(self, type_name: str, text: str = ""):
        self.type_name = type_name
        self.text = text

    def __repr__(self) -> str:
        return self.text or f"<{self.type_name} object>"


def type_name(value: Any) -> str:
    """The name of ``value``'s type as the student would say it (an Opaque's original type)."""
    return value.type_name.rsplit(".", 1)[-1] if isinstance(value, Opaque) else type(value).__name__


class Expr:
    """The name of an object in the student's process: a root, then attribute and call steps.

    ``Expr.toolkit().costly_env_fns(3, obs_size=5)`` calls nothing here; the runner evaluates it
    over there. Roots: a student's file (``Expr.file("q1_chunks.py")``), an object the runner
    kept (``Expr({"handle": 3})``), or :mod:`exercises.sandbox.toolkit`.
    """

    __slots__ = ("root", "steps")

    def __init__(self, root: dict[str, Any], steps: tuple = ()):
        self.root = root
        self.steps = steps

    @classmethod
    def file(cls, filename: str) -> Expr:
        return cls({"file": filename})

    @classmethod
    def toolkit(cls) -> Expr:
        return cls({"toolkit": True})

    def __getattr__(self, name: str) -> Expr:
        if name.startswith("_"):  # keep dunder lookups (copy, pickle, pytest) working normally
            raise AttributeError(name)
        return Expr(self.root, (*self.steps, ("attr", name)))

    def __call__(self, *args: Any, **kwargs: Any) -> Expr:
        return Expr(self.root, (*self.steps, ("call", args, kwargs)))

    def __repr__(self) -> str:
        root = self.root
        text = root.get("file") or (f"object {root['handle']}" if "handle" in root else "toolkit")
        return str(text) + "".join(f".{s[1]}" if s[0] == "attr" else "(...)" for s in self.steps)


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-ready data; what is not plain data becomes an opaque description."""
    if depth > MAX_DEPTH:
        return _opaque(value, "nested too deeply")
    if value is None or type(value) in (bool, str):
        return value
    if isinstance(value, Expr):
        return {"$": "expr", "root": value.root, "steps": [_step(s, depth) for s in value.steps]}
    # Where numpy was never imported (question 1's code, say) no numpy object can exist.
    np = sys.modules.get("numpy")
    try:
        # Subclasses and numpy scalars become the plain value they stand for: whatever their own
        # __eq__ says, the checks compare that value.
        if isinstance(value, bool) or (np and isinstance(value, np.bool_)):
            return bool(value)
        if isinstance(value, int) or (np and isinstance(value, np.integer)):
            return int(value)
        if isinstance(value, float) or (np and isinstance(value, np.floating)):
            number = float(value)
            return number if math.isfinite(number) else {"$": "float", "text": repr(number)}
        if isinstance(value, str):
            return str.__str__(value)
        if isinstance(value, range):
            return {"$": "range", "start": value.start, "stop": value.stop, "step": value.step}
        if isinstance(value, (list, tuple)):
            kind = "tuple" if isinstance(value, tuple) else "list"
            return {"$": kind, "items": [encode(item, depth + 1) for item in value]}
        if isinstance(value, dict):
            pairs = [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]
            return {"$": "dict", "items": pairs}
        if np and isinstance(value, np.ndarray) and _plain_dtype(value.dtype):
            array = np.ascontiguousarray(value)
            return {
                "$": "ndarray",
                "dtype": array.dtype.str,
                "shape": list(array.shape),
                "data": base64.b64encode(array.tobytes()).decode("ascii"),
            }
    except Exception as error:
        return _opaque(value, f"could not be read: {type(error).__name__}")
    return _opaque(value)


def _step(step: tuple, depth: int) -> list:
    if step[0] == "attr":
        return ["attr", step[1]]
    return ["call", encode(list(step[1]), depth + 1), encode(dict(step[2]), depth + 1)]


def _plain_dtype(dtype: Any) -> bool:
    return dtype.kind in ARRAY_KINDS and dtype.fields is None and not dtype.hasobject


def _opaque(value: Any, note: str = "") -> dict:
    kind = type(value)
    try:
        text = note or repr(value)
    except Exception:
        text = "its repr() failed"
    return {
        "$": "opaque",
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "repr": str(text)[:200],
    }


def decode(data: Any, evaluate: Any = None, depth: int = 0) -> Any:
    """Rebuilds a value from :func:`encode`'s output (parsed JSON).

    ``evaluate`` turns an :class:`Expr` into its object (the runner's evaluator); without it an
    Expr is a :class:`WireError`: the checks accept only data.
    """
    if data is None or type(data) in (bool, int, float, str):
        return data
    if depth > MAX_DEPTH:
        return Opaque("?", "nested too deeply")
    if not isinstance(data, dict) or not isinstance(data.get("$"), str):
        raise WireError(f"not a value in the wire format: {str(data)[:80]}")
    tag = data["$"]
    if tag in ("list", "tuple"):
        items = [decode(item, evaluate, depth + 1) for item in _field(data, "items", list)]
        return items if tag == "list" else tuple(items)
    if tag == "dict":
        pairs = [
            (decode(key, evaluate, depth + 1), decode(item, evaluate, depth + 1))
            for key, item in _field(data, "items", list)
        ]
        try:
            return dict(pairs)
        except TypeError:  # an unhashable key (a list, an array): not a dict the checks can use
            return Opaque("dict", "with unhashable keys")
    if tag == "float":
        text = _field(data, "text", str)
        if text not in ("nan", "inf", "-inf"):
            raise WireError(f"not a float: {text[:20]}")
        return float(text)
    if tag == "range":
        return range(*(_field(data, name, int) for name in ("start", "stop", "step")))
    if tag == "ndarray":
        return _decode_array(data)
    if tag == "opaque":
        return Opaque(str(data.get("type", "?"))[:200], str(data.get("repr", ""))[:200])
    if tag == "expr":
        if evaluate is None:
            raise WireError("a name of an object where only data is accepted")
        steps = [_decode_step(step, evaluate, depth) for step in _field(data, "steps", list)]
        return evaluate(Expr(_field(data, "root", dict), tuple(steps)))
    raise WireError(f"unknown tag {tag[:40]!r}")


def _decode_step(step: Any, evaluate: Any, depth: int) -> tuple:
    kind = step[0] if isinstance(step, list) and step else None
    if kind == "attr" and len(step) == 2 and isinstance(step[1], str):
        return ("attr", step[1])
    if kind == "call" and len(step) == 3:
        args, kwargs = (decode(part, evaluate, depth + 1) for part in step[1:])
        if isinstance(args, list) and isinstance(kwargs, dict):
            return ("call", args, kwargs)
    raise WireError(f"not a step: {str(step)[:80]}")


def _field(data: dict, name: str, kind: type) -> Any:
    value = data.get(name)
    if type(value) is not kind:
        raise WireError(f"{data.get('$')!r} needs {name!r} as {kind.__name__}")
    return value


def _decode_array(data: dict) -> Any:
    import numpy as np  # here, not at the top: see encode()

    try:
        dtype = np.dtype(_field(data, "dtype", str))
    except TypeError as error:
        raise WireError(f"not a dtype: {data.get('dtype')!r:.40}") from error
    if not _plain_dtype(dtype):
        return Opaque("numpy.ndarray", f"of dtype {dtype}")
    shape = _field(data, "shape", list)
    if not all(type(size) is int and size >= 0 for size in shape):
        raise WireError("an array shape must be non-negative integers")
    raw = base64.b64decode(_field(data, "data", str), validate=True)
    if len(raw) != dtype.itemsize * math.prod(shape):
        raise WireError("an array's data does not match its shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def send(channel: socket.socket, message: dict) -> None:
    """Sends one message (a dict of JSON-ready values)."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_MESSAGE:
        raise WireError(f"message of {len(body)} bytes, more than {MAX_MESSAGE}")
    channel.sendall(_HEADER.pack(len(body)) + body)


def receive(channel: socket.socket, deadline: float | None = None) -> dict:
    """Receives one message, waiting until ``deadline`` (a ``time.perf_counter()`` value) at most.

    Raises TimeoutError (nothing complete by the deadline), EOFError (the other side closed the
    connection: its process died, say) or WireError (what arrived is not a message).
    """
    size = _HEADER.unpack(_read_exactly(channel, _HEADER.size, deadline))[0]
    if size > MAX_MESSAGE:
        raise WireError(f"message of {size} bytes announced, more than {MAX_MESSAGE}")
    try:
        message = json.loads(_read_exactly(channel, size, deadline).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise WireError(f"not JSON: {error}") from None
    if not isinstance(message, dict):
        raise WireError("a message must be a JSON object")
    return message


def _read_exactly(channel: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks, missing = [], size
    while missing:
        if deadline is not None:
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or not select.select([channel], [], [], remaining)[0]:
                raise TimeoutError("no complete message before the deadline")
        chunk = channel.recv(min(missing, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
