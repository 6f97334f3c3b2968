"""Where one lock-step pool step goes, process by process, beside the bare pool.

``tests/bare_pool.py`` says how far ``PoolVecEnv`` is from a bare lock-step pool; this says
where the difference sits. It times, in rotating rounds, the bare pool and ``PoolVecEnv`` as
they are, then each again with clocks around their parts, and prints, for every process of the
timed versions, per step:

- ``wait``: time in the waits for the other side (the caller's for the workers, a worker's for
  the next command), and how often a wait fell asleep on its doorbell instead of spinning;
- ``lag``: from the caller moving the generation word to a worker seeing it;
- ``serve``: a chunk's step as the protocol serves it (``Chunk.serve``), and ``envs`` the part
  of it in the envs' own steps (``MultiEnv.step_envs``); the bare pool's ``envs`` is its whole
  loop over its envs, which does nothing else.

and, for the caller, where one ``step`` goes: ``before`` the generation word moves (checks,
the actions into shared memory), its ``own`` chunk, and ``after`` it (waiting for the workers,
the results copied out). The bare pool's ``before`` ends where it starts its own chunk, a few
stores after its words.

``serve - envs`` is what the pool's chunk adds to a step: on the critical path of every step
when the workers are the last to finish. The clocks cost time themselves: compare the timed
versions with each other, and the untimed ones for throughput. Linux (fork) only::

    python tests/step_breakdown.py --env CartPole-v1 --num-envs 64 --workers 16

It is a diagnostic for a machine at hand, not a test; the core16 page's results come from
``tests/bare_pool.py``.
"""

from __future__ import annotations

import mmap
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from bare_pool import (  # (this folder is the script's: first on sys.path)
    BarePool,
    _window,
    action_ring,
    point_arguments,
)

from vecenvs import PoolVecEnv, doorbell, workers
from vecenvs.factory import env_fns_for
from vecenvs.multi_env import MultiEnv

# Counters in memory the forked workers share: one row per process, found by its pid.
FIELDS = ("pid", "waits", "sleeps", "wait", "lag", "serve", "serves", "envs")
CALLER = ("steps", "step", "before", "own", "after")  # the caller's clocks, this process only
SLOTS = 256
COUNTERS = np.frombuffer(mmap.mmap(-1, SLOTS * len(FIELDS) * 8), np.float64).reshape(SLOTS, -1)
ANNOUNCED = np.frombuffer(mmap.mmap(-1, 8), np.float64)  # when the generation word last moved
CALLER_CLOCKS = dict.fromkeys(CALLER, 0.0)
OWN = {"started": 0.0, "ended": 0.0}  # this process's last chunk: when it started, and ended
clock = time.perf_counter


ROWS: dict[int, int] = {}  # each process's row, once claimed (a forked copy adds its own)
COLUMNS = {field: column for column, field in enumerate(FIELDS)}


def _row() -> int:
    """This process's row, claimed on first use: a clock reads it, cheaply, every time."""
    pid = os.getpid()
    row = ROWS.get(pid)
    if row is None:
        row = pid % SLOTS
        while COUNTERS[row, 0] not in (0, pid):  # taken by another pid: the next free row
            row = (row + 1) % SLOTS
        COUNTERS[row, 0], ROWS[pid] = pid, row
    return row


def _add(field: str, value: float) -> None:
    COUNTERS[_row(), COLUMNS[field]] += value


def _zero() -> None:
    """Every counter to 0, the caller's too: this process keeps its row (the workers, which
    keep theirs, stay in this window)."""
    row = _row()
    COUNTERS[:] = 0
    COUNTERS[row, 0] = os.getpid()
    CALLER_CLOCKS.update(dict.fromkeys(CALLER, 0.0))


