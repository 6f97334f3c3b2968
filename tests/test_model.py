"""Tests of the overhead model (vecenvs.bench.model).

Most measurements here are made up *from the model itself*, with a known t_env and t_os, so the
fit has a right answer to find. One test fits a real (quick) measurement, and only checks that
the numbers are sensible: the machine is shared, so nothing here says how fast anything is.
"""

from __future__ import annotations

import json
import math

import pytest
from synthetic_measurements import (
    CHEAP,
    COSTLY,
    CPUS,
    ENV_STEP,
    NUM_ENVS,
    US,
    measurement,
    model_speedup,
    synthetic,
)

from vecenvs.bench import QUICK, Measurement, compare
from vecenvs.bench.model import OverheadModel, fit_overhead_model

# --- the fit finds what the data were made from -------------------------------------------


def test_fit_recovers_t_env_and_t_os():
    data = synthetic({"pool": (300 * US, 0.0), "subproc": (150 * US, 0.0)})

    model = fit_overhead_model(data, cpus=CPUS)

    assert isinstance(model, OverheadModel)
    assert model.cpus == CPUS and model.reference == "gym-sync"
    for env_id, t_env in ENV_STEP.items():
        assert model.envs[env_id].t_env_seconds == pytest.approx(t_env, rel=0.01)
        assert model.envs[env_id].points == len(NUM_ENVS)
    assert set(model.backends) == {"pool", "subproc"}
    for label, t_os in [("pool", 300 * US), ("subproc", 150 * US)]:
        fit = model.backends[label]
        assert fit.t_os_seconds == pytest.approx(t_os, rel=0.01)
        assert fit.r2 == pytest.approx(1.0, abs=1e-6)
        assert fit.median_relative_error < 1e-6
        assert fit.points == len(ENV_STEP) * len(NUM_ENVS)
        assert not fit.constant.clamped
    assert model.skipped == []


def test_fit_with_noise_stays_close():
    data = synthetic({"pool": (300 * US, 0.0)}, noise=0.05, seed=1)

    fit = fit_overhead_model(data, cpus=CPUS).backends["pool"]

    assert fit.t_os_seconds == pytest.approx(300 * US, rel=0.15)
    assert 0.9 < fit.r2 < 1.0
    assert 0.0 < fit.median_relative_error < 0.1


def log_error(data: list[Measurement], label: str, t_os: float) -> float:
    """What the fit minimises: sum over the points of (log predicted - log measured speed-up)^2."""
    t_env = {m.config.num_envs: 1 / m.median for m in data if m.config.backend == "gym-sync"}
    return sum(
        math.log(
            model_speedup(
                m.config.num_envs,
                t_env[m.config.num_envs],
                min(m.workers, m.config.num_envs, CPUS),
                t_os,
            )
            / m.ratio
        )
        ** 2
        for m in data
        if m.config.backend_label == label
    )


def disagreeing_pool() -> list[Measurement]:
    """CartPole through a pool whose overhead is 500 us per call, except at N=1, where its
    single worker is the calling process and the overhead next to nothing (10 us)."""
    t_env = ENV_STEP[CHEAP]
    data = []
    for n in NUM_ENVS:
        c, t_os = min(2, n), (10 * US if n == 1 else 500 * US)
        speedup = model_speedup(n, t_env, c, t_os)
        data.append(measurement(CHEAP, n, "gym-sync", 1 / t_env, ratio=1.0))
        data.append(measurement(CHEAP, n, "pool", speedup / t_env, workers=c, ratio=speedup))
    return data


def test_fit_minimises_the_log_error_of_the_speedups():
    data = disagreeing_pool()

    fitted = fit_overhead_model(data, cpus=CPUS).backends["pool"].t_os_seconds

    # Brute force, to the tenth of a microsecond: no t_os does better.
    best = min((k * 0.1 * US for k in range(10_000)), key=lambda t: log_error(data, "pool", t))
    assert fitted == pytest.approx(best, abs=0.2 * US)
    assert log_error(data, "pool", fitted) <= log_error(data, "pool", best) + 1e-12


def test_one_cheap_point_does_not_decide_the_fit():
    data = disagreeing_pool()
    # The fit's first round, by hand: relative errors, the weighted mean of the points' own
    # t_os_i with weights 1 / t_batch_i^2. The 30 us batch at N=1 weighs hundreds of times
    # more than the others, and the result lands next to its 10 us.
    weights, estimates = [], []
    for m in data:
        if m.config.backend == "pool":
            n, c = m.config.num_envs, min(2, m.config.num_envs)
            t_batch = n * ENV_STEP[CHEAP] / m.ratio
            weights.append(1 / t_batch**2)
            estimates.append(t_batch - n * ENV_STEP[CHEAP] / c)
    first_round = sum(w * t for w, t in zip(weights, estimates)) / sum(weights)

    fitted = fit_overhead_model(data, cpus=CPUS).backends["pool"].t_os_seconds

    assert first_round < 20 * US
    # The log fit hears the six points at 500 us too, and is much closer to all seven.
    assert fitted > 10 * first_round
    assert log_error(data, "pool", fitted) < log_error(data, "pool", first_round) / 2


