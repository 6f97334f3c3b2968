"""The verdict (vecenvs.bench.verdict): what to use at each N, read from paired windows, and
the overhead model's fit quality in words. Made-up measurements, so every case is known."""

from __future__ import annotations

import math

import pytest
from synthetic_measurements import CHEAP, US, measurement, synthetic

from vecenvs.bench import ratios
from vecenvs.bench.model import BackendFit, OverheadFit, fit_overhead_model
from vecenvs.bench.ratios import relate_point
from vecenvs.bench.verdict import (
    CLEAR,
    GOOD,
    LIKELY,
    NOISY,
    ONE_WINDOW,
    POOR,
    ROUGH,
    SUSPECT,
    TIE,
    TOO_FEW,
    fit_quality,
    format_verdicts,
    verdict_rows,
    verdicts,
)


def point(**windows: list[float]) -> list:
    """The measurements of one point (CartPole-v1, N=8) with these windows each, related as
    compare() relates them; ``gym_sync`` is the reference."""
    measured = []
    for backend, throughputs in windows.items():
        result = measurement(CHEAP, 8, backend.replace("_", "-"), 1.0)
        result.throughputs = list(throughputs)
        measured.append(result)
    return list(relate_point(measured, measured[-1]))


REFERENCE = [100.0, 100.0, 100.0]


def test_a_clear_winner_is_named_with_its_margin_over_the_runner_up_and_its_ceiling_share():
    data = point(
        pool=[200, 220, 210],
        multi=[101, 102, 100],
        ceiling=[280, 285, 290],
        gym_sync=REFERENCE,
    )

    (verdict,) = verdicts(data)

    assert verdict.best == "pool" and verdict.runner_up == "multi"
    assert verdict.confidence == CLEAR and not verdict.close and verdict.advice == ""
    # Every number is a ratio of the throughputs (the median windows) shown beside it.
    assert verdict.speedup == pytest.approx(210 / 100)
    assert verdict.margin == pytest.approx(210 / 101)
    assert verdict.efficiency == pytest.approx(210 / 285)
    assert verdict.sentence() == (
        "CartPole-v1, N=8: use pool: 2.10x gym-sync, 2.08x the runner-up multi; clear: faster "
        "in 3 of 3 paired windows; 74% of the ceiling."
    )
    (row,) = verdict_rows([verdict], {CHEAP: "CartPole"})
    assert row == {
        "env": "CartPole",
        "N": "8",
        "use": "pool",
        "fastest": "pool",
        "x gym-sync": "2.10x",
        "x runner-up": "2.08x multi",
        "of ceiling": "74%",
        "confidence": "clear",
        "what to do": "",
    }


def test_two_windows_that_agree_make_a_likely_call_not_a_clear_one():
    (verdict,) = verdicts(point(pool=[150, 160], gym_sync=[100, 100]))

    assert verdict.confidence == LIKELY and not verdict.close
    assert verdict.advice == "ahead in 2 of 2 windows; more windows would confirm it"
    assert "use pool: 1.55x gym-sync" in verdict.sentence()


def test_the_runner_up_is_the_second_fastest_and_a_lost_round_makes_it_likely():
    # multi is fastest; the loop beat it in the second round.
    (verdict,) = verdicts(point(multi=[150, 90, 140], pool=[120, 80, 110], gym_sync=REFERENCE))

    assert (verdict.best, verdict.runner_up) == ("multi", "pool")
    assert verdict.wins == 3 and verdict.confidence == CLEAR  # it beat pool every round
    (verdict,) = verdicts(point(multi=[150, 90, 140], gym_sync=REFERENCE))
    assert verdict.wins == 2 and verdict.confidence == LIKELY


