"""The peer CSV parsers (gpuhunt, SkyPilot) collapse an offer's rows without holding the
payload's records (``crawlers.platforms.skypilot.collapsed``): the records, their order and
the source's counts are those of the collapse that held them all
(``tests.support.peer_csv.collapse_as_before``), for every fixture, the real captures and
generated CSVs; and a parse holds a few bytes per record, not the records."""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from crawlers.base import Context, RawRecord, Response
from crawlers.platforms.gpuhunt import GpuhuntCatalog
from crawlers.platforms.skypilot import (
    SkyPilotCatalog,
    collapse,
    collapsed,
    identity,
    read_csv,
)
from crawlers.registry import all_sources, get_source
from tests.support.peer_csv import collapse_as_before, parsed_as_before, peer_csv
from tests.support.source_contract import fixture_dir, seed_files

FETCHED_AT = datetime(2026, 12, 4, 12, tzinfo=UTC)
PEERS = sorted(
    name
    for name, cls in all_sources().items()
    if isinstance(cls, type) and issubclass(cls, (GpuhuntCatalog, SkyPilotCatalog))
)
REALDATA = {
    "skypilot:paperspace": "paperspace/skypilot-catalog-v6-paperspace-vms.csv",
    "skypilot:scaleway": "scaleway/skypilot-catalog-v6-scaleway-vms.csv",
}


def _parsed(source: Any, table: bytes, path: Path | None = None) -> list[RawRecord]:
    """The records of a parse of ``table`` (from ``path`` when given, as ``--from-file``
    hands a saved file over)."""
    if path is None:
        response = Response("https://peer.test/vms.csv", 200, table, {}, None, FETCHED_AT)
    else:
        response = Response(path.as_uri(), 200, b"", {}, None, FETCHED_AT, path)
    return [r for r in source.parse(response, Context(base_url="")) if isinstance(r, dict)]


def _check_as_before(name: str, table: bytes, tmp_path: Path) -> list[RawRecord]:
    """A parse of ``table`` by ``name``, from bytes and from a file, gives the records (in
    order, each with its keys in order) and the counts the holding collapse gave; and the
    identities the collapse reads of each row are those of the row's records."""
    cls = get_source(name)
    response = Response("https://peer.test/vms.csv", 200, table, {}, None, FETCHED_AT)
    expected, expected_stats = parsed_as_before(cls(), table, response)
    path = tmp_path / "catalog.csv"
    path.write_bytes(table)
    for source, where in ((cls(), None), (cls(), path)):
        got = _parsed(source, table, where)
        if where is not None:  # the file's URL is its own
            got = [{**r, "source_url": response.url} for r in got]
        assert [list(r.items()) for r in got] == [list(r.items()) for r in expected]
        assert source.stats == expected_stats
    source = cls()
    for line, row in read_csv(table, cls.REQUIRED, Counter(), what=name):
        records = source.offers(row, line, response, Counter())
        assert source.identities(row, Counter()) == [identity(r) for r in records]
    return expected


@pytest.mark.parametrize("name", PEERS)
def test_each_peer_fixture_parses_as_with_the_records_held(name: str, tmp_path: Path) -> None:
    cls = get_source(name)
    for path in seed_files(cls):
        assert path.parent == fixture_dir(cls)
        assert _check_as_before(name, path.read_bytes(), tmp_path)


@pytest.mark.parametrize("name", PEERS)
def test_each_peer_parses_generated_zones_and_hosts_as_with_the_records_held(
    name: str, tmp_path: Path
) -> None:
    """Zones and hosts of one offer, ties, repeats anywhere, missing, zero and unreadable
    prices, CPU-only rows: the collapse keeps, marks and orders as before."""
    records = _check_as_before(name, peer_csv(get_source(name), 1500, seed=len(name)), tmp_path)
    assert any(r.get("price_floor") for r in records)  # rows that disagree were met
    assert any(r.get("amount") == "N/A" for r in records)  # and unreadable ones


@pytest.mark.parametrize("name", sorted(REALDATA))
def test_real_captures_parse_as_with_the_records_held(
    name: str, realdata: Path, tmp_path: Path
) -> None:
    assert _check_as_before(name, (realdata / REALDATA[name]).read_bytes(), tmp_path)