def test_each_point_uses_the_reference_measured_at_its_own_n():
    # gym-sync pays its own per-call bookkeeping, so its per-step time falls as N grows. Each
    # ratio was divided by the reference at the same N, so the fit must use that one.
    data = []
    for n in NUM_ENVS:
        t_env = 20 * US * (1 + 1 / n)
        speedup = model_speedup(n, t_env, min(2, n), 300 * US)
        data.append(measurement(CHEAP, n, "gym-sync", 1 / t_env, ratio=1.0))
        data.append(
            measurement(CHEAP, n, "pool", speedup / t_env, workers=min(2, n), ratio=speedup)
        )

    model = fit_overhead_model(data, cpus=CPUS)

    assert model.backends["pool"].t_os_seconds == pytest.approx(300 * US, rel=1e-6)
    # The env's t_env is the median over N: here the reference at N=8.
    assert model.envs[CHEAP].t_env_seconds == pytest.approx(20 * US * (1 + 1 / 8))


def test_per_env_variant_recovers_overhead_growing_with_n():
    data = synthetic({"subproc": (100 * US, 30 * US), "pool": (300 * US, 0.0)})

    model = fit_overhead_model(data, cpus=CPUS)
    subproc, pool = model.backends["subproc"], model.backends["pool"]

    assert subproc.per_env is not None
    assert subproc.per_env.fixed_seconds == pytest.approx(100 * US, rel=0.01)
    assert subproc.per_env.per_env_seconds == pytest.approx(30 * US, rel=0.01)
    assert subproc.per_env.r2 == pytest.approx(1.0, abs=1e-6)
    # One constant t_os cannot describe an overhead that grows with N: a visibly worse fit.
    assert subproc.r2 < 0.9
    assert subproc.median_relative_error > 0.05
    # The pool's overhead does not grow with N: the second term finds nothing.
    assert pool.per_env.per_env_seconds == pytest.approx(0.0, abs=1e-9)
    assert pool.per_env.fixed_seconds == pytest.approx(300 * US, rel=0.01)


def test_per_env_variant_needs_two_values_of_n():
    model = fit_overhead_model(synthetic({"pool": (300 * US, 0.0)}, num_envs=(4,)), cpus=CPUS)
    fit = model.backends["pool"]

    assert fit.per_env is None
    assert fit.t_os_seconds == pytest.approx(300 * US, rel=0.01)
    assert fit.r2 == pytest.approx(1.0)  # the two envs' speed-ups differ: there is a spread
    with pytest.raises(ValueError, match="two or more values of N"):
        model.predict_speedup(CHEAP, "pool", 4, variant="per_env")


def test_r2_is_undefined_without_a_spread_to_explain():
    one_point = synthetic({"pool": (300 * US, 0.0)}, envs={CHEAP: 20 * US}, num_envs=(4,))

    fit = fit_overhead_model(one_point, cpus=CPUS).backends["pool"]

    assert math.isnan(fit.r2)
    assert fit.median_relative_error == pytest.approx(0.0, abs=1e-9)


def test_sequential_loop_faster_than_the_reference_is_clamped_to_zero():
    data = []
    for n in (1, 4, 16):
        data.append(measurement(CHEAP, n, "gym-sync", 50_000, ratio=1.0))
        data.append(measurement(CHEAP, n, "multi", 55_000, workers=1, ratio=1.1))

    model = fit_overhead_model(data, cpus=CPUS)
    fit = model.backends["multi"]

    assert fit.t_os_seconds == 0.0
    assert fit.constant.clamped
    assert fit.workers == 1
    # Predicted 1x (no overhead), measured 1.1x: the error says how much it beats gym-sync.
    assert fit.median_relative_error == pytest.approx(0.1 / 1.1)
    row = next(row for row in model.table() if row["backend"] == "multi")
    assert row["clamped"] and "clamped" in row["note"]


# --- predictions ----------------------------------------------------------------------------


