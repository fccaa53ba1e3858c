"""A short chaos run in the normal suite (SQLite, 22 s of chaos, one SIGKILL aimed at an
ingest in progress; API sources and Scrapy pricing pages). The full run adds random kills.

The full run is ``make chaos`` (``python -m tests.chaos.run``); see docs/reliability.md.
"""

from __future__ import annotations

from pathlib import Path

from tests.chaos.run import print_report, run


def test_short_chaos_run_holds_the_invariants(tmp_path: Path) -> None:
    outcome = run(
        22,
        seed=46,
        db="sqlite",
        kills=0,
        aimed=1,
        clients=2,
        max_requests=4000,
        workdir=tmp_path,
        event_gap=1.2,
        interval=10,
        html_interval=10,
    )
    print_report(outcome)
    figures = outcome.figures
    assert figures["kills_survived"] == 1
    assert figures["kills_aimed"] == 1
    assert figures["faults_total"] >= 3, figures["faults_by_kind"]
    assert sum(figures["crawl_runs"].values()) >= 4
    assert figures["requests"] > 0
    assert outcome.violations == [], outcome.violations
