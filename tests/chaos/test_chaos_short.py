"""A short chaos run in the normal suite (SQLite, 34 s of chaos, one SIGKILL aimed at an
ingest in progress; API sources and Scrapy pricing pages; 50 s more when the machine was
too slow for three faults to be served). The full run adds random kills.

The full run is ``make chaos`` (``python -m tests.chaos.run``); see docs/reliability.md.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from crawlers.base import Context, SourceError
from crawlers.http import FetchPolicy
from crawlers.registry import all_sources
from crawlers.scrapy.runner import run_spider
from tests.chaos.adapters import ADAPTERS, HTML_SOURCES
from tests.chaos.farm import HtmlAdapter
from tests.chaos.local import farm_catalog
from tests.chaos.run import Outcome, Receiver, print_report, run, signature

SHORT_SOURCES = [
    "oracle",
    "lambda",
    "ovhcloud",
    "gcp",
    "runpod",
    "ecb",
    "genesiscloud-web",
    "datacrunch-web",
]
"""The eight sources of the short run (the farm's other sources are in the full run and
have their own fast tests: with them all, a short run serves too few faults)."""


@pytest.mark.slow
def test_short_chaos_run_holds_the_invariants(tmp_path: Path) -> None:
    def short_run(seconds: float, seed: int) -> Outcome:
        workdir = tmp_path / f"seed{seed}"
        workdir.mkdir()
        outcome = run(
            seconds,
            seed=seed,
            db="sqlite",
            kills=0,
            aimed=1,
            clients=2,
            max_requests=4000,
            workdir=workdir,
            event_gap=1.2,
            interval=10,
            html_interval=10,
            sources=SHORT_SOURCES,
        )
        print_report(outcome)
        assert outcome.violations == [], outcome.violations
        return outcome

    outcome = short_run(34, seed=47)
    if outcome.figures["faults_total"] < 3:
        # Faults are served when a crawl fetches the faulty source: on a slow or busy
        # machine fewer crawls fit in the run. Once more, longer, not a weaker check.
        outcome = short_run(50, seed=48)
    figures = outcome.figures
    assert figures["kills_survived"] == 1
    assert figures["kills_aimed"] == 1
    assert figures["faults_total"] >= 3, figures["faults_by_kind"]
    assert sum(figures["crawl_runs"].values()) >= 4
    assert figures["requests"] > 0


def test_receiver_refuses_bad_signatures_and_dedupes() -> None:
    receiver = Receiver()
    try:
        receiver.secrets["0"] = "s3cret"
        body = json.dumps({"offer": {"sku": "x"}}).encode()
        with httpx.Client(timeout=5.0) as client:
            for signed_with in ("s3cret", "s3cret", "wrong"):
                response = client.post(
                    receiver.url(0),
                    content=body,
                    headers={
                        "X-Gpuatlas-Signature": signature(signed_with, body),
                        "Idempotency-Key": "k1",
                    },
                )
                assert response.status_code == (204 if signed_with == "s3cret" else 401)
        assert receiver.bad_signatures == ["/hook/0 k1"]
        assert list(receiver.unique) == ["k1"]
        assert receiver.redeliveries == 1 and not receiver.conflicting
    finally:
        receiver.close()


@pytest.mark.parametrize("name", sorted(HTML_SOURCES))
def test_farm_pages_parse_and_layout_changes_fail(name: str, tmp_path: Path) -> None:
    """The farm's page template parses like the fixture; every layout variant fails the
    spider with "layout changed"; reordered columns parse to the same offers."""
    adapter = ADAPTERS[name]()
    assert isinstance(adapter, HtmlAdapter)
    spider: Any = all_sources()[name]

    def parse(body: bytes) -> list[tuple[Any, ...]]:
        page = tmp_path / "page.html"
        page.write_bytes(body)
        output = run_spider(
            spider, Context(base_url=spider.base_url), FetchPolicy(), from_files=[page]
        )
        return sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in output.records)

    clean = parse(adapter.render(adapter.doc))
    assert clean == parse(adapter.fixture.read_bytes())
    reordered = adapter.mangle("columns_reordered", dict(adapter.doc), random.Random(1))
    assert parse(reordered) == clean
    for variant in range(3):
        changed = adapter.relayout(adapter.text(adapter.doc), variant).encode()
        with pytest.raises(SourceError) as failure:
            parse(changed)
        assert failure.value.reason == "layout changed"


def test_farm_pages_a_crawl_and_a_page_fault_fails_it_whole(tmp_path: Path) -> None:
    """GCP's three pages are chained by their tokens; a 500 served to both attempts of
    page 3 fails the crawl (no catalog version, nothing withdrawn) and the values that crawl
    was served are not counted as served; the next crawl is whole again."""
    from sqlalchemy import text

    from service.core.config import Settings
    from service.core.db import make_engine
    from service.core.migrate import upgrade
    from service.crawl.run import crawl_source
    from tests.chaos.farm import Armed, Farm

    url = f"sqlite:///{tmp_path / 'farm.db'}"
    farm = Farm(["gcp"], 1, http_timeout=2.0, attempts=2)
    farm.start()
    try:
        upgrade(url)
        engine = make_engine(url)
        settings = Settings(
            database_url=url,
            source_base_urls=farm.base_urls(),
            gcp_api_key="k",
            http_max_retries=1,
            http_timeout_seconds=2.0,
            _env_file=None,  # type: ignore[call-arg]
        )
        assert crawl_source(engine, settings, "gcp", trigger="t").label == "ok"
        assert farm.log.requests["gcp"] == 3
        served = dict(farm.log.served)
        farm._faults_on.set()
        farm.armed["gcp"] = Armed("http_500", 2, 0.0, page=2)
        failed = crawl_source(engine, settings, "gcp", trigger="t")
        assert failed.label.startswith("failed"), failed.label
        assert [f["page"] for f in farm.log.faults] == [2, 2]
        assert farm.log.served == served  # a failed crawl's values are not "served"
        with engine.connect() as conn:
            versions = conn.execute(text("SELECT count(*) FROM catalog_version")).scalar()
            gone = conn.execute(text("SELECT count(*) FROM offer WHERE status <> 'active'"))
            assert versions == 1 and gone.scalar() == 0
        assert crawl_source(engine, settings, "gcp", trigger="t").label == "ok"
    finally:
        farm.close()


def test_farm_fx_spike_fails_the_ecb_crawl_and_withdrawal_drops_one_product() -> None:
    """The ECB adapter's x100 day is refused by the parser (``implausible rate``), its new
    business day parses; RunPod's withdrawal removes one GPU type (its skus reported)."""
    from crawlers.base import Response, SourceError
    from crawlers.providers.ecb import EcbRates
    from tests.chaos.farm import Ecb, RunPod

    ecb = Ecb()
    rng = random.Random(1)
    source = EcbRates()

    def parse(body: bytes) -> list[Any]:
        return list(source.parse(Response("u", 200, body), Context(base_url="u")))

    event = ecb.publish(ecb.doc, rng)
    assert event is not None and len(parse(ecb.render(ecb.doc))) > 100
    assert ecb.spike_doc(ecb.doc, rng) is not None
    with pytest.raises(SourceError) as failure:
        parse(ecb.mangle("spike_x100", ecb.doc, rng))
    assert failure.value.reason == "implausible rate"
    runpod = RunPod()
    before = len(runpod.doc["data"]["gpuTypes"])
    skus = runpod.withdraw(runpod.doc, rng)
    assert skus and len(runpod.doc["data"]["gpuTypes"]) == before - 1


