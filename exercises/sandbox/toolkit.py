"""What the checks build inside the student's process: env factories, a worker whose failures
are scripted (no worker here catches an env's exceptions: that is question 4's answer), a
harness that drives a student's worker over a real pipe, and a reader of the predictions in a
student's notebooks (for the grader).

A check names these as ``toolkit.NAME(...)`` (a :class:`~exercises.sandbox.wire.Expr`); the
runner builds them next to the student's code, because env factories and pipes cannot cross a
process boundary as data. Nothing here decides a score: the checks judge what comes back.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

import vecenvs  # noqa: F401  (registers vecenvs/Costly-v0 and vecenvs/Faulty-v0)
from exercises.pipe_env import Command, PipeVecEnv, answer
from exercises.sandbox import tracing
from vecenvs.envs import FaultyEnv, faulty_env_fns  # noqa: F401  (checks ask for it by name)


def env_fn(env_id: str, **kwargs: Any) -> Callable[[], gym.Env]:
    return functools.partial(gym.make, env_id, **kwargs)


def env_fns(env_id: str, num_envs: int, **kwargs: Any) -> list[Callable[[], gym.Env]]:
    return [env_fn(env_id, **kwargs)] * num_envs


def env_fns_each(env_id: str, kwargs_per_env: list[dict[str, Any]]) -> list[Callable[[], gym.Env]]:
    """One factory per env, each with its own arguments (a slow env beside fast ones...)."""
    return [env_fn(env_id, **kwargs) for kwargs in kwargs_per_env]


def faulty_env_fns_at(
    num_envs: int, bad_indices: list[int], **faulty_kwargs: Any
) -> list[Callable[[], gym.Env]]:
    """Like ``faulty_env_fns``, with every env in ``bad_indices`` faulty (several hung...)."""
    good = functools.partial(FaultyEnv, fail_on=None)
    bad = functools.partial(FaultyEnv, **faulty_kwargs)
    return [bad if index in bad_indices else good for index in range(num_envs)]


#: The exceptions a :class:`FailingEnv` may raise, by name.
ERRORS = {"RuntimeError": RuntimeError, "ValueError": ValueError, "KeyError": KeyError}


class FailingEnv(gym.Wrapper):
    """CartPole that raises (``RuntimeError`` unless ``error`` names another of
    :data:`ERRORS`) at the ``at``-th reset or step, and again at each of the ``also`` later
    ones. The message ends with ``token``, chosen at random by the check: only a real traceback
    carries it."""

    def __init__(
        self, fail_on: str, at: int, token: str, error: str = "RuntimeError", also: tuple = ()
    ):
        super().__init__(gym.make("CartPole-v1"))
        self.fail_on, self.at, self.token = fail_on, at, token
        self.error, self.failing = ERRORS[error], {at, *also}
        self.counts = {"reset": 0, "step": 0}

    def _count(self, phase: str) -> None:
        self.counts[phase] += 1
        if phase == self.fail_on and self.counts[phase] in self.failing:
            number = self.counts[phase]
            raise self.error(f"deliberate failure in {phase} #{number} ({self.token})")

    def reset(self, **kwargs: Any) -> Any:
        self._count("reset")
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        self._count("step")
        return self.env.step(action)


def failing_env_fn(fail_on: str, at: int, token: str, **options: Any) -> Callable[[], gym.Env]:
    return functools.partial(FailingEnv, fail_on, at, token, **options)


class ScriptedFailure(gym.Wrapper):
    """An env whose ``at``-th step is reported as failed by :func:`scripted_worker`, which
    then does not step it: question 3's checks need a worker reply ``(False, text)``, and this
    gives them one without a worker that catches an env's exceptions (that worker is question
    4's answer, which nothing the student has may hold)."""

    def __init__(self, env_fn: Callable[[], gym.Env], at: int):
        super().__init__(env_fn())
        self.at, self.steps = at, 0

    def failure(self, command: Command) -> str | None:
        """The text to send instead of an answer, when this command is the scripted failure."""
        if command is not Command.STEP:
            return None
        self.steps += 1
        if self.steps != self.at:
            return None
        return (
            "Traceback (most recent call last):\n  (a failure scripted by the checks)\n"
            f"RuntimeError: deliberate failure in step #{self.at}\n"
        )


