"""The listing and history benchmarks judge issue 20's targets from what they measured:
each target they have the figures for, met or not, none they have not measured, and the
history's only at the scale the issue sets them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.bench import history, listing
from tests.bench.targets import at_most, print_verdicts


def by_target(found: list[tuple[str, str, bool]]) -> dict[str, tuple[str, bool]]:
    return {target: (figure, ok) for target, figure, ok in found}


def test_at_most_is_met_at_the_limit_and_not_beyond() -> None:
    assert at_most("x", 10.0, 10.0, " ms") == ("x <= 10 ms", "10.00 ms", True)
    assert at_most("x", 10.001, 10.0, " ms") == ("x <= 10 ms", "10.00 ms", False)
    assert at_most("r", 2.5, 2.0, "x") == ("r <= 2x", "2.50x", False)


def test_the_listing_targets() -> None:
    figures = {
        "sqlite": {
            "computed": {"p50": 7.5, "p90": 30.0, "p99": 50.8, "max": 78.0},
            "cached": {"p50": 0.8, "p90": 1.1, "p99": 1.3, "max": 3.0},
        },
        "postgresql": {"computed": {"p50": 12.0, "p90": 29.0, "p99": 101.6, "max": 100.0}},
    }
    found = by_target(listing.verdicts(figures))
    assert found == {
        "SQLite computed p50 <= 10 ms": ("7.50 ms", True),
        "SQLite computed p99 <= 50 ms": ("50.80 ms", False),
        "SQLite cached p99 <= 2 ms": ("1.30 ms", True),
        "PostgreSQL computed p50 / SQLite's <= 2x": ("1.60x", True),
        "PostgreSQL computed p99 / SQLite's <= 2x": ("2.00x", True),  # at the limit
        # PostgreSQL's cached figure was not measured: not judged
    }


def test_the_listing_without_http_or_postgresql_judges_what_it_has() -> None:
    found = listing.verdicts({"sqlite": {"computed": {"p50": 11.0, "p99": 40.0}}})
    assert [(t, ok) for t, _, ok in found] == [
        ("SQLite computed p50 <= 10 ms", False),
        ("SQLite computed p99 <= 50 ms", True),
    ]
    assert listing.verdicts({}) == []


def history_run(observations: int, p50: float, size: float) -> dict[str, Any]:
    kinds = {
        label: {"p50_ms": p50, "p99_ms": p50 * 2, "n": 10} for label in history.HISTORY_TARGETS
    }
    kinds["change feed page (limit 1000)"] = {"p50_ms": p50, "p99_ms": p50, "n": 10}
    # a build lands a few observations short of what it was asked (whole crawls)
    return {"kinds": kinds, "bytes": size, "observations": observations - 30, "asked": observations}


def test_the_history_targets_at_scale_and_postgresql_against_sqlite() -> None:
    lite = history_run(5_000_000, 0.5, 127.0)
    lite["kinds"]["diff of two consecutive versions"]["p50_ms"] = 100.5
    pg = history_run(5_000_000, 1.2, 240.0)
    pg["kinds"]["as_of a month back, 4 filters (100), jit off"] = {"p50_ms": 9.0}
    found = by_target(history.verdicts({"sqlite": lite, "postgresql": pg}))
    expected = {
        "SQLite 4,999,970: history raw, one offer (~24 prices) p50 <= 10 ms": ("0.50 ms", True),
        "SQLite 4,999,970: diff of two consecutive versions p50 <= 100 ms": ("100.50 ms", False),
        "SQLite 4,999,970: bytes per observation <= 120": ("127.00", False),
        "PostgreSQL 4,999,970: history raw, one offer (~24 prices) p50 / SQLite's <= 2x": (
            "2.40x",
            False,
        ),
        "PostgreSQL 4,999,970: change feed page (limit 1000) p50 / SQLite's <= 2x": (
            "2.40x",
            False,
        ),
        "PostgreSQL 4,999,970: bytes per observation / SQLite's <= 2x": ("1.89x", True),
    }
    assert {target: found.get(target) for target in expected} == expected
    # a kind measured on PostgreSQL only has nothing to be compared with
    assert not any("jit off" in target for target in found)


def test_the_history_targets_are_not_judged_below_their_scale(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lite, pg = history_run(500_000, 0.4, 118.0), history_run(500_000, 0.6, 230.0)
    found = by_target(history.verdicts({"sqlite": lite, "postgresql": pg}))
    assert "set at 5,000,000 observations: not judged at 500,000" in capsys.readouterr().out
    assert not any(target.startswith("SQLite") for target in found)
    # PostgreSQL against SQLite is judged at any size, the size named
    assert found["PostgreSQL 499,970: bytes per observation / SQLite's <= 2x"] == ("1.95x", True)


def test_the_verdicts_print_under_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    print_verdicts([("a <= 1 ms", "0.50 ms", True), ("b <= 2x", "2.10x", False)])
    out = capsys.readouterr().out
    assert "issue 20's targets: 1 of 2 met" in out
    assert "  met      a <= 1 ms: 0.50 ms" in out
    assert "  NOT MET  b <= 2x: 2.10x" in out
    print_verdicts([])
    assert capsys.readouterr().out == ""
