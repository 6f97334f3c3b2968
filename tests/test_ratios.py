"""One set of numbers (vecenvs.bench.ratios): every ratio the lab shows is the ratio of the
throughputs shown beside it, whichever table, verdict, store, command or export shows it; and a
number that breaks a definition is flagged, never shown as a result.

Made-up measurements with one bad window, so every number has a known right value: these are
the cases where a median of window-by-window ratios and a ratio of medians part ways.
"""

from __future__ import annotations

import csv
import io
import math

import pytest
from synthetic_measurements import COSTLY, measurement

from vecenvs import cli
from vecenvs.bench import ResultsStore, SweepConfig, figures, ratios
from vecenvs.bench.engine import Measurement
from vecenvs.bench.ratios import (
    ABOVE_CEILING,
    CEILING_DISTURBED,
    DISTURBED,
    REFERENCE_DISTURBED,
    changes,
    efficiency_text,
    measurement_row,
    relate,
    relate_point,
    shown_efficiency,
)
from vecenvs.bench.verdict import verdict_rows, verdicts
from vecenvs.cli.bench import format_table
from vecenvs.cli.results import format_measurements


def measured(backend: str, throughputs: list[float], n: int = 4) -> Measurement:
    result = measurement(COSTLY, n, backend, 1.0, workers=2 if backend != "multi" else 1)
    result.throughputs = list(throughputs)
    result.window_steps = [100] * len(throughputs)
    result.window_seconds = [0.2] * len(throughputs)
    return result


def issue_point(n: int = 4) -> list[Measurement]:
    """The page issue 21 shows (Acrobot, N=4, two windows): multi at 15,718 and the loop at
    8,761 env steps/s, one of the ceiling's windows stalled (10,150 ± 8,654)."""
    point = [
        measured("multi", [15_000, 16_436], n),
        measured("pool", [6_300, 6_794], n),
        measured("ceiling", [4_031, 16_269], n),
        measured("gym-sync", [8_500, 9_022], n),
    ]
    return list(relate_point(point, point[-1]))


def test_a_speed_up_is_the_ratio_of_the_throughputs_shown_not_a_median_of_window_ratios():
    multi, pool, _, loop = issue_point()

    assert multi.throughput == 15_718 and loop.throughput == 8_761
    assert multi.ratio == pytest.approx(15_718 / 8_761)  # 1.79x, as the table's numbers say
    assert multi.paired_ratios == pytest.approx([15_000 / 8_500, 16_436 / 9_022])
    assert loop.ratio == 1.0
    assert pool.efficiency == pytest.approx(6_547 / 10_150)


def test_one_bad_window_flags_the_ceiling_and_every_efficiency_it_would_give():
    multi, pool, ceiling, loop = issue_point()

    assert DISTURBED in ceiling.checks, "4,031 and 16,269: a window stalled"
    assert multi.checks == [CEILING_DISTURBED, ABOVE_CEILING]
    assert CEILING_DISTURBED in pool.checks and ABOVE_CEILING not in pool.checks
    for result in (multi, pool, loop):
        assert shown_efficiency(result) is None and efficiency_text(result).startswith("? ")
    assert efficiency_text(multi) == "? ceiling disturbed", "the cause, before what follows"
    assert efficiency_text(ceiling) == "100%"
    # Without the stall, nothing is flagged and the shares are results.
    quiet = [
        measured("multi", [10_000, 10_400]),
        measured("ceiling", [16_000, 16_300]),
        measured("gym-sync", [8_500, 9_022]),
    ]
    relate_point(quiet, quiet[-1])
    assert [m.checks for m in quiet] == [[], [], []]
    assert efficiency_text(quiet[0]) == f"{10_200 / 16_150:.0%}"


def test_native_envs_above_the_ceiling_are_not_flagged_but_python_ones_are():
    point = [measured("envpool", [30_000, 30_500]), measured("ceiling", [16_000, 16_300])]
    point.append(measured("gym-sync", [8_000, 8_100]))
    relate_point(point, point[-1])
    assert point[0].efficiency > 1 and point[0].checks == []  # not like-for-like: its own envs


def test_a_disturbed_reference_makes_every_speed_up_at_its_point_suspect():
    point = [measured("multi", [9_000, 9_100]), measured("gym-sync", [3_000, 9_000])]
    relate_point(point, point[-1])
    assert REFERENCE_DISTURBED in point[0].checks and DISTURBED in point[1].checks
    assert "the reference's windows disagree" in ratios.explain(point[0])[0]


