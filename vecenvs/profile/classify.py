"""Sorting sampled stacks into what the time was spent on: env, pickling, pipes, waiting, ...

Each stack gets one of the :data:`CATEGORIES`: the first frame, from the innermost outwards,
that one of the :data:`RULES` matches decides. Frames no rule matches (numpy, gymnasium's
spaces...) are neutral: they take their caller's category, so ``numpy.stack`` called while
batching is bookkeeping.

Gotchas when reading a profile: writing to a pipe wakes its reader, and a busy kernel may
switch to it right there, so a slow ``send`` often includes that hand-over. And py-spy sees
only Python frames, so two rules read the source line a frame was running (from the file
py-spy names, else this machine's copy of the module; unreadable: pipe I/O):
``Connection.recv`` ends in ``pickle.loads`` (serialization), and ``Connection._recv_bytes``
first reads the 4-byte length header, which blocks until the other side sends: waiting, as
for a worker blocked on its next command or a parent calling ``recv()`` without polling
(AsyncVectorEnv, SB3); reading the payload after it is I/O.
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

#: One colour per category, everywhere (Okabe and Ito's colour-blind-safe palette); waiting is
#: grey: the process is doing nothing.
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
    """Frames matching this rule put the sample in ``category`` (None: a *neutral* helper,
    whose frame takes its caller's category); ``why`` says what the matching code does.

    A frame matches when its module path (see :func:`module_path`) starts with one of
    ``files`` (any file if empty), its function is one of ``functions`` (any if empty; a name
    matches a method too, ``"sleep"`` matches ``"Doorbell.sleep"``, and a function defined
    inside it, ``"SharedArea.write_actions.<locals>.<lambda>"``), and, if ``line_contains`` is
    set, the source line it was running contains that text.
    """

    category: str | None
    why: str
    files: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    line_contains: str | None = None

    def matches(self, frame: Frame, module: str, callee: Frame | None = None) -> bool:
        """Whether ``frame`` (in module path ``module``, calling ``callee`` unless it is the
        innermost frame) matches this rule."""
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


def _mp(*modules: str) -> tuple[str, ...]:
    """Modules of multiprocessing, in the standard library and in `multiprocess` (its dill fork)."""
    packages = ("multiprocessing", "multiprocess")
    return tuple(f"{package}/{module}.py" for module in modules for package in packages)


_CONNECTION = _mp("connection")
# The pool's protocol and the layer under it.
_WORKERS = ("vecenvs/workers.py", "vecenvs/doorbell.py", "vecenvs/shm.py")
#: Names of functions that older versions of the pool had and that the profiles recorded in
#: ``tests/data/profiles`` still name: a rename leaves the old name here (and in its rule) until
#: those are recorded again. Every other function a rule names must exist in the modules it
#: names (tests/test_classify_names.py checks both). None since the recording of 2026-11-27.
RECORDED_NAMES: tuple[str, ...] = ()

#: The rules, in order: for each frame, innermost first, the first rule that matches decides.
#: The order only matters between rules that can match the same frame.
RULES: tuple[Rule, ...] = (
    # ----- neutral: vecenvs' generic helpers work for whoever calls them.
    Rule(
        None,
        "vecenvs' helpers (nested batches, the futex system call) do their caller's work",
        files=("vecenvs/multi_env.py", *_WORKERS),
        functions=("tree_map", "_futex"),
    ),
    # ----- waiting: nothing to do until another process acts.
    Rule(
        WAITING,
        "vecenvs spins on a word in shared memory until the other side moves it "
        "(then sleeps on a doorbell: the rule below)",
        files=_WORKERS,
        functions=("wait",),
    ),
    # (Bare method names: Python 3.10 reports `sleep`, 3.11+ `Doorbell.sleep`; both match.)
    Rule(
        WAITING,
        "vecenvs sleeps on a doorbell (a futex), or in poll(), until the other side "
        "answers, gives a command or dies",
        files=_WORKERS,
        functions=("sleep", "read_message"),
    ),
    Rule(
        WAITING,
        "the async pool watches its envs' done words until enough are ready (counting them)",
        files=("vecenvs/async_pool.py",),
        functions=("_wait_for", "_ReadyCount.count"),
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
        files=("selectors.py", "threading.py", "queue.py", *_mp("synchronize", "queues")),
    ),
    # ----- serialization: objects <-> bytes.
    Rule(
        SERIALIZATION,
        "pickle, dill and multiprocessing's ForkingPickler turn objects into bytes and back",
        files=("pickle.py", "_compat_pickle.py", "dill/", "cloudpickle/", *_mp("reduction")),
    ),
    Rule(
        SERIALIZATION,
        "vecenvs' worker messages are pickled by workers.dumps and unpickled by workers.loads",
        files=_WORKERS,
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
            *("send", "send_bytes", "_send_bytes"),
            *("recv", "recv_bytes", "_recv_bytes", "recv_bytes_into"),
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
        files=_WORKERS,
        functions=("ring",),
    ),
    Rule(
        PIPE_IO,
        "the pool's workers write their results into shared memory, and the parent reads them",
        files=_WORKERS,
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


# Cached: a profile has thousands of samples but only a few hundred distinct stacks.
@functools.lru_cache(maxsize=1 << 16)
def _explain(stack: tuple[Frame, ...], rules: tuple[Rule, ...]) -> Verdict:
    for index in range(len(stack) - 1, -1, -1):
        frame, callee = stack[index], (stack[index + 1] if index + 1 < len(stack) else None)
        module = module_path(frame.file)
        rule = next((rule for rule in rules if rule.matches(frame, module, callee)), None)
        if rule is not None and rule.category is not None:  # None: neutral, its caller decides
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

    The file py-spy names comes first, then this machine's copy of the same module (a profile
    recorded elsewhere, or py-spy's relative raw paths). A line that does not mention the
    function it was calling (``callee``) belongs to another version of the file: not trusted.
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
    name = module.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None else None
