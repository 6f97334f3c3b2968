"""Tests of vecenvs.profile: the classifier on recorded py-spy output, the files, real runs.

Most tests classify real py-spy recordings committed in ``tests/data/profiles/`` (see
``record_fixtures.py`` there): fast, and independent of ptrace permission. A few profile a
real run end to end, through :func:`vecenvs.profile.profile` and through the command line;
they need py-spy to be allowed to attach, and say so in a visible skip where it is not.
The permission failure itself is tested with a fake py-spy printing py-spy's real messages:
as root we cannot lose the permission for real.
"""

from __future__ import annotations

import inspect
import json
import linecache
import multiprocessing.connection
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree

import psutil
import pytest
from conftest import live_children, press_ctrl_c, wait_gone

from vecenvs import cli
from vecenvs.bench.store import RunCancelled
from vecenvs.profile import (
    CATEGORIES,
    CATEGORY_COLORS,
    RULES,
    Frame,
    ProfileConfig,
    ProfilerError,
    PySpyNotFoundError,
    PySpyPermissionError,
    StackSample,
    breakdown,
    breakdown_figure,
    check_attach,
    classify,
    explain,
    find_py_spy,
    flamegraph_svg,
    profile,
    read_collapsed,
    read_samples,
    read_speedscope,
    write_collapsed,
)
from vecenvs.profile.breakdown import is_counted
from vecenvs.profile.classify import (
    BOOKKEEPING,
    ENV_COMPUTE,
    OTHER,
    PIPE_IO,
    SERIALIZATION,
    WAITING,
    module_path,
)
from vecenvs.profile.flamegraph import flame_tree

DATA = Path(__file__).resolve().parent / "data" / "profiles"
SVG = "{http://www.w3.org/2000/svg}"

#: What py-spy 0.4 really prints when it may not attach (benfred/py-spy src/main.rs): as a
#: normal user, as root in Docker without SYS_PTRACE, on macOS without sudo, and the generic
#: error chain of root without CAP_SYS_PTRACE.
PY_SPY_PERMISSION_MESSAGES = {
    "user": "Permission Denied: Try running again with elevated permissions by going "
    "'sudo env \"PATH=$PATH\" !!'",
    "docker": "Permission Denied\n\nIt looks like you are running in a docker container. Please "
    "make sure you started your container with the SYS_PTRACE capability. See "
    "https://github.com/benfred/py-spy#how-do-i-run-py-spy-in-docker for more details",
    "macos": "This program requires root on OSX.\n"
    "Try running again with elevated permissions by going 'sudo !!'",
    "no-capability": "Error: Failed to get process executable name. Check that the process is "
    "running.\nReason: Permission denied (os error 13)",
}


# ------------------------------------------------------------------------------------------------
# Helpers and fixtures
# ------------------------------------------------------------------------------------------------


def load(name: str) -> list[StackSample]:
    """The samples of the recorded profile ``name``, labelled with its processes map."""
    labels = json.loads((DATA / f"{name}.processes.json").read_text())
    return read_speedscope(
        DATA / f"{name}.speedscope.json", {int(pid): label for pid, label in labels.items()}
    )


def fake_py_spy(directory: Path, message: str, exit_code: int = 1) -> Path:
    """An executable that prints ``message`` on stderr and exits, as py-spy does on failure."""
    path = directory / "py-spy"
    path.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stderr.write({message!r} + '\\n')\n"
        f"sys.exit({exit_code})\n"
    )
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def attach() -> None:
    """Skip, visibly and saying why, where py-spy may not attach to processes."""
    result = check_attach()
    if not result.ok:
        pytest.skip(f"py-spy cannot attach here, so no real profile can run: {result.message}")


def site(path: str) -> str:
    """A file inside an installed package."""
    return "/venv/lib/python3.11/site-packages/" + path


def stdlib(path: str) -> str:
    """A file of the standard library."""
    return "/usr/lib/python3.11/" + path


def line_of(function, text: str) -> int:
    """The line number of the first line of ``function`` containing ``text``."""
    source, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(source) if text in line)


CONNECTION_FILE = multiprocessing.connection.__file__
HEADER_LINE = line_of(multiprocessing.connection.Connection._recv_bytes, "_recv(4)")
PAYLOAD_LINE = line_of(multiprocessing.connection.Connection._recv_bytes, "return self._recv(size)")
UNPICKLE_LINE = line_of(multiprocessing.connection._ConnectionBase.recv, "loads(")


def frames(*names_and_files: tuple[str, str]) -> tuple[Frame, ...]:
    return tuple(Frame(name, file, 1) for name, file in names_and_files)


# ------------------------------------------------------------------------------------------------
# Classification rules, on hand-made stacks (outermost frame first, as py-spy writes them)
# ------------------------------------------------------------------------------------------------

WORKER_LOOP = ("run_worker", "/repo/vecenvs/workers.py")