def scripted_failure_fns(num_envs: int, bad_index: int, at: int) -> list[Callable[[], gym.Env]]:
    """``num_envs`` CartPoles as ``faulty_env_fns`` makes them, of which env ``bad_index``
    fails at its ``at``-th step when served by :func:`scripted_worker`."""
    good = functools.partial(FaultyEnv, fail_on=None)
    bad = functools.partial(ScriptedFailure, good, at)
    return [bad if index == bad_index else good for index in range(num_envs)]


def scripted_worker(pipe: Any, env_fn: Callable[[], gym.Env]) -> None:
    """``pipe_env.basic_worker``, which also replies ``(False, text)`` when its env's script
    (:class:`ScriptedFailure`) says so. Like basic_worker it catches nothing: an env that
    raises ends it, and it closes its env only after CLOSE."""
    env = env_fn()
    while True:
        command, data = pipe.recv()
        if command is Command.CLOSE:
            pipe.send((True, None))
            break
        failure = env.failure(command) if isinstance(env, ScriptedFailure) else None
        pipe.send((False, failure) if failure else (True, answer(env, command, data)))
    env.close()


class _CloseRecorder(gym.Wrapper):
    """Writes a file when closed, so the harness can tell whether the worker closed its env."""

    def __init__(self, env_fn: Callable[[], gym.Env], marker: str):
        super().__init__(env_fn())
        self.marker = marker

    def close(self) -> None:
        Path(self.marker).write_text("closed")
        super().close()


def _traced(worker_function: Callable, pipe: Any, env_fn: Callable[[], gym.Env]) -> None:
    """Runs a student's worker function in its forked process with the course's own functions
    it calls noted (:mod:`exercises.sandbox.tracing`): the runner reads them from there."""
    tracing.watch_this_process()
    worker_function(pipe, env_fn)


class WorkerUnderTest:
    """A student's worker function in a forked process, and the parent's end of its pipe;
    question 4's checks call its methods, each returning plain data saying what happened."""

    def __init__(self, worker_function: Callable, env_fn: Callable[[], gym.Env]):
        self.marker = os.path.join(tempfile.mkdtemp(prefix="closed-"), "env-closed")
        recorded = functools.partial(_CloseRecorder, env_fn, self.marker)
        # Started as the exercises' vector env starts its workers; then driven from here.
        worker = functools.partial(_traced, worker_function)
        envs = PipeVecEnv([recorded], worker=worker)
        self.pipe, self.process = envs.parent_pipes[0], envs.processes[0]

    def ask(self, command: str, data: Any = None, seconds: float = 5.0) -> dict:
        """Sends ``(Command[command], data)``; returns ``{"reply": ...}``, ``{"silent": True}``
        (no answer within ``seconds``) or ``{"dead": exit code}`` (the worker process ended)."""
        try:
            self.pipe.send((Command[command], data))
        except (BrokenPipeError, OSError):
            return self._dead(f"sending {command}")
        if not self.pipe.poll(seconds):
            if not self.process.is_alive():
                return self._dead(f"answering {command}")
            return {"silent": True}
        try:
            return {"reply": self.pipe.recv()}
        except (EOFError, OSError):  # closed or reset: the worker is gone
            return self._dead(f"answering {command}")

    def _dead(self, doing: str) -> dict:
        self.process.join(1.0)
        return {"dead": self.process.exitcode, "doing": doing}

    def close_pipe(self) -> None:
        """Closes the parent's end: the worker's ``recv()`` now raises ``EOFError``."""
        self.pipe.close()

    def join(self, seconds: float) -> dict:
        self.process.join(seconds)
        return {"alive": self.process.is_alive(), "exitcode": self.process.exitcode}

    def env_was_closed(self) -> bool:
        return os.path.exists(self.marker)

    def close(self) -> None:
        """Ends the worker, politely first."""
        self.pipe.close()
        self.process.join(2.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2.0)


#: The largest JSON file of a student's that :func:`read_json` reads.
MAX_JSON_BYTES = 5 * 1024 * 1024


