"""Exercise 6, a worked answer, computed from the sweep beside it (``q6_sweep.json``).

An open-ended question has no single answer. This one is a real measurement, and nothing in it
is typed: every number below and in the explanation is read from the JSON file that ``vecenvs
bench --json`` wrote (the command, the machine, its load before and after, the medians), and
the model is fitted with question 2's functions (``q2_overhead.py`` beside this file, imported
by name as the student's file does: the checks put the folder on the path). The
words that depend on the numbers (whether the pool caught up, whether the model agrees, whether
the machine was quiet) are chosen from them. To measure again, run ``COMMAND`` from the
repository's root with ``--json exercises/solutions/q6_sweep.json``: this file follows.
"""

from __future__ import annotations

import json
from pathlib import Path

from q2_overhead import break_even_num_envs, fit_model

BESIDE = Path(__file__).resolve().parent
REPORT = json.loads((BESIDE / "q6_sweep.json").read_text())
#: A load average per CPU from which the machine counts as busy (vecenvs' load check uses the
#: same share of the CPUs for other programs' CPU time).
BUSY_LOAD_PER_CPU = 0.2

_POOL = next(
    result["config"] for result in REPORT["results"] if result["config"]["backend"] == "pool"
)
_MACHINE = REPORT.get("machine", {})
_RUN = REPORT["run"]

CPUS = _MACHINE.get("usable_cpus", REPORT["cpu_count"])
ENV_ID = _POOL["env_id"]
ENV_KWARGS = _POOL.get("env_kwargs", {})
WORKERS = _POOL["backend_kwargs"]["num_workers"]
COMMAND = _RUN["command"]

_MEDIANS = {
    (result["config"]["backend"], result["config"]["num_envs"]): result["median"]
    for result in REPORT["results"]
    if result["config"]["env_id"] == ENV_ID and result["config"].get("env_kwargs", {}) == ENV_KWARGS
}
SWEEP = [
    (num_envs, _MEDIANS["gym-sync", num_envs], _MEDIANS["pool", num_envs])
    for num_envs in sorted(num_envs for backend, num_envs in _MEDIANS if backend == "pool")
]
BREAK_EVEN_N = next((num_envs for num_envs, loop, pool in SWEEP if pool >= loop), None)

# Question 2's fit takes the mean time of one step() call: N / (env steps per second).
_T_ENV, _T_OS = fit_model(
    [(num_envs, num_envs / loop, num_envs / pool) for num_envs, loop, pool in SWEEP], WORKERS, CPUS
)
_T_OS = max(_T_OS, 0.0)  # a noisy fit can dip below 0; an overhead cannot
T_ENV_US = _T_ENV * 1e6
T_OS_US = _T_OS * 1e6
PREDICTED_BREAK_EVEN_N = break_even_num_envs(_T_ENV, _T_OS, WORKERS, CPUS)


