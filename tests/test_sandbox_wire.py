"""The wire between a student's process and the checks: only plain data crosses, rebuilt as
exactly what it says it is; an object that lies about equality arrives as something equal to
nothing; and what is not a message is refused, never run."""

from __future__ import annotations

import json
import socket
import struct
import time

import numpy as np
import pytest

from exercises.sandbox import wire


class AlwaysEqual:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class EqualInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def round_trip(value):
    """What the checks get when the student's code answers ``value`` (through real JSON)."""
    return wire.decode(json.loads(json.dumps(wire.encode(value))))


def test_plain_data_arrives_as_itself():
    value = {"a": [1, 2.5, True, None, "x"], ("t", 1): (range(2, 9, 3), [])}
    assert round_trip(value) == value
    assert type(round_trip((1,))) is tuple and type(round_trip([1])) is list
    assert [str(x) for x in round_trip([float("nan"), float("inf")])] == ["nan", "inf"]
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = round_trip({"observations": array, "done": np.array([True, False])})
    assert got["observations"].dtype == np.float32 and np.array_equal(got["observations"], array)
    assert got["done"].dtype == np.bool_ and got["done"].tolist() == [True, False]


def test_liars_become_plain_values_or_opaque():
    # A subclass of a plain type becomes the plain value it holds: its __eq__ stays behind.
    assert type(round_trip(EqualInt(3))) is int and round_trip(EqualInt(3)) != 4
    assert type(round_trip(np.float64(0.5))) is float and type(round_trip(np.bool_(True))) is bool
    # Anything else is only described, and equal to no expected answer, not even another copy.
    for liar, expected in (
        (AlwaysEqual(), "waiting"),
        ([AlwaysEqual()], [0.5]),
        ({"share": AlwaysEqual()}, {"share": 1.0}),
    ):
        got = round_trip(liar)
        assert got != expected and not (got == expected) and got != round_trip(liar)  # noqa: SIM201 (both operators lie differently)
    opaque = round_trip(AlwaysEqual())
    assert isinstance(opaque, wire.Opaque) and wire.type_name(opaque) == "AlwaysEqual"
    assert opaque != opaque.type_name and opaque not in ("a", "b", "c")
    assert isinstance(round_trip(np.array([object()], dtype=object)), wire.Opaque)


def test_what_is_not_data_is_refused():
    with pytest.raises(wire.WireError):  # a name of an object, where the checks accept only data
        wire.decode(wire.encode(wire.Expr.file("q1_chunks.py").split_envs(1, 2)))
    for bad in (
        {"$": "pickle", "data": "gASV"},
        [1, 2],
        {"$": "ndarray", "dtype": "<f4", "shape": [3], "data": "AAAA"},
    ):
        with pytest.raises(wire.WireError):
            wire.decode(bad)
    assert isinstance(
        wire.decode({"$": "ndarray", "dtype": "O", "shape": [1], "data": ""}), wire.Opaque
    )


def test_messages_are_framed_sized_and_waited_for_with_a_deadline():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        wire.send(theirs, {"value": wire.encode([1, 2])})
        assert wire.decode(wire.receive(ours, time.perf_counter() + 5)["value"]) == [1, 2]
        with pytest.raises(TimeoutError):
            wire.receive(ours, time.perf_counter() + 0.05)
        theirs.sendall(struct.pack("!I", wire.MAX_MESSAGE + 1))
        with pytest.raises(wire.WireError):
            wire.receive(ours, time.perf_counter() + 5)
        theirs.sendall(struct.pack("!I", 5) + b"[1,2]")
        with pytest.raises(wire.WireError):  # JSON, but not a message
            wire.receive(ours, time.perf_counter() + 5)
    ours, theirs = socket.socketpair()
    with ours:
        theirs.close()
        with pytest.raises(EOFError):
            wire.receive(ours, time.perf_counter() + 5)
