"""Exercise 6: the break-even N on your own machine (``q6_measure.py`` and ``q6_sweep.json``).

These checks ask whether your numbers agree with each other and with the JSON file that
``vecenvs bench --json`` wrote; they cannot know your machine. Whether the numbers are plausible
is checked by the grader, and your explanation is read by your instructor.
"""

import math
import statistics

import pytest
from conftest import fail, toolkit, type_name

#: What the file must define, and what each is.
NAMES = {
    "CPUS": "a whole number, vecenvs.available_cpus()",
    "ENV_ID": "the env's id, e.g. 'CartPole-v1'",
    "ENV_KWARGS": "a dict of the env's arguments ({} for none)",
    "WORKERS": "the pool's --workers, a whole number",
    "COMMAND": "the command you ran, as text",
    "SWEEP": "a list of (N, loop steps/s, pool steps/s)",
    "BREAK_EVEN_N": "a whole number from SWEEP's Ns, or None",
    "T_ENV_US": "t_env in µs, a number",
    "T_OS_US": "t_os in µs, a number",
    "PREDICTED_BREAK_EVEN_N": "a whole number, or None",
    "EXPLANATION": "100 to 400 words",
}
WORDS = (100, 400)
JSON_FILE = "q6_sweep.json"


@pytest.fixture
def q6(student):
    """The student's answers, read once (``{name: value}``), after checking their types."""
    module = student.module("q6_measure.py")
    answers = {name: module.get(name) for name in NAMES}
    for name in ("CPUS", "WORKERS"):
        if type(answers[name]) is not int or answers[name] < 1:
            fail(f"{name} = {answers[name]!r}: expected {NAMES[name]}")
    for name in ("ENV_ID", "COMMAND", "EXPLANATION"):
        if not isinstance(answers[name], str) or not answers[name].strip():
            fail(f"{name} = {answers[name]!r:.60}: expected {NAMES[name]}")
    if not isinstance(answers["ENV_KWARGS"], dict):
        fail(f"ENV_KWARGS = {answers['ENV_KWARGS']!r:.60}: expected {NAMES['ENV_KWARGS']}")
    for name in ("T_ENV_US", "T_OS_US"):
        value = answers[name]
        if type(value) not in (int, float) or not (math.isfinite(value) and value >= 0):
            fail(f"{name} = {value!r}: expected {NAMES[name]} (at least 0)")
    for name in ("BREAK_EVEN_N", "PREDICTED_BREAK_EVEN_N"):
        value = answers[name]
        if value is not None and (type(value) is not int or value < 1):
            fail(f"{name} = {value!r}: expected {NAMES[name]}")
    return answers


@pytest.fixture
def sweep(q6):
    """SWEEP as a list of (N, loop steps/s, pool steps/s), after checking its form."""
    rows = q6["SWEEP"]
    if not isinstance(rows, (list, tuple)) or len(rows) < 6:
        fail(
            f"SWEEP has {len(rows) if isinstance(rows, (list, tuple)) else type_name(rows)} "
            "rows: measure at least 6 values of N"
        )
    for row in rows:
        ok = isinstance(row, (list, tuple)) and len(row) == 3 and type(row[0]) is int
        if not ok or not all(
            type(v) in (int, float) and math.isfinite(v) and v > 0 for v in row[1:]
        ):
            fail(
                f"SWEEP has a row {row!r:.80}: expected (N, loop steps/s, pool steps/s), N a whole number"
            )
    sizes = [row[0] for row in rows]
    if sizes != sorted(set(sizes)) or sizes[0] < q6["WORKERS"]:
        fail(
            f"SWEEP's Ns are {sizes}: expected them increasing, each once, from WORKERS "
            f"({q6['WORKERS']}) up"
        )
    return [tuple(row) for row in rows]


def read_json(student):
    """q6_sweep.json, read in the student's process and sent here as data (None when missing)."""
    return student.ask("call", toolkit.read_json(JSON_FILE), f"reading {JSON_FILE}")


