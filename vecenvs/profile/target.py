"""The process that gets profiled: build one vector env and step it until told to stop.

:func:`vecenvs.profile.profile` starts it as a child process and points py-spy at it, so that
py-spy samples only the stepping loop and the backend's workers, not a notebook, a dashboard
or the test runner around it::

    python -m vecenvs.profile.target --env CartPole-v1 --num-envs 8 --backend pool \\
        --workers 2 --seed 0 --max-seconds 60

It builds the vector env and resets it, samples a ring of actions up front (as the benchmark
does: sampling in the loop would show up as the backend's work), steps for a short warm-up,
then prints ONE JSON line, ``{"ready": true, "pid": ..., "processes": {pid: label}}`` (py-spy
only knows pids). It steps until a line arrives on stdin or stdin is closed (or
``--max-seconds`` pass, should the profiler die), closes the env and prints ``{"done": true,
"steps": ..., "seconds": ..., "steps_per_second": ...}``. If building fails it prints
``{"ready": false, "error": "...", "traceback": "..."}`` and exits 1.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import Any

import psutil

__all__ = ["PARENT", "WARMUP_SECONDS", "main", "process_labels"]

#: How long to step before saying "ready": the first steps pay for lazy imports and cold caches.
WARMUP_SECONDS = 0.5

#: How many batched actions are sampled up front and cycled through (as in the benchmark).
ACTION_RING_SIZE = 64

#: The label of the process that runs the stepping loop.
PARENT = "parent"

_HELPERS = ("forkserver", "resource_tracker", "semaphore_tracker")


def process_labels(envs: Any) -> dict[int, str]:
    """Which process is which: ``{pid: "parent" | "worker k" | "helper: <name>"}``.

    Worker k steps the backend's k-th chunk of envs: our backends and gymnasium's
    AsyncVectorEnv keep their worker processes in chunk order in ``.processes``. Any other
    descendant (multiprocessing's fork server or resource tracker, or the workers of a backend
    without ``.processes``) is found with psutil; those that look like workers are numbered
    after the known ones in creation order.
    """
    me = psutil.Process()
    labels = {me.pid: PARENT}
    known = [p.pid for p in getattr(envs, "processes", None) or [] if getattr(p, "pid", None)]
    labels.update({pid: f"worker {index}" for index, pid in enumerate(known)})
    others = []
    for child in me.children(recursive=True):
        if child.pid in labels:
            continue
        try:
            command, created = " ".join(child.cmdline()), child.create_time()
        except psutil.Error:  # ended meanwhile: it will not be sampled either
            continue
        helper = next((name for name in _HELPERS if name in command), None)
        if helper is not None:
            labels[child.pid] = f"helper: {helper}"
        else:
            others.append((created, child.pid))
    for index, (_, pid) in enumerate(sorted(others), start=len(known)):
        labels[pid] = f"worker {index}"
    return labels


def _literal_kwarg(text: str) -> tuple[str, Any]:
    """``"step_seconds=0.001"`` -> ``("step_seconds", 0.001)``: the runner sends ``repr`` s."""
    key, _, raw = text.partition("=")
    return key, ast.literal_eval(raw)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m vecenvs.profile.target",
        description="Build one vector env and step it until stdin is closed (for py-spy).",
    )
    parser.add_argument("--env", required=True, help="gymnasium env id")
    parser.add_argument("--num-envs", type=int, required=True, help="number of envs (N)")
    parser.add_argument("--backend", required=True, help="a name from vecenvs.BACKENDS")
    parser.add_argument("--workers", type=int, help="num_workers, for the pool backend")
    for name, of in (("env", "gym.make"), ("backend", "the backend")):
        parser.add_argument(
            f"--{name}-kwarg",
            action="append",
            type=_literal_kwarg,
            default=[],
            metavar="KEY=LITERAL",
            help=f"argument for {of} (a Python literal)",
        )
    parser.add_argument("--seed", type=int, default=0, help="seed of the reset and the actions")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="stop stepping after this long even if stdin stays open",
    )
    parser.add_argument(
        "--warmup", type=float, default=WARMUP_SECONDS, help="untimed stepping before saying ready"
    )
    return parser.parse_args(argv)


def _say(message: dict[str, Any]) -> None:
    """One JSON line on stdout: the only way this process talks to the profiler."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _watch_stdin(stop: threading.Event) -> None:
    """Set ``stop`` when a line arrives on stdin or stdin is closed."""
    try:
        sys.stdin.readline()
    finally:
        stop.set()


def main(argv: Sequence[str] | None = None) -> int:
    """Build, warm up, say ready, step until stdin closes; return the exit code."""
    args = _parse_args(argv)
    import vecenvs  # here, not at the top: `--help` should not pay for gymnasium

    backend_kwargs = dict(args.backend_kwarg)
    if args.workers is not None:
        backend_kwargs["num_workers"] = args.workers
    envs = None
    try:
        try:
            envs = vecenvs.make_vec(
                args.env,
                args.num_envs,
                args.backend,
                env_kwargs=dict(args.env_kwarg),
                **backend_kwargs,
            )
            envs.reset(seed=args.seed)
            envs.action_space.seed(args.seed)
            actions = [envs.action_space.sample() for _ in range(ACTION_RING_SIZE)]
            labels = process_labels(envs)
        except Exception as error:
            error_text = f"{type(error).__name__}: {error}"
            _say({"ready": False, "error": error_text, "traceback": traceback.format_exc()})
            return 1

        step, clock, steps = envs.step, time.perf_counter, 0
        warmup_end = clock() + args.warmup
        while clock() < warmup_end:
            step(actions[steps % ACTION_RING_SIZE])
            steps += 1

        # A thread, rather than polling stdin between steps, keeps the stepping loop as tight
        # as the benchmark's: checking an Event costs well under a microsecond. The thread
        # sleeps in read() and is not counted in the breakdown (only main threads are).
        stop = threading.Event()
        threading.Thread(
            target=_watch_stdin, args=(stop,), name="vecenvs-profile-stop", daemon=True
        ).start()
        processes = {str(pid): label for pid, label in labels.items()}
        _say({"ready": True, "pid": psutil.Process().pid, "processes": processes})

        is_stopped, steps = stop.is_set, 0
        start = now = clock()
        deadline = start + args.max_seconds
        while now < deadline and not is_stopped():
            step(actions[steps % ACTION_RING_SIZE])
            steps += 1
            now = clock()
        seconds = now - start
    finally:
        if envs is not None:
            envs.close()
    rate = args.num_envs * steps / seconds if seconds > 0 else None
    _say({"done": True, "steps": steps, "seconds": seconds, "steps_per_second": rate})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