def read_json(filename: str) -> Any:
    """A JSON file of the student's folder, as data for the checks to judge (None when there
    is no such file). Only a file directly in the folder: no path, no link."""
    path = Path(filename)
    if path.name != filename or filename.startswith("."):
        raise ValueError(f"{filename!r}: expected a file name, not a path")
    if path.is_symlink() or not path.is_file():
        return None
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ValueError(f"{filename} is larger than {MAX_JSON_BYTES // 2**20} MiB")
    return json.loads(path.read_text(encoding="utf-8"))


#: What :func:`notebook_guesses` reads at most: notebooks, bytes per notebook, characters per
#: value and per reasoning.
MAX_NOTEBOOKS, MAX_NOTEBOOK_BYTES, MAX_GUESS_CHARS, MAX_REASONING_CHARS = (
    40,
    20 * 1024**2,
    300,
    1500,
)
#: The names of the notebooks' prediction cells' variables start with one of these.
GUESS_PREFIXES = ("MY_GUESS", "MY_PREDICTION")


def notebook_guesses(folder: str = ".") -> dict[str, Any]:
    """The predictions written in the notebooks under ``folder`` (the student's files): for each
    notebook, ``{variable: {"value": the text of its value, "reasoning": the assignment with the
    comments around it, "ran": "before" / "after" / "not run"}}`` for every ``MY_GUESS...``
    (or ``MY_PREDICTION...``) assignment in its code cells, and a list of what could not be
    read. ``ran`` compares the cell's execution count with the next code cell's (the
    measurement it predicts): "before" when the guess ran first. Nothing in them runs: the
    cells are parsed, never executed."""
    found: dict[str, dict[str, dict[str, str]]] = {}
    problems: list[str] = []
    paths = sorted(Path(folder).rglob("*.ipynb"))
    for path in paths[:MAX_NOTEBOOKS]:
        name = str(path.relative_to(folder))
        if ".ipynb_checkpoints" in path.parts:
            continue
        try:
            if path.stat().st_size > MAX_NOTEBOOK_BYTES:
                raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB")
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
            code = [c for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]
            guesses = {}
            for index, cell in enumerate(code):
                source = cell.get("source", "")
                source = "".join(source) if isinstance(source, list) else str(source)
                if any(prefix in source for prefix in GUESS_PREFIXES):
                    following = code[index + 1] if index + 1 < len(code) else {}
                    ran = _ran(cell.get("execution_count"), following.get("execution_count"))
                    for variable, guess in _guesses_in(source).items():
                        guesses[variable] = {**guess, "ran": ran}
            found[name] = guesses
        except (OSError, ValueError, AttributeError, RecursionError, MemoryError) as error:
            problems.append(f"{name}: could not be read ({type(error).__name__}: {error})"[:200])
    if len(paths) > MAX_NOTEBOOKS:
        problems.append(f"only the first {MAX_NOTEBOOKS} of {len(paths)} notebooks were read")
    return {"notebooks": found, "problems": problems}


def _ran(guess: Any, measurement: Any) -> str:
    """Whether a guess cell ran before the cell after it, by their execution counts."""
    if type(guess) is not int:
        return "not run"
    if type(measurement) is not int:
        return "before"  # the measurement never ran (or ran in another session, then cleared)
    return "before" if guess < measurement else "after"


def _guesses_in(source: str) -> dict[str, dict[str, str]]:
    """``{name: {"value": its text, "reasoning": the statement's lines with the comment lines
    just above and below it}}`` of the top-level ``MY_GUESS... = value`` statements of a cell."""
    lines = source.splitlines()
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython's %magics and !commands: leave those lines out and try again
        kept = [line if not line.lstrip().startswith(("%", "!")) else "" for line in lines]
        source = "\n".join(kept)
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return {}
    guesses = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id.startswith(GUESS_PREFIXES):
                    text = ast.get_source_segment(source, node.value) or "?"
                    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
                    while first > 0 and lines[first - 1].lstrip().startswith("#"):
                        first -= 1
                    while last + 1 < len(lines) and lines[last + 1].lstrip().startswith("#"):
                        last += 1
                    reasoning = "\n".join(lines[first : last + 1])
                    guesses[target.id] = {
                        "value": text[:MAX_GUESS_CHARS],
                        "reasoning": reasoning[:MAX_REASONING_CHARS],
                    }
    return guesses
