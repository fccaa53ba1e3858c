"""The chaos farm's AWS price list, gpuhunt catalogs and SkyPilot CSVs, crawled with the real
``crawl_source`` (tests/chaos/farm_peers.py): a gpuhunt price change publishes a new version
that the crawler follows, broken zips fail the crawl with a recorded reason, AWS faults are
refused, and each source's legitimate withdrawal is applied without tripping the count
guard (the full run's check "2a" relies on it)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from crawlers.base import Context, Request, Response, SourceError
from crawlers.registry import get_source
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.chaos.adapters import ADAPTERS as ALL
from tests.chaos.farm import Armed, Farm, SkyPilotCsv
from tests.chaos.farm_peers import ADAPTERS, Gpuhunt
from tests.chaos.local import farm_catalog

PEERS = sorted(a.name for a in ADAPTERS)
WITHDRAWING = sorted({*PEERS, "azure", "vastai", "skypilot:lambda", "skypilot:runpod"})


@dataclass
class Bench:
    farm: Farm
    engine: Engine
    settings: Settings

    def crawl(self, name: str) -> str:
        return crawl_source(self.engine, self.settings, name, trigger="t").label

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params).all())

    def last_run(self, name: str) -> Any:
        return self.rows(
            "SELECT status, reason, seen, source_urls FROM crawl_run WHERE source = :s "
            "ORDER BY id DESC LIMIT 1",
            s=name,
        )[0]

    def active(self, name: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for (sku,) in self.rows(
            "SELECT sku FROM offer WHERE source = :s AND status = 'active'", s=name
        ):
            found[sku] = found.get(sku, 0) + 1
        return found


@pytest.fixture
def bench(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_reference_template: Path
) -> Iterator[Bench]:
    names: list[str] = request.param
    with farm_catalog(names, tmp_path, template=sqlite_reference_template) as (
        farm,
        engine,
        settings,
    ):
        farm._faults_on.set()
        yield Bench(farm, engine, settings)


@pytest.mark.parametrize("bench", [["gpuhunt:nebius"]], indirect=True)
def test_a_gpuhunt_price_change_publishes_a_new_version_the_crawler_follows(bench: Bench) -> None:
    name = "gpuhunt:nebius"
    assert bench.crawl(name) == "ok"
    first = bench.last_run(name)
    assert [u.rsplit("/", 2)[-2:] for u in json.loads(first.source_urls)] == [
        ["nebius", "version"],
        ["20251128-412", "catalog.zip"],
    ]
    bench.farm._change(name)
    change = bench.farm.log.changes[-1]
    assert bench.farm.adapters[name].doc["version"] == "20251128-413"
    assert bench.crawl(name) == "ok"
    assert json.loads(bench.last_run(name).source_urls)[-1].endswith(
        "/v3/nebius/20251128-413/catalog.zip"
    )
    amounts = bench.rows(
        "SELECT amount FROM offer WHERE source = :s AND sku = :k AND price_kind = 'on_demand'",
        s=name,
        k=change["sku"],
    )
    assert amounts and {Decimal(str(a)) for (a,) in amounts} == {change["new"]}
    for page in (0, 1):  # a spike is a fault: no new version, nothing applied
        bench.farm.armed[name] = Armed("spike_x100", 1, 0.0, page=page)
        label = bench.crawl(name)
        expected = "ok" if page == 0 else "quarantined: price of"  # the version page: whole
        assert label.startswith(expected), (page, label)
        assert bench.farm.adapters[name].doc["version"] == "20251128-413"
    versions = bench.rows("SELECT count(*) FROM catalog_version WHERE source = :s", s=name)
    assert versions == [(2,)]


class _Variant(random.Random):
    """A random source whose ``randrange`` names one fault variant."""

    def __init__(self, variant: int) -> None:
        super().__init__(0)
        self.variant = variant

    def randrange(self, *args: Any, **kwargs: Any) -> int:  # type: ignore[override]
        return self.variant


@pytest.mark.parametrize("name", sorted(a.name for a in ADAPTERS if issubclass(a, Gpuhunt)))
def test_every_broken_gpuhunt_zip_is_an_invalid_payload(name: str) -> None:
    """A zip cut short, one with corrupt deflated data and a zipped CSV with an unbalanced
    quote are each refused by the real parser as ``invalid payload``; a ``hostile`` zip
    (stored, 10 MB field) parses to the clean offers."""
    adapter = next(a for a in ADAPTERS if a.name == name)()
    assert isinstance(adapter, Gpuhunt)
    clean = adapter.render_page(adapter.doc, 1)

    def parse(body: bytes) -> list[Any]:
        source = get_source(name)()
        request_url = f"http://farm/v3/{adapter.peer}/x/catalog.zip"
        response = Response(
            request_url, 200, body, request=Request(request_url, meta={"step": "catalog"})
        )
        return sorted(
            (r["sku"], r["region"], r["price_kind"], r["amount"])
            for r in source.parse(response, Context(base_url="http://farm"))
            if isinstance(r, dict)
        )

    offers = parse(clean)
    assert offers
    for variant in range(3):
        body = adapter.invalid_page(adapter.doc, clean, 1, _Variant(variant))
        with pytest.raises(SourceError) as failure:
            parse(body)
        assert failure.value.reason == "invalid payload", (variant, failure.value)
    hostile = adapter.mangle_page("hostile", json.loads(json.dumps(adapter.doc)), 1, _Variant(0))
    assert len(hostile) > 10 * 1024 * 1024
    assert parse(hostile) == offers


@pytest.mark.parametrize("bench", [["gpuhunt:runpod", "skypilot:vast"]], indirect=True)
def test_broken_payloads_fail_the_crawl_with_a_recorded_reason(bench: Bench) -> None:
    farm = bench.farm
    assert bench.crawl("gpuhunt:runpod") == "ok"
    assert bench.crawl("skypilot:vast") == "ok"
    cases = [
        ("gpuhunt:runpod", "invalid_json", 1, 1, "invalid payload"),
        ("gpuhunt:runpod", "truncated", 1, 2, "truncated body"),
        ("gpuhunt:runpod", "renamed_field", 0, 1, "layout changed"),
        ("gpuhunt:runpod", "invalid_json", 0, 1, "layout changed"),
        ("skypilot:vast", "invalid_json", 0, 1, "invalid payload"),
    ]
    for name, kind, page, count, reason in cases:
        farm.armed[name] = Armed(kind, count, 0.0, page=page)
        assert bench.crawl(name) == f"failed: {reason}", (name, kind, page)
        status, recorded, _, _ = bench.last_run(name)
        assert (status, recorded) == ("failed", reason)
    for name, kind, page in (("gpuhunt:runpod", "hostile", 0), ("gpuhunt:runpod", "duplicates", 0)):
        farm.armed[name] = Armed(kind, 1, 0.0, page=page)
        assert bench.crawl(name) == "ok", (kind, page)


@pytest.mark.parametrize("bench", [["aws"]], indirect=True)
def test_aws_faults_on_any_page_are_refused_and_nothing_moves(bench: Bench) -> None:
    """The region index and the three offer files are four pages of one crawl: a renamed
    field on any of them is ``layout changed``; ``drop_90`` on every page and a ×100 price
    on one region are quarantined by the plausibility guard; duplicates and hostile
    strings change nothing."""
    farm, name = bench.farm, "aws"
    assert bench.crawl(name) == "ok"
    assert farm.log.requests[name] == 4
    before = bench.rows(
        "SELECT sku, region, price_kind, amount FROM offer WHERE source = 'aws' ORDER BY 1, 2, 3"
    )
    seen = bench.last_run(name).seen
    assert seen > 500
    for page in range(4):
        farm.armed[name] = Armed("renamed_field", 1, 0.0, page=page)
        assert bench.crawl(name) == "failed: layout changed", page
    farm.armed[name] = Armed("drop_90", 4, 0.0, page=None)
    label = bench.crawl(name)
    assert label.startswith("quarantined: offer count dropped"), label
    assert name not in farm.armed  # served on every page, used up by the one crawl
    farm.armed[name] = Armed("spike_x100", 1, 0.0, page=2)
    label = bench.crawl(name)
    assert label.startswith("quarantined: price of"), label
    for kind in ("duplicates", "hostile"):
        for page in (0, 3):
            farm.armed[name] = Armed(kind, 1, 0.0, page=page)
            assert bench.crawl(name) == "ok", (kind, page)
    after = bench.rows(
        "SELECT sku, region, price_kind, amount FROM offer WHERE source = 'aws' ORDER BY 1, 2, 3"
    )
    assert after == before
    assert bench.last_run(name).seen == seen


@pytest.mark.parametrize("bench", [[n] for n in WITHDRAWING], indirect=True, ids=WITHDRAWING)
def test_a_withdrawal_is_applied_and_stays_within_the_count_guard(bench: Bench) -> None:
    """The schedule's first change of a source is a withdrawal: the next crawl is ``ok``
    (never quarantined), exactly the skus the farm reported lose every offer, the rest
    stay; ``drop_90`` is only served to a source the count guard can still judge."""
    farm = bench.farm
    (name,) = farm.adapters
    assert bench.crawl(name) == "ok"
    before = bench.active(name)
    seen = bench.last_run(name).seen
    farm._change(name, withdraw=True)
    (withdrawal,) = farm.log.withdrawals
    skus = withdrawal["skus"]
    assert skus and set(skus) <= set(before)
    assert not any(k.sku in skus for k in farm.knobs[name].values())
    assert bench.crawl(name) == "ok"
    after = bench.active(name)
    assert after == {k: n for k, n in before.items() if k not in skus}
    left = bench.last_run(name).seen
    assert 2 * left >= seen
    if "drop_90" in farm.kinds[name]:
        assert left >= bench.settings.min_offers_for_ratio_check
        farm.armed[name] = Armed("drop_90", farm.adapters[name].pages, 0.0, page=None)
        label = bench.crawl(name)
        assert label.startswith(("quarantined", "failed: empty result")), label
        assert bench.active(name) == after
    farm._change(name, withdraw=True)  # once per run: then a price change
    assert len(farm.log.withdrawals) == 1 and farm.log.changes


@pytest.mark.parametrize(
    "name",
    sorted(n for n, a in ALL.items() if issubclass(a, SkyPilotCsv) and not issubclass(a, Gpuhunt)),
)
def test_every_skypilot_csv_fault_reads_as_intended(name: str) -> None:
    """``invalid_json`` (an unbalanced quote) is ``invalid payload``; a renamed price header
    is ``layout changed``; duplicated rows and hostile strings parse to the clean offers."""
    adapter = ALL[name]()
    assert isinstance(adapter, SkyPilotCsv)

    def parse(body: bytes) -> list[Any]:
        source = get_source(name)()
        response = Response(f"http://farm{adapter.path}", 200, body)
        return sorted(
            (r["sku"], r["region"], r["price_kind"], r["amount"])
            for r in source.parse(response, Context(base_url="http://farm"))
            if isinstance(r, dict)
        )

    def fresh() -> Any:
        return json.loads(json.dumps(adapter.doc))

    rng = random.Random(1)
    clean = parse(adapter.render(adapter.doc))
    assert len(clean) == sum(adapter.offer_counts(adapter.doc).values())
    with pytest.raises(SourceError) as failure:
        parse(adapter.invalid_page(fresh(), b"", 0, rng))
    assert failure.value.reason == "invalid payload"
    with pytest.raises(SourceError) as failure:
        parse(adapter.mangle("renamed_field", fresh(), rng))
    assert failure.value.reason == "layout changed"
    assert parse(adapter.mangle("duplicates", fresh(), rng)) == clean
    assert parse(adapter.mangle("hostile", fresh(), rng)) == clean


def test_a_whole_crawl_fault_covers_one_crawl_from_its_first_page() -> None:
    """``drop_90`` on a paged source hits every page of one crawl: armed mid-crawl it waits
    for the next crawl's first page, and a crawl cut short (killed; Vast.ai's paging ends
    at a short page) leaves no part of it to the next one (a drop on some pages only could
    pass the count guard)."""
    farm = Farm(["azure"], 1, http_timeout=2.0, attempts=2)
    try:
        farm._faults_on.set()
        pages = farm.adapters["azure"].pages
        farm._answer("azure", 0)
        farm.armed["azure"] = Armed("drop_90", pages, 0.0, page=None)
        for page in range(1, pages):  # the crawl in progress: clean
            farm._answer("azure", page)
        assert not farm.log.faults
        for page in range(3):  # the next crawl, killed after three pages
            farm._answer("azure", page)
        assert [f["page"] for f in farm.log.faults] == [0, 1, 2]
        for page in range(pages):  # the crawl after it: clean
            farm._answer("azure", page)
        assert len(farm.log.faults) == 3 and "azure" not in farm.armed
        farm.armed["azure"] = Armed("drop_90", pages, 0.0, page=None)
        for page in range(pages):  # a whole crawl: every page
            farm._answer("azure", page)
        assert [f["page"] for f in farm.log.faults[3:]] == list(range(pages))
        assert "azure" not in farm.armed
    finally:
        farm.close()


@pytest.mark.parametrize("bench", [["vastai"]], indirect=True)
def test_a_vastai_drop_ends_the_paging_and_leaves_the_next_crawl_whole(bench: Bench) -> None:
    farm = bench.farm
    assert bench.crawl("vastai") == "ok"
    farm.armed["vastai"] = Armed("drop_90", 2, 0.0, page=None)
    label = bench.crawl("vastai")
    assert label.startswith("quarantined: offer count dropped"), label
    assert [f["page"] for f in farm.log.faults] == [0]  # a short page 1: no page 2 asked
    assert bench.crawl("vastai") == "ok"
    assert len(farm.log.faults) == 1 and "vastai" not in farm.armed