def test_predictions_follow_the_formula():
    model = fit_overhead_model(
        synthetic({"pool": (300 * US, 0.0), "subproc": (150 * US, 0.0)}), cpus=CPUS
    )
    t_env = model.envs[COSTLY].t_env_seconds
    t_os = model.backends["subproc"].t_os_seconds

    # One process per env, but only 2 CPUs: c = min(N, N, 2) = 2.
    expected = model_speedup(8, t_env, 2, t_os)
    assert model.predict_speedup(COSTLY, "subproc", 8) == pytest.approx(expected)
    assert model.concurrency("subproc", 8) == 2
    assert model.concurrency("subproc", 1) == 1
    # Asking for one worker: c = 1, and the speed-up can only be below 1.
    one_worker = model.predict_speedup(COSTLY, "subproc", 8, workers=1)
    assert one_worker == pytest.approx(model_speedup(8, t_env, 1, t_os))
    assert one_worker < 1
    # Throughput = speed-up x single-env rate; the reference is 1x by definition.
    assert model.predict_throughput(COSTLY, "subproc", 8) == pytest.approx(expected / t_env)
    assert model.predict_speedup(COSTLY, "gym-sync", 64) == 1.0
    assert model.predict_throughput(COSTLY, "gym-sync", 64) == pytest.approx(1 / t_env)
    # Many costly envs: the speed-up approaches the CPUs, never passes them.
    assert CPUS * 0.9 < model.predict_speedup(COSTLY, "pool", 10_000) < CPUS


def test_machine_limit_is_cpus_times_single_env_rate():
    model = fit_overhead_model(synthetic({"pool": (300 * US, 0.0)}), cpus=4)
    env = model.envs[CHEAP]

    assert env.single_env_rate == pytest.approx(1 / (20 * US))
    assert env.machine_limit == pytest.approx(4 / (20 * US))
    assert env.cpus == 4


def test_a_measured_ceiling_is_the_limit_and_caps_how_many_envs_step_at_once():
    # Two busy cores give 1.6x one env, not 2x: the fit must use that, not the CPU count.
    data = synthetic({"pool": (300 * US, 0.0), "subproc": (150 * US, 0.0)}, ceiling=0.8)
    model = fit_overhead_model(data, cpus=CPUS)
    env = model.envs[COSTLY]

    assert env.ceiling_measured
    assert env.capacity(1) == pytest.approx(0.8) and env.capacity(64) == pytest.approx(1.6)
    assert env.limit(64) == pytest.approx(1.6 / ENV_STEP[COSTLY])
    assert env.machine_limit == pytest.approx(1.6 / ENV_STEP[COSTLY])
    assert "ceiling" not in model.backends, "the ceiling is the limit, not a backend to fit"
    # With c capped by the ceiling, the fit finds the overheads the data were made with.
    assert model.backends["pool"].t_os_seconds == pytest.approx(300 * US, rel=1e-6)
    assert model.backends["subproc"].t_os_seconds == pytest.approx(150 * US, rel=1e-6)
    assert model.predict_speedup(COSTLY, "pool", 10_000) < 1.6
    assert "~" not in model.format_table().split("backend ")[0]


def test_without_a_ceiling_the_limit_is_the_cpu_estimate():
    model = fit_overhead_model(synthetic({"pool": (300 * US, 0.0)}), cpus=CPUS)
    env = model.envs[CHEAP]

    assert not env.ceiling_measured
    assert env.capacity(1) == 1 and env.capacity(64) == CPUS
    assert [row["ceiling_measured"] for row in model.env_table()] == [False, False]


def test_workers_come_from_the_measurements():
    data = synthetic({"pool": (300 * US, 0.0), "subproc": (150 * US, 0.0)})
    data += [measurement(CHEAP, n, "multi", 50_000, workers=1, ratio=1.0) for n in (1, 8)]

    model = fit_overhead_model(data, cpus=8)

    assert model.backends["pool"].workers == 2
    assert model.backends["subproc"].workers is None  # one per env
    assert model.backends["multi"].workers == 1
    assert model.concurrency("subproc", 64) == 8  # capped by the CPUs
    assert model.concurrency("pool", 64) == 2


# --- what is left out, and bad input ----------------------------------------------------------


def test_left_out_measurements_are_listed_with_their_reason():
    data = synthetic({"pool": (300 * US, 0.0)})
    data.append(measurement(CHEAP, 4, "envpool", 1e6, workers=2, ratio=10.0))
    data.append(measurement(CHEAP, 4, "subproc", 1e4, workers=4, ratio=None))
    data.append(measurement("MountainCar-v0", 4, "pool", 1e4, workers=2, ratio=0.5))

    model = fit_overhead_model(data, cpus=CPUS)

    assert set(model.backends) == {"pool"}
    assert model.backends["pool"].t_os_seconds == pytest.approx(300 * US, rel=0.01)
    reasons = "\n".join(model.skipped)
    assert len(model.skipped) == 3
    assert "envpool" in reasons and "native" in reasons
    assert "subproc on CartPole-v1, N=4: no ratio" in reasons
    assert "MountainCar-v0" in reasons and "t_env" in reasons
    with pytest.raises(KeyError, match="envpool"):
        model.predict_speedup(CHEAP, "envpool", 4)


