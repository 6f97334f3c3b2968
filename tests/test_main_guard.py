"""The ``if __name__ == "__main__":`` guard, taught and caught: the docs' spawn example, pasted
into a script, runs as written; without its guard it fails with an error that names the guard
and Python's cause, under spawn and under forkserver."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vecenvs import main_guard
from vecenvs.errors import WorkerDiedError

ROOT = Path(__file__).resolve().parents[1]


def docs_spawn_example() -> str:
    """The docs home page's example that passes ``start_method="spawn"``, as a reader copies it."""
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    spawn = [block for block in blocks if 'start_method="spawn"' in block]
    assert len(spawn) == 1, "the docs' home page should have one spawn example"
    return spawn[0]


def without_guard(code: str) -> str:
    """``code`` with its ``if __name__ == "__main__":`` line removed and its body dedented: what
    a reader who drops the guard runs."""
    head, guard, body = code.partition('if __name__ == "__main__":\n')
    assert guard, "the example should show the guard"
    return head + textwrap.dedent(body)


def run(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_docs_spawn_example_runs_as_written(tmp_path):
    done = run(tmp_path, docs_spawn_example())
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_without_the_guard_the_error_names_it(tmp_path, start_method):
    code = without_guard(docs_spawn_example()).replace('"spawn"', f'"{start_method}"')
    assert "__main__" not in code
    done = run(tmp_path, code)
    assert done.returncode != 0, done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("vecenvs.errors.WorkerDiedError: worker 1 (envs 16-31) stopped while")
    assert 'outside `if __name__ == "__main__":`' in last, last
    assert "finished its bootstrapping phase" in last, last
    assert "making the envs" not in last, last
    # The worker said it too, on its own stderr, before it stopped.
    assert done.stderr.count("vecenvs: this process stops:") >= 1, done.stderr[-3000:]


def test_only_the_guard_s_exit_code_is_explained():
    assert main_guard.explain(main_guard.EXIT_CODE) is not None
    assert main_guard.explain(1) is None and main_guard.explain(None) is None
    died = WorkerDiedError(2, [4, 5], 1, "start-up (making the envs)")
    assert "making the envs" in str(died) and "__main__" not in str(died)
    guarded = WorkerDiedError(2, [4, 5], main_guard.EXIT_CODE, "start-up (making the envs)")
    assert 'if __name__ == "__main__":' in str(guarded) and guarded.exitcode == main_guard.EXIT_CODE


def test_a_process_that_is_not_starting_is_left_alone():
    assert not main_guard.bootstrapping()
    main_guard.exit_if_bootstrapping()  # returns: this process is not importing a main script
