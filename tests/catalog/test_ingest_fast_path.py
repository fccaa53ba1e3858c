"""Ingest's fast paths: the state-text comparison of unchanged offers, memoized
fingerprints and prices, bulk updates — each still classifies every offer exactly as a
column-by-column comparison would. SQLite and PostgreSQL."""

from __future__ import annotations

import gc
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

import service.catalog.diff
import service.catalog.ingest
import service.catalog.writer
from schema.prices import OfferLine
from service.catalog.diff import load_current, read_current
from service.catalog.ingest import ingest
from service.catalog.resolver import fingerprint
from service.catalog.results import CrawlResult
from service.catalog.state import CurrentState, key_digest, same_digest
from service.catalog.validation import StreamValidator
from service.core.config import Settings
from service.core.db import writer
from service.query.sql import OBS_CRAWL_RUN, OBS_VALID_FROM, OBS_VALID_TO, with_versions
from tests.support import factories
from tests.support.factories import catalog_state, check_invariants, record, records


def crawl(recs: list[dict[str, Any]], **kwargs: Any) -> CrawlResult:
    return CrawlResult(source="acme", records=recs, **kwargs)


def offer_rows(engine: Engine) -> dict[str, dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(factories.OFFER).order_by(factories.OFFER.c.id)).mappings().all()
    return {f"{r['sku']}/{r['region']}": dict(r) for r in rows}


def count(engine: Engine, table: Any, *where: Any) -> int:
    with engine.connect() as conn:
        stmt = select(func.count()).select_from(table)
        return int(conn.execute(stmt.where(*where) if where else stmt).scalar() or 0)


def test_unchanged_reingest_confirms_every_offer_and_writes_none(
    engine: Engine, settings: Settings
) -> None:
    ingest(engine, settings, crawl(records(30)))
    offers, state = offer_rows(engine), catalog_state(engine)
    result = ingest(engine, settings, crawl(records(30)))
    assert result.status.value == "ok" and result.seen == 30
    assert result.catalog_version is None
    assert (result.added, result.changed, result.updated, result.withdrawn) == (0, 0, 0, 0)
    assert offer_rows(engine) == offers and catalog_state(engine) == state


@pytest.mark.parametrize("spelling", ["20.000", "2E+1", "20", "0.0020E+4"])
def test_the_same_price_spelled_differently_is_unchanged(
    engine: Engine, settings: Settings, spelling: str
) -> None:
    ingest(engine, settings, crawl(records(3, amount="20.00")))
    result = ingest(engine, settings, crawl(records(3, amount=spelling)))
    assert (result.added, result.changed, result.updated) == (0, 0, 0)
    assert result.catalog_version is None


@pytest.mark.parametrize(("first", "then"), [("8.0", "8"), ("96", "9.6E+1"), ("0.50", "0.5")])
def test_the_same_attribute_spelled_differently_is_unchanged(
    engine: Engine, settings: Settings, first: str, then: str
) -> None:
    """Attributes are fingerprinted in canonical form: ``8.0`` and ``8`` are one value and
    are stored alike, so a re-spelling is no change (no version, nothing written)."""
    ingest(engine, settings, crawl(records(4, vcpus=first, memory_gb=first)))
    before = offer_rows(engine)
    result = ingest(engine, settings, crawl(records(4, vcpus=then, memory_gb=then)))
    assert result.catalog_version is None
    assert (result.added, result.changed, result.updated) == (0, 0, 0)
    assert offer_rows(engine) == before


def test_mixed_spellings_in_one_crawl_share_one_fingerprint(
    engine: Engine, settings: Settings
) -> None:
    batch = records(6)
    for i, item in enumerate(batch):
        item["vcpus"] = "8.00" if i % 2 else "8"
    ingest(engine, settings, crawl(batch))
    with engine.connect() as conn:
        digests = set(conn.execute(select(factories.OFFER.c.fingerprint)).scalars())
    assert len(digests) == 1
    assert digests == {
        fingerprint(
            (
                "instance",
                None,
                False,
                "H100 SXM",
                Decimal(8),
                None,
                Decimal(8),
                None,
                "DE",
                None,
                False,
                None,
                None,  # tax_included: unknown (the digest is the one it had before)
            )
        )
    }


