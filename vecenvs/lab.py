"""The lab's jobs: what the dashboard queues, and how the runner process carries each out.

:mod:`vecenvs.bench.jobs` is the queue itself and knows nothing of what a job does; this
module, above the measuring code, gives it the dashboard's four kinds: a **sweep**
(:func:`~vecenvs.bench.sweep.run_sweep`), a **profile** (:func:`~vecenvs.profile.profile`), an
**autotune** search (:func:`~vecenvs.autotune.autotune`, with gym-sync, the loop the other
pages compare with, among its candidates) and a **train** comparison
(:func:`~vecenvs.bench.training.compare_training`). Each ``submit_*`` checks its settings
first, so a bad one raises ``ValueError`` in the page and is never queued; the runner
(``python -m vecenvs.lab --store PATH``) runs each job with the same code as the CLI.

Example:
    >>> import tempfile
    >>> from vecenvs.bench import QUICK, ResultsStore, SweepConfig
    >>> from vecenvs.lab import LabQueue
    >>> folder = tempfile.mkdtemp()
    >>> queue = LabQueue(ResultsStore(f"{folder}/example.sqlite"))
    >>> config = SweepConfig(["CartPole-v1"], [4], ["pool"], **QUICK)
    >>> job_id = queue.submit_sweep(config, start_runner=False)  # the dashboard starts one
    >>> queue.get(job_id).status
    'queued'
    >>> queue.serve()  # what the runner process does: run the queued jobs, then return
    >>> queue.get(job_id).status
    'done'
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

from vecenvs.autotune import Candidate, autotune, candidates, validate_autotune
from vecenvs.bench.jobs import Job, JobQueue, Progress
from vecenvs.bench.ratios import DEFAULT_REFERENCE
from vecenvs.bench.store import ResultsStore, Run, RunCancelled
from vecenvs.bench.sweep import SweepConfig, run_sweep, validate_sweep
from vecenvs.bench.training import compare_training, training_settings
from vecenvs.envspec import CHECK_SECONDS
from vecenvs.profile.runner import ProfileConfig, profile, validate_profile

__all__ = ["JOB_KINDS", "LabQueue", "main"]

JOB_KINDS = ("sweep", "profile", "autotune", "train")


class LabQueue(JobQueue):
    """The job queue with the lab's four kinds of job (see the module docstring)."""

    runner_module = "vecenvs.lab"

    def submit_sweep(
        self, config: Any, *, label: str | None = None, start_runner: bool = True
    ) -> int:
        """Queue a :class:`~vecenvs.bench.sweep.SweepConfig`; return the job's id."""
        validate_sweep(config)
        return self.submit("sweep", config.to_dict(), label, start_runner)

    def submit_profile(
        self, config: Any, *, label: str | None = None, start_runner: bool = True
    ) -> int:
        """Queue a :class:`~vecenvs.profile.ProfileConfig` (its ``output_dir`` is chosen by the
        runner, under :attr:`profiles_dir`); return the job's id."""
        if config.output_dir is not None:
            raise ValueError(
                "a queued profile's output_dir is chosen by the runner "
                f"(under {self.profiles_dir}); got output_dir={config.output_dir!r}"
            )
        validate_profile(config)
        settings = dataclasses.asdict(config)
        del settings["output_dir"]
        return self.submit("profile", settings, label, start_runner)

    def submit_autotune(
        self,
        env_id: str,
        num_envs: int,
        budget_seconds: float,
        *,
        env_kwargs: Mapping[str, Any] | None = None,
        label: str | None = None,
        start_runner: bool = True,
        check_timeout: float = CHECK_SECONDS,
    ) -> int:
        """Queue an :func:`~vecenvs.autotune.autotune` search; return the job's id."""
        validate_autotune(
            env_id, num_envs, budget_seconds, env_kwargs=env_kwargs, check_timeout=check_timeout
        )
        settings = {
            "env_id": env_id,
            "num_envs": num_envs,
            "budget_seconds": budget_seconds,
            "env_kwargs": dict(env_kwargs or {}),
            "check_timeout": check_timeout,
        }
        return self.submit("autotune", settings, label, start_runner)

    def submit_training(
        self,
        env_id: str,
        num_envs: int,
        backends: list[str],
        *,
        timesteps: int = 2048,
        repeats: int = 2,
        torch_threads: int | None = None,
        label: str | None = None,
        start_runner: bool = True,
        env_kwargs: Mapping[str, Any] | None = None,
        check_timeout: float = CHECK_SECONDS,
    ) -> int:
        """Queue :func:`~vecenvs.bench.training.compare_training`; return the job's id."""
        settings = training_settings(
            env_id,
            num_envs,
            backends,
            timesteps,
            repeats,
            torch_threads=torch_threads,
            env_kwargs=env_kwargs,
            check_timeout=check_timeout,
        )
        return self.submit("train", settings, label, start_runner)

    def execute(self, job: Job, run: Run, progress: Progress) -> None:
        if job.kind not in JOB_KINDS:
            raise ValueError(f"unknown job kind {job.kind!r}; expected one of {JOB_KINDS}")
        getattr(self, f"_execute_{job.kind}")(job, run, progress)

    def _next_queued(self) -> int | None:
        """The next job to run; none once this runner is told to stop (it leaves the queue to
        the next runner)."""
        return None if STOPPING.is_set() else super()._next_queued()

    def _cancelled(self, job: Job) -> bool:
        """Whether the job is to stop: cancelled from a page, or this runner told to stop."""
        return STOPPING.is_set() or self.cancel_requested(job.id)

    def _execute_sweep(self, job: Job, run: Run, progress: Progress) -> None:
        config = SweepConfig.from_dict(job.settings)
        total = config.windows
        progress.update(0, total, "starting")
        done = 0

        def on_window() -> None:
            nonlocal done
            done += 1
            progress.update(done, total, f"timed window {done} of {total}")

        def on_stage(message: str) -> None:
            progress.update(done, total, message, force=True)

        result = run_sweep(
            config,
            store=self.store,
            run_id=job.run_id,
            on_window=on_window,
            on_stage=on_stage,
            cancel=lambda: self._cancelled(job),
        )
        progress.update(done, total, "cancelled" if result.cancelled else "done", force=True)

    def _execute_profile(self, job: Job, run: Run, progress: Progress) -> None:
        output_dir = self.profiles_dir / f"run-{job.run_id}"
        config = ProfileConfig(**{**job.settings, "output_dir": str(output_dir)})

        def on_progress(message: str, fraction: float) -> None:
            progress.update(round(fraction * 100), 100, message)
            if self._cancelled(job):
                raise RunCancelled  # the profiler cleans up on any exception

        run.summary = profile(config, on_progress=on_progress).to_dict()

    def _execute_autotune(self, job: Job, run: Run, progress: Progress) -> None:
        settings = job.settings
        progress.update(0, 0, "measuring the first candidate", force=True)

        def on_result(step: Any) -> None:
            progress.update(
                step.done,
                step.total,
                f"measured {step.measurement.config.backend_label} ({step.done} of {step.total})",
                force=True,
            )

        # The loop every other page measures against is a candidate too, so that the page can
        # say "x gym-sync" like the rest of the dashboard (autotune's own loop is multi).
        to_try = [Candidate(DEFAULT_REFERENCE), *candidates(settings["num_envs"])]
        result = autotune(
            settings["env_id"],
            settings["num_envs"],
            settings["budget_seconds"],
            env_kwargs=settings.get("env_kwargs"),
            check_timeout=settings.get("check_timeout", CHECK_SECONDS),
            candidates_to_try=to_try,
            on_result=on_result,
            cancel=lambda: self._cancelled(job),
            store=self.store,
            run_id=job.run_id,
        )
        if result.cancelled:
            outcome = "cancelled"
        elif result.measurements:
            outcome = f"best: {result.best.label}"
        else:
            outcome = "nothing fitted in the budget: raise it"
        measured = len(result.measurements)
        progress.update(measured, measured + len(result.skipped), outcome, force=True)

    def _execute_train(self, job: Job, run: Run, progress: Progress) -> None:
        settings = job.settings
        steps = 1000  # the bar's resolution: progress is reported after every rollout
        progress.update(0, steps, f"building {settings['backends'][0]}", force=True)

        def on_progress(message: str, fraction: float) -> None:
            progress.update(round(fraction * steps), steps, message)

        cancelled = lambda: self._cancelled(job)  # noqa: E731
        compare_training(
            **settings,
            on_progress=on_progress,
            cancel=cancelled,
            store=self.store,
            run_id=job.run_id,
        )
        progress.update(steps, steps, "cancelled" if cancelled() else "done", force=True)


#: Set when the runner is told to stop (SIGTERM): the job's cancel checks see it even where the
#: KeyboardInterrupt raised with it was lost (Python drops one that lands in a fork's hooks).
STOPPING = threading.Event()


def _stop(signum: int, frame: Any) -> None:
    STOPPING.set()
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """The runner process: ``python -m vecenvs.lab --store PATH``."""
    parser = argparse.ArgumentParser(
        prog="python -m vecenvs.lab", description="Run the queued jobs of a results store."
    )
    parser.add_argument("--store", required=True, help="the results store (SQLite file)")
    arguments = parser.parse_args(argv)
    # SIGTERM (e.g. `kill`) stops the current job the way Ctrl-C does: envs closed, run cancelled.
    signal.signal(signal.SIGTERM, _stop)
    try:
        LabQueue(ResultsStore(arguments.store)).serve()
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
