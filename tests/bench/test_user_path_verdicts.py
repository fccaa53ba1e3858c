"""The user-path benchmark judges issue 20's end-to-end targets from what it measured:
each target it has the figures for, met or not, and none it has not measured."""

from __future__ import annotations

import pytest

from tests.bench.user_path import Step, print_verdicts, verdicts

LABELS = (
    "first ingest",
    "5 %-changed re-ingest",
    "unchanged re-ingest",
    "unchanged again (confirmed)",
)


def steps(n: int, seconds: tuple[float, ...], rss: float | None = 150.0) -> list[Step]:
    return [Step(label, n, s, rss, "0/0") for label, s in zip(LABELS, seconds, strict=True)]


def by_target(found: list[tuple[str, str, bool]]) -> dict[str, tuple[str, bool]]:
    return {target: (figure, ok) for target, figure, ok in found}


def test_the_sqlite_times_at_200000_offers_are_judged_against_their_limits() -> None:
    found = by_target(verdicts({("SQLite", 200_000): steps(200_000, (4.0, 3.01, 0.9, 1.0))}))
    assert found["SQLite 200,000: first ingest <= 4 s"] == ("4.00 s", True)  # at the limit
    assert found["SQLite 200,000: 5 %-changed re-ingest <= 3 s"] == ("3.01 s", False)
    assert found["SQLite 200,000: unchanged re-ingest <= 1 s"] == ("0.90 s", True)
    assert found["SQLite 200,000: unchanged again (confirmed) <= 1 s"] == ("1.00 s", True)
    assert found["SQLite 200,000: peak RSS <= 250 MB"] == ("150.00 MB", True)
    assert len(found) == 5  # one size, one database: no ratio to judge


def test_scaling_and_postgresql_ratios_are_judged_per_step() -> None:
    results = {
        ("SQLite", 200_000): steps(200_000, (10.0, 4.0, 1.0, 1.0)),
        ("PostgreSQL", 200_000): steps(200_000, (21.0, 4.0, 2.0, 1.5)),
        ("SQLite", 1_000_000): steps(1_000_000, (55.0, 22.1, 1.5, 1.5), rss=251.0),
        ("PostgreSQL", 1_000_000): steps(1_000_000, (60.0, 20.0, 2.0, 2.0)),
    }
    found = by_target(verdicts(results))
    assert found["SQLite: first ingest, 1,000,000 / 200,000 <= 5.5x"] == ("5.50x", True)
    assert found["SQLite: 5 %-changed re-ingest, 1,000,000 / 200,000 <= 5.5x"] == ("5.53x", False)
    # the scaling target is SQLite's; PostgreSQL is judged against SQLite at each size
    assert not any(t.startswith("PostgreSQL: ") for t in found)
    assert found["PostgreSQL 200,000: first ingest / SQLite's <= 2x"] == ("2.10x", False)
    assert found["PostgreSQL 200,000: unchanged re-ingest / SQLite's <= 2x"] == ("2.00x", True)
    assert found["PostgreSQL 1,000,000: first ingest / SQLite's <= 2x"] == ("1.09x", True)
    assert found["SQLite 1,000,000: peak RSS <= 250 MB"] == ("251.00 MB", False)
    # the absolute times are SQLite's at 200,000 only
    assert not any(t.startswith("PostgreSQL 200,000: first ingest <= 4") for t in found)


def test_a_step_without_a_peak_rss_is_not_judged_on_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    results = {("SQLite", 200_000): steps(200_000, (5.0, 2.0, 0.5, 0.5), rss=None)}
    assert not any("RSS" in target for target, _, _ in verdicts(results))
    print_verdicts(results)
    out = capsys.readouterr().out
    assert "issue 20's targets: 3 of 4 met" in out
    assert "NOT MET  SQLite 200,000: first ingest <= 4 s: 5.00 s" in out


def test_nothing_measured_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    print_verdicts({})
    assert capsys.readouterr().out == ""
