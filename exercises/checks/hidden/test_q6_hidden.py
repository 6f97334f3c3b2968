"""Exercise 6, hidden checks (the grader's only; not in the student release).

The public checks ask whether the numbers agree with each other; these ask whether they could
have come from a real machine: a loop whose speed barely depends on N, a pool no faster than its
workers stepping the loop's envs with no overhead at all, an env step no faster than its cost,
and timing windows that differ from one another as real ones do.
"""

import math

from conftest import fail
from test_q6_measure import JSON_FILE, q6, read_json, sweep  # noqa: F401  (fixtures)

#: The fastest and slowest a CartPole-v1 loop runs, in env steps/s, on anything from a
#: Raspberry Pi to a fast desktop (about 90,000/s on the course's 2-CPU VM when quiet).
CARTPOLE_RATES = (3_000.0, 3_000_000.0)


def test_numbers_are_plausible(q6, sweep):  # noqa: F811  (the fixtures)
    loops = [loop for num_envs, loop, _ in sweep if num_envs >= 4] or [sweep[-1][1]]
    assert max(loops) <= 4 * min(loops), (
        f"the loop's env steps/s range from {min(loops):,.0f} to {max(loops):,.0f} over N: a loop "
        "steps each env the same way whatever N, so its rate barely changes"
    )
    fastest_loop = max(loop for _, loop, _ in sweep)
    for num_envs, _, pool in sweep:
        perfect = min(q6["WORKERS"], num_envs, q6["CPUS"]) * fastest_loop
        assert pool <= 1.25 * perfect, (
            f"at N={num_envs} the pool ran at {pool:,.0f} env steps/s, more than its "
            f"{min(q6['WORKERS'], num_envs, q6['CPUS'])} busy processes could step the loop's envs "
            f"with no overhead at all ({perfect:,.0f})"
        )
    if q6["ENV_ID"] == "CartPole-v1" and not q6["ENV_KWARGS"]:
        low, high = CARTPOLE_RATES
        assert low <= fastest_loop <= high, (
            f"a CartPole-v1 loop at {fastest_loop:,.0f} env steps/s is outside what machines do "
            f"({low:,.0f} to {high:,.0f})"
        )
    cost = q6["ENV_KWARGS"].get("step_seconds") if q6["ENV_ID"] == "vecenvs/Costly-v0" else None
    if type(cost) in (int, float) and cost > 0:
        assert fastest_loop <= 1.1 / cost, (
            f"the loop stepped {fastest_loop:,.0f} envs per second whose step costs {cost:g} s each"
        )


def test_timing_windows_look_measured(student, q6, sweep):  # noqa: F811  (the fixtures)
    report = read_json(student)
    if not isinstance(report, dict) or not isinstance(report.get("results"), list):
        fail(f"{JSON_FILE} is missing or not what `vecenvs bench --json` writes")
    identical = 0
    for result in report["results"]:
        windows = result.get("throughputs") if isinstance(result, dict) else None
        if not (
            isinstance(windows, list)
            and windows
            and all(type(value) in (int, float) and math.isfinite(value) for value in windows)
        ):
            fail(f"{JSON_FILE} has a result without its windows' throughputs")
        identical += len(set(windows)) < len(windows)
    assert identical == 0, (
        f"{identical} result(s) of {JSON_FILE} have timing windows with exactly the same "
        "throughput, which measured windows never have"
    )