CLASSIFIED = {
    "numpy inside an env is env compute": (
        frames(
            WORKER_LOOP,
            ("MultiEnv.step_each", "/repo/vecenvs/multi_env.py"),
            ("TimeLimit.step", site("gymnasium/wrappers/common.py")),
            ("CartPoleEnv.step", site("gymnasium/envs/classic_control/cartpole.py")),
            ("Discrete.contains", site("gymnasium/spaces/discrete.py")),
            ("issubdtype", site("numpy/_core/numerictypes.py")),
        ),
        ENV_COMPUTE,
    ),
    "a per-env wrapper is env compute": (
        frames(
            ("SyncVectorEnv.step", site("gymnasium/vector/sync_vector_env.py")),
            ("PassiveEnvChecker.step", site("gymnasium/wrappers/common.py")),
        ),
        ENV_COMPUTE,
    ),
    "a teaching env sleeping in step is env compute": (
        frames(WORKER_LOOP, ("CostlyEnv.step", "/repo/vecenvs/envs/costly.py")),
        ENV_COMPUTE,
    ),
    "an env from another package is env compute": (
        frames(
            ("MultiEnv.step_each", "/repo/vecenvs/multi_env.py"),
            ("AtariEnv.step", site("ale_py/env.py")),
        ),
        ENV_COMPUTE,
    ),
    "numpy while batching is bookkeeping": (
        frames(
            ("MultiEnv.step", "/repo/vecenvs/multi_env.py"),
            ("_concatenate_base", site("gymnasium/vector/utils/space_utils.py")),
            ("stack", site("numpy/_core/shape_base.py")),
        ),
        BOOKKEEPING,
    ),
    "checking actions is bookkeeping": (
        frames(
            ("ChunkedVecEnv.step_async", "/repo/vecenvs/core.py"),
            ("_BoundsCheck.__call__", "/repo/vecenvs/multi_env.py"),
        ),
        BOOKKEEPING,
    ),
    "SB3's vector env code is bookkeeping": (
        frames(
            (
                "SubprocVecEnv.step_wait",
                site("stable_baselines3/common/vec_env/subproc_vec_env.py"),
            ),
        ),
        BOOKKEEPING,
    ),
    "gymnasium's vector wrappers are bookkeeping": (
        frames(
            ("RecordEpisodeStatistics.step", site("gymnasium/wrappers/vector/common.py")),
        ),
        BOOKKEEPING,
    ),
    "our pickling is serialization": (
        frames(
            ("ProcessWorker.send_message", "/repo/vecenvs/workers.py"),
            ("dumps", "/repo/vecenvs/workers.py"),
        ),
        SERIALIZATION,
    ),
    "unpickling numpy arrays is serialization": (
        frames(
            ("ProcessWorker.read_message", "/repo/vecenvs/workers.py"),
            ("loads", "/repo/vecenvs/workers.py"),
            ("_frombuffer", site("numpy/_core/numeric.py")),
        ),
        SERIALIZATION,
    ),
    "ForkingPickler is serialization": (
        frames(
            ("_ConnectionBase.send", stdlib("multiprocessing/connection.py")),
            ("ForkingPickler.dumps", stdlib("multiprocessing/reduction.py")),
        ),
        SERIALIZATION,
    ),
    "writing to a pipe is pipe I/O": (
        frames(
            ("ProcessWorker.send_message", "/repo/vecenvs/workers.py"),
            ("_ConnectionBase.send_bytes", site("multiprocess/connection.py")),
            ("Connection._send_bytes", site("multiprocess/connection.py")),
            ("Connection._send", site("multiprocess/connection.py")),
        ),
        PIPE_IO,
    ),
    "gymnasium's shared-memory writes are shm I/O": (
        frames(
            ("_async_worker", site("gymnasium/vector/async_vector_env.py")),
            ("_write_base_to_shared_memory", site("gymnasium/vector/utils/shared_memory.py")),
        ),
        PIPE_IO,
    ),
    "the pool writing actions into shared memory is shm I/O": (
        frames(
            ("ChunkedVecEnv.step_async", "/repo/vecenvs/core.py"),
            ("SharedArea.write_actions", "/repo/vecenvs/workers.py"),
            ("tree_map", "/repo/vecenvs/multi_env.py"),
            ("SharedArea.write_actions.<locals>.<lambda>", "/repo/vecenvs/workers.py"),
        ),
        PIPE_IO,
    ),
    "a worker copying its results into shared memory is shm I/O": (
        frames(
            WORKER_LOOP,
            ("Chunk._reply", "/repo/vecenvs/workers.py"),
            ("SharedArea.write_observations", "/repo/vecenvs/workers.py"),
        ),
        PIPE_IO,
    ),
    "copying the batch out is bookkeeping": (
        frames(("ChunkedVecEnv._batch", "/repo/vecenvs/core.py"), ("deepcopy", stdlib("copy.py"))),
        BOOKKEEPING,
    ),
    "the parent's sleep on its doorbell is waiting": (
        frames(
            ("ChunkedVecEnv._gather", "/repo/vecenvs/core.py"),
            ("WordCrew.hear", "/repo/vecenvs/workers.py"),
            ("Waiter.wait", "/repo/vecenvs/doorbell.py"),
            ("Waiter._sleep", "/repo/vecenvs/doorbell.py"),
            ("Doorbell.sleep", "/repo/vecenvs/doorbell.py"),
        ),
        WAITING,
    ),
    "the parent's poll is waiting": (
        frames(
            ("ChunkedVecEnv._gather", "/repo/vecenvs/core.py"),
            ("ProcessWorker.receive", "/repo/vecenvs/workers.py"),
            ("ProcessWorker.read_message", "/repo/vecenvs/workers.py"),
        ),
        WAITING,
    ),
    "a spin is waiting": (
        frames(
            WORKER_LOOP,
            ("serve_with_control", "/repo/vecenvs/workers.py"),
            ("Waiter.wait", "/repo/vecenvs/doorbell.py"),
        ),
        WAITING,
    ),
    "a worker asleep until its next command is waiting": (
        frames(
            WORKER_LOOP,
            ("serve_with_control", "/repo/vecenvs/workers.py"),
            ("Waiter.wait", "/repo/vecenvs/doorbell.py"),
            ("Waiter._sleep", "/repo/vecenvs/doorbell.py"),
            ("Doorbell.sleep", "/repo/vecenvs/doorbell.py"),
        ),
        WAITING,
    ),
    "multiprocessing's poll is waiting": (
        frames(
            ("AsyncVectorEnv._poll_pipe_envs", site("gymnasium/vector/async_vector_env.py")),
            ("_ConnectionBase.poll", stdlib("multiprocessing/connection.py")),
            ("Connection._poll", stdlib("multiprocessing/connection.py")),
            ("wait", stdlib("multiprocessing/connection.py")),
            ("PollSelector.select", stdlib("selectors.py")),
        ),
        WAITING,
    ),
    "the profiled loop itself is other": (
        frames(
            ("<module>", "/repo/vecenvs/profile/target.py"),
            ("main", "/repo/vecenvs/profile/target.py"),
        ),
        OTHER,
    ),
    "an empty stack is other": ((), OTHER),
}


