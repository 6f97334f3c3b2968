"""Training throughput: how fast Stable-Baselines3's PPO trains on each way of stepping envs.

The benchmark times the vector env alone. A learner also runs its policy on every step and
updates it between rollouts, so what a faster vector env buys in training depends on the env's
share of the training time. This module trains PPO on each backend (through
:func:`vecenvs.sb3.to_sb3`, or SB3's own vec envs for ``sb3-dummy`` / ``sb3-subproc``) and
measures the **training throughput** (env steps per second of ``model.learn()``, everything
included) and the **env share** (the part of that time spent inside the vector env's ``step``).

Each result is a :class:`~vecenvs.bench.Measurement` (one timed window per ``learn()`` call),
so the store, the History page and the exports treat it like the benchmark's; its run has kind
``"train"`` and its data also holds ``env_seconds`` and ``learn_seconds``.

Example:
    >>> from vecenvs.bench.training import measure_training
    >>> result = measure_training("CartPole-v1", 8, "pool", timesteps=1024)  # doctest: +SKIP
    >>> result.measurement.median, result.env_share                        # doctest: +SKIP
    (5321.0, 0.41)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass
from functools import partial
from typing import Any

import psutil

from vecenvs.bench.engine import BenchConfig, Measurement, validate_config
from vecenvs.bench.store import recording
from vecenvs.bench.sweep import BenchEnv, check_env
from vecenvs.checks import check_seconds, check_whole_number
from vecenvs.envspec import CHECK_SECONDS, make_env
from vecenvs.factory import BACKEND_INFO, check_backend_available, make_vec

__all__ = ["SB3_OWN", "TrainingResult", "compare_training", "measure_training", "training_settings"]

#: Backends that are SB3's own vector envs, used as they are (no adapter in between).
SB3_OWN = tuple(name for name, info in BACKEND_INFO.items() if info.family == "sb3")

#: PPO's rollout length per env: short, so that a few thousand steps give several updates.
N_STEPS = 64


@dataclass
class TrainingResult:
    """One backend trained on: the measurement and where its time went."""

    measurement: Measurement  # training env steps per second, one window per learn() call
    env_seconds: float  # inside the vector env's step during the timed learn() calls
    learn_seconds: float  # the timed learn() calls in all

    @property
    def env_share(self) -> float:
        """The share of the training time spent stepping envs, from 0 to 1."""
        return self.env_seconds / self.learn_seconds if self.learn_seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The measurement's dict with ``env_seconds``, ``learn_seconds`` and ``env_share``."""
        return {
            **self.measurement.to_dict(),
            "env_seconds": self.env_seconds,
            "learn_seconds": self.learn_seconds,
            "env_share": self.env_share,
        }


def training_settings(
    env_id: str,
    num_envs: int,
    backends: Sequence[str],
    timesteps: int = 2048,
    repeats: int = 2,
    seed: int = 0,
    torch_threads: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    check_timeout: float = CHECK_SECONDS,
) -> dict[str, Any]:
    """The arguments of :func:`compare_training`, checked (ValueError naming the bad value: an
    unknown backend, SB3 missing, N < 1, an env that fails its check...), as the settings a run
    or a job keeps; the job queue passes them back to :func:`compare_training` as they are.

    ``env_id`` is any named form :mod:`vecenvs.envspec` reads (``"mycart:MyCart-v0"``, an entry
    point ``"mycart.env:MyCartEnv"``), made with ``env_kwargs``; it is checked once
    (:func:`vecenvs.envspec.check_env`, within ``check_timeout`` seconds) before anything trains.
    """
    check_backend_available("sb3-dummy")  # SB3 itself: the learner
    env_kwargs = dict(env_kwargs or {})
    if not backends:
        raise ValueError("backends is empty; expected at least one, e.g. ['sb3-dummy', 'pool']")
    check_whole_number("timesteps", timesteps)
    check_whole_number("repeats", repeats)
    if torch_threads is not None:
        check_whole_number("torch_threads", torch_threads)
    for backend in backends:
        if backend in BACKEND_INFO and not BACKEND_INFO[backend].trainable:
            raise ValueError(
                f"backend {backend!r} can't be trained on through to_sb3 here "
                "(SB3 steps every env in lock-step, and envpool brings its own "
                "envs); pick another"
            )
        validate_config(BenchConfig(env_id, num_envs, backend, env_kwargs=env_kwargs))
    if not isinstance(env_id, str):
        raise ValueError(
            f"env_id {env_id!r:.60} is not a name: a training job keeps its settings as text; "
            "give an id, 'module:EnvId' or 'package.module:Class'"
        )
    check_env(BenchEnv(env_id, env_kwargs), check_seconds("check_timeout", check_timeout))
    return {
        "env_id": env_id,
        "num_envs": num_envs,
        "backends": list(backends),
        "timesteps": timesteps,
        "repeats": repeats,
        "seed": seed,
        "torch_threads": torch_threads,
        "env_kwargs": env_kwargs,
        "check_timeout": check_timeout,
    }


