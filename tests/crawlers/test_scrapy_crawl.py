"""Spiders crawling over HTTP end to end: real Scrapy in a child process, a real local
server (robots.txt included), the real pipeline and ingest, on real databases.

Each crawl starts a Python process (~1.5 s), so the set is kept small: one lifecycle on
Lambda (ok -> layout changed -> half a table -> a row without a price), a non-UTF-8 page,
and one crawl per fetch fault the contract suite (test_source_contract.py) does not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from crawlers.registry import get_source
from crawlers.scrapy.settings import HTML_MAX_BYTES
from schema.crawl import CrawlRun, CrawlRunPayload, RejectedRecord
from schema.prices import CatalogVersion, Offer
from service.core.config import Settings
from service.crawl.run import CrawlReport, crawl_source
from service.crawl.seed import seed_files
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply

D = Decimal
OFFER = Offer.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]
REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]


@pytest.fixture
def sq_settings(sqlite_url: str) -> Settings:
    return Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]


def configure(settings: Settings, server: ReplayServer, **extra: Any) -> Settings:
    return settings.model_copy(
        update={
            "source_base_urls": dict.fromkeys(("lambda-web", "digitalocean-web"), server.url),
            "http_max_retries": 1,
            "http_timeout_seconds": 10.0,
            "crawl_timeout_seconds": 60.0,
            **extra,
        }
    )


def page_path(name: str) -> str:
    source: Any = get_source(name)
    return str(source.start_paths[0])


def page(name: str) -> Path:
    return seed_files(get_source(name))[0]


def serve(server: ReplayServer, name: str, *replies: Reply, robots: Reply | None = None) -> None:
    server.route("/robots.txt", robots or Reply.file(FIXTURES / name / "robots.txt"))
    server.route(page_path(name), *(replies or [Reply.file(page(name))]))


def html(text: str, **kwargs: Any) -> Reply:
    return Reply(text.encode("utf-8"), content_type="text/html; charset=utf-8", **kwargs)


def offers(engine: Engine, name: str) -> dict[tuple[str, str], dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(OFFER).where(OFFER.c.source == name)).mappings().all()
    return {(r["sku"], r["price_kind"]): dict(r) for r in rows}


def run_row(engine: Engine, report: CrawlReport) -> dict[str, Any]:
    with engine.connect() as conn:
        row = conn.execute(select(RUN).where(RUN.c.id == report.crawl_run_id)).mappings().one()
    return dict(row)


def count(engine: Engine, table: Any, *where: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())


# ---------------------------------------------------------------- lifecycle (both databases)


@pytest.mark.slow
def test_lambda_lifecycle(engine: Engine, settings: Settings, server: ReplayServer) -> None:
    good = page("lambda-web").read_text(encoding="utf-8")
    changed = good.replace("data-plan", "data-sku")  # a redesign: the hook is gone
    half = good[: good.index('data-plan="NVIDIA A100 SXM"') + 200]  # cut mid-row
    no_price = good.replace('<td data-label="PRICE/GPU/HR*">$2.99</td>', "", 1)
    serve(
        server,
        "lambda-web",
        html("busy", status=503),  # Scrapy's retry middleware retries it
        html(good),
        html(changed),
        html(half),
        html(no_price),
    )
    config = configure(settings, server)

    first = crawl_source(engine, config, "lambda-web")
    assert first.label == "ok"
    assert (first.counts["seen"], first.counts["added"]) == (15, 15)
    assert server.hits["/pricing"] == 2
    method, path, headers, _ = server.requests[0]
    assert (method, path) == ("GET", "/robots.txt")  # robots.txt first, every crawl
    assert headers["User-Agent"] == settings.user_agent  # identifying, with a contact URL
    run = run_row(engine, first)
    assert run["source_urls"] == [f"{server.url}/pricing"]
    assert "no public price for 1x NVIDIA B200 SXM6 180 GB" in run["log"]  # counted, logged
    assert "Spider closed (finished)" in run["log"]  # the child's log reaches the run
    assert count(engine, RUN_PAYLOAD, RUN_PAYLOAD.c.crawl_run_id == first.crawl_run_id) == 1
    catalog = offers(engine, "lambda-web")
    h100 = catalog[("8x NVIDIA H100 SXM 80 GB", "on_demand")]
    assert (h100["amount"], h100["price_per"], h100["gpu_count"]) == (D("2.99"), "gpu", D(8))
    assert ("1x NVIDIA B200 SXM6 180 GB", "on_demand") not in catalog  # "CONTACT SALES"
    versions = count(engine, VERSION)

    broken = crawl_source(engine, config, "lambda-web")
    assert broken.label == "failed: layout changed"
    assert offers(engine, "lambda-web") == catalog  # catalog untouched
    assert count(engine, VERSION) == versions
    run = run_row(engine, broken)
    assert "tr[data-plan]" in run["error"]
    # the page that broke the parser is kept, to re-parse once the spider is fixed
    assert count(engine, RUN_PAYLOAD, RUN_PAYLOAD.c.crawl_run_id == broken.crawl_run_id) == 1

    cut = crawl_source(engine, config, "lambda-web")
    assert cut.label.startswith("quarantined: offer count dropped from 15 to 2")
    assert offers(engine, "lambda-web") == catalog
    assert count(engine, REJECTED, REJECTED.c.crawl_run_id == cut.crawl_run_id) == 1

    partial = crawl_source(engine, config, "lambda-web")
    assert partial.label == "ok"
    assert (partial.counts["seen"], partial.counts["rejected"]) == (14, 1)
    assert partial.counts["withdrawn"] == 0  # the unpriced row's offer is kept
    kept = offers(engine, "lambda-web")[("8x NVIDIA H100 SXM 80 GB", "on_demand")]
    assert (kept["status"], kept["amount"]) == ("active", D("2.99"))
    assert "rejected 8x NVIDIA H100 SXM 80 GB: " in run_row(engine, partial)["log"]


# ---------------------------------------------------------------- encodings


def test_non_utf8_page(sqlite_engine: Engine, sq_settings: Settings, server: ReplayServer) -> None:
    text = page("digitalocean-web").read_text(encoding="utf-8")
    serve(
        server,
        "digitalocean-web",
        Reply(text.encode("cp1252"), content_type="text/html; charset=windows-1252"),
    )
    report = crawl_source(sqlite_engine, configure(sq_settings, server), "digitalocean-web")
    assert report.label == "ok"
    names = {row["gpu_name_raw"] for row in offers(sqlite_engine, "digitalocean-web").values()}
    assert "AMD Instinct™ MI300X" in names


# ---------------------------------------------------------------- fetch faults


FAULTS: Sequence[tuple[str, dict[str, Any]]] = [
    ("not found", {"page": html("gone", status=404)}),
    ("redirect loop", {"page": Reply(b"", status=302, headers={"Location": "/pricing"})}),
    (
        "robots.txt disallowed",
        {"robots": Reply(b"User-agent: *\nDisallow: /pricing\n", content_type="text/plain")},
    ),
    ("too large", {"huge": True}),  # built only when run: 16 MiB
]


@pytest.mark.parametrize(("reason", "fault"), FAULTS, ids=[r for r, _ in FAULTS])
def test_fetch_faults(
    sqlite_engine: Engine,
    sq_settings: Settings,
    server: ReplayServer,
    reason: str,
    fault: dict[str, Any],
) -> None:
    replies = [fault["page"]] if "page" in fault else []
    if fault.get("huge"):  # one byte over the default cap, announced by Content-Length
        replies = [Reply(b"p" * (HTML_MAX_BYTES + 1), content_type="text/html")]
    serve(server, "lambda-web", *replies, robots=fault.get("robots"))
    report = crawl_source(sqlite_engine, configure(sq_settings, server), "lambda-web")
    assert report.label == f"failed: {reason}"
    assert offers(sqlite_engine, "lambda-web") == {}  # nothing written
    run = run_row(sqlite_engine, report)
    assert (run["status"], run["reason"]) == ("failed", reason)
    assert "crawler log (tail)" in run["error"] and run["log"]
    if reason == "robots.txt disallowed":
        assert "/pricing" not in server.hits  # never fetched
    if reason == "redirect loop":
        assert server.hits["/pricing"] == 6  # the first request and five redirects


def test_hung_crawl_is_killed(
    sqlite_engine: Engine, sq_settings: Settings, server: ReplayServer
) -> None:
    serve(server, "lambda-web", Reply.file(page("lambda-web"), delay=8.0))
    config = configure(sq_settings, server, crawl_timeout_seconds=3.0)
    report = crawl_source(sqlite_engine, config, "lambda-web")
    assert report.label == "failed: timeout"
    assert report.seconds < 7
    assert "child killed" in run_row(sqlite_engine, report)["error"]