@pytest.mark.parametrize("stack, expected", list(CLASSIFIED.values()), ids=list(CLASSIFIED))
def test_classify_puts_each_kind_of_stack_in_its_category(stack, expected):
    assert classify(stack) == expected, explain(stack)


def test_the_innermost_matching_frame_decides_and_inner_send_recv_are_neutral():
    stack = CLASSIFIED["writing to a pipe is pipe I/O"][0]
    # Connection._send (the innermost frame) matches no rule: _send_bytes, its caller, decides.
    assert explain(stack).frame.name == "Connection._send_bytes"
    assert explain(stack).rule.why


def test_a_read_of_the_next_message_header_is_waiting_and_its_payload_is_pipe_io():
    reading = Frame("_ConnectionBase.recv", CONNECTION_FILE, 250)
    inner = Frame("Connection._recv", CONNECTION_FILE, 1)  # neutral: its caller's line decides
    header = (reading, Frame("Connection._recv_bytes", CONNECTION_FILE, HEADER_LINE), inner)
    payload = (reading, Frame("Connection._recv_bytes", CONNECTION_FILE, PAYLOAD_LINE), inner)
    assert classify(header) == WAITING
    assert classify(payload) == PIPE_IO
    # Connection.recv's last line is pickle.loads (C code, so py-spy shows recv's own line).
    unpickling = (Frame("_ConnectionBase.recv", CONNECTION_FILE, UNPICKLE_LINE),)
    assert classify(unpickling) == SERIALIZATION


def test_a_profile_recorded_elsewhere_is_read_with_this_machines_copy_of_the_module():
    elsewhere = "/another/machine/lib/python3.11/multiprocessing/connection.py"
    assert linecache.getline(elsewhere, HEADER_LINE) == ""
    assert classify((Frame("Connection._recv_bytes", elsewhere, HEADER_LINE),)) == WAITING
    short = "multiprocessing/connection.py"  # as py-spy's raw format names files
    assert classify((Frame("Connection._recv_bytes", short, PAYLOAD_LINE),)) == PIPE_IO


def test_a_different_version_of_the_file_at_the_recorded_path_is_not_trusted(tmp_path):
    # Another Python's connection.py, where the recorded line number is something else.
    stale = tmp_path / "lib" / "python3.11" / "multiprocessing" / "connection.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("# nothing to see here\n" * (HEADER_LINE + 10))
    stack = (
        Frame("Connection._recv_bytes", str(stale), HEADER_LINE),
        Frame("Connection._recv", str(stale), 1),
    )
    # The stale line does not call _recv, so this machine's copy of the module is read.
    assert classify(stack) == WAITING


@pytest.mark.parametrize(
    "file, expected",
    [
        ("/home/me/.venv/lib/python3.11/site-packages/gymnasium/core.py", "gymnasium/core.py"),
        ("/usr/lib/python3.11/multiprocessing/connection.py", "multiprocessing/connection.py"),
        ("/home/me/vecenvs/vecenvs/workers.py", "vecenvs/workers.py"),  # a checkout, not installed
        (
            "/home/me/vecenvs/.venv/lib/python3.12/site-packages/gymnasium/envs/x.py",
            "gymnasium/envs/x.py",
        ),
        ("C:\\Python311\\Lib\\threading.py", "threading.py"),
        ("vecenvs/workers.py", "vecenvs/workers.py"),  # py-spy's short names (raw format)
        ("/home/me/queue.py", "/home/me/queue.py"),  # not the standard library's queue
    ],
)
def test_module_path_is_the_path_from_the_top_level_package(file, expected):
    assert module_path(file) == expected


