"""Sorting sampled stacks into what the time was spent on: env, pickling, pipes, waiting, ...

A stack sampled by py-spy says which function each process was in at that moment. To say
where a vector env's time goes, each stack gets one of the :data:`CATEGORIES`:

- **env compute**: the env's own ``step``/``reset`` and its per-env wrappers (TimeLimit,
  OrderEnforcing, PassiveEnvChecker): the work we actually want done.
- **serialization**: pickling messages before sending them and unpickling them after.
- **pipe & shm I/O**: moving bytes between processes: writing to and reading from a pipe,
  reading and writing shared memory.
- **waiting**: blocked until another process does something: the parent waiting for its
  workers' answers, a worker waiting for its next command.
- **bookkeeping**: the rest of the vector env's own work: checking actions, batching
  observations, merging infos, dispatching commands.
- **other**: anything else (the loop that drives the env, the interpreter's start-up...).

How a stack is classified: look at its frames from the innermost (the function running when
the sample was taken) outwards, and let the first frame that one of the :data:`RULES` matches
decide. Frames no rule matches (numpy, gymnasium's spaces, functools...) are neutral: they
take the category of whoever called them, so ``numpy.stack`` called while batching is
bookkeeping, and ``Discrete.contains`` called by ``CartPoleEnv.step`` is env compute.

Two choices worth knowing when reading a profile:

- The pool's workers batch their observations as MultiEnv does (bookkeeping), then copy the
  batch into shared memory (shm I/O: :class:`~vecenvs.workers.SharedArea`'s ``write_*`` and
  ``read_*``, and gymnasium's shared-memory helpers).
- Writing to a pipe wakes the process reading it, and on a busy machine the kernel may switch
  to that process right there: a ``send`` that looks slow often includes that hand-over.

Two rules look at the source line a frame was running (py-spy only sees Python frames: when a
Python line calls into C, such as ``pickle.loads`` or ``os.read``, the sample shows that line):

- ``Connection.recv`` spends its last line in ``pickle.loads``: that is serialization.
- ``Connection._recv_bytes`` first reads the message's 4-byte length header. That read blocks
  until the other process has sent something, so a process found there is *waiting* for the
  other side; the payload that follows is already in the pipe, and reading it is I/O. This is
  how a worker blocked on its next command, or a parent that calls ``recv()`` without polling
  first (gymnasium's AsyncVectorEnv, Stable-Baselines3's SubprocVecEnv), counts as waiting.
  (The line is read from the source file py-spy names or, for a profile recorded on another
  machine, from this machine's copy of the same module; if neither can be read, such reads
  count as pipe I/O.)

Example:
    >>> from vecenvs.profile.stacks import Frame
    >>> classify((Frame("run_worker", "/x/vecenvs/workers.py", 168),
    ...           Frame("CartPoleEnv.step", "/x/gymnasium/envs/classic_control/cartpole.py", 170)))
    'env compute'
    >>> explain((Frame("dumps", "/x/vecenvs/workers.py", 76),)).rule.why
    "vecenvs' worker messages are pickled by workers.dumps and unpickled by workers.loads"
"""

from __future__ import annotations

import functools
import importlib.util
import linecache
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from vecenvs.profile.stacks import Frame

__all__ = [
    "BOOKKEEPING",
    "CATEGORIES",
    "CATEGORY_COLORS",
    "ENV_COMPUTE",
    "OTHER",
    "PIPE_IO",
    "RULES",
    "SERIALIZATION",
    "WAITING",
    "Rule",
    "Verdict",
    "classify",
    "explain",
    "module_path",
]

ENV_COMPUTE = "env compute"
SERIALIZATION = "serialization"
PIPE_IO = "pipe & shm I/O"
WAITING = "waiting"
BOOKKEEPING = "bookkeeping"
OTHER = "other"

#: Every category, in the order tables and charts show them.
CATEGORIES = (ENV_COMPUTE, SERIALIZATION, PIPE_IO, WAITING, BOOKKEEPING, OTHER)

#: One colour per category, the same in the flame graph, the charts and the dashboard
#: (Okabe and Ito's palette, which colour-blind readers can tell apart). Waiting is grey: the
#: process is doing nothing.
CATEGORY_COLORS = {
    ENV_COMPUTE: "#009E73",
    SERIALIZATION: "#E69F00",
    PIPE_IO: "#56B4E9",
    WAITING: "#C8C8C8",
    BOOKKEEPING: "#CC79A7",
    OTHER: "#F0E442",
}


