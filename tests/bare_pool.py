"""The bare pool: the least a lock-step pool does, to measure ours against in the same run.

K processes (this one and K-1 forked workers) each step N/K envs and write observations,
rewards and flags into shared memory; the workers spin on a generation word (napping only
after 50 ms without a step, so as not to take a core from the contenders measured between its
windows). Nothing else: no errors or tracebacks, no deadlines, no infos, no checks of the
actions, fork only (Linux). Envs reset as soon as an episode ends. It is a reference for what
the pool's guarantees cost, not something to use.

Run it as a script: the ceiling (:mod:`vecenvs.bench.ceiling`), the bare pool and
``PoolVecEnv`` stepped in turn, window by window, each built for its window and closed after
it; ``--json`` writes the windows and how the run was made::

    python tests/bare_pool.py --env HumanoidStandup-v5 --num-envs 32 --seconds 2 --repeats 5

``--no-infos`` adds ``PoolVecEnv`` stepping the same envs with their infos dropped (a wrapper
that returns ``{}``): what the infos cost the pool, measured in the same run.
"""

from __future__ import annotations

import argparse
import functools
import json
import mmap
import os
import statistics
import sys
import time
from typing import Any

import gymnasium as gym
import multiprocess
import numpy as np

from vecenvs import PoolVecEnv
from vecenvs.bench import machine_load
from vecenvs.bench.ceiling import ACTION_RING_SIZE, Ceiling
from vecenvs.cli.bench import finished, provenance
from vecenvs.core import split_evenly
from vecenvs.factory import env_fns_for

LINE = 8  # control words per process, a cache line: [generation, done, ...]