def test_every_rule_has_a_known_category_and_a_reason():
    for rule in RULES:
        assert rule.category in CATEGORIES or rule.category is None, rule  # None: a neutral helper
        assert len(rule.why) > 20, rule


# ------------------------------------------------------------------------------------------------
# Recorded profiles: the claims of the issue, on real py-spy output
# ------------------------------------------------------------------------------------------------

FIXTURES = [
    "subproc-cartpole-n8",
    "pool-cartpole-n8-w2",
    "pool-cartpole-n128-w2",
    "gym-async-cartpole-n8",
]


@pytest.mark.parametrize("name", FIXTURES)
def test_recorded_speedscope_files_follow_py_spys_schema(name):
    document = json.loads((DATA / f"{name}.speedscope.json").read_text())
    assert document["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    assert document["exporter"].startswith("py-spy@")
    frame_count = len(document["shared"]["frames"])
    for recorded in document["profiles"]:
        assert re.fullmatch(r'Process \d+ Thread \d+ ".*"', recorded["name"])
        assert recorded["type"] == "sampled"
        assert len(recorded["samples"]) == len(recorded["weights"]) > 0
        assert all(0 <= index < frame_count for stack in recorded["samples"] for index in stack)


@pytest.mark.parametrize("name", FIXTURES)
def test_reading_labels_processes_and_drops_py_spys_process_frames(name):
    labels = set(json.loads((DATA / f"{name}.processes.json").read_text()).values())
    samples = load(name)
    assert {sample.process for sample in samples} == labels
    assert all(not frame.name.startswith("process ") for s in samples for frame in s.stack)
    # Every process has its main thread; the workers' orphan watch is another thread.
    assert {s.process for s in samples if s.main_thread} == labels


@pytest.mark.parametrize("name", FIXTURES)
def test_every_sample_lands_in_exactly_one_category(name):
    samples = load(name)
    result = breakdown(samples)
    for process, shares in result.by_process().items():
        main = sum(s.count for s in samples if s.process == process and s.main_thread)
        assert result.samples(process) == main
        assert set(shares) == set(CATEGORIES)
        assert sum(shares.values()) == pytest.approx(1.0)
    # Nothing vanishes: what is not counted is listed, with its samples.
    left_out = sum(item.samples for item in result.excluded)
    assert result.samples() + left_out == sum(s.count for s in samples)
    assert {item.thread for item in result.excluded} <= {
        "vecenvs-orphan-watch",
        "vecenvs-profile-stop",
    }


def test_subproc_parent_spends_most_of_its_time_on_pipes_and_waiting():
    shares = breakdown(load("subproc-cartpole-n8")).by_process()
    parent = shares["parent"]
    assert parent[PIPE_IO] + parent[WAITING] > 0.5, parent
    assert parent[PIPE_IO] + parent[WAITING] + parent[SERIALIZATION] > 0.7, parent
    assert parent[ENV_COMPUTE] == 0.0, "the subproc parent steps no env itself"
    for worker in (name for name in shares if name != "parent"):
        # One CartPole step per round trip: a worker mostly waits for its next command.
        assert max(shares[worker], key=shares[worker].get) == WAITING, (worker, shares[worker])


def test_pool_workers_spend_their_busy_time_mostly_in_env_code():
    big = breakdown(load("pool-cartpole-n128-w2")).by_process()["worker 0"]
    assert max(big, key=big.get) == ENV_COMPUTE, big
    # With only 4 CartPole envs per worker the worker waits most of the time, but what it
    # does when busy is mostly stepping envs.
    small = breakdown(load("pool-cartpole-n8-w2")).by_process()["worker 0"]
    busy = {category: share for category, share in small.items() if category != WAITING}
    assert max(busy, key=busy.get) == ENV_COMPUTE, small
    subproc = breakdown(load("subproc-cartpole-n8")).by_role()["workers"]
    assert big[ENV_COMPUTE] > small[ENV_COMPUTE] > subproc[ENV_COMPUTE]


def test_a_parent_blocked_in_recv_without_polling_is_mostly_pipes_and_waiting():
    # gymnasium's AsyncVectorEnv reads each pipe without polling first, as SB3 does.
    parent = breakdown(load("gym-async-cartpole-n8")).by_process()["parent"]
    assert parent[PIPE_IO] + parent[WAITING] > 0.6, parent
    assert parent[SERIALIZATION] > 0.02, "the parent unpickles every worker's answer"


# ------------------------------------------------------------------------------------------------
# Collapsed stacks, py-spy's raw format
# ------------------------------------------------------------------------------------------------


def test_collapsed_text_round_trips():
    samples = load("subproc-cartpole-n8")
    text = write_collapsed(samples)
    assert all(re.fullmatch(r"[^;]+(;[^;]+)* \d+", line) for line in text.splitlines())

    def key(items):
        counts = Counter()
        for s in items:
            counts[(s.process, s.thread, s.stack)] += s.count
        return counts

    assert key(read_collapsed(text)) == key(samples)


def test_py_spys_raw_format_is_read_with_processes_and_threads():
    labels = json.loads((DATA / "pool-raw.processes.json").read_text())
    samples = read_collapsed(
        (DATA / "pool-raw.txt").read_text(), {int(pid): label for pid, label in labels.items()}
    )
    assert {(s.process, s.thread) for s in samples} == {
        ("parent", "MainThread"),
        ("parent", "vecenvs-profile-stop"),
        ("worker 0", "MainThread"),
        ("worker 0", "vecenvs-orphan-watch"),
    }
    assert all(s.pid in {int(pid) for pid in labels} for s in samples)
    assert breakdown(samples).processes == ["parent", "worker 0"]


def test_read_samples_tells_speedscope_from_collapsed_text(tmp_path):
    samples = load("pool-cartpole-n8-w2")
    collapsed = tmp_path / "stacks.txt"
    collapsed.write_text(write_collapsed(samples))
    speedscope = read_samples(DATA / "pool-cartpole-n8-w2.speedscope.json")
    assert sum(s.count for s in read_samples(collapsed)) == sum(s.count for s in speedscope)
    assert {s.process for s in speedscope} == {f"pid {s.pid}" for s in samples}


def test_collapsed_text_that_is_not_stacks_is_refused_with_the_line_number():
    with pytest.raises(ValueError, match="line 2"):
        read_collapsed("parent;main (x.py:1) 3\nthis is not a stack\n")


# ------------------------------------------------------------------------------------------------
# The breakdown table and chart, the flame graph
# ------------------------------------------------------------------------------------------------


def test_breakdown_table_is_plain_data_with_a_row_per_process_and_category():
    result = breakdown(load("subproc-cartpole-n8"))
    table = result.table()
    assert len(table) == 9 * len(CATEGORIES)
    assert set(table[0]) == {"process", "thread", "category", "samples", "share"}
    assert json.loads(json.dumps(result.to_dict()))["rows"] == table
    assert result.processes == ["parent", *(f"worker {k}" for k in range(8))]
    text = result.format_table()
    assert all(name in text for name in result.processes)
    pooled = result.format_table(max_workers=4)
    assert "workers (all 8)" in pooled and "worker 7" not in pooled


def test_breakdown_figure_stacks_one_bar_per_process_in_category_colours():
    figure = breakdown_figure(breakdown(load("subproc-cartpole-n8")))
    assert [trace.name for trace in figure.data] == list(CATEGORIES)
    assert [trace.marker.color for trace in figure.data] == [CATEGORY_COLORS[c] for c in CATEGORIES]
    assert "parent" in figure.data[0].y and figure.layout.barmode == "stack"
    assert "%" in figure.layout.xaxis.title.text


def test_flamegraph_svg_has_a_rect_per_frame_node_a_legend_and_tooltips():
    samples = [s for s in load("subproc-cartpole-n8") if is_counted(s)]
    svg = flamegraph_svg(samples, title="subproc", min_width=0)
    root = ElementTree.fromstring(svg.encode())

    def count_nodes(node):
        return sum(1 + count_nodes(child) for child in node.children.values())

    boxes = [group for group in root.iter(f"{SVG}g") if group.find(f"{SVG}title") is not None]
    assert len(boxes) == count_nodes(flame_tree(samples))
    assert all(group.find(f"{SVG}rect") is not None for group in boxes)
    texts = " ".join(text.text or "" for text in root.iter(f"{SVG}text"))
    assert all(category in texts for category in CATEGORIES)  # the legend
    titles = [group.find(f"{SVG}title").text for group in boxes]
    cartpole = next(title for title in titles if title.startswith("CartPoleEnv.step"))
    assert "gymnasium/envs/classic_control/cartpole.py:" in cartpole
    assert re.search(r"\d+ samples, [\d.]+% of all", cartpole)
    # Each process has a band of the whole width, the parent on top: none squeezed, none cut
    # off (the parent of 9 processes got 1/9 of the width, and a narrow window cut worker 7).
    names = {"parent", *(f"worker {k}" for k in range(8))}
    processes = {
        group.find(f"{SVG}title").text.splitlines()[0]: group.find(f"{SVG}rect")
        for group in boxes
        if group.find(f"{SVG}title").text.splitlines()[0] in names
    }
    assert set(processes) == names
    width = float(root.get("viewBox").split()[2])
    assert root.get("width") == "100%", "it scales to the page instead of being cut"
    for rect in processes.values():
        assert float(rect.get("x")) == 10 and float(rect.get("width")) == pytest.approx(width - 20)
    tops = [float(processes[name].get("y")) for name in ("parent", "worker 0", "worker 7")]
    assert tops == sorted(tops), "one band under the other, the parent first"
    assert all(
        float(rect.get("x")) + float(rect.get("width")) <= width + 1e-6
        for rect in (group.find(f"{SVG}rect") for group in boxes)
    )
    assert processes["worker 0"].get("fill") == CATEGORY_COLORS[WAITING]  # a worker mostly waits


def test_flamegraph_leaves_out_boxes_too_thin_to_see():
    samples = [s for s in load("subproc-cartpole-n8") if is_counted(s)]
    everything = flamegraph_svg(samples, min_width=0).count("<title>")
    visible = flamegraph_svg(samples, min_width=20.0).count("<title>")
    assert 0 < visible < everything


# ------------------------------------------------------------------------------------------------
# Bad input, py-spy missing or not allowed: clear messages, nothing left running
# ------------------------------------------------------------------------------------------------

BAD_CONFIGS = {
    "backend": ({"backend": "nope"}, "'nope'"),
    "env id": ({"env_id": "Nope-v9"}, "'Nope-v9'"),
    "N": ({"num_envs": 0}, "num_envs"),
    "negative seconds": ({"seconds": -1}, "seconds is -1: expected a whole number"),
    "fraction of a second": ({"seconds": 1.5}, "1.5"),
    "rate": ({"rate": 5000}, "rate is 5000: expected a whole number from 1 to 1000"),
    "kwarg": ({"env_kwargs": {"make": lambda: None}}, "env_kwargs['make']"),
    "env argument": ({"env_kwargs": {"bogus": 1}}, "cannot make CartPole-v1 (bogus=1)"),
}


@pytest.mark.parametrize("changes, message", list(BAD_CONFIGS.values()), ids=list(BAD_CONFIGS))
def test_bad_configs_are_refused_before_anything_starts(changes, message, tmp_path):
    before = {p.pid for p in live_children()}
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(message)):
        profile(ProfileConfig(**{"output_dir": out, **changes}))
    assert {p.pid for p in live_children()} == before
    assert not out.exists()