def test_errors_on_empty_or_unusable_input():
    with pytest.raises(ValueError, match="no measurements"):
        fit_overhead_model([], cpus=CPUS)
    only_reference = [measurement(CHEAP, 4, "gym-sync", 5e4, ratio=1.0)]
    with pytest.raises(ValueError, match="nothing to fit"):
        fit_overhead_model(only_reference, cpus=CPUS)
    no_reference = [measurement(CHEAP, 4, "pool", 5e4, workers=2, ratio=1.5)]
    with pytest.raises(ValueError, match="gym-sync"):
        fit_overhead_model(no_reference, cpus=CPUS)
    without_ratio = [*only_reference, measurement(CHEAP, 4, "pool", 5e4, workers=2)]
    with pytest.raises(ValueError, match="no ratio"):
        fit_overhead_model(without_ratio, cpus=CPUS)
    with pytest.raises(TypeError, match="from_dict"):
        fit_overhead_model([only_reference[0].to_dict()], cpus=CPUS)
    with pytest.raises(ValueError, match="cpus"):
        fit_overhead_model(only_reference, cpus=0)


def test_predict_rejects_what_the_model_does_not_know():
    model = fit_overhead_model(synthetic({"pool": (300 * US, 0.0)}), cpus=CPUS)

    with pytest.raises(KeyError, match="MountainCar"):
        model.predict_speedup("MountainCar-v0", "pool", 4)
    with pytest.raises(KeyError, match="subproc"):
        model.predict_speedup(CHEAP, "subproc", 4)
    with pytest.raises(ValueError, match="variant"):
        model.predict_speedup(CHEAP, "pool", 4, variant="quadratic")
    with pytest.raises(ValueError, match="num_envs"):
        model.predict_speedup(CHEAP, "pool", 0)


# --- tables ---------------------------------------------------------------------------------


def test_table_is_json_ready_with_the_reference_first():
    data = synthetic({"pool": (300 * US, 0.0), "subproc": (100 * US, 30 * US)})
    model = fit_overhead_model(data, cpus=CPUS)

    rows = model.table()
    json.dumps(model.to_dict(), allow_nan=False)  # NaN is not JSON: it must not appear

    assert [row["backend"] for row in rows] == ["gym-sync", "pool", "subproc"]
    assert rows[0]["t_os_us"] == 0.0 and "reference" in rows[0]["note"]
    pool = rows[1]
    assert pool["t_os_us"] == pytest.approx(300, rel=0.01)
    assert pool["workers"] == 2 and pool["points"] == len(ENV_STEP) * len(NUM_ENVS)
    assert rows[2]["per_env_us"] == pytest.approx(30, rel=0.01)
    envs = model.env_table()
    assert [row["env"] for row in envs] == [CHEAP, COSTLY]  # cheapest first
    assert envs[0]["t_env_us"] == pytest.approx(20, rel=0.01)
    assert envs[0]["machine_limit"] == pytest.approx(CPUS / (20 * US), rel=0.01)


def test_format_table_shows_every_backend_and_env():
    data = synthetic({"pool": (300 * US, 0.0)})
    data.append(measurement(CHEAP, 4, "envpool", 1e6, workers=2, ratio=10.0))

    text = fit_overhead_model(data, cpus=CPUS).format_table()

    for expected in (
        "gym-sync",
        "pool",
        CHEAP,
        COSTLY,
        "300.0",
        "t_os",
        "ceiling (steps/s)",
        "no ceiling measured: estimated as CPUs x 1 env",
        "envpool: native backend",
    ):
        assert expected in text, f"{expected!r} missing from:\n{text}"


# --- a real measurement -----------------------------------------------------------------------


def test_fit_a_real_quick_comparison(no_leftover_processes):
    results = compare(
        "CartPole-v1", 2, ["pool", "multi"], backend_kwargs={"pool": {"num_workers": 2}}, **QUICK
    )

    model = fit_overhead_model(results)

    assert set(model.backends) == {"pool (num_workers=2)", "multi"}
    for fit in model.backends.values():
        assert math.isfinite(fit.t_os_seconds) and fit.t_os_seconds >= 0
        assert fit.points == 1
    assert 0 < model.predict_speedup("CartPole-v1", "pool (num_workers=2)", 2) <= model.cpus
    assert model.envs["CartPole-v1"].single_env_rate > 0
