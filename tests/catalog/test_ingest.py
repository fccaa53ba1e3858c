"""Ingest: diffs, type-2 history, quarantine, rejections, provenance, FX — SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import threading
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from schema.crawl import CrawlRun, CrawlRunPayload, RawPayload, RejectedRecord, UnmappedName
from service.catalog.fx import Rate, store_rates
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult, Payload, Rejection
from service.catalog.validation import StreamValidator
from service.core.config import Settings
from service.core.db import writer
from service.query.history import offer_history
from service.query.offers import get_offer
from service.query.sql import (
    OBS_AMOUNT_USD,
    OBS_CRAWL_RUN,
    OBS_FX_RATE,
    OBS_HOURLY_AMOUNT,
    OBS_HOURLY_USD,
    RUN_PAYLOAD,
    payload_sha256,
    with_versions,
)
from tests.support.factories import (
    OBS,
    OFFER,
    VERSION,
    catalog_state,
    check_invariants,
    record,
    records,
)
from tests.support.paged import PagedRecords

RUN = CrawlRun.__table__  # type: ignore[attr-defined]


def crawl(recs: list, source: str = "acme", **kwargs: object) -> CrawlResult:
    return CrawlResult(source=source, records=recs, **kwargs)  # type: ignore[arg-type]


def count(engine: Engine, table: object) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar() or 0)  # type: ignore[arg-type]


def test_first_ingest_creates_offers_observations_and_one_version(
    engine: Engine, settings: Settings
) -> None:
    result = ingest(engine, settings, crawl(records(20)))
    assert result.status.value == "ok"
    assert (result.added, result.changed, result.withdrawn) == (20, 0, 0)
    assert result.catalog_version == 1
    assert count(engine, OFFER) == 20 and count(engine, OBS) == 20 and count(engine, VERSION) == 1
    check_invariants(engine)


def test_identical_reingest_writes_no_observation_and_no_version(
    engine: Engine, settings: Settings
) -> None:
    ingest(engine, settings, crawl(records(20)))
    before = catalog_state(engine)
    result = ingest(engine, settings, crawl(records(20)))
    assert result.status.value == "ok" and result.catalog_version is None
    assert result.counts["added"] == result.counts["changed"] == 0
    assert catalog_state(engine) == before
    with engine.connect() as conn:
        runs = conn.execute(select(RUN.c.status, RUN.c.seen).order_by(RUN.c.id)).all()
    assert [tuple(r) for r in runs] == [("ok", 20), ("ok", 20)]


def test_price_change_closes_old_observation_and_opens_new(
    engine: Engine, settings: Settings
) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ingest(engine, settings, crawl(records(10)), now=t0)
    changed = records(10)
    changed[3]["amount"] = "25.00"
    t1 = t0 + timedelta(days=2)
    result = ingest(engine, settings, crawl(changed), now=t1)
    assert (result.added, result.changed, result.catalog_version) == (0, 1, 2)
    with engine.connect() as conn:
        offer_id = conn.execute(select(OFFER.c.id).where(OFFER.c.sku == "gpu-3")).scalar_one()
        history = offer_history(conn, offer_id)
        offer = get_offer(conn, offer_id)
    assert [h["amount"] for h in history] == [Decimal("20.3"), Decimal("25")]
    assert history[0]["valid_to"] == t1 and history[0]["version_to"] == 2
    assert history[1]["valid_from"] == t1 and history[1]["valid_to"] is None
    assert offer["amount"] == Decimal("25") and offer["last_changed_at"] == t1
    check_invariants(engine)


def test_withdrawal_keeps_history_and_a_return_reopens(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, crawl(records(10)))
    result = ingest(engine, settings, crawl(records(9)))
    assert result.withdrawn == 1
    with engine.connect() as conn:
        row = conn.execute(select(OFFER).where(OFFER.c.sku == "gpu-9")).mappings().one()
        assert row["status"] == "withdrawn" and row["withdrawn_version"] == 2
        assert len(offer_history(conn, row["id"])) == 1
    back = ingest(engine, settings, crawl(records(10)))
    assert back.added == 1 and back.catalog_version == 3
    with engine.connect() as conn:
        row = conn.execute(select(OFFER).where(OFFER.c.sku == "gpu-9")).mappings().one()
        assert row["status"] == "active" and len(offer_history(conn, row["id"])) == 2
    check_invariants(engine)


def test_incomplete_crawl_never_withdraws(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, crawl(records(10)))
    result = ingest(engine, settings, crawl(records(6), complete=False))
    assert result.withdrawn == 0 and result.catalog_version is None


def test_sharp_drop_in_offer_count_is_quarantined_and_changes_nothing(
    engine: Engine, settings: Settings
) -> None:
    ingest(engine, settings, crawl(records(20)))
    before = catalog_state(engine)
    result = ingest(engine, settings, crawl(records(4, bump_every=1)))
    assert result.status.value == "quarantined"
    assert result.reason is not None and "offer count dropped from 20 to 4" in result.reason
    assert catalog_state(engine) == before
    with engine.connect() as conn:
        run = conn.execute(select(RUN).order_by(RUN.c.id.desc())).mappings().first()
    assert run is not None and run["status"] == "quarantined" and "dropped" in run["reason"]


def test_price_spike_beyond_the_band_is_quarantined(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, crawl(records(10)))
    before = catalog_state(engine)
    spiked = records(10)
    spiked[2]["amount"] = str(Decimal(spiked[2]["amount"]) * 100)
    result = ingest(engine, settings, crawl(spiked))
    assert result.status.value == "quarantined" and "plausibility band" in (result.reason or "")
    assert catalog_state(engine) == before


def test_empty_crawl_is_not_applied(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, crawl(records(5)))
    before = catalog_state(engine)
    result = ingest(engine, settings, crawl([]))
    assert result.status.value == "quarantined" and "empty" in (result.reason or "")
    assert catalog_state(engine) == before


def test_invalid_records_are_rejected_one_by_one_and_the_rest_proceed(
    engine: Engine, settings: Settings
) -> None:
    good = records(5)
    bad = [
        record(100, amount="-3"),
        record(101, amount="0"),
        record(102, currency="QQQ"),
        record(103, amount="twelve"),
        {k: v for k, v in record(104).items() if k != "sku"},
        "not an object",
        record(105, sku="x\x00" * 3000),
    ]
    result = ingest(engine, settings, crawl(good + bad))
    assert result.status.value == "ok" and result.added == 5 and result.rejected == 7
    with engine.connect() as conn:
        reasons = list(conn.execute(select(RejectedRecord.__table__.c.reason)).scalars())  # type: ignore[attr-defined]
        stored = conn.execute(select(RejectedRecord.__table__.c.record)).scalars().all()  # type: ignore[attr-defined]
    assert any("price must be positive" in r for r in reasons)
    assert any("unknown ISO 4217 currency" in r for r in reasons)
    assert any("unparseable amount" in r for r in reasons)
    assert any("sku: Field required" in r for r in reasons)
    assert all(len(str(value)) < 60_000 for value in stored)  # hostile input stored bounded


def test_a_rejected_record_does_not_withdraw_its_offer(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, crawl(records(10)))
    again = records(10)
    again[4]["amount"] = "oops"
    result = ingest(engine, settings, crawl(again))
    assert result.rejected == 1 and result.withdrawn == 0


def test_a_record_rejected_upstream_does_not_withdraw_its_offer(
    engine: Engine, settings: Settings
) -> None:
    ingest(engine, settings, crawl(records(10)))
    bad = record(4, amount="n/a")
    result = ingest(
        engine,
        settings,
        crawl(
            [r for r in records(10) if r["sku"] != "gpu-4"],
            rejections=[Rejection(4, "amount: unparseable amount 'n/a'", bad)],
        ),
    )
    assert result.rejected == 1 and result.withdrawn == 0


def test_a_global_price_or_a_stated_country_is_not_an_unmapped_region(
    engine: Engine, settings: Settings
) -> None:
    result = ingest(
        engine,
        settings,
        crawl([record(0, region="global", country=None), record(1, region="xx-1", country="FR")]),
    )
    with engine.connect() as conn:
        regions = {
            r.value
            for r in conn.execute(select(UnmappedName.__table__))  # type: ignore[attr-defined]
            if r.kind == "region"
        }
    assert result.added == 2 and regions == set()


def test_duplicate_key_with_two_prices_is_ambiguous_and_rejected(
    engine: Engine, settings: Settings
) -> None:
    recs = records(3) + [record(1, amount="99")]
    result = ingest(engine, settings, crawl(recs))
    assert result.rejected == 1 and result.added == 2


def test_unknown_gpu_region_and_provider_are_recorded_not_dropped(
    engine: Engine, settings: Settings
) -> None:
    result = ingest(
        engine, settings, crawl([record(0, gpu_name_raw="Quantum Flux 9000", country=None)])
    )
    assert result.added == 1 and result.unmapped == 1
    with engine.connect() as conn:
        names = {(r.kind, r.value) for r in conn.execute(select(UnmappedName.__table__))}  # type: ignore[attr-defined]
    assert ("gpu", "Quantum Flux 9000") in names
    assert ("region", "acme/r0") in names
    assert ("provider", "acme") in names


def test_provenance_raw_payload_is_stored_once_and_referenced(
    engine: Engine, settings: Settings
) -> None:
    body = b'{"fake": "payload"}' * 100
    payload = Payload("https://example.test/prices", body, datetime.now(UTC), "application/json")
    ingest(engine, settings, crawl(records(3), payloads=[payload]))
    ingest(engine, settings, crawl(records(3, bump_every=1), payloads=[payload]))
    with engine.connect() as conn:
        blobs = conn.execute(select(RawPayload.__table__)).mappings().all()  # type: ignore[attr-defined]
        shas = set(conn.execute(select(payload_sha256()).select_from(OBS)).scalars())
        links = conn.execute(  # each observation names a payload row of its own run
            select(OBS_CRAWL_RUN, RUN_PAYLOAD.c.crawl_run_id, RUN_PAYLOAD.c.url).select_from(
                with_versions(OBS.join(RUN_PAYLOAD, RUN_PAYLOAD.c.id == OBS.c.payload_id))
            )
        ).all()
        observations = conn.execute(select(func.count()).select_from(OBS)).scalar()
    assert len(blobs) == 1 and blobs[0]["size"] == len(body)
    assert shas == {payload.sha256}
    assert len(links) == observations == 6
    assert all(run == linked and url == payload.url for run, linked, url in links)


def test_each_price_names_the_page_it_was_read_from(engine: Engine, settings: Settings) -> None:
    now = datetime.now(UTC)
    pages = [Payload(f"https://example.test/p{i}", f"page {i}".encode(), now) for i in range(3)]
    recs = records(6)
    ingest(engine, settings, crawl(PagedRecords(recs, [p.sha256 for p in pages]), payloads=pages))
    with engine.connect() as conn:
        rows = conn.execute(
            select(OBS.c.offer_id, RUN_PAYLOAD.c.url, RUN_PAYLOAD.c.sha256)
            .join(RUN_PAYLOAD, RUN_PAYLOAD.c.id == OBS.c.payload_id)
            .order_by(OBS.c.offer_id)
        ).all()
    assert [(url, sha) for _, url, sha in rows] == [
        (pages[i % 3].url, pages[i % 3].sha256) for i in range(6)
    ]


def test_a_price_tied_to_a_payload_the_crawl_did_not_keep_fails_the_ingest(
    engine: Engine, settings: Settings
) -> None:
    """Provenance is never invented or dropped: a record naming a payload that is not
    among the crawl's fails the ingest, which keeps nothing."""
    now = datetime.now(UTC)
    pages = [Payload(f"https://example.test/p{i}", f"page {i}".encode(), now) for i in range(2)]
    stray = hashlib.sha256(b"a page never stored").hexdigest()
    paged = PagedRecords(records(4), [pages[0].sha256, pages[1].sha256, stray])
    with pytest.raises(LookupError, match=f"stored no payload {stray}"):
        ingest(engine, settings, crawl(paged, payloads=pages))
    assert count(engine, OBS) == 0 and count(engine, RUN_PAYLOAD) == 0


