"""The verdict (vecenvs.bench.verdict): what to use at each N, read from paired windows, and
the overhead model's fit quality in words. Made-up measurements, so every case is known."""

from __future__ import annotations

import math

import pytest
from synthetic_measurements import CHEAP, US, measurement, synthetic

from vecenvs.bench.model import BackendFit, OverheadFit, fit_overhead_model
from vecenvs.bench.verdict import GOOD, POOR, ROUGH, fit_quality, verdicts


def windows(backend: str, throughputs: list[float], reference: list[float], n: int = 8):
    """A measurement with these windows, paired with the reference's windows of each round."""
    result = measurement(CHEAP, n, backend, 1.0)
    result.throughputs = list(throughputs)
    result.paired_ratios = [own / ref for own, ref in zip(throughputs, reference)]
    result.ratio = sorted(result.paired_ratios)[len(throughputs) // 2]
    return result


REFERENCE = [100.0, 100.0, 100.0]


def test_a_clear_winner_is_named_with_its_interval_and_margin():
    data = [
        windows("pool", [200, 220, 210], REFERENCE),
        windows("multi", [101, 102, 100], REFERENCE),
        windows("gym-sync", REFERENCE, REFERENCE),
    ]
    data[0].efficiency = 0.74

    (verdict,) = verdicts(data)

    assert verdict.best == "pool" and verdict.runner_up == "multi" and not verdict.close
    assert (verdict.low, verdict.speedup, verdict.high) == pytest.approx((2.0, 2.1, 2.2))
    assert verdict.sentence() == (
        "CartPole-v1, N=8: use pool: 2.10x gym-sync (2.00-2.20x over 3 paired windows), faster "
        "than every other backend in every round, 1.98-2.16x its closest rival, multi; 74% of "
        "the machine's ceiling."
    )


def test_a_backend_that_won_one_round_makes_it_too_close_even_if_third_by_median():
    # multi is first by median, pool second; but the loop beat multi in the second round.
    data = [
        windows("multi", [150, 90, 140], REFERENCE),
        windows("pool", [120, 80, 110], REFERENCE),
        windows("gym-sync", REFERENCE, REFERENCE),
    ]

    (verdict,) = verdicts(data)

    assert verdict.best == "multi" and verdict.runner_up == "gym-sync" and verdict.close
    assert (
        "too close to call between multi at 1.40x gym-sync and gym-sync (the loop)"
        in verdict.sentence()
    )


def test_too_close_to_call_when_a_round_disagrees():
    data = [windows("pool", [108, 97, 106], REFERENCE), windows("gym-sync", REFERENCE, REFERENCE)]

    (verdict,) = verdicts(data)

    assert verdict.close
    text = verdict.sentence("CartPole")
    assert text.startswith(
        "CartPole, N=8: too close to call between pool at 1.06x gym-sync and "
        "gym-sync (the loop) at 1.00x"
    )
    assert "0.97-1.08x the other" in text


def test_one_window_is_never_enough_to_call_it():
    data = [windows("pool", [300], [100]), windows("gym-sync", [100], [100])]

    (verdict,) = verdicts(data)

    assert verdict.close and "a single window cannot tell them apart" in verdict.sentence()


def test_the_ceiling_is_the_limit_never_the_answer_and_each_n_gets_its_verdict():
    data = synthetic(
        {"pool": (300 * US, 0.0)}, envs={CHEAP: 20 * US}, num_envs=(1, 64), ceiling=0.9
    )
    for result in data:  # three identical windows each: every round agrees
        result.paired_ratios = [result.ratio] * 3

    found = {(v.env_label, v.num_envs): v for v in verdicts(data)}

    assert set(found) == {(CHEAP, 1), (CHEAP, 64)}
    assert all(v.best != "ceiling" and v.runner_up != "ceiling" for v in found.values())
    assert found[CHEAP, 1].best == "gym-sync"  # one env: the pool only adds overhead
    assert "use gym-sync (the loop)" in found[CHEAP, 1].sentence()
    assert found[CHEAP, 64].best == "pool"


def fit(error: float, r2: float, per_env: OverheadFit | None = None, workers=None) -> BackendFit:
    return BackendFit("subproc", 7, workers, OverheadFit(600 * US, 0.0, r2, error), per_env)


@pytest.mark.parametrize(
    "error, r2, word",
    [
        (0.05, 0.95, GOOD),
        (0.05, math.nan, GOOD),
        (0.2, 0.6, ROUGH),
        (0.05, 0.3, POOR),
        (0.45, -9.9, POOR),
    ],
)
def test_fit_quality_in_words_follows_the_numbers(error, r2, word):
    quality = fit_quality(fit(error, r2))

    assert quality.word == word
    assert f"median error {error:.0%}" in quality.sentence
    assert ("do not trust its curve" in quality.sentence) == (word == POOR)


def test_a_poor_fit_says_when_an_overhead_growing_with_n_fits_better():
    per_env = OverheadFit(100 * US, 80 * US, 0.97, 0.04)

    quality = fit_quality(fit(0.45, -19.7, per_env))

    assert quality.poor
    assert quality.sentence == (
        "subproc: the model fits poor (median error 45%, R² -19.70); do not trust its curve, "
        "though an overhead growing with N fits it good (median error 4%, R² 0.97)."
    )


def test_fit_quality_of_a_real_model():
    data = synthetic({"pool": (300 * US, 0.0), "subproc": (100 * US, 30 * US)})
    model = fit_overhead_model(data)

    words = {fit.label: fit_quality(fit).word for fit in model.backends.values()}

    # The pool was made with a constant overhead; subproc's grows with N: only the per-env
    # variant describes it, and the words say so.
    assert words == {"pool": GOOD, "subproc": POOR}
    assert (
        "an overhead growing with N fits it good" in fit_quality(model.backends["subproc"]).sentence
    )


def test_a_loop_is_judged_on_its_error_alone():
    # multi's speed-up hardly changes with N: an R^2 of 0.28 says nothing about a 3% error.
    quality = fit_quality(fit(0.03, 0.28, workers=1))

    assert quality.word == GOOD
    assert "(median error 3%, R² 0.28; R² not used for a loop)" in quality.sentence
    assert fit_quality(fit(0.40, 0.28, workers=1)).word == POOR


def test_a_reference_that_is_not_a_loop_is_not_called_the_loop():
    """The async pool's notebook compares it with the sync pool as the reference."""
    data = [
        windows("pool-async", [150, 160, 155], REFERENCE),
        windows("pool", REFERENCE, REFERENCE),
    ]
    (verdict,) = verdicts(data, reference="pool")
    assert "pool (the reference)" in verdict.sentence() and "the loop" not in verdict.sentence()
    (verdict,) = verdicts(
        [windows("multi", [90, 120, 80], REFERENCE), windows("gym-sync", REFERENCE, REFERENCE)]
    )
    assert "gym-sync (the loop)" in verdict.sentence()
