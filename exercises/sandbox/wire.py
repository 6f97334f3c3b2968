"""What crosses between the checks and a student's process: plain data, and names of things.

The checks never hold an object made by a student's code. A student's function runs in a process
of its own (``exercises.sandbox.runner``); what it returns comes back through this module as plain
data, rebuilt here from JSON:

    None, bool, int, float, str, list, tuple, dict, range,
    numpy arrays of booleans or numbers (any shape)

Anything else arrives as an :class:`Opaque`: the name of its type and a short ``repr``, equal to
nothing but itself. Why not pickle? Unpickling runs code chosen by whoever wrote the bytes, and
an object a student made can lie: ``class Yes: __eq__ = lambda self, other: True`` is equal to
every expected answer. Data rebuilt from JSON can only be what it says it is: a number is an
``int`` or a ``float``, and ``==`` means what it says.

The other direction, from the checks to the student's process, may also carry an :class:`Expr`:
the name of an object that lives over there ("the student's ``split_envs``", "object 3",
"``toolkit.costly_env_fns(3)``"), which the runner evaluates there.

Messages are JSON objects, each sent as a 4-byte length and the UTF-8 text, at most
:data:`MAX_MESSAGE` bytes.
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
    """Something a student's code returned that is not plain data: only its type name and repr.

    It is equal to nothing but itself, so no check can be passed with it.
    """

    __slots__ = ("text", "type_name")

    def __init__(self, type_name: str, text: str = ""):
        self.type_name = type_name
        self.text = text

    def __repr__(self) -> str:
        # Its own repr, as the student would see it printed over there.
        return self.text or f"<{self.type_name} object>"


def type_name(value: Any) -> str:
    """The name of ``value``'s type as the student would say it (an Opaque's original type)."""
    return value.type_name.rsplit(".", 1)[-1] if isinstance(value, Opaque) else type(value).__name__


class Expr:
    """The name of an object in the student's process, built from a root and steps.

    ``Expr.toolkit().costly_env_fns(3, obs_size=5)`` does not call anything here: it records
    the attribute and the call, and the runner evaluates them when this arrives as an argument
    or a request. Roots: a student's file (``Expr.file("q1_chunks.py")``), an object the
    runner kept for the checks (``Expr({"handle": 3})``), or :mod:`exercises.sandbox.toolkit`.
    """

    __slots__ = ("root", "steps")

    def __init__(self, root: dict[str, Any], steps: tuple = ()):
        self.root = root
        self.steps = steps

    @classmethod
    def file(cls, filename: str) -> Expr:
        """A student's file, imported as a module."""
        return cls({"file": filename})

    @classmethod
    def toolkit(cls) -> Expr:
        """The checks' own helpers, :mod:`exercises.sandbox.toolkit`."""
        return cls({"toolkit": True})

    def __getattr__(self, name: str) -> Expr:
        if name.startswith("_"):  # keep dunder lookups (copy, pickle, pytest) working normally
            raise AttributeError(name)
        return Expr(self.root, (*self.steps, ("attr", name)))

    def __call__(self, *args: Any, **kwargs: Any) -> Expr:
        return Expr(self.root, (*self.steps, ("call", args, kwargs)))

    def __repr__(self) -> str:
        root = self.root.get("file") or (
            f"object {self.root['handle']}" if "handle" in self.root else "toolkit"
        )
        text = str(root)
        for step in self.steps:
            text += f".{step[1]}" if step[0] == "attr" else "(...)"
        return text


# ---------------------------------------------------------------------------------------- encoding


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-ready data; what is not plain data becomes an opaque description."""
    if depth > MAX_DEPTH:
        return _opaque(value, "nested too deeply")
    if value is None or type(value) in (bool, str):
        return value
    if isinstance(value, Expr):
        steps = [_encode_step(step, depth) for step in value.steps]
        return {"$": "expr", "root": value.root, "steps": steps}
    # No numpy object can exist where numpy was never imported (question 1's code, say): then
    # there is no need to pay for importing it.
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
            pairs = [
                [encode(key, depth + 1), encode(item, depth + 1)] for key, item in value.items()
            ]
            return {"$": "dict", "items": pairs}
        if (
            np
            and isinstance(value, np.ndarray)
            and value.dtype.kind in ARRAY_KINDS
            and value.dtype.fields is None
        ):
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


def _encode_step(step: tuple, depth: int) -> list:
    """``["attr", name]`` or ``["call", args as a list, kwargs as a dict]``."""
    if step[0] == "attr":
        return ["attr", step[1]]
    return ["call", encode(list(step[1]), depth + 1), encode(dict(step[2]), depth + 1)]


def _decode_step(step: Any, evaluate: Any, depth: int) -> tuple:
    kind = step[0] if isinstance(step, list) and step else None
    if kind == "attr" and len(step) == 2 and isinstance(step[1], str):
        return ("attr", step[1])
    if kind == "call" and len(step) == 3:
        args, kwargs = (decode(part, evaluate, depth + 1) for part in step[1:])
        if isinstance(args, list) and isinstance(kwargs, dict):
            return ("call", args, kwargs)
    raise WireError(f"not a step: {str(step)[:80]}")


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


# ---------------------------------------------------------------------------------------- decoding


def decode(data: Any, evaluate: Any = None, depth: int = 0) -> Any:
    """Rebuilds a value from :func:`encode`'s output.

    Args:
        data: parsed JSON.
        evaluate: what to do with an :class:`Expr` (the runner passes its evaluator); without
            it, an Expr in the data is a :class:`WireError`: the checks accept only data.
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
        return range(
            _field(data, "start", int), _field(data, "stop", int), _field(data, "step", int)
        )
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
    if dtype.kind not in ARRAY_KINDS or dtype.fields is not None or dtype.hasobject:
        return Opaque("numpy.ndarray", f"of dtype {dtype}")
    shape = _field(data, "shape", list)
    if not all(type(size) is int and size >= 0 for size in shape):
        raise WireError("an array shape must be non-negative integers")
    raw = base64.b64decode(_field(data, "data", str), validate=True)
    if len(raw) != dtype.itemsize * math.prod(shape):
        raise WireError("an array's data does not match its shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


# ---------------------------------------------------------------------------------------- framing


def send(channel: socket.socket, message: dict) -> None:
    """Sends one message (a dict of JSON-ready values)."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_MESSAGE:
        raise WireError(f"message of {len(body)} bytes, more than {MAX_MESSAGE}")
    channel.sendall(_HEADER.pack(len(body)) + body)


def receive(channel: socket.socket, deadline: float | None = None) -> dict:
    """Receives one message; waits until ``deadline`` (a ``time.perf_counter()`` value) at most.

    Raises:
        TimeoutError: nothing complete arrived by the deadline.
        EOFError: the other side closed the connection (for instance, its process died).
        WireError: what arrived is not a message.
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