def test_verdict_tables_store_show_and_csv_export_give_the_same_numbers(tmp_path, capsys):
    point = issue_point()
    multi = point[0]
    shown = f"{multi.ratio:.2f}"
    assert shown == "1.79"

    # The verdict and its table.
    (verdict,) = verdicts(point)
    assert verdict.best == "multi" and verdict.speedup == multi.ratio
    (row,) = verdict_rows([verdict])
    assert row["x gym-sync"] == f"{shown}x" and row["of ceiling"] == "? ceiling disturbed"
    # The dashboard's measurements table and the terminal's.
    assert measurement_row(multi)["x gym-sync"] == f"{shown}x"
    assert measurement_row(multi)["env steps/s"] == "15,718"
    assert measurement_row(multi)["of ceiling"] == "? ceiling disturbed"
    terminal = format_table(point)
    (line,) = [line for line in terminal.splitlines() if line.startswith("multi ")]
    assert "15,718" in line and f" {shown} " in line and "? ceiling disturbed" in line
    assert "%" not in line, "no share of a disturbed ceiling"

    # The store, `results show`, and the CSV export.
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as store:
        run = store.start_run("sweep", SweepConfig([COSTLY], [4], ["multi"]).to_dict())
        for result in point:
            store.add_measurement(run, result)
        store.finish_run(run)
        rows = store.measurements([run])
        text = io.StringIO()
        store.export_csv(text, [run])
    by_backend = {row["backend"]: row for row in rows}
    assert by_backend["multi"]["ratio"] == pytest.approx(multi.ratio)
    assert by_backend["multi"]["median"] == 15_718
    table = format_measurements(rows, reference="gym-sync")
    (line,) = [line for line in table.splitlines() if " multi " in line]
    assert "15,718" in line and f" {shown} " in line and "? ceiling disturbed" in line
    exported = {row["backend"]: row for row in csv.DictReader(io.StringIO(text.getvalue()))}
    assert float(exported["multi"]["ratio"]) == pytest.approx(multi.ratio)
    assert exported["multi"]["checks"] == '["ceiling disturbed", "above the ceiling"]'
    assert cli.main(["results", "show", str(run), "--store", str(path)]) == 0
    assert f" {shown} " in capsys.readouterr().out

    # The charts: the point's speed-up, no efficiency point above 100%, and the title says why.
    speedups = figures.speedup_figure(point)
    (trace,) = [t for t in speedups.data if t.name == "multi"]
    assert list(trace.y) == [pytest.approx(multi.ratio)]
    efficiency = figures.efficiency_figure(point)
    drawn = [y for t in efficiency.data if t.name in ("multi", "pool", "gym-sync") for y in t.y]
    assert drawn == [], "every efficiency at this point is flagged"
    assert efficiency.layout.title.text.endswith(
        "<br><sup>Not shown, not results: N=4: ceiling disturbed</sup>"
    )


def test_a_stored_run_from_before_gets_the_same_numbers_as_a_new_one():
    old = issue_point()
    for result in old:  # as the lab stored them before: medians of the window ratios
        result.ratio = 2.37
        result.efficiency = 1.0
        result.checks = []
    reread = relate([Measurement.from_dict(result.to_dict()) for result in old])
    assert [m.ratio for m in reread] == pytest.approx([m.ratio for m in issue_point()])
    assert reread[0].checks == [CEILING_DISTURBED, ABOVE_CEILING]


def test_relate_takes_the_reference_of_each_point_and_leaves_a_point_without_one_alone():
    two = issue_point(4) + issue_point(16)[:2]  # N=16 without its reference
    for result in two:
        result.ratio = None
    relate(two)
    assert [m.ratio is None for m in two] == [False] * 4 + [True] * 2


def test_changes_between_two_runs_are_ratios_of_their_throughputs():
    then = issue_point()
    now = issue_point()
    now[0].throughputs = [16_500, 18_000]  # multi 10% faster
    relate_point(now, now[-1])

    rows = changes(now, then)

    assert [row["backend"] for row in rows] == ["multi", "pool", "ceiling", "gym-sync"]
    assert rows[0]["change"] == pytest.approx(17_250 / 15_718)
    assert rows[1]["change"] == 1.0
    assert rows[0]["speedup_now"] == pytest.approx(17_250 / 8_761)
    assert CEILING_DISTURBED in rows[0]["checks"]
    assert changes(now, []) == []
    assert math.isnan(changes(now, [measured("multi", [0.0, 0.0])])[0]["change"])


def test_the_spread_of_a_single_window_is_one_and_a_stopped_window_is_infinite():
    assert ratios.spread(measured("multi", [5.0])) == 1.0
    assert ratios.spread(measured("multi", [5.0, 0.0])) == math.inf
    assert math.isnan(ratios.throughput(measured("multi", [])))