@dataclass(frozen=True)
class Rule:
    """Frames matching this rule put the sample in ``category``.

    A frame matches when its module path (see :func:`module_path`) starts with one of
    ``files`` (any file if empty), its function is one of ``functions`` (any if empty; a name
    matches a method too, ``"sleep"`` matches ``"Doorbell.sleep"``, and a function defined
    inside it, ``"SharedArea.write_actions.<locals>.<lambda>"``), and, if ``line_contains`` is
    set, the source line it was running contains that text.
    """

    category: str | None
    """One of :data:`CATEGORIES`, or None for a helper that is *neutral*: its frame takes the
    category of whoever called it (as frames no rule matches do)."""

    why: str
    """What the matching code does, and so why it belongs to ``category``."""

    files: tuple[str, ...] = ()
    """Module path prefixes, e.g. ``"gymnasium/envs/"`` or ``"vecenvs/workers.py"``."""

    functions: tuple[str, ...] = ()
    """Function names, e.g. ``"dumps"`` or ``"Doorbell.sleep"``."""

    line_contains: str | None = None
    """Text the frame's source line must contain, e.g. ``"_recv(4)"``."""

    def matches(self, frame: Frame, module: str, callee: Frame | None = None) -> bool:
        """Whether ``frame`` (whose module path is ``module``, and which was calling ``callee``,
        if it was not the innermost frame) matches this rule."""
        if self.files and not module.startswith(self.files):
            return False
        if self.functions and not any(
            frame.name == name
            or frame.name.endswith("." + name)
            or f".{name}.<locals>." in f".{frame.name}"
            for name in self.functions
        ):
            return False
        if self.line_contains is not None:
            return self.line_contains in _source_line(frame, module, callee)
        return True


# multiprocessing's Connection, in the standard library and in `multiprocess` (its dill fork).
_CONNECTION = ("multiprocessing/connection.py", "multiprocess/connection.py")

#: The rules, in order: for each frame, innermost first, the first rule that matches decides.
#: The order only matters between rules that can match the same frame.
RULES: tuple[Rule, ...] = (
    # ----- neutral: vecenvs' generic helpers work for whoever calls them.
    Rule(
        None,
        "vecenvs' helpers (nested batches, the futex system call) do their caller's work",
        files=("vecenvs/multi_env.py", "vecenvs/workers.py"),
        functions=("tree_map", "_futex"),
    ),
    # ----- waiting: nothing to do until another process acts.
    Rule(
        WAITING,
        "vecenvs spins on a word in shared memory until the other side moves it",
        files=("vecenvs/workers.py",),
        functions=("_spin_until",),
    ),
    # (Bare method names: Python 3.10 reports `sleep`, 3.11+ `Doorbell.sleep`; both match.)
    Rule(
        WAITING,
        "vecenvs sleeps on a doorbell (a futex), or in poll(), until the other side "
        "answers, gives a command or dies",
        files=("vecenvs/workers.py",),
        functions=("sleep", "_sleep_until_given", "_wait_done", "_message"),
    ),
    Rule(
        WAITING,
        "the async pool watches its envs' done words until enough are ready",
        files=("vecenvs/async_pool.py",),
        functions=("_wait_for",),
    ),
    Rule(
        WAITING,
        "multiprocessing's poll()/wait(): blocked until a pipe has data",
        files=_CONNECTION,
        functions=("wait", "poll", "_poll"),
    ),
    Rule(
        WAITING,
        "reading the 4-byte length of the next message blocks until the other process sends one",
        files=_CONNECTION,
        functions=("_recv_bytes",),
        line_contains="_recv(4)",
    ),
    Rule(
        WAITING,
        "blocked in a selector, lock, condition or queue",
        files=(
            "selectors.py",
            "threading.py",
            "queue.py",
            "multiprocessing/synchronize.py",
            "multiprocess/synchronize.py",
            "multiprocessing/queues.py",
            "multiprocess/queues.py",
        ),
    ),
    # ----- serialization: objects <-> bytes.
    Rule(
        SERIALIZATION,
        "pickle, dill and multiprocessing's ForkingPickler turn objects into bytes and back",
        files=(
            "pickle.py",
            "_compat_pickle.py",
            "dill/",
            "cloudpickle/",
            "multiprocessing/reduction.py",
            "multiprocess/reduction.py",
        ),
    ),
    Rule(
        SERIALIZATION,
        "vecenvs' worker messages are pickled by workers.dumps and unpickled by workers.loads",
        files=("vecenvs/workers.py",),
        functions=("dumps", "loads"),
    ),
    Rule(
        SERIALIZATION,
        "Connection.recv ends by unpickling what it read (pickle.loads, in C)",
        files=_CONNECTION,
        functions=("recv",),
        line_contains="loads(",
    ),
    # ----- pipe & shared-memory I/O: moving bytes between processes.
    Rule(
        PIPE_IO,
        "multiprocessing's Connection writing bytes to a pipe or reading them "
        "(its inner _send/_recv are neutral: their caller says which read it is)",
        files=_CONNECTION,
        functions=(
            "send",
            "send_bytes",
            "_send_bytes",
            "recv",
            "recv_bytes",
            "_recv_bytes",
            "recv_bytes_into",
        ),
    ),
    Rule(
        PIPE_IO,
        "reading and writing shared memory with gymnasium's and vecenvs' helpers",
        files=("gymnasium/vector/utils/shared_memory.py",),
    ),
    Rule(
        PIPE_IO,
        "ringing a doorbell wakes the processes asleep on it (a futex system call, "
        "as writing to a pipe wakes its reader)",
        files=("vecenvs/workers.py",),
        functions=("ring",),
    ),
    Rule(
        PIPE_IO,
        "the pool's workers write their results into shared memory, and the parent reads them",
        files=("vecenvs/workers.py",),
        functions=("write_observations", "read_observations", "write_actions", "read_actions"),
    ),
    # ----- env compute: the work we want done. Vector wrappers first: they work on the batch.
    Rule(
        BOOKKEEPING,
        "gymnasium's vector wrappers work on the whole batch",
        files=("gymnasium/wrappers/vector/",),
    ),
    Rule(
        ENV_COMPUTE,
        "an env's own code and its per-env wrappers (TimeLimit, OrderEnforcing, "
        "PassiveEnvChecker): work each env needs wherever it runs",
        files=("gymnasium/envs/", "gymnasium/wrappers/", "gymnasium/core.py", "vecenvs/envs/"),
    ),
    # ----- other: the profiled loop itself is not the vector env's work.
    Rule(OTHER, "the loop that drives the profiled vector env", files=("vecenvs/profile/",)),
    # ----- bookkeeping: the rest of the vector env.
    Rule(
        BOOKKEEPING,
        "vector-env code: checking actions, dispatching, batching, merging infos",
        files=("vecenvs/", "gymnasium/vector/", "stable_baselines3/common/vec_env/", "envpool/"),
    ),
    # Last: an env that lives elsewhere (ale_py, a notebook) is still an env.
    Rule(
        ENV_COMPUTE,
        "the step/reset of an env defined outside gymnasium",
        functions=("step", "reset"),
    ),
)


