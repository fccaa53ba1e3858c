"""OCI price list through a real local HTTP server: GPU parts -> shapes, fences, changes."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from schema.prices import Offer
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.factories import gpu_of
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import offers_by

ROUTE = "/pls/apex/cetools/api/v1/products/?currencyCode=USD"
FILE = FIXTURES / "oracle" / "products-USD.json"
OFFER = Offer.__table__  # type: ignore[attr-defined]
SHAPES = 19  # shapes of the 14 known parts
UNKNOWN_PARTS = {"B111758", "B112140", "B112237", "B112613"}


def _settings(settings: Settings, server: ReplayServer) -> Settings:
    return settings.model_copy(
        update={"source_base_urls": {"oracle": server.url}, "http_max_retries": 2}
    )


def _offers(engine: Engine) -> dict[str, dict[str, Any]]:
    return offers_by(engine, "oracle", "sku")


def _book() -> dict[str, Any]:
    return json.loads(FILE.read_text())


def _body(book: dict[str, Any]) -> bytes:
    return json.dumps(book).encode()


def test_gpu_parts_become_per_gpu_shape_offers(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(
        ROUTE,
        Reply(b"busy", status=503, headers={"Retry-After": "0"}),
        Reply(b'{"message": "slow down"}', status=429, headers={"Retry-After": "0"}),
        Reply.file(FILE),
    )
    report = crawl_source(engine, _settings(settings, server), "oracle")
    assert report.label == "ok", report
    assert len(server.requests) == 3  # a 503 and a 429, both retried
    offers = _offers(engine)
    assert len(offers) == SHAPES + len(UNKNOWN_PARTS)

    h100 = offers["BM.GPU.H100.8"]
    assert (h100["amount"], h100["price_per"], h100["gpu_count"], h100["unit"]) == (
        Decimal("10"),
        "gpu",
        8,
        "hour",
    )
    assert h100["region"] == "global" and h100["country"] is None and h100["bare_metal"] is True
    assert h100["vcpus"] == 224 and h100["memory_gb"] == 2048
    # one part bills three A10 shapes
    assert {offers[s]["amount"] for s in ("VM.GPU.A10.1", "VM.GPU.A10.2", "BM.GPU.A10.4")} == {
        Decimal("2")
    }
    assert (
        offers["VM.GPU.A10.2"]["gpu_count"] == 2 and offers["VM.GPU.A10.1"]["bare_metal"] is False
    )
    assert offers["BM.GPU.A100-v2.8"]["amount"] == Decimal("4")
    # parts the table does not know yet: one GPU-hour each, visible rather than dropped
    assert {f"gpu-part-{p}" for p in UNKNOWN_PARTS} <= set(offers)
    assert offers["gpu-part-B112613"]["amount"] == Decimal("4.5")
    # the E4 and H100T parts bill their own shapes, at their own prices
    assert offers["BM.GPU.H100T.8"]["amount"] == Decimal("10.75")
    assert offers["BM.GPU.GM4.8"]["amount"] == Decimal("3.05")
    # software licences, on-premises appliances and per-node rows are not offers
    assert not {"gpu-part-B111824", "gpu-part-B110965", "gpu-part-B111455"} & set(offers)

    slugs = {r.sku: gpu_of(r) for r in report.records}
    assert slugs["BM.GPU.H200.8"] == "nvidia-h200-sxm-141gb"
    assert slugs["BM.GPU.MI300X.8"] == "amd-mi300x-192gb"
    assert slugs["BM.GPU.H100T.8"] == "nvidia-h100-sxm-80gb"
    assert slugs["BM.GPU.GM4.8"] == "nvidia-a100-sxm-80gb"
    # an unknown part's chip name resolves when the catalog knows it
    assert slugs["gpu-part-B112237"] is not None and not report.unmapped

    assert "authorization" not in {k.lower() for k in server.requests[-1][2]}

    unchanged = crawl_source(engine, _settings(settings, server), "oracle")
    assert unchanged.label == "ok" and unchanged.catalog_version is None

    book = _book()
    for item in book["items"]:
        if item["partNumber"] == "B98415":
            item["currencyCodeLocalizations"][0]["prices"][0]["value"] = 9.5
    server.route(ROUTE, Reply(_body(book)))
    cheaper = crawl_source(engine, _settings(settings, server), "oracle")
    assert cheaper.label == "ok" and cheaper.catalog_version is not None
    assert cheaper.counts["changed"] == 1 and cheaper.counts["added"] == 0
    assert _offers(engine)["BM.GPU.H100.8"]["amount"] == Decimal("9.5")

    kept = _offers(engine)
    server.route(ROUTE, Reply(b'{"lastUpdated": "2026-11-14", "products": []}'))  # renamed root
    renamed = crawl_source(engine, _settings(settings, server), "oracle")
    assert renamed.label.startswith("failed: layout changed") and _offers(engine) == kept


def test_saved_price_book_dry_run() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, settings, "oracle", from_files=[FILE], dry_run=True)
    assert report.label == "ok"
    by_sku = {r.sku: r for r in report.records}
    assert by_sku["BM.GPU.GB200.4"].amount == Decimal("16")
    assert by_sku["BM.GPU.GB200.4"].gpu_count == 4
    assert by_sku["VM.GPU3.4"].amount == Decimal("2.95")


@pytest.mark.postgres
def test_a_cut_database_connection_fails_the_crawl_as_unavailable(
    pg_url: str, server: ReplayServer
) -> None:
    """The database connection is cut in the middle of the ingest (a server restart, a
    failover): the crawl fails as "database unavailable", recorded on its run (the pool
    reconnects), nothing of it stored; the next crawl succeeds."""
    from sqlalchemy import event, text

    from schema.crawl import CrawlRun
    from service.compliance.reference_load import load_reference
    from service.core.config import REFERENCE_DIR
    from service.core.db import make_engine

    settings = Settings(database_url=pg_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    engine = make_engine(pg_url)
    load_reference(engine, REFERENCE_DIR)
    admin = make_engine(pg_url)
    cut: list[int] = []

    def cut_at_first_offer_write(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if (
            not cut
            and "offer" in statement
            and statement.lstrip().upper().startswith(("INSERT", "COPY"))
        ):
            pid = conn.connection.dbapi_connection.info.backend_pid
            with admin.begin() as other:
                other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            cut.append(pid)

    event.listen(engine, "before_cursor_execute", cut_at_first_offer_write)
    server.route(ROUTE, Reply.file(FILE))
    try:
        # what the client reads depends on when the kill lands: the server's notice, or a
        # closed socket (e.g. inside an executemany of offer locations)
        with pytest.raises(Exception, match=r"terminating connection|server closed the connection"):
            crawl_source(engine, _settings(settings, server), "oracle")
        assert cut
        run = CrawlRun.__table__  # type: ignore[attr-defined]
        with engine.connect() as conn:
            status, reason = conn.execute(
                select(run.c.status, run.c.reason).order_by(run.c.id.desc()).limit(1)
            ).one()
        assert (status, reason) == ("failed", "database unavailable: OperationalError")
        assert _offers(engine) == {}
        assert crawl_source(engine, _settings(settings, server), "oracle").label == "ok"
        assert len(_offers(engine)) == SHAPES + len(UNKNOWN_PARTS)
    finally:
        engine.dispose()
        admin.dispose()


def test_a_part_whose_chip_the_catalog_does_not_know_is_shown_not_dropped(
    tmp_path: Path,
) -> None:
    book = _book()
    rental = next(i for i in book["items"] if i["partNumber"] == "B112613")
    book["items"].append(
        {**rental, "partNumber": "B999999", "displayName": "OCI - Compute - GPU - Z9"}
    )
    saved = tmp_path / "products-USD.json"
    saved.write_bytes(_body(book))
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, settings, "oracle", from_files=[saved], dry_run=True)
    assert report.label == "ok"
    unknown = {r.sku: r for r in report.records}["gpu-part-B999999"]
    assert unknown.gpu_name_raw == "Z9" and unknown.amount == Decimal("4.5")
    assert report.unmapped == {"gpu:Z9": 1}