def _explanation() -> str:
    """The explanation, its words chosen by the numbers above."""
    first, last = SWEEP[0], SWEEP[-1]
    before, after = _RUN.get("load_before"), _RUN.get("load_after")  # 1-minute load averages
    busy = before is not None and before >= BUSY_LOAD_PER_CPU * CPUS
    config = REPORT["results"][0]["config"]
    env = ENV_ID + (
        f" ({', '.join(f'{k}={v}' for k, v in ENV_KWARGS.items())})" if ENV_KWARGS else ""
    )
    lanes = min(WORKERS, CPUS)
    text = [
        f"I measured {env} stepped by the loop (gym-sync) and by a pool of {WORKERS} workers, at "
        f"{len(SWEEP)} values of N from {first[0]} to {last[0]}, {config['repeats']} windows of "
        f"{config['measure_seconds']:g} s each, on {CPUS} CPUs ({_MACHINE.get('cpu_model', 'CPU')}), "
        f"on {_RUN['started'][:10]}."
    ]
    if before is not None and after is not None:
        text.append(
            f"The load average was {before:.2f} when the sweep started and {after:.2f} when "
            "it ended (the sweep's own processes count in the second): "
            + (
                "other programs kept the machine busy, so every number here is lower and noisier "
                "than a quiet run's."
                if busy
                else "the machine was quiet."
            )
        )
    if BREAK_EVEN_N is not None:
        index = [row[0] for row in SWEEP].index(BREAK_EVEN_N)
        at = SWEEP[index]
        text.append(
            f"The pool first kept up with the loop at N={BREAK_EVEN_N}: {at[2]:,.0f} against "
            f"{at[1]:,.0f} env steps/s."
        )
        if index > 0:
            below = SWEEP[index - 1]
            work = below[0] * T_ENV_US
            text.append(
                f"At N={below[0]} it ran at {below[2] / below[1]:.2f}x the loop: sharing that step's "
                f"{work:.0f} µs of env work among {lanes} processes saves about "
                f"{work * (1 - 1 / lanes):.0f} µs, less than the pool's overhead of about "
                f"{T_OS_US:.0f} µs per call."
            )
        else:
            text.append(
                "It did from the smallest N I measured: a sweep from fewer envs would find where it starts."
            )
    else:
        text.append(
            f"The pool never kept up with the loop: at N={last[0]} it ran at {last[2] / last[1]:.2f}x "
            f"({last[2]:,.0f} against {last[1]:,.0f} env steps/s)."
        )
    ceiling = (
        f"the {lanes} processes that can step at once cap the speed-up at {lanes}x, less the "
        "overhead each call still pays"
    )
    if BREAK_EVEN_N is not None:
        text.append(
            f"Above it, {ceiling}: at N={last[0]} the pool reached {last[2] / last[1]:.2f}x."
        )
    else:
        text.append(
            f"Even with many envs {ceiling}"
            + (
                f", and on a busy machine the {lanes} rarely get {lanes} CPUs at the same moment."
                if busy
                else "."
            )
        )
    text.append(
        f"Question 2's fit gives t_env = {T_ENV_US:.1f} µs (the slope of the loop's time per call "
        f"against N) and t_os = {T_OS_US:.0f} µs, and predicts "
        + (
            "no break-even at all."
            if PREDICTED_BREAK_EVEN_N is None
            else f"a break-even at N={PREDICTED_BREAK_EVEN_N}."
        )
    )
    measured_n = [row[0] for row in SWEEP]
    if PREDICTED_BREAK_EVEN_N is not None and BREAK_EVEN_N is not None:
        index = measured_n.index(BREAK_EVEN_N)
        low = measured_n[index - 1] + 1 if index > 0 else 1
        if low <= PREDICTED_BREAK_EVEN_N <= BREAK_EVEN_N:
            text.append(
                f"That falls between N={low} and N={BREAK_EVEN_N}, where the sweep placed it: the "
                "model agrees with the measurement as closely as the sweep's steps can tell."
            )
        elif abs(PREDICTED_BREAK_EVEN_N - BREAK_EVEN_N) <= BREAK_EVEN_N / 2:
            text.append(
                f"The sweep placed it at N={BREAK_EVEN_N}: close, though not within the sweep's "
                "steps; one constant t_os is an approximation, and the points are noisy."
            )
        else:
            text.append(
                f"The sweep placed it at N={BREAK_EVEN_N}: the model misses, a sign that one "
                "constant t_os does not describe this pool at every N, or that the points are noisy."
            )
    elif PREDICTED_BREAK_EVEN_N is not None:
        past = next(
            (num_envs for num_envs in measured_n if num_envs >= PREDICTED_BREAK_EVEN_N), None
        )
        text.append(
            "That is beyond the largest N I measured, so the sweep cannot contradict it; a sweep to "
            "larger N would test it."
            if past is None
            else f"At N={past}, at or past it, the pool was still slower: the model misses, a sign "
            "that one constant t_os does not describe this pool at every N, or that the points "
            "are noisy."
        )
    text.append(
        "I would measure again on a quiet machine before trusting the break-even N."
        if busy
        else "Repeating the sweep would show how far these numbers move from run to run."
    )
    return "\n".join(text)


EXPLANATION = _explanation()