def test_a_changed_attribute_alone_updates_the_offer_in_place(
    engine: Engine, settings: Settings
) -> None:
    ingest(engine, settings, crawl(records(10)))
    before = offer_rows(engine)
    result = ingest(engine, settings, crawl(records(10, vcpus="96")))
    assert (result.added, result.changed, result.updated) == (0, 0, 10)
    assert result.catalog_version == 2
    after = offer_rows(engine)
    for name, row in after.items():
        assert row["vcpus"] == Decimal(96) and before[name]["vcpus"] is None
        assert row["fingerprint"] != before[name]["fingerprint"]
        assert row["observation_id"] == before[name]["observation_id"]
        assert row["amount"] == before[name]["amount"]
    assert count(engine, factories.OBS) == 10  # no new observation: the price did not move
    again = ingest(engine, settings, crawl(records(10, vcpus="96")))
    assert again.catalog_version is None and again.updated == 0
    check_invariants(engine)


def test_one_crawl_adds_changes_updates_withdraws_and_reopens(
    engine: Engine, settings: Settings
) -> None:
    ingest(engine, settings, crawl(records(20)))
    first = records(20)
    ingest(engine, settings, crawl(first[:18]))  # withdraws gpu-18 and gpu-19
    assert count(engine, factories.OFFER, factories.OFFER.c.status == "withdrawn") == 2
    batch = records(24)
    del batch[5]  # withdrawn
    batch[0]["amount"] = "99.5"  # changed
    batch[1]["memory_gb"] = "512"  # updated in place
    batch[2]["amount"], batch[2]["vcpus"] = "31.25", "64"  # changed, attributes too
    # gpu-18 and gpu-19 come back (reopened); gpu-20..23 are new
    before = offer_rows(engine)
    result = ingest(engine, settings, crawl(batch))
    assert result.status.value == "ok"
    assert (result.added, result.changed, result.updated, result.withdrawn) == (6, 2, 1, 1)
    after = offer_rows(engine)
    assert after["gpu-0/r0"]["amount"] == Decimal("99.5")
    assert after["gpu-1/r1"]["memory_gb"] == Decimal(512)
    assert after["gpu-1/r1"]["observation_id"] == before["gpu-1/r1"]["observation_id"]
    assert after["gpu-2/r2"]["vcpus"] == Decimal(64)
    assert after["gpu-2/r2"]["gpu_hour_usd"] == Decimal("31.25") / 8
    assert after["gpu-2/r2"]["gpu_hour_usd_e10"] == int(Decimal("31.25") / 8 * 10**10)
    assert after["gpu-2/r2"]["last_changed_version"] == result.catalog_version
    assert after["gpu-5/r5"]["status"] == "withdrawn"
    for name in ("gpu-18/r4", "gpu-19/r5"):
        assert after[name]["status"] == "active" and after[name]["withdrawn_at"] is None
    assert count(engine, factories.VERSION) == 3
    check_invariants(engine)
    # and the next identical crawl of that mixed state changes nothing
    again = ingest(engine, settings, crawl(batch))
    assert again.catalog_version is None
    assert (again.added, again.changed, again.updated, again.withdrawn) == (0, 0, 0, 0)


def test_the_current_state_text_round_trips(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, crawl(records(4, amount="12.3400")))
    ingest(engine, settings, crawl(records(3, amount="12.3400")))  # withdraws gpu-3
    rows = offer_rows(engine)
    with writer(engine).begin() as conn:
        current = load_current(conn, "acme")
        stored = read_current(conn, [row["id"] for row in rows.values()])
    assert len(current) == 4 and len(stored) == 4
    for row in rows.values():
        old = stored[row["id"]]
        assert (old.provider, old.id, old.observation_id, old.status) == (
            "acme",
            row["id"],
            row["observation_id"],
            row["status"],
        )
        assert old.amount == Decimal("12.34") and old.fingerprint == row["fingerprint"]
        # the compact state holds the digest of the canonical text on both databases
        at = current.row(
            key_digest(f"acme\x1f{row['sku']}\x1f{row['region']}\x1fon_demand\x1fhour")
        )
        assert current.ids[at] == row["id"]
        same = same_digest(f"12.34\x1fUSD\x1f{row['fingerprint']}\x1f{row['status']}")
        assert current.unchanged(at, same)