def test_a_quarantined_crawl_keeps_its_raw_payload_and_a_failed_ingest_keeps_none(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The payloads are stored while the crawl's batches are validated (on their own thread), in the
    ingest's transaction: a quarantined crawl's are kept, linked to its run, so it can be
    re-parsed; an ingest that fails leaves none."""
    ingest(engine, settings, crawl(records(20)))
    first = Payload("https://example.test/a", b"page one" * 500, datetime.now(UTC))
    result = ingest(engine, settings, crawl(records(4), payloads=[first]))
    assert result.status.value == "quarantined"

    def broken(self: StreamValidator, items: Any) -> Any:
        raise RuntimeError("validator bug")

    monkeypatch.setattr(StreamValidator, "batch", broken)
    second = Payload("https://example.test/b", b"page two" * 500, datetime.now(UTC))
    with pytest.raises(RuntimeError, match="validator bug"):
        ingest(engine, settings, crawl(records(20), payloads=[second]))
    with engine.connect() as conn:
        blobs = set(conn.execute(select(RawPayload.__table__.c.sha256)).scalars())  # type: ignore[attr-defined]
        links = conn.execute(select(CrawlRunPayload.__table__)).mappings().all()  # type: ignore[attr-defined]
    assert blobs == {first.sha256}
    assert [(link["crawl_run_id"], link["sha256"]) for link in links] == [
        (result.crawl_run_id, first.sha256)
    ]


def test_fx_conversion_uses_the_rate_in_force(engine: Engine, settings: Settings) -> None:
    with writer(engine).begin() as conn:
        store_rates(
            conn,
            [
                Rate(date(2026, 3, 2), "USD", Decimal("1.0800")),
                Rate(date(2026, 3, 3), "USD", Decimal("1.1000")),
                Rate(date(2026, 3, 2), "GBP", Decimal("0.8500")),
            ],
            "ecb",
            None,
        )
    when = datetime(2026, 3, 3, 12, tzinfo=UTC)
    recs = [
        record(0, currency="EUR", amount="10", gpu_count="4"),
        record(1, currency="GBP", amount="10", gpu_count="1"),
        record(2, currency="JPY", amount="1000"),
    ]
    ingest(engine, settings, crawl(recs), now=when)
    with engine.connect() as conn:
        rows = {r.currency: r for r in conn.execute(select(OBS))}
    eur = rows["EUR"]
    assert eur.amount_usd == Decimal("11") and eur.fx_rate == Decimal("1.1")
    assert eur.fx_date == date(2026, 3, 3) and eur.gpu_hour_usd == Decimal("2.75")
    gbp = rows["GBP"]
    assert gbp.fx_rate == (Decimal("1.1") / Decimal("0.85")).quantize(Decimal("1e-10"))
    assert gbp.fx_date == date(2026, 3, 2)  # the older of the two rates used
    assert rows["JPY"].amount_usd is None  # no rate known: kept, not guessed


def test_monthly_and_per_gpu_prices_give_per_gpu_hour(engine: Engine, settings: Settings) -> None:
    recs = [
        record(0, unit="month", price_kind="monthly", amount="730", gpu_count="2"),
        record(1, price_per="gpu", amount="2.5", gpu_count="8"),
        record(2, unit="term_1y", price_kind="reserved_1y", amount="87600", gpu_count="1"),
    ]
    ingest(engine, settings, crawl(recs))
    with engine.connect() as conn:
        rows = {r.offer_id: r for r in conn.execute(select(OBS))}
    assert rows[1].hourly_amount == Decimal("1") and rows[1].gpu_hour_usd == Decimal("0.5")
    assert rows[2].hourly_amount == Decimal("20") and rows[2].gpu_hour_usd == Decimal("2.5")
    assert rows[3].hourly_amount == Decimal("10") and rows[3].gpu_hour_usd == Decimal("10")


def test_one_list_price_over_gpu_counts_bases_and_units_gives_each_its_figures(
    engine: Engine, settings: Settings
) -> None:
    """Prices sharing an amount and currency share their conversion (a memo keyed
    without the GPU count): every stored figure still matches its own record."""
    with writer(engine).begin() as conn:
        store_rates(conn, [Rate(date(2026, 3, 3), "USD", Decimal("1.1"))], "ecb", None)
    hours = {"hour": Decimal(1), "month": Decimal(730)}
    kinds = {"hour": "on_demand", "month": "monthly"}
    combos = [
        (count, per, currency, unit)
        for count in ("1", "2", "8", "0.5", "8.0")
        for per in ("instance", "gpu")
        for currency in ("EUR", "USD")
        for unit in ("hour", "month")
    ]
    recs = [
        record(
            i,
            amount="24.00" if i % 2 else "24",
            gpu_count=count,
            price_per=per,
            currency=currency,
            unit=unit,
            price_kind=kinds[unit],
        )
        for i, (count, per, currency, unit) in enumerate(combos)
    ]
    ingest(engine, settings, crawl(recs), now=datetime(2026, 3, 3, 12, tzinfo=UTC))
    with engine.connect() as conn:
        read = (
            OBS_AMOUNT_USD.label("read_amount_usd"),
            OBS_HOURLY_USD.label("read_hourly_usd"),
            OBS_FX_RATE.label("read_fx_rate"),
            OBS_HOURLY_AMOUNT.label("read_hourly_amount"),
        )
        rows = {r.offer_id: r for r in conn.execute(select(OBS, *read))}
        offers = {r.id: r for r in conn.execute(select(OFFER))}
    assert len(rows) == len(combos)
    ten = Decimal("1e-10")
    ids = {offer.sku: offer_id for offer_id, offer in offers.items()}
    for i, (count, per, currency, unit) in enumerate(combos):
        offer_id = ids[f"gpu-{i}"]
        gpus = Decimal(count)
        hourly = (Decimal(24) / hours[unit] * (gpus if per == "gpu" else 1)).quantize(ten)
        rate = Decimal("1.1") if currency == "EUR" else Decimal(1)
        gpu_hour = ((hourly * rate).quantize(ten) / gpus).quantize(ten)
        row = rows[offer_id]
        assert (row.amount, row.currency, row.read_fx_rate) == (Decimal(24), currency, rate)
        assert row.read_hourly_amount == hourly, (count, per, currency, unit)
        assert row.read_amount_usd == (Decimal(24) * rate).quantize(ten)
        assert row.read_hourly_usd == (hourly * rate).quantize(ten)
        # a price per instance-hour is its own hourly figure (schema.prices.HOURLY_SAME)
        per_hour = hourly == Decimal(24)
        assert row.hourly_amount == (None if per_hour else hourly), (count, per, unit)
        stored = (row.amount_usd, row.hourly_usd, row.fx_rate)
        if currency == "USD":  # its own figures, not stored again (schema.prices.USD)
            assert stored == (None, None, None)
        else:
            hourly_usd = None if per_hour else row.read_hourly_usd
            assert stored == (row.read_amount_usd, hourly_usd, row.read_fx_rate)
        assert row.gpu_hour_usd == gpu_hour, (count, per, currency, unit)
        assert offers[offer_id].gpu_hour_usd == gpu_hour
        assert offers[offer_id].gpu_hour_usd_e10 == int(gpu_hour.scaleb(10))


def test_sources_are_independent(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, crawl(records(5)))
    ingest(engine, settings, crawl(records(3, source="peer:acme"), source="peer:acme"))
    result = ingest(engine, settings, crawl(records(5)))
    assert result.withdrawn == 0 and count(engine, OFFER) == 8


def test_record_from_another_source_is_rejected(engine: Engine, settings: Settings) -> None:
    result = ingest(engine, settings, crawl([record(0, source="other"), record(1)]))
    assert result.rejected == 1 and result.added == 1


def test_concurrent_ingests_of_one_source_are_serialized(
    engine: Engine, settings: Settings
) -> None:
    ingest(engine, settings, crawl(records(200)))
    changed = records(200, bump_every=3)
    results = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(ingest(engine, settings, crawl(changed)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    versions = [r.catalog_version for r in results if r.catalog_version is not None]
    assert len(versions) == 1, "the same change applied once: one new version, not three"
    assert count(engine, VERSION) == 2
    check_invariants(engine)


def test_a_run_left_running_by_a_dead_process_is_closed_as_interrupted(
    engine: Engine, settings: Settings
) -> None:
    from service.catalog.run_owner import STALE_AFTER as STALE_RUN  # its owner (us) lives: only age
    from service.catalog.runs import start_crawl_run

    old = start_crawl_run(engine, "acme")
    with writer(engine).begin() as conn:
        conn.execute(
            RUN.update()
            .where(RUN.c.id == old)
            .values(started_at=datetime.now(UTC) - STALE_RUN - timedelta(minutes=1))
        )
    start_crawl_run(engine, "acme")
    with engine.connect() as conn:
        row = conn.execute(select(RUN).where(RUN.c.id == old)).mappings().one()
    assert (row["status"], row["reason"]) == ("failed", "interrupted")


def test_upstream_rejections_with_any_values_are_stored_safely(
    engine: Engine, settings: Settings
) -> None:
    hostile = record(7, sku="evil\x00\u202ename", amount=Decimal("1.5"))
    hostile["observed_at"] = datetime(2026, 1, 1, tzinfo=UTC)
    result = ingest(
        engine,
        settings,
        crawl(records(5), rejections=[Rejection(7, "sku: contains control characters", hostile)]),
    )
    assert result.status.value == "ok" and result.added == 5 and result.rejected == 1
    with engine.connect() as conn:
        stored = conn.execute(select(RejectedRecord.__table__.c.record)).scalar_one()  # type: ignore[attr-defined]
    assert stored["amount"] == "1.5" and "\x00" not in stored["sku"]