def test_an_output_directory_that_cannot_be_made_is_refused(tmp_path, monkeypatch):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(ValueError, match="is not a directory"):
        profile(ProfileConfig(output_dir=a_file / "sub"))
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # as root, nothing is read-only
    with pytest.raises(ValueError, match="is not writable"):
        profile(ProfileConfig(output_dir=tmp_path / "new"))


def test_missing_py_spy_says_how_to_install_it(tmp_path, monkeypatch):
    with pytest.raises(PySpyNotFoundError, match="not found"):
        find_py_spy(tmp_path / "no-py-spy")
    monkeypatch.setenv("VECENVS_PY_SPY", str(tmp_path / "no-py-spy"))
    with pytest.raises(PySpyNotFoundError, match="VECENVS_PY_SPY"):
        find_py_spy()
    monkeypatch.delenv("VECENVS_PY_SPY")
    monkeypatch.setattr("shutil.which", lambda *args, **kwargs: None)
    with pytest.raises(PySpyNotFoundError, match="pip install py-spy"):
        find_py_spy()
    before = {p.pid for p in live_children()}
    with pytest.raises(PySpyNotFoundError):
        profile(ProfileConfig(output_dir=tmp_path / "out"))
    assert {p.pid for p in live_children()} == before


@pytest.mark.parametrize("system", list(PY_SPY_PERMISSION_MESSAGES))
def test_check_attach_explains_a_permission_failure(system, tmp_path, no_leftover_processes):
    said = PY_SPY_PERMISSION_MESSAGES[system]
    result = check_attach(fake_py_spy(tmp_path, said))
    assert not result.ok
    assert said.splitlines()[0] in result.message
    for advice in ("ptrace_scope", "--cap-add SYS_PTRACE", "macOS: run with sudo"):
        assert advice in result.message


