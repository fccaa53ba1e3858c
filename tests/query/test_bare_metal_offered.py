"""A current listing filtered on a ``bare_metal`` value no active offer has answers empty at
once (service.query.facts.bare_metal_offered); every other answer is the filter's own,
and a commit that brings the value makes it found."""

from __future__ import annotations

from sqlalchemy import Engine, event

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query.filters import OfferFilters
from service.query.offers import list_offers
from service.query.versions import current_version
from tests.support.factories import records


def _crawl(engine: Engine, settings: Settings, flags: list[bool | None]) -> None:
    recs = records(len(flags))
    for rec, flag in zip(recs, flags, strict=True):
        if flag is not None:
            rec["bare_metal"] = flag
    assert ingest(engine, settings, CrawlResult("acme", recs)).status.value == "ok"


def _skus(engine: Engine, bare_metal: bool | None, version: int | None = None) -> list[str]:
    with engine.connect() as conn:
        rows = list_offers(conn, OfferFilters(bare_metal=bare_metal), 100, version=version)
    return sorted(r["sku"] for r in rows)


def _statements(engine: Engine) -> list[str]:
    seen: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    return seen


def test_an_absent_value_answers_empty_without_reading_the_offers(
    engine: Engine, settings: Settings
) -> None:
    _crawl(engine, settings, [None, None, True, None, True, None])
    assert _skus(engine, True) == ["gpu-2", "gpu-4"]
    assert _skus(engine, None) == [f"gpu-{i}" for i in range(6)]
    assert _skus(engine, False) == []
    seen = _statements(engine)
    # asked again: the probe's answer is kept while nothing was committed since. On
    # PostgreSQL a commit anywhere in the cluster (another test's database) moves the
    # snapshot and rightly re-probes: retried, it must hold on a quiet moment.
    for _ in range(20):
        seen.clear()
        assert _skus(engine, False) == []
        listing = [s for s in seen if "FROM offer" in s]
        if not listing:
            break
    assert listing == [], listing


def test_a_commit_that_brings_the_value_is_seen(engine: Engine, settings: Settings) -> None:
    _crawl(engine, settings, [None, True, None])
    assert _skus(engine, False) == []
    _crawl(engine, settings, [None, True, False])  # gpu-2 now says it is not bare metal
    assert _skus(engine, False) == ["gpu-2"]
    assert _skus(engine, True) == ["gpu-1"]


def test_a_pinned_listing_is_not_answered_by_the_current_probe(
    engine: Engine, settings: Settings
) -> None:
    """The probe reads the active offers; a listing as of a version filters the offers in
    force then, a withdrawn one included."""
    _crawl(engine, settings, [None, False, None])
    with engine.connect() as conn:
        first = current_version(conn)
    later = [r for r in records(3) if r["sku"] != "gpu-1"]  # gpu-1 withdrawn
    assert ingest(engine, settings, CrawlResult("acme", later)).status.value == "ok"
    assert _skus(engine, False) == []  # no active offer says so
    assert _skus(engine, False, version=first) == ["gpu-1"]