def test_reading_offers_by_id_across_chunks(engine: Engine, settings: Settings) -> None:
    """read_current answers by id across its chunks of 900 (one row a chunk on SQLite),
    with each offer's line digest when it has one, and leaves out ids not stored."""
    ingest(engine, settings, crawl(records(950)))
    rows = offer_rows(engine)
    ids = sorted(row["id"] for row in rows.values())
    lined = {ids[0]: b"\x01" * 16, ids[899]: b"\xab" * 16, ids[900]: b"\xff" * 16}
    with writer(engine).begin() as conn:
        conn.execute(
            OfferLine.__table__.insert(),  # type: ignore[attr-defined]
            [{"offer_id": k, "digest": v} for k, v in lined.items()],
        )
        missing = [ids[-1] + 1, ids[-1] + 1000]
        stored = read_current(conn, [*reversed(ids), *missing])
        assert read_current(conn, missing) == {}
        assert read_current(conn, []) == {}
    assert sorted(stored) == ids
    for row in rows.values():
        old = stored[row["id"]]
        assert (old.id, old.observation_id, old.amount, old.fingerprint) == (
            row["id"],
            row["observation_id"],
            row["amount"],
            row["fingerprint"],
        )
        expected = lined.get(row["id"])
        assert old.line == (expected.hex().upper() if expected else None)


def _rows(current: CurrentState) -> set[tuple[int, int, bytes, int, int]]:
    keys, same = current.keys, current.same
    return {
        (
            keys.his[r],
            keys.los[r],
            bytes(same[16 * r : 16 * r + 16]),
            current.ids[r],
            current.flags[r],
        )
        for r in range(len(current))
    }


def _tricky(source: str) -> list[dict[str, Any]]:
    """Keys next to each other in the unique key's order: one SKU a prefix of another,
    non-ASCII text, the same SKU and region at two price kinds and two units."""
    skus = ("x", "x-1", "x1", "xé", "x日本", "X", "x\u00a0y")
    out = [record(i, source=source, sku=sku) for i, sku in enumerate(skus)]
    out += [
        record(40, source=source, sku="x", region="r0", price_kind=kind, unit=unit)
        for kind in ("spot", "reserved_1y")
        for unit in ("hour", "month")
    ]
    return out


@pytest.mark.parametrize("lines", [False, True])
def test_the_state_read_in_chunks_equals_the_whole_read(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch, lines: bool
) -> None:
    """Sources interleaved in id order, with neighbouring keys, read 1, 7, 13 or 24 offers
    a chunk (the last chunk full, or not; 24 is each source's whole) give exactly the read
    of the default chunk, line digests included; an unknown source, nothing."""
    for n in (5, 9, 13):
        ingest(engine, settings, crawl(records(n, amount="3.50")))
        ingest(engine, settings, CrawlResult("peer", records(n, source="peer")))
    ingest(engine, settings, crawl([*records(13, amount="3.50"), *_tricky("acme")]))
    ingest(engine, settings, CrawlResult("peer", [*records(13, source="peer"), *_tricky("peer")]))
    with writer(engine).begin() as conn:  # a line digest on some of them
        ids = sorted(conn.execute(select(factories.OFFER.c.id)).scalars())
        conn.execute(
            OfferLine.__table__.insert(),  # type: ignore[attr-defined]
            [{"offer_id": k, "digest": bytes([k % 256]) * 16} for k in ids[::3]],
        )
    with engine.connect() as conn:
        whole = [load_current(conn, source, lines=lines) for source in ("acme", "peer")]
        for size in (1, 7, 13, 24):
            monkeypatch.setattr(service.catalog.diff, "STATE_CHUNK", size)
            windowed = [load_current(conn, source, lines=lines) for source in ("acme", "peer")]
            assert [len(c) for c in windowed] == [24, 24], size  # none twice, none left out
            assert [_rows(c) for c in windowed] == [_rows(c) for c in whole], size
            assert [_lines(c) for c in windowed] == [_lines(c) for c in whole], size
        assert len(load_current(conn, "nobody", lines=lines)) == 0
    assert [len(c) for c in whole] == [24, 24]
    assert [len(_lines(c)) for c in whole] == ([0, 0] if not lines else [9, 7])  # ids[::3]
    # the same identities in two sources are distinct offers
    rows = [_rows(c) for c in whole]
    assert {r[:2] for r in rows[0]} == {r[:2] for r in rows[1]}
    assert {r[3] for r in rows[0]}.isdisjoint({r[3] for r in rows[1]})


def _lines(current: CurrentState) -> set[tuple[int, int, int]]:
    """Each line digest of the state with its offer's id and amount."""
    table = current.lines
    if table is None:
        return set()
    return {
        (table.his[n], current.ids[current.line_rows[n]], current.line_amount(n))
        for n in range(len(table))
    }