class BarePool:
    """``num_envs`` copies of ``env_id`` in ``num_workers`` processes; env i reset with seed i."""

    def __init__(self, env_id: str, num_envs: int, num_workers: int = 2, **env_kwargs: Any):
        self.env_fns = env_fns_for(env_id, num_envs, **env_kwargs)
        probe = self.env_fns[0]()
        observation_space, action_space = probe.observation_space, probe.action_space
        probe.close()
        self.chunks = split_evenly(num_envs, num_workers)  # the caller's chunk first, as ours
        sizes = [  # control words, observations, rewards, terminations, truncations, actions
            8 * LINE * num_workers,
            num_envs * int(np.prod(observation_space.shape)) * observation_space.dtype.itemsize,
            8 * num_envs,
            num_envs,
            num_envs,
            num_envs * int(np.prod(action_space.shape or (1,))) * action_space.dtype.itemsize,
        ]
        offsets = np.cumsum([0] + [-(-size // 64) * 64 for size in sizes])  # cache-line aligned
        self.memory = mmap.mmap(-1, int(offsets[-1]))  # shared with the forked workers
        view = memoryview(self.memory)
        self.control = view[offsets[0] : offsets[0] + sizes[0]].cast("q")
        shape = (num_envs, *observation_space.shape)
        self.observations = np.frombuffer(view[offsets[1] :], observation_space.dtype, int(np.prod(shape))).reshape(shape)  # fmt: skip
        self.rewards = np.frombuffer(view[offsets[2] :], np.float64, num_envs)
        self.terminations = np.frombuffer(view[offsets[3] :], np.bool_, num_envs)
        self.truncations = np.frombuffer(view[offsets[4] :], np.bool_, num_envs)
        self.actions = np.frombuffer(view[offsets[5] :], action_space.dtype, num_envs * int(np.prod(action_space.shape or (1,)))).reshape(num_envs, *action_space.shape)  # fmt: skip
        self.generation = 0
        context = multiprocess.get_context("fork")
        self.processes = [
            context.Process(target=self._work, args=(worker,), daemon=True)
            for worker in range(1, num_workers)
        ]
        for process in self.processes:
            process.start()
        self.envs = self._make(0)
        for worker in range(1, num_workers):  # ready: its envs are made and reset
            while self.control[LINE * worker + 1] != -1:
                time.sleep(1e-3)

    def _make(self, worker: int) -> list[gym.Env]:
        envs = [self.env_fns[i]() for i in self.chunks[worker]]
        for env, index in zip(envs, self.chunks[worker]):
            self.observations[index] = env.reset(seed=index)[0]
        return envs

    def _step(self, envs: list[gym.Env], rows: range) -> None:
        for env, index in zip(envs, rows):
            observation, reward, terminated, truncated, _ = env.step(self.actions[index])
            if terminated or truncated:
                observation, _ = env.reset()
            self.observations[index] = observation
            self.rewards[index] = reward
            self.terminations[index] = terminated
            self.truncations[index] = truncated

    def _work(self, worker: int) -> None:
        envs, rows, words, seen = self._make(worker), self.chunks[worker], self.control, 0
        words[LINE * worker + 1] = -1
        while True:
            idle_since = time.perf_counter()
            while words[LINE * worker] == seen:
                # Idle for long (the other contenders' windows): nap, or this spin would take a
                # core from them. Within a window the next step comes long before.
                if time.perf_counter() - idle_since > 0.05:
                    time.sleep(1e-3)
            seen = words[LINE * worker]
            if seen < 0:
                return
            self._step(envs, rows)
            words[LINE * worker + 1] = seen

    def step(self, actions: np.ndarray) -> tuple[Any, ...]:
        self.actions[:] = actions
        self.generation += 1
        for worker in range(1, len(self.chunks)):
            self.control[LINE * worker] = self.generation
        self._step(self.envs, self.chunks[0])
        for worker in range(1, len(self.chunks)):
            while self.control[LINE * worker + 1] != self.generation:
                pass
        copies = (self.observations, self.rewards, self.terminations, self.truncations)
        return (*(array.copy() for array in copies), {})

    def close(self) -> None:
        for worker in range(1, len(self.chunks)):
            self.control[LINE * worker] = -1
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.kill()
        for env in self.envs:
            env.close()


def _window(step: Any, actions: list[Any], seconds: float) -> float:
    """Env steps per second of ``step`` for ``seconds`` (as the benchmark times it)."""
    count, clock = 0, time.perf_counter
    start = now = clock()
    while now < start + seconds:
        step(actions[count % len(actions)])
        count += 1
        now = clock()
    return count * len(actions[0]) / (now - start)


class NoInfos(gym.Wrapper):
    """The env with its infos dropped (``{}`` from reset and step)."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        return self.env.reset(**kwargs)[0], {}

    def step(self, action: Any) -> tuple[Any, ...]:
        return (*self.env.step(action)[:4], {})


def _no_infos(env_id: str) -> NoInfos:
    return NoInfos(gym.make(env_id))


def _contender(name: str, env_id: str, num_envs: int, num_workers: int) -> tuple[Any, Any]:
    """``name``'s step function (``None`` for the ceiling, which times itself) and its close."""
    if name == "ceiling":
        ceiling = Ceiling(env_id, num_envs, num_workers=num_workers)
        return ceiling, ceiling.close
    if name == "bare pool":
        bare = BarePool(env_id, num_envs, num_workers)
        return bare.step, bare.close
    env_fns = env_fns_for(env_id, num_envs)
    if name == NO_INFOS:
        env_fns = [functools.partial(_no_infos, env_id)] * num_envs
    pool = PoolVecEnv(env_fns, num_workers=num_workers)
    pool.reset(seed=0)
    return pool.step, pool.close


def action_ring(env_id: str, num_envs: int) -> list[Any]:
    """The batches of actions every contender steps with, in turn (seeded: the same each run)."""
    space = gym.make(env_id).action_space
    space.seed(0)
    return [np.stack([space.sample() for _ in range(num_envs)]) for _ in range(ACTION_RING_SIZE)]


def point_arguments(
    description: str, num_envs: int, workers: int | None, seconds: float, repeats: int
) -> argparse.ArgumentParser:
    """The options a script measuring one point takes, with its defaults (``workers`` None:
    no ``--workers``)."""
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=num_envs)
    if workers is not None:
        parser.add_argument("--workers", type=int, default=workers)
    parser.add_argument("--seconds", type=float, default=seconds)
    parser.add_argument("--repeats", type=int, default=repeats)
    return parser


CONTENDERS = ("ceiling", "bare pool", "PoolVecEnv")
NO_INFOS = "PoolVecEnv, infos dropped"


def compare(
    env_id: str,
    num_envs: int,
    num_workers: int,
    seconds: float,
    repeats: int,
    contenders: tuple[str, ...] = CONTENDERS,
) -> dict[str, list[float]]:
    """Each contender's throughput, window by window (rounds in rotating order). Each is built
    for its window and closed after it, so that no idle spinner of one takes a core from the
    next (a worker spinning between its windows would)."""
    actions = action_ring(env_id, num_envs)
    throughputs: dict[str, list[float]] = {name: [] for name in contenders}
    for round_index in range(repeats):
        shift = round_index % len(contenders)
        for name in contenders[shift:] + contenders[:shift]:
            step, close = _contender(name, env_id, num_envs, num_workers)
            try:
                if name == "ceiling":
                    step.run_for(min(seconds, 0.5))  # warm-up
                    steps, elapsed = step.run_for(seconds)
                    throughputs[name].append(steps / elapsed)
                else:
                    _window(step, actions, min(seconds, 0.5))  # warm-up
                    throughputs[name].append(_window(step, actions, seconds))
            finally:
                close()
    return throughputs


def main() -> None:
    parser = point_arguments(__doc__, num_envs=128, workers=2, seconds=2.0, repeats=5)
    parser.add_argument("--json", help="also write the windows and the run to this file")
    parser.add_argument(
        "--no-infos", action="store_true", help=f"add {NO_INFOS!r}: what the infos cost the pool"
    )
    arguments = parser.parse_args()
    contenders = (*CONTENDERS, NO_INFOS) if arguments.no_infos else CONTENDERS
    run = provenance(["python", "tests/bare_pool.py", *sys.argv[1:]])
    print(machine_load().sentence(), f"(uptime: {os.getloadavg()[0]:.2f})")
    throughputs = compare(
        arguments.env,
        arguments.num_envs,
        arguments.workers,
        arguments.seconds,
        arguments.repeats,
        contenders,
    )
    finished(run)
    ceiling = throughputs["ceiling"]
    for name, values in throughputs.items():
        shares = [value / limit for value, limit in zip(values, ceiling)]
        print(
            f"{arguments.env} N={arguments.num_envs} K={arguments.workers} {name:10s} "
            f"{statistics.median(values):10,.0f} env steps/s, {statistics.median(shares):5.0%} of "
            f"the ceiling (windows {min(shares):.0%}-{max(shares):.0%})"
        )
    pool, bare = (
        statistics.median(throughputs["PoolVecEnv"]),
        statistics.median(throughputs["bare pool"]),
    )
    print(f"PoolVecEnv / bare pool: {pool / bare:.2f} (medians)")
    if arguments.no_infos:
        dropped = statistics.median(throughputs[NO_INFOS])
        print(f"PoolVecEnv / {NO_INFOS}: {pool / dropped:.2f} (medians)")
    print(machine_load().sentence())
    if arguments.json:
        document = {
            "run": run,
            "env_id": arguments.env,
            "num_envs": arguments.num_envs,
            "num_workers": arguments.workers,
            "seconds": arguments.seconds,
            "throughputs": throughputs,
        }
        with open(arguments.json, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=2)
            file.write("\n")


if __name__ == "__main__":
    main()