@pytest.mark.parametrize(
    "name", sorted(n for n in ADAPTERS if n not in SHORT_SOURCES and n not in HTML_SOURCES)
)
def test_farm_serves_new_sources_and_a_moved_price_reaches_every_region(
    name: str, tmp_path: Path, sqlite_reference_template: Path
) -> None:
    """Every API, price-list and peer source outside the short run (Azure's seven pages,
    Vast.ai's POST search, AWS's region files, gpuhunt's version and zip, the SkyPilot
    CSVs) crawls ``ok`` from the farm; a knob moved shows in every region of its sku; a renamed field
    fails the crawl as ``layout changed``; ``hostile`` and ``duplicates`` end ``ok``."""
    from sqlalchemy import text

    from service.crawl.run import crawl_source
    from tests.chaos.farm import Armed

    with farm_catalog([name], tmp_path, template=sqlite_reference_template) as (
        farm,
        engine,
        settings,
    ):
        assert crawl_source(engine, settings, name, trigger="t").label == "ok"
        assert farm.log.requests[name] == farm.adapters[name].pages
        farm._faults_on.set()
        for kind, label in (("renamed_field", "failed"), ("hostile", "ok"), ("duplicates", "ok")):
            farm.armed[name] = Armed(kind, 1, 0.0, page=farm.adapters[name].pages - 1)
            report = crawl_source(engine, settings, name, trigger="t")
            assert report.label.startswith(label), (kind, report.label)
            if kind == "renamed_field":
                assert "layout changed" in report.label
        farm._change(name)
        change = farm.log.changes[-1]
        assert crawl_source(engine, settings, name, trigger="t").label == "ok"
        with engine.connect() as conn:
            amounts = conn.execute(
                text(
                    "SELECT o.region, o.amount FROM offer o WHERE o.source = :s AND o.sku = :k "
                    "AND o.price_kind = 'on_demand' AND o.status = 'active'"
                ),
                {"s": name, "k": change["sku"]},
            ).all()
        assert amounts and {Decimal(str(a)) for _, a in amounts} == {change["new"]}, amounts
