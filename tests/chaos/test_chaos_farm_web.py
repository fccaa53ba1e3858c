"""The farm's template pricing pages (``tests/chaos/farm_web.py``): each page the spider
asks for parses like its fixture, faults do what they say (offline, with the spider's own
``parse``), and a real crawl against the farm (the Scrapy child process) stores a moved
price, applies a withdrawal and refuses a redesign."""

from __future__ import annotations

import contextlib
import copy
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from crawlers.base import SourceError
from tests.chaos.farm import FAULT_KINDS
from tests.chaos.farm_web import ADAPTERS, TemplatePage
from tests.chaos.local import farm_catalog

NAMES = sorted(a.name for a in ADAPTERS)
BY_NAME = {a.name: a for a in ADAPTERS}


def _records(adapter: TemplatePage, body: bytes, page: int) -> list[tuple[Any, ...]]:
    return sorted(
        tuple(sorted((k, str(v)) for k, v in r.items()))
        for r in adapter.parse_page_records(body, page)
    )


def _identities(adapter: TemplatePage, body: bytes, page: int) -> set[tuple[str, str, str]]:
    return {
        (str(r["sku"]), str(r["price_kind"]), str(r["region"]))
        for r in adapter.parse_page_records(body, page)
    }


@pytest.mark.parametrize("name", NAMES)
def test_template_page_parses_like_its_fixtures_and_faults_do_what_they_say(name: str) -> None:
    adapter = BY_NAME[name]()
    assert isinstance(adapter, TemplatePage)
    knobs = adapter.knobs()
    assert knobs, "no price the farm can move"
    assert adapter.paths == [adapter.prefix + p for p in adapter.spider.start_paths]
    for index, path in enumerate(adapter.paths):
        assert adapter.route("GET", path, "") == index
    kinds = adapter.kinds(FAULT_KINDS)
    rng = random.Random(7)
    for page in range(adapter.pages):
        fixture = (adapter.fixture.parent / adapter.files[page]).read_bytes()
        clean = _records(adapter, adapter.render_page(adapter.doc, page), page)
        assert clean == _records(adapter, fixture, page)
        # hostile strings and reordered columns change no record at all
        hostile = adapter.mangle_page("hostile", copy.deepcopy(adapter.doc), page, rng)
        assert _records(adapter, hostile, page) == clean
        if "columns_reordered" in kinds:
            moved = adapter.mangle_page("columns_reordered", adapter.doc, page, rng)
            assert _records(adapter, moved, page) == clean
        doubled = adapter.mangle_page("duplicates", adapter.doc, page, rng)
        assert _identities(adapter, doubled, page) == {tuple(r) for r in _ids(clean)}
        for variant in range(3):
            changed = adapter.relayout_page(adapter.text_page(adapter.doc, page), page, variant)
            with pytest.raises(SourceError) as failure:
                adapter.parse_page_records(changed.encode(), page)
            assert failure.value.reason == "layout changed", (page, variant)
    # drop_90 leaves less than half the offers (the count guard refuses it)
    if "drop_90" in kinds:
        left = 0
        for page in range(adapter.pages):
            body = adapter.mangle_page("drop_90", adapter.doc, page, rng)
            with contextlib.suppress(SourceError):  # a page without products fails outright
                left += len(_identities(adapter, body, page))
        assert 2 * left < len(adapter.baseline)
    # a knob moves exactly its sku's on-demand offers (every region), a spike too
    key = sorted(knobs)[0]
    doc = copy.deepcopy(adapter.doc)
    knobs[key].setter(doc, knobs[key].amount * 100)
    after = adapter.parse_all(doc)
    assert {i for i in after if after[i] != adapter.baseline[i]} == {
        i for i in adapter.baseline if i[0] == knobs[key].sku and i[1] == "on_demand"
    }
    # a withdrawal removes every offer of the skus it names, and nothing else
    doc = copy.deepcopy(adapter.doc)
    skus = adapter.withdraw(doc, random.Random(3))
    assert skus
    left_over = adapter.parse_all(doc)
    assert {i for i in adapter.baseline if i not in left_over} == {
        i for i in adapter.baseline if i[0] in skus
    }
    assert 2 * len(left_over) > len(adapter.baseline)


def _ids(records: list[tuple[Any, ...]]) -> set[tuple[str, str, str]]:
    out = set()
    for record in records:
        fields = dict(record)
        out.add((fields["sku"], fields["price_kind"], fields["region"]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_farm_page_crawl_moves_a_price_withdraws_a_product_and_refuses_a_redesign(
    name: str, tmp_path: Path, sqlite_reference_template: Path
) -> None:
    """Real crawls (``crawl_source``, Scrapy in its child process) against the farm: the
    baseline is ``ok`` with every page requested once; a layout change fails the crawl
    as ``layout changed`` and changes nothing; then a withdrawal and a moved price reach
    the catalog: the withdrawn skus' offers are gone (all kinds), the moved price is the
    sku's price in every region, every other offer stays."""
    from sqlalchemy import text

    from service.crawl.run import crawl_source
    from tests.chaos.farm import Armed

    with farm_catalog(
        [name], tmp_path, seed=5, timeout=5.0, template=sqlite_reference_template
    ) as (farm, engine, settings):

        def offers() -> dict[tuple[str, str, str], tuple[Decimal, str]]:
            with engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT sku, price_kind, region, amount, status FROM offer "
                        "WHERE source = :s"
                    ),
                    {"s": name},
                ).all()
            return {(r[0], r[1], r[2]): (Decimal(str(r[3])), r[4]) for r in rows}

        assert crawl_source(engine, settings, name, trigger="t").label == "ok"
        adapter = farm.adapters[name]
        assert isinstance(adapter, TemplatePage)
        assert farm.log.requests[name] == adapter.pages
        before = offers()
        assert set(before) == set(adapter.baseline)
        farm._faults_on.set()
        farm.armed[name] = Armed("layout_changed", 1, 0.0, page=adapter.pages - 1)
        report = crawl_source(engine, settings, name, trigger="t")
        assert report.label.startswith("failed") and "layout changed" in report.label
        assert offers() == before
        farm._faults_on.clear()
        farm._change(name, withdraw=True)
        (withdrawal,) = farm.log.withdrawals
        farm._change(name)
        (change,) = farm.log.changes
        assert crawl_source(engine, settings, name, trigger="t").label == "ok"
        after = offers()
        for identity, (amount, status) in after.items():
            if identity[0] in withdrawal["skus"]:
                assert status != "active", identity
            elif identity[0] == change["sku"] and identity[1] == "on_demand":
                assert (amount, status) == (change["new"], "active"), identity
            else:
                assert (amount, status) == before[identity], identity
        assert {i[0] for i in after} >= set(withdrawal["skus"])