def _timed_methods() -> dict[tuple[Any, str], Callable[..., Any]]:
    """The methods to wrap with clocks: ``{(class, name): wrapper}``."""
    wait, sleep = doorbell.Waiter.wait, doorbell.Waiter._sleep
    announce, serve = workers.WordCrew.announce, workers.Chunk.serve
    step_envs, bare_step = MultiEnv.step_envs, BarePool._step
    pool_step, bare_whole_step = PoolVecEnv.step, BarePool.step

    def caller_step(step: Callable[..., Any], bare: bool) -> Callable[..., Any]:
        def timed_step(self: Any, actions: Any) -> Any:
            started = clock()
            result = step(self, actions)
            now = clock()
            word_moved = OWN["started"] if bare else ANNOUNCED[0]
            own = OWN["ended"] - OWN["started"]
            times = (1, now - started, word_moved - started, own, now - OWN["ended"])
            for field, value in zip(CALLER, times):
                CALLER_CLOCKS[field] += value
            return result

        return timed_step

    def timed_wait(self: Any, read: Any, target: Any, deadline: float) -> Any:
        started = clock()
        value = wait(self, read, target, deadline)
        now = clock()
        _add("waits", 1)
        _add("wait", now - started)
        if self.alive is None:  # a worker's wait (the caller's watches its workers)
            _add("lag", now - ANNOUNCED[0])
        return value

    def timed_sleep(self: Any, *args: Any) -> Any:
        _add("sleeps", 1)
        return sleep(self, *args)

    def timed_announce(self: Any) -> None:
        ANNOUNCED[0] = clock()
        announce(self)

    def timed_serve(self: Any, command: Any, payload: Any) -> Any:
        OWN["started"] = started = clock()
        answer = serve(self, command, payload)
        OWN["ended"] = clock()
        _add("serve", OWN["ended"] - started)
        _add("serves", 1)
        return answer

    def timed_step_envs(self: Any, actions: Any) -> Any:
        started = clock()
        infos = step_envs(self, actions)
        _add("envs", clock() - started)
        return infos

    def timed_bare_step(self: Any, envs: Any, rows: range) -> None:
        OWN["started"] = started = clock()
        bare_step(self, envs, rows)
        OWN["ended"] = clock()
        _add("envs", OWN["ended"] - started)
        _add("serves", 1)

    return {
        (doorbell.Waiter, "wait"): timed_wait,
        (doorbell.Waiter, "_sleep"): timed_sleep,
        (workers.WordCrew, "announce"): timed_announce,
        (workers.Chunk, "serve"): timed_serve,
        (MultiEnv, "step_envs"): timed_step_envs,
        (BarePool, "_step"): timed_bare_step,
        (PoolVecEnv, "step"): caller_step(pool_step, bare=False),
        (BarePool, "step"): caller_step(bare_whole_step, bare=True),
    }


@contextmanager
def clocks(on: bool) -> Iterator[None]:
    """The methods wrapped with clocks while inside (in the workers forked meanwhile too)."""
    if not on:
        yield
        return
    wrappers = _timed_methods()
    originals = {key: key[0].__dict__.get(key[1]) for key in wrappers}  # None: inherited
    for (owner, name), wrapper in wrappers.items():
        setattr(owner, name, wrapper)
    try:
        yield
    finally:
        for (owner, name), method in originals.items():
            if method is None:
                delattr(owner, name)
            else:
                setattr(owner, name, method)


def _report(name: str, steps: float) -> None:
    me = os.getpid()
    for row in COUNTERS[COUNTERS[:, FIELDS.index("serves")] > 0]:
        values = dict(zip(FIELDS, row))
        who = "caller" if int(values["pid"]) == me else "worker"
        per = max(values["serves"], 1)
        waits = max(values["waits"], 1)
        print(
            f"  {name:>4s} {who:6s} wait {values['wait'] / waits * 1e6:6.1f} us "
            f"(asleep in {values['sleeps'] / steps:.1%} of steps)  lag "
            f"{values['lag'] / waits * 1e6:4.1f} us  serve {values['serve'] / per * 1e6:6.1f} us  "
            f"envs {values['envs'] / per * 1e6:6.1f} us"
        )
    steps_timed = max(CALLER_CLOCKS["steps"], 1)
    per_step = {field: CALLER_CLOCKS[field] / steps_timed * 1e6 for field in CALLER}
    print(
        f"  {name:>4s} caller step {per_step['step']:6.1f} us: before the word "
        f"{per_step['before']:4.1f} us, own chunk {per_step['own']:6.1f} us, after it "
        f"{per_step['after']:5.1f} us"
    )


def main() -> None:
    parser = point_arguments(__doc__, num_envs=64, workers=16, seconds=1.0, repeats=2)
    arguments = parser.parse_args()
    env_id, n, k = arguments.env, arguments.num_envs, arguments.workers
    actions = action_ring(env_id, n)
    names = ["bare", "pool", "bare, timed", "pool, timed"]
    throughputs: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(arguments.repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            timed = name.endswith("timed")
            with clocks(timed):
                if name.startswith("bare"):
                    bare = BarePool(env_id, n, k)
                    step, close = bare.step, bare.close
                else:
                    pool = PoolVecEnv(env_fns_for(env_id, n), num_workers=k)
                    pool.reset(seed=0)
                    step, close = pool.step, pool.close
                try:
                    _window(step, actions, min(arguments.seconds, 0.5))  # warm-up
                    _zero()
                    throughputs[name].append(_window(step, actions, arguments.seconds))
                    if timed:
                        steps = throughputs[name][-1] * arguments.seconds / n
                        print(f"{name}: {n / throughputs[name][-1] * 1e6:.1f} us per step")
                        _report(name.split(",")[0], steps)
                finally:
                    close()
    bare_median = statistics.median(throughputs["bare"])
    for name, values in throughputs.items():
        median = statistics.median(values)
        print(
            f"{env_id} N={n} K={k} {name:12s} {median:10,.0f} env steps/s, "
            f"{n / median * 1e6:6.1f} us per step, {median / bare_median:.2f} of the bare pool"
        )


if __name__ == "__main__":
    main()
