"""The contract every source keeps, run for each source in ``all_sources()`` from its
fixtures through the real local HTTP server, on SQLite and PostgreSQL.

- paging to the end: every fixture answer fetched once, as many records as the fixtures
  hold offline, with a 429 (``Retry-After: 0``) first, waited out;
- a 5xx storm, a truncated body, garbage, a renamed field, an empty answer and an
  unauthorized answer each fail with their reason, and leave the catalog as it was
  (the source's offers, their observations and the current catalog version);
- a source with a credential is skipped, with no request, when the credential is missing.

Per-source knowledge is data (:mod:`tests.support.source_contract`). Spiders run Scrapy in a
child process (seconds per crawl): their fetch faults run over HTTP on SQLite, and their
parse faults (garbage, renamed hook, empty page) through the same parse in-process on
both databases; the catalog checks are the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from crawlers.registry import all_sources
from service.core.config import Settings
from service.crawl.run import CrawlReport, crawl_source
from service.crawl.seed import seed_files
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import (
    GARBAGE,
    RETRIES,
    catalog_state,
    configure,
    empty_answer,
    is_spider,
    replay,
    wire,
)

SOURCES = all_sources()
API = sorted(n for n, c in SOURCES.items() if not is_spider(c))
SPIDERS = sorted(n for n, c in SOURCES.items() if is_spider(c))
DECODED = {"application/json", "application/xml", "application/zip", "text/csv"}
"""Payloads decoded before parsing: garbage is an invalid payload (HTML: no rows)."""


def offline(name: str, files: list[Path]) -> CrawlReport:
    plain = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    return crawl_source(None, plain, name, from_files=files, dry_run=True)


def crawl_to_the_end(
    engine: Engine, settings: Settings, server: ReplayServer, name: str
) -> CrawlReport:
    """Serve every fixture answer, a 429 first; check all were fetched and counted."""
    answers = replay(name)
    throttled = answers.reply(b"slow down", status=429, headers={"Retry-After": "0"})
    first = next(iter(answers.routes)) if not is_spider(SOURCES[name]) else answers.data
    replies = [answers.reply(b) for b in answers.routes[first]]
    answers.serve(server, {first: [throttled, *replies]})
    report = crawl_source(engine, configure(settings, server, name), name)
    assert report.label == "ok", report
    assert server.hits[first] == len(answers.routes[first]) + 1  # the 429 was waited out
    for target, bodies in answers.routes.items():
        if target != first:
            assert server.hits.get(target) == len(bodies), f"{target} not fetched"
    if is_spider(SOURCES[name]):  # each offer cites the page it was read from
        pages = {server.url + target for target in answers.payloads}
        assert {o["source_url"] for o in catalog_state(engine, name)[0].values()} <= pages
    expected = offline(name, answers.files)
    if SOURCES[name].kind != "fx":  # FX feeds store rates, not offers
        assert report.counts["seen"] == len(expected.records)
        assert report.counts["rejected"] == len(expected.rejections)
    return report


def fetch_faults(name: str) -> dict[str, tuple[list[Reply], str, int | None]]:
    """case -> (replies for the payload's target, the failure label, requests expected)."""
    answers = replay(name)
    spider = is_spider(SOURCES[name])
    payload = answers.routes[answers.data][0]
    denied = "failed: blocked" if spider else "failed: unauthorized"
    return {
        "5xx-storm": (
            [answers.reply(b"busy", status=503, headers={"Retry-After": "0"})],
            "failed: server error",
            RETRIES + 1,
        ),
        "truncated": ([answers.reply(payload, truncate=True)], "failed: truncated body", None),
        "unauthorized": ([answers.reply(b"who?", status=401)], denied, 1),
        "forbidden": ([answers.reply(b"denied", status=403)], denied, 1),
    }


def parse_faults(name: str) -> dict[str, tuple[dict[str, bytes] | None, str]]:
    """case -> (bodies by target, or None for the renamed fixtures, the failure reason)."""
    answers = replay(name)
    decoded = answers.content_type[answers.data].split(";")[0] in DECODED
    empty = wire(name).empty_reason or (
        "layout changed" if is_spider(SOURCES[name]) else "empty result"
    )
    return {
        "garbage": ({answers.data: GARBAGE}, "invalid payload" if decoded else "layout changed"),
        "renamed-field": (None, "layout changed"),
        "empty": (dict.fromkeys(answers.payloads, empty_answer(name)), empty),
    }


def assert_failed(report: CrawlReport, reason: str) -> None:
    """Failed (or, for an empty answer after good crawls, quarantined) for ``reason``."""
    assert report.status.value in ("failed", "quarantined"), report.label
    assert (report.reason or "").startswith(reason), report.label


def test_every_registered_source_has_fixtures() -> None:
    """``gpuatlas seed`` replays each source's fixtures; a source without any is never seeded
    and never runs the contract below to the end."""
    missing = sorted(name for name, cls in SOURCES.items() if not seed_files(cls))
    assert not missing, f"sources without fixtures: {', '.join(missing)}"


# ---------------------------------------------------------------- API clients and peers


@pytest.mark.parametrize("name", API)
def test_api_source_contract(
    engine: Engine,
    settings: Settings,
    server: ReplayServer,
    subtests: pytest.Subtests,
    name: str,
) -> None:
    answers = replay(name)
    assert answers.files, f"{name} has no fixtures"
    with subtests.test("paging-to-the-end"):
        crawl_to_the_end(engine, settings, server, name)
    before = catalog_state(engine, name)
    config = configure(settings, server, name)
    for case, (replies, label, requests) in fetch_faults(name).items():
        with subtests.test(case):
            answers.serve(server, {answers.data: replies})
            report = crawl_source(engine, config, name)
            assert report.label.startswith(label), report.label
            if requests is not None:
                assert server.hits[answers.data] == requests
            assert catalog_state(engine, name) == before
    for case, (bodies, label) in parse_faults(name).items():
        with subtests.test(case):
            damaged = replay(name, wire(name).rename) if bodies is None else answers
            assert bodies is not None or damaged.routes != answers.routes, "nothing renamed"
            damaged.serve(server, {t: [damaged.reply(b)] for t, b in (bodies or {}).items()})
            assert_failed(crawl_source(engine, config, name), label)
            assert catalog_state(engine, name) == before
    credential = getattr(SOURCES[name], "credential", None)
    if credential:
        with subtests.test("missing-credential"):
            answers.serve(server)
            report = crawl_source(
                engine, configure(settings, server, name, **{credential: None}), name
            )
            assert report.label == "skipped: no credential"
            assert server.requests == []
            assert catalog_state(engine, name) == before


# ---------------------------------------------------------------- pricing-page spiders


def sqlite_settings(sqlite_url: str) -> Settings:
    return Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]