def test_a_failure_while_validating_on_its_thread_leaves_the_catalog_as_it_was(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(engine, settings, crawl(records(5)))
    before = catalog_state(engine)

    def broken(self: StreamValidator, items: Any) -> Any:
        raise RuntimeError("validator bug")

    monkeypatch.setattr(StreamValidator, "batch", broken)
    with pytest.raises(RuntimeError, match="validator bug"):
        ingest(engine, settings, crawl(records(5, bump_every=1)))
    monkeypatch.undo()
    assert catalog_state(engine) == before
    result = ingest(engine, settings, crawl(records(5, bump_every=1)))
    assert result.status.value == "ok" and result.changed == 5
    check_invariants(engine)


def test_fingerprint_memo_matches_the_plain_function(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, crawl(records(6, vcpus="8.0")))
    with engine.connect() as conn:
        stored = conn.execute(
            select(factories.OFFER.c.fingerprint, factories.OFFER.c.gpu_count)
        ).all()
    attributes = (
        "instance",
        None,
        False,
        "H100 SXM",
        Decimal("8"),
        None,
        Decimal("8.0"),
        None,
        "DE",
    )
    expected = fingerprint((*attributes, None, False, None))
    assert {digest for digest, _ in stored} == {expected}


def test_the_garbage_collector_is_back_on_after_an_ingest(
    engine: Engine, settings: Settings
) -> None:
    assert gc.isenabled()
    ingest(engine, settings, crawl(records(3)))
    assert gc.isenabled()
    ingest(engine, settings, crawl([]))  # a failed (empty) crawl too
    assert gc.isenabled()


def test_new_skus_are_registered_with_their_attributes(engine: Engine, settings: Settings) -> None:
    from schema.catalog import InstanceType

    sku = InstanceType.__table__  # type: ignore[attr-defined]
    recs = records(4, vcpus="26.5", memory_gb="192.0", bare_metal=True)
    ingest(engine, settings, crawl(recs))
    with engine.connect() as conn:
        rows = conn.execute(
            select(sku.c.name, sku.c.gpu_count, sku.c.vcpus, sku.c.memory_gb, sku.c.bare_metal)
            .where(sku.c.provider == "acme")
            .order_by(sku.c.name)
        ).all()
    assert [tuple(r) for r in rows] == [
        (f"gpu-{i}", Decimal(8), Decimal("26.5"), Decimal(192), True) for i in range(4)
    ]


def test_a_new_sku_takes_its_first_offers_attributes_and_a_known_one_is_kept(
    engine: Engine, settings: Settings
) -> None:
    """SKUs are registered by the database from the new offer rows, in identity order."""
    from schema.catalog import InstanceType

    sku = InstanceType.__table__  # type: ignore[attr-defined]
    # One SKU in three regions, listed out of identity order, each with other vCPUs.
    recs = [
        record(0, sku="shared", region="r2", vcpus="30"),
        record(1, sku="shared", region="r0", vcpus="10"),
        record(2, sku="shared", region="r1", vcpus="20"),
    ]
    ingest(engine, settings, crawl(recs))
    # Later, a new region of the same SKU with other attributes: the SKU stays as it was.
    ingest(engine, settings, crawl([*recs, record(3, sku="shared", region="r3", vcpus="99")]))
    with engine.connect() as conn:
        rows = conn.execute(select(sku.c.name, sku.c.vcpus).where(sku.c.provider == "acme")).all()
    assert [tuple(r) for r in rows] == [("shared", Decimal(10))]


def test_new_offer_rows_hold_the_ingests_shared_values(engine: Engine, settings: Settings) -> None:
    """Source, status, stamps, versions and crawl run are constants of the bulk inserts."""
    result = ingest(engine, settings, crawl(records(5, bare_metal=False)))
    with engine.connect() as conn:
        offers = conn.execute(select(factories.OFFER)).mappings().all()
        observations = conn.execute(select(factories.OBS)).mappings().all()
        read = conn.execute(
            select(OBS_CRAWL_RUN, OBS_VALID_FROM, OBS_VALID_TO).select_from(
                with_versions(factories.OBS)
            )
        ).all()
    assert {
        (
            o["source"],
            o["status"],
            o["price_kind"],
            o["unit"],
            o["price_per"],
            o["bare_metal"],
            o["price_floor"],
            o["first_seen_version"],
            o["last_changed_version"],
            o["first_seen_at"] == o["last_changed_at"],
        )
        for o in offers
    } == {("acme", "active", "on_demand", "hour", "instance", False, False, 1, 1, True)}
    # stored: the version only; the validity and the run are the version's (VERSIONS_OWN)
    assert {
        (o["crawl_run_id"], o["version_from"], o["valid_from"], o["valid_to"]) for o in observations
    } == {(None, 1, None, None)}
    assert set(read) == {(result.crawl_run_id, offers[0]["first_seen_at"], None)}


@pytest.mark.parametrize("value", ["plain", "it's", "nul\x00inside", "ünï", 7, None, True])
def test_sqlite_literals_store_what_binding_stores(value: Any) -> None:
    import sqlite3

    from service.catalog.bulk import sqlite_literal

    conn = sqlite3.connect(":memory:")
    literal = conn.execute(f"SELECT {sqlite_literal(value)}").fetchone()[0]
    bound = conn.execute("SELECT ?", (value,)).fetchone()[0]
    assert literal == bound and type(literal) is type(bound)


@pytest.mark.parametrize("path", ["rows", "staged"])
def test_new_offers_are_numbered_in_identity_order_whatever_the_crawl_order(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Offer ids follow the identity key (provider, SKU, region, price kind, unit), not
    the order the crawl listed the offers in, on both write paths; every offer gets its
    own record's price."""
    monkeypatch.setattr(
        service.catalog.writer, "STAGED_MIN_ROWS", 10 if path == "staged" else 10**9
    )
    listed = records(60)
    listed = listed[1::2][::-1] + listed[0::2]  # far from key order
    result = ingest(engine, settings, crawl(listed))
    assert result.status.value == "ok" and result.added == 60
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                factories.OFFER.c.id,
                factories.OFFER.c.sku,
                factories.OFFER.c.region,
                factories.OBS.c.id,
                factories.OBS.c.amount,
            )
            .join(factories.OBS, factories.OBS.c.id == factories.OFFER.c.observation_id)
            .order_by(factories.OFFER.c.id)
        ).all()
    keys = [(sku, region) for _, sku, region, _, _ in rows]
    assert keys == sorted(keys)
    assert [obs_id - offer_id for offer_id, _, _, obs_id, _ in rows] == [
        rows[0][3] - rows[0][0]
    ] * 60
    price = {(r["sku"], r["region"]): Decimal(r["amount"]) for r in listed}
    assert all(price[(sku, region)] == amount for _, sku, region, _, amount in rows)
    check_invariants(engine)