class Verdict(NamedTuple):
    """A stack's category, and which rule matched which frame (both ``None`` for "other")."""

    category: str
    rule: Rule | None
    frame: Frame | None


def classify(stack: Sequence[Frame], rules: Sequence[Rule] = RULES) -> str:
    """The category of one sampled stack (frames outermost first, as py-spy writes them)."""
    return explain(stack, rules).category


def explain(stack: Sequence[Frame], rules: Sequence[Rule] = RULES) -> Verdict:
    """Like :func:`classify`, but also says which rule decided, on which frame."""
    return _explain(tuple(stack), tuple(rules))


@functools.lru_cache(maxsize=1 << 16)
def _explain(stack: tuple[Frame, ...], rules: tuple[Rule, ...]) -> Verdict:
    # Cached: a profile has thousands of samples but only a few hundred distinct stacks.
    for index in range(len(stack) - 1, -1, -1):
        frame, callee = stack[index], (stack[index + 1] if index + 1 < len(stack) else None)
        module = module_path(frame.file)
        for rule in rules:
            if rule.matches(frame, module, callee):
                if rule.category is None:
                    break  # a neutral helper: its caller decides
                return Verdict(rule.category, rule, frame)
    return Verdict(OTHER, None, None)


# site-packages, or the standard library (`lib/python3.11/`, Windows' `Lib\`).
_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
_STDLIB = re.compile(r"[/\\](?:lib[/\\]python\d+(?:\.\d+)?t?|Lib)[/\\]")
# Packages the rules name, to find in a path that is neither (a source checkout).
_PACKAGES = ("vecenvs", "gymnasium", "stable_baselines3", "envpool", "multiprocess", "dill")


@functools.lru_cache(maxsize=4096)
def module_path(file: str) -> str:
    """A file's path from its top-level package, the same on every machine.

    ``/home/me/.venv/lib/python3.11/site-packages/gymnasium/core.py`` -> ``gymnasium/core.py``;
    ``/usr/lib/python3.11/multiprocessing/connection.py`` -> ``multiprocessing/connection.py``;
    ``/home/me/vecenvs/vecenvs/workers.py`` (a checkout) -> ``vecenvs/workers.py``. Any other
    file keeps its full path, so a script of yours named ``queue.py`` is not taken for the
    standard library's.
    """
    for pattern in (_INSTALLED, _STDLIB):
        matches = list(pattern.finditer(file))
        if matches:
            return file[matches[-1].end() :].replace("\\", "/")
    parts = re.split(r"[/\\]", file)
    for index in range(len(parts) - 2, -1, -1):
        if parts[index] in _PACKAGES:
            return "/".join(parts[index:])
    return file


def _source_line(frame: Frame, module: str, callee: Frame | None) -> str:
    """The source line ``frame`` was running, or ``""`` if it can't be read here.

    The file py-spy names comes first; then, for a profile recorded on another machine (or
    a relative path, as in py-spy's raw format), this machine's copy of the same module. A
    line that does not mention the function it was calling (``callee``) belongs to another
    version of the file, and is not trusted.
    """
    if frame.line <= 0:
        return ""
    called = callee.name.rsplit(".", 1)[-1] if callee is not None else ""
    for file in (frame.file, _local_copy(module)):
        text = linecache.getline(file, frame.line) if file else ""
        if text and called in text:
            return text
    return ""


@functools.lru_cache(maxsize=64)
def _local_copy(module: str) -> str | None:
    """The file of module path ``module`` (``"multiprocessing/connection.py"``) here, if any."""
    if not module.endswith(".py") or module.startswith("/"):
        return None
    name = module[: -len(".py")].replace("/", ".").removesuffix(".__init__")
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin else None
