"""Two guards of the student's process, each in a process of its own: the seccomp filter that
turns the network off where no namespace can (Unix sockets and pipes still work, every other
socket is refused, for good, in children too), and the tracer that notes which of the course's
own functions the student's code calls (entries into shipped code from outside it, not its
internal calls, not imports; switching it off is noted)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from exercises.sandbox.client import OwnWork
from exercises.sandbox.tracing import SWITCHED_OFF

REPO = Path(__file__).resolve().parent.parent


def run(code: str, folder: Path | None = None) -> str:
    """Runs ``code`` in a Python of its own (in ``folder``), the checkout importable."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=folder or REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
def test_the_network_filter_refuses_every_socket_but_unix_ones_for_good():
    said = run(
        """
        import multiprocessing, socket, subprocess, sys
        from exercises.sandbox import network
        print(network.turn_off())
        socket.socketpair()[0].close()
        multiprocessing.Pipe()
        for family in (socket.AF_INET, socket.AF_INET6):
            try:
                socket.socket(family)
                print("open")
            except PermissionError:
                print("refused")
        child = [sys.executable, "-c", "import socket; socket.socket(socket.AF_INET)"]
        print("child", subprocess.run(child, capture_output=True).returncode)
        """
    )
    assert said.split("\n")[:4] == ["off (a seccomp filter)", "refused", "refused", "child 1"]


def test_the_tracer_notes_entries_into_shipped_code_only(tmp_path):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "lib.py").write_text(
        "def inner(x):\n    return x + 1\n\n\ndef outer(x):\n    return inner(x) * 2\n\n\n"
        "class Box:\n    def open(self):\n        return outer(1)\n"
    )
    said = run(
        f"""
        import sys
        sys.path.insert(0, {str(shipped)!r})
        from exercises.sandbox import tracing
        tracer = tracing.start({{{str(shipped)!r}: "course"}})
        with tracer.watching():
            import lib  # an import is not a call
        print(tracer.take())
        with tracer.watching():
            lib.outer(1)  # outer, not inner: one entry
            lib.Box().open()
        print(tracer.take())
        with tracer.watching(False):
            lib.inner(1)
        with tracer.watching():
            sys.setprofile(None)
        print(tracer.take())
        """,
        tmp_path,
    )
    nothing, calls, switched = said.splitlines()
    assert nothing == "[]"
    assert calls in (
        "['course/lib.py: Box.open', 'course/lib.py: outer']",  # Python 3.11+
        "['course/lib.py: open', 'course/lib.py: outer']",  # 3.10: no qualified names
    )
    assert switched == f"[{SWITCHED_OFF!r}]"


def test_what_a_question_may_call_of_the_course():
    q4 = OwnWork(allowed=("vecenvs/envs/", "exercises/pipe_env.py"), refused=("basic_worker",))
    assert not q4.refuses("exercises/pipe_env.py: answer")
    assert not q4.refuses("vecenvs/envs/faulty.py: FaultyEnv.step")
    assert q4.refuses("exercises/pipe_env.py: basic_worker")
    assert q4.refuses("vecenvs/workers.py: run_worker")
    assert OwnWork().refuses("vecenvs/core.py: split_evenly")
    q6 = OwnWork(allowed=("",), refused=("vecenvs/bench/model.py",))
    assert not q6.refuses("vecenvs/cpus.py: available_cpus")
    assert q6.refuses("vecenvs/bench/model.py: fit_overhead_model")
    assert q6.refuses(SWITCHED_OFF)