def test_sqlite_connections_keep_the_temporary_schema_in_a_real_cache(
    sqlite_engine: Engine,
) -> None:
    """The ingest's staged rows live in temporary tables: their schema gets the same page
    cache as the main one (SQLite's default for it is a few pages, which sent every
    lookup of a large staged table back to the temporary file)."""
    with sqlite_engine.connect() as conn:
        main = conn.exec_driver_sql("PRAGMA main.cache_size").scalar()
        temp = conn.exec_driver_sql("PRAGMA temp.cache_size").scalar()
        conn.exec_driver_sql("CREATE TEMP TABLE t (x)")  # the temporary schema exists now
        assert conn.exec_driver_sql("PRAGMA temp.cache_size").scalar() == temp == main
        assert main is not None and main <= -65536  # KiB: 64 MiB or more


def test_a_crawls_records_are_validated_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading a crawl's records (parsed and validated as they are read) runs with the
    cyclic collector paused (a third of the time of validating 200,000 records went to
    its full collections) and turns it back on afterwards, also when validation fails."""
    from crawlers.http import CrawlOutput
    from crawlers.pipeline import Pipeline
    from service.crawl.run import parse_records

    class Acme:
        name, provider = "acme", "acme"

    seen: list[bool] = []
    real_batches = Pipeline.batches

    def batches(self: Pipeline, raws: Any) -> Any:
        seen.append(gc.isenabled())
        return real_batches(self, raws)

    monkeypatch.setattr(Pipeline, "batches", batches)
    assert gc.isenabled()
    crawl = parse_records(Acme, CrawlOutput(records=[*records(3), {"sku": "x"}]))
    valid = list(crawl)
    assert seen == [False] and gc.isenabled()
    assert len(valid) == len(crawl) == 3 and len(crawl.rejections) == 1

    def broken(self: Pipeline, raws: Any) -> Any:
        raise RuntimeError("parser bug")

    monkeypatch.setattr(Pipeline, "batches", broken)
    with pytest.raises(RuntimeError, match="parser bug"):
        list(parse_records(Acme, CrawlOutput(records=records(1))))
    assert gc.isenabled()