def test_check_attach_reports_other_failures_as_they_are(tmp_path, no_leftover_processes):
    result = check_attach(fake_py_spy(tmp_path, "Error: Failed to find python version"))
    assert not result.ok and "Failed to find python version" in result.message
    assert "ptrace" not in result.message


def test_check_attach_passes_when_py_spy_dumps_the_process(tmp_path, no_leftover_processes):
    result = check_attach(fake_py_spy(tmp_path, "Thread 1 (idle): MainThread", exit_code=0))
    assert result.ok and str(tmp_path) in result.message


def test_profile_raises_a_permission_error_and_stops_everything(tmp_path, no_leftover_processes):
    fake = fake_py_spy(tmp_path, PY_SPY_PERMISSION_MESSAGES["user"])
    config = ProfileConfig(
        "CartPole-v1", num_envs=2, backend="subproc", seconds=1, output_dir=tmp_path / "out"
    )
    with pytest.raises(PySpyPermissionError) as raised:
        profile(config, py_spy=fake)
    message = str(raised.value)
    assert "ptrace" in message and "Permission Denied: Try running again" in message
    assert "pid" in message  # which process it could not read
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(240)
def test_notebook_5_without_permission_says_what_to_do_and_shows_the_recorded_profiles(
    tmp_path, monkeypatch, no_leftover_processes
):
    """Where py-spy may not attach (a user under Ubuntu's ptrace_scope 1, Docker without
    SYS_PTRACE, macOS without sudo) the course's profiling notebook still runs to the end."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    refusing = fake_py_spy(tmp_path, PY_SPY_PERMISSION_MESSAGES["user"])
    monkeypatch.setenv("VECENVS_PY_SPY", str(refusing))  # the kernel inherits both
    monkeypatch.setenv("VECENVS_QUICK", "1")
    notebook = nbformat.read(DATA.parents[2] / "notebooks" / "05-profiling.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=150,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    printed = "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )
    assert "py-spy is not allowed to read" in printed and "What to do:" in printed, printed
    assert "py-spy cannot attach here: this notebook shows recorded profiles" in printed
    assert printed.count("recorded profile ") == 4, printed  # its four profiles (one without idle)
    assert "env compute" in printed and "→" in printed  # and what it concludes from them


def failing_first_reset(tmp_path) -> ProfileConfig:
    """Two envs that fail on their first reset: while being built."""
    return ProfileConfig(
        "vecenvs/Faulty-v0",
        num_envs=2,
        backend="subproc",
        seconds=1,
        env_kwargs={"fail_on": "reset", "at": 1},
        output_dir=tmp_path / "out",
    )


def test_a_broken_env_is_refused_in_one_line_before_the_profiled_process_starts(tmp_path):
    with pytest.raises(ValueError, match=r"reset\(seed=0\) raised RuntimeError: .*deliberate"):
        profile(failing_first_reset(tmp_path))
    assert not (tmp_path / "out").exists()


def test_a_crash_while_building_is_reported_with_the_envs_error(
    tmp_path, monkeypatch, no_leftover_processes
):
    # An env that passes the check (made once, reset and stepped, here) but fails on its
    # first reset inside the profiled process, as one that needs a resource only the check's
    # process had would: the check is skipped to get there.
    monkeypatch.setattr("vecenvs.profile.runner.check_env", lambda *args, **kwargs: None)
    with pytest.raises(ProfilerError, match="building subproc .* failed.*deliberate failure"):
        profile(failing_first_reset(tmp_path))
    assert not (tmp_path / "out").exists()


def test_an_env_crashing_while_profiled_is_reported_not_drawn(
    attach, tmp_path, no_leftover_processes
):
    # The env raises at its 5000th step: after the ready line (no warm-up), while or just
    # before py-spy samples. Either way the run did not go as asked, and profile() says so.
    config = ProfileConfig(
        "vecenvs/Faulty-v0",
        num_envs=1,
        backend="multi",
        seconds=2,
        env_kwargs={"fail_on": "step", "at": 5000},
        warmup_seconds=0,
        output_dir=tmp_path / "out",
    )
    with pytest.raises(ProfilerError, match="deliberate failure in step #5000"):
        profile(config)


@pytest.mark.parametrize(
    "args, named",
    [
        (["--backend", "nope"], "'nope'"),
        (["--env", "Nope-v9"], "'Nope-v9'"),
        (["--num-envs", "0"], "'0'"),
        (["--seconds", "-1"], "'-1'"),
        (["--seconds", "1.5"], "'1.5'"),
        (["--rate", "5000"], "'5000'"),
        (["--env-kwarg", "bogus=1"], "bogus=1"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line_naming_the_value(args, named, capsys):
    before = {p.pid for p in live_children()}
    assert cli.main(["profile", *args]) == 2
    error = capsys.readouterr().err.strip()
    assert named in error and "\n" not in error and "Traceback" not in error
    assert {p.pid for p in live_children()} == before


def test_cli_refuses_an_output_directory_under_a_file(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "profile"
    assert cli.main(["profile", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert str(out) in error and "\n" not in error


def test_cli_reports_missing_py_spy_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VECENVS_PY_SPY", str(tmp_path / "no-py-spy"))
    before = {p.pid for p in live_children()}
    assert cli.main(["profile", "--quick", "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert "no-py-spy" in error and "Traceback" not in error
    assert {p.pid for p in live_children()} == before


def test_cli_reports_a_permission_failure_and_exits_1(
    tmp_path, monkeypatch, capsys, no_leftover_processes
):
    monkeypatch.setenv(
        "VECENVS_PY_SPY", str(fake_py_spy(tmp_path, PY_SPY_PERMISSION_MESSAGES["docker"]))
    )
    code = cli.main(
        ["profile", "--num-envs", "2", "--seconds", "1", "--out", str(tmp_path / "out")]
    )
    error = capsys.readouterr().err
    assert code == 1
    assert "SYS_PTRACE" in error and "It looks like you are running in a docker" in error
    assert "Traceback" not in error


# ------------------------------------------------------------------------------------------------
# Real runs
# ------------------------------------------------------------------------------------------------


def test_profile_a_real_run_end_to_end(attach, tmp_path, no_leftover_processes):
    progress = []
    result = profile(
        ProfileConfig(
            "CartPole-v1", num_envs=4, backend="subproc", seconds=1, output_dir=tmp_path / "out"
        ),
        on_progress=lambda message, fraction: progress.append(fraction),
    )
    assert result.breakdown.processes == ["parent", "worker 0", "worker 1", "worker 2", "worker 3"]
    assert sorted(result.processes.values()) == result.breakdown.processes
    assert progress[0] == 0.0 and progress[-1] == 1.0 and progress == sorted(progress)

    document = json.loads(result.speedscope_path.read_text())
    assert document["exporter"].startswith("py-spy@")
    ElementTree.fromstring(result.svg_path.read_bytes())
    assert read_collapsed(result.collapsed_path.read_text())
    summary = json.loads(result.summary_path.read_text())
    assert summary["processes"] == {str(pid): label for pid, label in result.processes.items()}
    assert summary["py_spy_command"][1:3] == ["record", "--pid"]
    left_out = sum(item.samples for item in result.breakdown.excluded)
    assert summary["total_samples"] == result.counted_samples + left_out
    parent = result.breakdown.by_process()["parent"]
    assert parent[PIPE_IO] + parent[WAITING] + parent[SERIALIZATION] > 0.5, parent
    # Every process of the run has ended (also checked for our children by the fixture).
    assert not any(psutil.pid_exists(pid) and _is_ours(pid) for pid in result.processes)


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RunCancelled])
def test_profile_cancelled_from_on_progress_stops_everything(
    attach, tmp_path, no_leftover_processes, stop
):
    def cancel(message, fraction):
        if message.startswith("sampling"):
            raise stop

    with pytest.raises(stop):
        profile(
            ProfileConfig(
                "CartPole-v1", num_envs=2, backend="subproc", seconds=5, output_dir=tmp_path / "out"
            ),
            on_progress=cancel,
        )
    if stop is KeyboardInterrupt:  # Ctrl-C: py-spy is stopped as Ctrl-C stops it, and what it
        # recorded so far is kept (and nothing else: the folder holds no half-written file)
        assert [path.name for path in (tmp_path / "out").iterdir()] == ["speedscope.json"]
        json.loads((tmp_path / "out" / "speedscope.json").read_text())
    else:  # cancelled (the dashboard's Cancel): py-spy killed, no empty folder left behind
        assert not (tmp_path / "out").exists()


def test_cli_profiles_a_real_run(attach, tmp_path):
    out = tmp_path / "out"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "vecenvs",
            "profile",
            "--quick",
            "--backend",
            "pool",
            "--workers",
            "2",
            "--num-envs",
            "4",
            "--out",
            str(out),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert completed.returncode == 0, completed.stderr
    for name in ("flamegraph.svg", "speedscope.json", "stacks.collapsed.txt", "summary.json"):
        assert (out / name).is_file(), name
        assert name in completed.stdout
    assert "https://www.speedscope.app" in completed.stdout
    assert re.search(r"^parent\s+\d+", completed.stdout, re.MULTILINE)
    assert re.search(r"^worker 0\s+\d+", completed.stdout, re.MULTILINE)
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["processes"].values()) == ["parent", "worker 0"]
    # The command has exited: none of the processes it profiled may still run.
    assert not any(
        psutil.pid_exists(int(pid)) and _is_ours(int(pid)) for pid in summary["processes"]
    )


@pytest.mark.usefixtures("ctrl_c_raises")
@pytest.mark.parametrize("where", ["terminal", "process"])
def test_cli_ctrl_c_exits_130_and_stops_everything(attach, tmp_path, where):
    """Ctrl-C in a terminal signals the whole process group (py-spy too, which then writes
    what it recorded); ``kill -INT`` only the command, which then stops py-spy the same way.
    Either way: exit 130, py-spy's recording so far kept and named, nothing left running."""
    marker = "918273"  # an unusual seed, to find the profiled processes by their command line
    out = tmp_path / "out"
    command = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vecenvs",
            "profile",
            "--seconds",
            "30",
            "--num-envs",
            "2",
            "--seed",
            marker,
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + 30
        while not _py_spy(command) and time.monotonic() < deadline:  # the target is ready
            time.sleep(0.1)
        time.sleep(1.5)  # ... and py-spy has been sampling it
        if where == "terminal":
            processes = press_ctrl_c(command)
        else:
            processes = [psutil.Process(command.pid), *_profiled(marker)]
            command.send_signal(signal.SIGINT)
        _, error = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
    assert command.returncode == 130, error
    recording = out / "speedscope.json"
    assert error.strip().splitlines()[-1] == (
        "vecenvs profile: interrupted (every process it started has been stopped; py-spy's "
        f"recording so far is in {recording}, for https://www.speedscope.app)"
    ), error
    assert json.loads(recording.read_text())["profiles"], "what py-spy recorded, readable"
    assert not _profiled(marker)
    assert wait_gone(processes, timeout=10) == []


def _py_spy(command: subprocess.Popen) -> list[psutil.Process]:
    """The py-spy recording the command started, once it has."""
    try:
        children = psutil.Process(command.pid).children()
        return [p for p in children if "py-spy" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def _profiled(marker: str) -> list[psutil.Process]:
    """The live processes of a profiled run started with ``--seed <marker>``."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        command = " ".join(process.info["cmdline"] or [])
        if (
            "vecenvs.profile.target" in command
            and f"--seed {marker}" in command
            and process.info["status"] != psutil.STATUS_ZOMBIE
        ):
            found.append(process)
    return found


def _is_ours(pid: int) -> bool:
    """Whether ``pid`` is (still) a process of a profiled run, not a reused pid."""
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and "vecenvs.profile.target" in " ".join(
            process.cmdline()
        )
    except psutil.Error:
        return False