def test_no_call_is_clear_beside_a_flag_saying_every_speed_up_at_that_n_is_suspect():
    # The dashboard said "clear" for 1.52x beside "the loop was disturbed: every speed-up at
    # this N is suspect". The rounds alone would call it clear; the flag makes it suspect.
    disturbed_loop = [100.0, 60.0, 101.0]  # fastest 1.68x the slowest: a stall
    (verdict,) = verdicts(
        point(pool=[152, 150, 155], multi=[100, 101, 99], gym_sync=disturbed_loop)
    )

    assert ratios.REFERENCE_DISTURBED in verdict.checks
    assert verdict.confidence == SUSPECT and verdict.close
    assert verdict.windows_to_measure == 6
    assert verdict.advice == (
        "suspect: the windows of gym-sync (the loop) disagree, so every speed-up here is "
        "suspect; measure again, on a quieter machine or with 6 windows"
    )
    (row,) = verdict_rows([verdict])
    assert (row["use"], row["confidence"]) == ("no call yet", "suspect")
    assert "clear" not in verdict.sentence()
    # A tie, and a call against the loop itself, are suspect too; noise stays noise.
    (tie,) = verdicts(point(pool=[101, 61, 102], gym_sync=disturbed_loop))
    assert tie.confidence == SUSPECT
    (noisy,) = verdicts(point(multi=[150, 40, 100], gym_sync=disturbed_loop))
    assert noisy.confidence == NOISY
    # Steady loop, same rounds: clear.
    (verdict,) = verdicts(point(pool=[152, 150, 155], multi=[100, 101, 99], gym_sync=REFERENCE))
    assert verdict.confidence == CLEAR


def test_less_than_five_percent_apart_in_steady_windows_is_a_tie():
    (verdict,) = verdicts(point(pool=[101, 99, 103], gym_sync=REFERENCE))

    assert verdict.confidence == TIE and verdict.close
    assert verdict.sentence("CartPole") == (
        "CartPole, N=8: a tie between pool at 1.01x gym-sync and gym-sync (the loop) at 1.00x: "
        "within 5% of gym-sync in every window: either will do."
    )
    assert verdict_rows([verdict])[0]["use"] == "pool or gym-sync"


def test_windows_that_disagree_are_noise_not_closeness_and_say_what_to_do():
    # The case: 2.27x over the loop, the windows ranging 0.82-2.63x.
    (verdict,) = verdicts(point(multi=[263, 82], gym_sync=[100, 100]))

    assert verdict.confidence == NOISY and verdict.close
    assert verdict.windows_to_measure == 5
    assert verdict.advice == "noisy: 2 windows ranged 0.82-2.63x gym-sync; measure 5 windows"
    assert verdict.sentence().startswith("CartPole-v1, N=8: no call between multi at 1.73x")
    assert verdict_rows([verdict])[0]["use"] == "no call yet"
    (more,) = verdicts(point(multi=[263, 82, 250, 85], gym_sync=[100] * 4))
    assert more.confidence == NOISY and more.windows_to_measure == 8, "twice as many"
    (most,) = verdicts(point(multi=[263, 82, 250, 85, 260, 80], gym_sync=[100] * 6))
    assert most.windows_to_measure == 10, "up to the form's 10"


def test_one_window_is_never_enough_to_call_it():
    (verdict,) = verdicts(point(pool=[300], gym_sync=[100]))

    assert verdict.confidence == ONE_WINDOW and verdict.close
    assert verdict.advice == "one window: no spread to judge by; measure 5 windows"


def test_the_ceiling_is_the_limit_never_the_answer_and_each_n_gets_its_verdict():
    data = synthetic(
        {"pool": (300 * US, 0.0)}, envs={CHEAP: 20 * US}, num_envs=(1, 64), ceiling=0.9
    )

    found = {(v.env_label, v.num_envs): v for v in verdicts(data)}

    assert set(found) == {(CHEAP, 1), (CHEAP, 64)}
    assert all(v.best != "ceiling" and v.runner_up != "ceiling" for v in found.values())
    assert found[CHEAP, 1].best == "gym-sync"  # one env: the pool only adds overhead
    assert "use gym-sync (the loop)" in found[CHEAP, 1].sentence()
    assert found[CHEAP, 64].best == "pool"


def test_a_disturbed_ceiling_is_flagged_and_never_makes_an_efficiency_above_100_percent():
    # The page: multi 15,718 and gym-sync 8,761 env steps/s (1.79x), one of the
    # ceiling's two windows stalled (10,150 ± 8,654), multi drawn above the ceiling.
    data = point(
        multi=[15_000, 16_436],
        pool=[6_300, 6_794],
        ceiling=[4_031, 16_269],
        gym_sync=[8_500, 9_022],
    )

    (verdict,) = verdicts(data)

    assert verdict.speedup == pytest.approx(15_718 / 8_761) and f"{verdict.speedup:.2f}" == "1.79"
    assert verdict.efficiency is None, "1.55 of the ceiling is not a result"
    assert {ratios.CEILING_DISTURBED, ratios.ABOVE_CEILING} <= set(verdict.checks)
    assert verdict_rows([verdict])[0]["of ceiling"] == "? ceiling disturbed"
    assert "efficiency not shown: ceiling disturbed" in verdict.sentence()
    assert "%" not in verdict.sentence()


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
    assert ("its curve is not drawn" in quality.sentence) == (word == POOR)
    assert quality.trusted == (word != POOR)