AMOUNTS = st.one_of(
    st.sampled_from(["1", "1.0", "1.00", "2", "0.5", "0.50", "3", "", "N/A", "0", "-1"]),
    st.none(),
)
RECORD = st.fixed_dictionaries(
    {
        "sku": st.sampled_from(["a", "b", "c"]),
        "region": st.sampled_from(["r1", "r2"]),
        "price_kind": st.sampled_from(["on_demand", "spot"]),
    },
    optional={"amount": AMOUNTS},
)


@hsettings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=60), st.integers(min_value=1, max_value=4))
def test_the_collapse_keeps_what_the_holding_one_did(
    drawn: list[dict[str, Any]], hold: int
) -> None:
    """Any records, ties, several zones, repeats far apart, missing or unreadable amounts:
    the same records in the same order, also when only ``hold`` may wait (more readings)."""
    records = [{**r, "row": n} for n, r in enumerate(drawn)]  # each one told apart
    expected = collapse_as_before(records)
    assert collapse(records) == expected
    readings: list[bool] = []

    def reading(first: bool) -> list[RawRecord]:
        readings.append(first)
        return [dict(r) for r in records]  # each reading makes its records afresh

    offers: list[int] = []

    def handed() -> Iterator[RawRecord]:
        offers.append((yield from collapsed(map(identity, records), reading, hold=hold)))

    got = list(handed())
    assert offers == [len(expected)]  # it says how many offers it handed on
    assert got == expected
    assert readings[0] is True and not any(readings[1:])
    if hold >= len(records):
        assert len(readings) == 1


def test_winners_far_after_their_offer_are_found_by_further_readings() -> None:
    """20,000 records of 2,000 offers, each offer's lowest price anywhere after its first
    row, at most 50 held: each reading hands on at least 50 more, in order."""
    rnd = random.Random(20)
    records = [
        {"sku": f"s{rnd.randrange(2000)}", "region": "r", "price_kind": "spot", "row": n}
        | {"amount": str(rnd.randrange(1, 400))}
        for n in range(20_000)
    ]
    readings: list[bool] = []

    def reading(first: bool) -> list[RawRecord]:
        readings.append(first)
        return records

    assert list(collapsed(map(identity, records), reading, hold=50)) == collapse_as_before(records)
    assert 1 < len(readings) <= 2000 // 50 + 1


def test_a_reading_that_differs_from_the_first_fails() -> None:
    records = [{"sku": "a", "region": "r", "price_kind": "spot", "amount": "1"}]
    with pytest.raises(RuntimeError, match="reading"):
        list(collapsed(map(identity, records), lambda first: records * 2))
    with pytest.raises(RuntimeError, match="reading"):
        list(collapsed(map(identity, records * 2), lambda first: records))


# ------------------------------------------------------------------------- memory

ROWS = 12_000


def _distinct_offers_csv(rows: int) -> bytes:
    """A gpuhunt GCP catalog whose every row is its own offer (as the benchmark's)."""
    lines = [
        "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,"
        "disk_size,gpu_vendor,flags,cpu_arch,provider_data"
    ]
    for i in range(rows):
        sku, count = i // 50, 1 + (i // 50) % 8
        lines.append(
            f"a3-syn{sku}-{count}g,region{(i // 2) % 25}-a,{1 + (i * 37) % 9000 / 100:.6f},"
            f"{12 * count},{85.0 * count},{count},H100,80,{'True' if i % 2 else 'False'},,"
            'nvidia,,x86,"{}"'
        )
    return "\r\n".join(lines).encode() + b"\r\n"


def _peak(run: Any) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_peer_csv_parse_holds_a_few_bytes_a_record_not_the_records() -> None:
    """A parse read a record at a time (as the ingest reads it) peaks at a fraction of
    the same parse whose records are kept (the measurement can fail), and under 300 bytes
    a row (a raw record held is over 600)."""
    table = _distinct_offers_csv(ROWS)
    source = get_source("gpuhunt:gcp")
    response = Response("https://peer.test/gcp.csv", 200, table, {}, None, FETCHED_AT)

    def streamed() -> None:
        for _ in source().parse(response, Context(base_url="")):
            pass

    def kept() -> None:
        held = list(source().parse(response, Context(base_url="")))
        assert len(held) == ROWS

    streamed()  # the memos of amounts and names filled, as in any crawl after its first
    held, read = _peak(kept), _peak(streamed)
    assert held > ROWS * 600, held
    assert read * 3 < held, (read, held)
    assert read < ROWS * 300, (read, held)
