"""The ECB feed, fetched over a real local HTTP server and stored as FX rates."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from sqlalchemy import Engine, select

from schema.crawl import CrawlRun
from schema.fx import FxRate
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply

HIST = "/stats/eurofxref/eurofxref-hist-90d.xml"


def _settings(settings: Settings, server: ReplayServer) -> Settings:
    return settings.model_copy(
        update={"source_base_urls": {"ecb": server.url}, "http_max_retries": 2}
    )


def test_ecb_feed_stores_rates(engine: Engine, settings: Settings, server: ReplayServer) -> None:
    server.route(HIST, Reply.file(FIXTURES / "ecb" / "eurofxref-hist-90d.xml"))
    report = crawl_source(engine, _settings(settings, server), "ecb")
    assert report.label == "ok"
    with engine.connect() as conn:
        rows = conn.execute(select(FxRate.__table__)).mappings().all()  # type: ignore[attr-defined]
    assert len(rows) == report.counts["seen"] > 100
    usd = [r for r in rows if r["currency"] == "USD"]
    assert all(isinstance(r["per_eur"], Decimal) for r in usd)
    again = crawl_source(engine, _settings(settings, server), "ecb")
    assert again.counts["added"] == 0  # a published rate is stored once


@pytest.mark.parametrize(("factor", "ok"), [("100", False), ("0.01", False), ("1.5", True)])
def test_ecb_implausible_day_fails_and_stores_nothing(
    engine: Engine, settings: Settings, server: ReplayServer, factor: str, ok: bool
) -> None:
    """Stored rates never change, so a decimal slip in the newest day (x100, /100) would
    convert that day's prices for good: the feed is refused as a whole. A real move passes."""
    body = (FIXTURES / "ecb" / "eurofxref-hist-90d.xml").read_text()
    old = '<Cube currency="USD" rate="1.1480"/>'
    assert body.count(old) == 1  # the newest day's USD rate
    new = f'<Cube currency="USD" rate="{Decimal("1.1480") * Decimal(factor)}"/>'
    server.route(HIST, Reply(body.replace(old, new).encode(), content_type="application/xml"))
    report = crawl_source(engine, _settings(settings, server), "ecb")
    with engine.connect() as conn:
        stored = conn.execute(select(FxRate.__table__)).first()  # type: ignore[attr-defined]
    if ok:
        assert report.label == "ok" and stored is not None
    else:
        assert report.label.startswith("failed: implausible rate"), report.label
        assert stored is None


@pytest.mark.parametrize(("factor", "ok"), [("100", False), ("0.01", False), ("1.01", True)])
def test_ecb_one_day_feed_is_checked_against_the_stored_rates(
    engine: Engine, settings: Settings, server: ReplayServer, factor: str, ok: bool
) -> None:
    """A one-day feed (the next business day) has no neighbour of its own: its rates are
    checked against the stored rate of the nearest day. A slip fails the crawl with its
    reason on the run, and nothing of it is stored; a real move is stored."""
    server.route(HIST, Reply.file(FIXTURES / "ecb" / "eurofxref-hist-90d.xml"))
    assert crawl_source(engine, _settings(settings, server), "ecb").label == "ok"
    day = (FIXTURES / "ecb" / "eurofxref-daily.xml").read_text()
    day = day.replace("time='2026-11-27'", "time='2026-11-30'")
    old = "rate='1.1480'"
    assert day.count(old) == 1
    day = day.replace(old, f"rate='{Decimal('1.1480') * Decimal(factor)}'")
    server.route(HIST, Reply(day.encode(), content_type="application/xml"))
    report = crawl_source(engine, _settings(settings, server), "ecb")
    table = FxRate.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        stored = conn.execute(
            select(table.c.per_eur).where(
                table.c.currency == "USD", table.c.rate_date == date(2026, 11, 30)
            )
        ).scalar()
        run = CrawlRun.__table__  # type: ignore[attr-defined]
        reason, error = conn.execute(
            select(run.c.reason, run.c.error).where(run.c.id == report.crawl_run_id)
        ).one()
    if ok:
        assert report.label == "ok" and report.counts["added"] > 0
        assert stored == Decimal("1.1480") * Decimal(factor)
    else:
        assert report.label.startswith("failed: implausible rate"), report.label
        assert reason == "implausible rate" and "USD" in error and "2026-11-27" in error
        assert stored is None