def test_a_poor_fit_says_when_an_overhead_growing_with_n_fits_better():
    per_env = OverheadFit(100 * US, 80 * US, 0.97, 0.04)

    quality = fit_quality(fit(0.45, -19.7, per_env))

    assert quality.poor
    assert quality.sentence == (
        "subproc: the model fits poor (median error 45%, R² -19.70); its curve is not drawn, "
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
    data = point(pool_async=[150, 160, 155], pool=REFERENCE)
    (verdict,) = verdicts(data, reference="pool")
    assert "pool (the reference)" in verdict.sentence() and "the loop" not in verdict.sentence()
    (verdict,) = verdicts(point(multi=[90, 120, 80], gym_sync=REFERENCE))
    assert "gym-sync (the loop)" in verdict.sentence()


def test_a_fit_through_as_many_points_as_numbers_claims_nothing_and_draws_no_curve():
    # Two N of one env: t_env and t_os go through both points exactly, "median error 0%".
    exact = OverheadFit(300 * US, 0.0, 1.0, 0.0)
    two = BackendFit("pool", 2, 2, exact, exact, envs=1, distinct_points=2)

    quality = fit_quality(two)

    assert quality.word == TOO_FEW and not quality.trusted
    assert quality.sentence == (
        "pool: too few points to judge the model (2 point(s) for 2 numbers: t_env per env and "
        "t_os); its curve is not drawn. Measure at more N to test it."
    )
    assert fit_quality(BackendFit("pool", 3, 2, exact, exact, distinct_points=3)).trusted
    assert fit_quality(BackendFit("pool", 3, 2, exact, exact), "per_env").word == TOO_FEW
    # Two envs at two N each: four points for three numbers (two t_env, one t_os).
    assert fit_quality(BackendFit("pool", 4, 2, exact, None, envs=2)).word == "good"
    data = synthetic({"pool": (300 * US, 0.0)}, envs={CHEAP: 20 * US}, num_envs=(4, 64))
    (fit,) = fit_overhead_model(data).backends.values()
    assert (fit.distinct_points, fit.parameters()) == (2, 2) and not fit.enough_points()


def test_a_model_too_thin_to_judge_is_one_line_in_the_terminal_not_a_table():
    """A first quick run measures two N: every fit goes through its points exactly."""
    overheads = {"pool": (300 * US, 0.0), "subproc": (900 * US, 0.0)}
    two = synthetic(overheads, envs={CHEAP: 20 * US}, num_envs=(4, 64))
    model = fit_overhead_model(two)
    assert not model.judged

    text = format_verdicts(two, model)

    [line] = [line for line in text.splitlines() if "Overhead model" in line]
    assert line == (
        "Overhead model: too few points to judge it: 2 point(s) of env and N for 2 numbers "
        "(t_env per env and t_os); measure at 3 or more values of N to see it."
    )
    assert "too few points to judge the model" not in text  # not once per backend

    # Enough points for some: their fit in words, the others named in one line.
    many = synthetic({"pool": (300 * US, 0.0)}, envs={CHEAP: 20 * US}, num_envs=(2, 8, 32))
    many += synthetic({"subproc": (900 * US, 0.0)}, envs={CHEAP: 20 * US}, num_envs=(8,))[1:]
    model = fit_overhead_model(many)
    assert model.judged
    text = format_verdicts(many, model)
    assert "pool: the model fits good" in text
    assert (
        "  Overhead model: too few points to judge it for subproc: 1 point(s) of env and N for "
        "2 numbers (t_env per env and t_os); measure at 3 or more values of N to see it."
    ) in text
    table = model.format_table()
    assert "\npool " in table and "\nsubproc " not in table
    assert "Not shown, too few points to judge their fit: subproc" in table