@pytest.mark.slow
@pytest.mark.parametrize("name", SPIDERS)
def test_spider_pages_to_the_end(
    sqlite_engine: Engine, sqlite_url: str, server: ReplayServer, name: str
) -> None:
    crawl_to_the_end(sqlite_engine, sqlite_settings(sqlite_url), server, name)
    assert catalog_state(sqlite_engine, name)[0], "the crawl stored offers"


FETCH_FAULTS = list(fetch_faults(SPIDERS[0]))
ROTATION = [(case, SPIDERS[(3 * i) % len(SPIDERS)]) for i, case in enumerate(FETCH_FAULTS)]
"""A spider module has no fetch code (only ``start_paths``): each fetch fault runs on one
spider, each on another, so the suite stays within its time (a crawl is a process)."""


@pytest.mark.slow
@pytest.mark.parametrize(("case", "name"), ROTATION)
def test_spider_fetch_faults(
    engine: Engine, settings: Settings, server: ReplayServer, case: str, name: str
) -> None:
    answers = replay(name)
    assert crawl_source(engine, settings, name, from_files=answers.files).label == "ok"
    before = catalog_state(engine, name)
    replies, label, _ = fetch_faults(name)[case]
    answers.serve(server, {answers.data: replies})
    report = crawl_source(engine, configure(settings, server, name), name)
    assert report.label.startswith(label), report.label
    assert catalog_state(engine, name) == before


@pytest.mark.parametrize("name", SPIDERS)
def test_spider_parse_contract(
    engine: Engine,
    settings: Settings,
    tmp_path: Path,
    subtests: pytest.Subtests,
    name: str,
) -> None:
    answers = replay(name)
    seeded = crawl_source(engine, settings, name, from_files=answers.files)
    assert seeded.label == "ok"
    before = catalog_state(engine, name)
    for case, (bodies, label) in parse_faults(name).items():
        with subtests.test(case):
            damaged = replay(name, wire(name).rename) if bodies is None else answers
            files = []
            for target, path in zip(list(damaged.routes)[1:], answers.files, strict=True):
                page = tmp_path / f"{case}-{path.name}"
                page.write_bytes((bodies or {}).get(target, damaged.routes[target][0]))
                files.append(page)
            assert bodies is not None or damaged.routes != answers.routes, "nothing renamed"
            assert_failed(crawl_source(engine, settings, name, from_files=files), label)
            assert catalog_state(engine, name) == before