def test_sweep_is_what_bench_wrote(student, q6, sweep):
    report = read_json(student)
    if report is None:
        fail(
            f"{JSON_FILE} is missing: hand it in beside q6_measure.py, as "
            f"`vecenvs bench ... --json exercises/student/{JSON_FILE}` wrote it"
        )
    if not isinstance(report, dict) or not isinstance(report.get("results"), list):
        fail(f"{JSON_FILE} is not what `vecenvs bench --json` writes (no 'results' list)")
    medians = {}
    for result in report["results"]:
        config = result.get("config", {}) if isinstance(result, dict) else {}
        if config.get("env_id") != q6["ENV_ID"] or config.get("env_kwargs", {}) != q6["ENV_KWARGS"]:
            continue
        backend = config.get("backend")
        if (
            backend == "pool"
            and config.get("backend_kwargs", {}).get("num_workers") != q6["WORKERS"]
        ):
            continue
        medians[(backend, config.get("num_envs"))] = result.get("median")
    for num_envs, loop, pool in sweep:
        for backend, rate in (("gym-sync", loop), ("pool", pool)):
            measured = medians.get((backend, num_envs))
            if type(measured) not in (int, float):
                fail(
                    f"{JSON_FILE} has no {backend} result for {q6['ENV_ID']} {q6['ENV_KWARGS']} "
                    f"at N={num_envs}{' with WORKERS workers' if backend == 'pool' else ''}"
                )
            assert math.isclose(rate, measured, rel_tol=0.01), (
                f"SWEEP says {backend} ran at {rate:,.0f} env steps/s at N={num_envs}; "
                f"{JSON_FILE} says {measured:,.0f}: copy the medians"
            )
    # The CPUs the lab could use (vecenvs.available_cpus()), which the JSON keeps with the
    # machine's description; a file without it gives the host's count only.
    machine = report.get("machine") if isinstance(report.get("machine"), dict) else {}
    cpus = machine.get("usable_cpus", report.get("cpu_count"))
    assert cpus == q6["CPUS"], (
        f"CPUS = {q6['CPUS']}, but {JSON_FILE} was measured where the lab could use {cpus!r} CPUs"
    )


def test_break_even_follows_from_the_sweep(q6, sweep):
    first = next((num_envs for num_envs, loop, pool in sweep if pool >= loop), None)
    assert q6["BREAK_EVEN_N"] == first, (
        f"BREAK_EVEN_N = {q6['BREAK_EVEN_N']!r}, but the first N of SWEEP at which the pool was at "
        f"least as fast as the loop is {first!r}"
    )


def model_speedup(num_envs, t_env, t_os, workers, cpus):
    """The overhead model's speed-up over the loop (question 2's docstring)."""
    c = min(workers, num_envs, cpus)
    return num_envs * t_env / (num_envs * t_env / c + t_os)


def test_model_agrees_with_the_sweep(q6, sweep):
    t_env, t_os = q6["T_ENV_US"] * 1e-6, q6["T_OS_US"] * 1e-6
    if t_env <= 0:
        fail("T_ENV_US must be above 0")
    largest_n, largest_loop, _ = sweep[-1]
    assert 0.7 <= t_env * largest_loop <= 1.3, (
        f"T_ENV_US = {q6['T_ENV_US']:g}, but at N={largest_n} the loop stepped {largest_loop:,.0f} "
        f"env steps/s, about {1e6 / largest_loop:.3g} µs per env step: is T_ENV_US fitted to the loop?"
    )
    errors = [
        abs(
            (num_envs * t_env / min(q6["WORKERS"], num_envs, q6["CPUS"]) + t_os) * pool / num_envs
            - 1
        )
        for num_envs, _, pool in sweep
    ]
    assert statistics.median(errors) <= 0.5, (
        f"with T_ENV_US and T_OS_US, the model's step() times for the pool are off by a median of "
        f"{statistics.median(errors):.0%} from your sweep's: is T_OS_US fitted to the pool?"
    )
    predicted, workers, cpus = q6["PREDICTED_BREAK_EVEN_N"], q6["WORKERS"], q6["CPUS"]
    if predicted is None:
        assert min(workers, cpus) == 1 and t_os > 0, (
            "PREDICTED_BREAK_EVEN_N is None, but with these numbers the model's pool does catch up "
            "with the loop"
        )
    else:
        at = model_speedup(predicted, t_env, t_os, workers, cpus)
        before = model_speedup(predicted - 1, t_env, t_os, workers, cpus) if predicted > 1 else 0
        assert at >= 1 - 1e-9 and before < 1 + 1e-9, (
            f"PREDICTED_BREAK_EVEN_N = {predicted}: the model's speed-up is {at:.4f} there and "
            f"{before:.4f} one N before; the break-even N is the first N where it reaches 1"
        )


def test_explanation_is_written(q6):
    words = len(q6["EXPLANATION"].split())
    assert WORDS[0] <= words <= WORDS[1], (
        f"EXPLANATION has {words} words: write {WORDS[0]} to {WORDS[1]}, in your own words"
    )
    assert (
        q6["COMMAND"].split()[:4] == ["python", "-m", "vecenvs", "bench"]
        or "vecenvs bench" in q6["COMMAND"]
    ), f"COMMAND = {q6['COMMAND']!r:.80}: expected the `vecenvs bench` command you ran"