def measure_training(
    env_id: str,
    num_envs: int,
    backend: str,
    *,
    backend_kwargs: Mapping[str, Any] | None = None,
    timesteps: int = 2048,
    repeats: int = 2,
    seed: int = 0,
    torch_threads: int | None = None,
    on_progress: Callable[[str, float], None] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    check_timeout: float = CHECK_SECONDS,
) -> TrainingResult:
    """Train PPO on ``num_envs`` copies of ``env_id`` stepped by ``backend`` and time it.

    One untimed ``learn()`` of a single rollout warms up (torch's first passes are slow), then
    ``repeats`` timed ``learn()`` calls of ``timesteps`` env steps each.

    ``torch_threads`` is what torch may use for the policy (``torch.set_num_threads``) during
    this measurement; ``None`` keeps torch's default, one per core. On few cores torch's threads
    and a process-based vector env's workers compete for the CPUs: on our 2-core VM, PPO on the
    pool (N=8 CartPole) trained at ~1,900 env steps/s with torch's 2 threads and ~4,700 with 1.

    ``on_progress`` is called once the vector env is built and after each rollout, with a
    message and the fraction of this measurement's env steps done: one ``learn()`` can take a
    minute, too long to report nothing.
    """
    import torch
    from stable_baselines3 import PPO

    settings = training_settings(
        env_id,
        num_envs,
        [backend],
        timesteps,
        repeats,
        seed,
        torch_threads,
        env_kwargs,
        check_timeout,
    )
    own_kwargs: dict[str, Any] = settings["env_kwargs"]
    backend_kwargs = dict(backend_kwargs or {})
    warmup_steps = N_STEPS * num_envs
    all_steps = warmup_steps + repeats * timesteps
    callback = None
    if on_progress is not None:

        def report(num_timesteps: int) -> None:
            done = min(num_timesteps, all_steps)
            on_progress(f"{backend}: {done:,} of {all_steps:,} env steps", done / all_steps)

        callback = _rollout_callback(report)
    with ExitStack() as stack:  # closes the vector env, then gives torch its threads back
        stack.callback(torch.set_num_threads, torch.get_num_threads())
        if torch_threads is not None:
            torch.set_num_threads(torch_threads)
        started = time.perf_counter()
        venv = _timed(_sb3_vec_env(env_id, num_envs, backend, backend_kwargs, seed, own_kwargs))
        stack.enter_context(closing(venv))
        if on_progress is not None:
            on_progress(f"{backend}: built, warming up", 0.0)
        model = PPO(
            "MlpPolicy",
            venv,
            n_steps=N_STEPS,
            batch_size=min(64, N_STEPS * num_envs),
            n_epochs=4,
            device="cpu",
            seed=seed,
            verbose=0,
        )
        startup = time.perf_counter() - started
        model.learn(total_timesteps=warmup_steps, callback=callback)  # warm-up
        children = psutil.Process().children(recursive=True)
        throughputs, window_steps, window_seconds = [], [], []
        venv.env_seconds = 0.0
        for _ in range(repeats):
            before, start = model.num_timesteps, time.perf_counter()
            model.learn(total_timesteps=timesteps, reset_num_timesteps=False, callback=callback)
            seconds = time.perf_counter() - start
            steps = model.num_timesteps - before
            throughputs.append(steps / seconds)
            window_steps.append(steps // num_envs)
            window_seconds.append(seconds)
        rss = sum(_rss(p) for p in [psutil.Process(), *children])
    config = BenchConfig(
        env_id,
        num_envs,
        backend,
        backend_kwargs,
        own_kwargs,
        warmup_seconds=0.0,
        measure_seconds=max(window_seconds),
        repeats=repeats,
        seed=seed,
    )
    measurement = Measurement(
        config=config,
        throughputs=throughputs,
        window_steps=window_steps,
        window_seconds=window_seconds,
        startup_seconds=startup,
        parent_cpu_seconds=0.0,
        children_cpu_seconds=0.0,
        child_processes=len(children),
        rss_bytes=rss,
        children_uss_bytes=None,
        peak_rss_bytes=rss,
    )
    return TrainingResult(measurement, venv.env_seconds, sum(window_seconds))


def compare_training(
    env_id: str,
    num_envs: int,
    backends: Sequence[str],
    *,
    timesteps: int = 2048,
    repeats: int = 2,
    seed: int = 0,
    torch_threads: int | None = None,
    on_result: Callable[[TrainingResult], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    store: Any = None,
    run_id: int | None = None,
    on_progress: Callable[[str, float], None] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    check_timeout: float = CHECK_SECONDS,
) -> list[TrainingResult]:
    """:func:`measure_training` for each backend in turn; save each result in ``store``.

    ``on_result`` is called after each backend, ``on_progress`` after each rollout with a
    message and the fraction of the whole comparison done. ``cancel`` is checked before each
    backend: True stops and returns what was measured. ``store`` and ``run_id``: a results
    store to save the run in (kind ``"train"``), and a run already started in it, if any (see
    :func:`~vecenvs.bench.store.recording`).
    """
    settings = training_settings(
        env_id,
        num_envs,
        backends,
        timesteps,
        repeats,
        seed,
        torch_threads,
        env_kwargs,
        check_timeout,
    )
    results: list[TrainingResult] = []
    with recording(store, "train", settings, run_id=run_id) as run:
        for index, backend in enumerate(backends):
            if cancel is not None and cancel():
                run.cancelled = True
                break
            overall = None
            if on_progress is not None:

                def overall(message: str, fraction: float, index: int = index) -> None:
                    on_progress(
                        f"{message} ({index + 1} of {len(backends)} vector envs)",
                        (index + fraction) / len(backends),
                    )

            result = measure_training(
                env_id,
                num_envs,
                backend,
                timesteps=timesteps,
                repeats=repeats,
                seed=seed,
                torch_threads=torch_threads,
                on_progress=overall,
                env_kwargs=settings["env_kwargs"],
                check_timeout=check_timeout,
            )
            results.append(result)
            run.add(result.to_dict())
            if on_result is not None:
                on_result(result)
    return results


def _rollout_callback(report: Callable[[int], None]) -> Any:
    """An SB3 callback that calls ``report(num_timesteps)`` at the end of every rollout."""
    from stable_baselines3.common.callbacks import BaseCallback

    class _Report(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            report(self.model.num_timesteps)

    return _Report()


def _sb3_vec_env(
    env_id: str,
    num_envs: int,
    backend: str,
    backend_kwargs: dict[str, Any],
    seed: int,
    env_kwargs: dict[str, Any],
) -> Any:
    """SB3's own vec env for ``sb3-*``; otherwise ours, in SAME_STEP mode, through to_sb3.

    Either way each episode's return and length are recorded, as SB3 users have them:
    ``make_vec_env`` puts a ``Monitor`` on each env, and ``to_sb3`` records them itself.
    """
    if backend in SB3_OWN:
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

        vec_env_cls = DummyVecEnv if backend == "sb3-dummy" else SubprocVecEnv
        # Every form of name (an entry point too), made as the other backends make it.
        return make_vec_env(
            partial(make_env, env_id),
            n_envs=num_envs,
            seed=seed,
            vec_env_cls=vec_env_cls,
            env_kwargs=env_kwargs,
        )
    from vecenvs.sb3 import to_sb3

    return to_sb3(
        make_vec(
            env_id,
            num_envs,
            backend=backend,
            autoreset_mode="SameStep",
            env_kwargs=env_kwargs,
            **backend_kwargs,
        )
    )


def _rss(process: psutil.Process) -> int:
    try:
        return process.memory_info().rss
    except psutil.Error:
        return 0


def _timed(venv: Any) -> Any:
    """``venv`` wrapped so that the time spent in its ``step_async`` + ``step_wait`` adds up
    in ``.env_seconds`` (SB3's ``VecEnvWrapper``, defined here to import SB3 only when used)."""
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class TimedVecEnv(VecEnvWrapper):
        def __init__(self, inner: Any):
            super().__init__(inner)
            self.env_seconds = 0.0
            self._sent_at = 0.0

        def reset(self) -> Any:
            return self.venv.reset()

        def step_async(self, actions: Any) -> None:
            self._sent_at = time.perf_counter()
            self.venv.step_async(actions)

        def step_wait(self) -> Any:
            result = self.venv.step_wait()
            self.env_seconds += time.perf_counter() - self._sent_at
            return result

    return TimedVecEnv(venv)
