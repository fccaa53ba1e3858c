"""Issue 20, item 5: the reads through time (diffs, the change feed, ``as_of`` listings,
one offer's history) give what the observations say, checked against a brute-force reading
of every observation row, on SQLite and PostgreSQL.

The catalog goes through real ingests: offers added, repriced, withdrawn and brought back,
over several versions, so every kind of change and every paging boundary is crossed."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, select

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import make_engine
from service.query.filters import OfferFilters
from service.query.history import offer_history
from service.query.offers import After, list_offers
from service.query.sql import OBS, SORT_KEYS
from service.query.versions import change_feed, current_version, diff_versions
from tests.support.factories import records

ROUNDS = 6


def build(engine: Engine, settings: Settings) -> int:
    """Two sources over ``ROUNDS + 1`` versions; returns the last version."""
    load_reference(engine, REFERENCE_DIR)
    acme = records(24)
    beta = records(10, source="beta", provider="lambda")
    for r in beta:
        r["sku"] = f"b-{r['sku']}"
    for n in range(ROUNDS + 1):
        rows = [dict(r) for r in acme]
        for i, r in enumerate(rows):
            if (i + n) % 3 == 0:  # a third repriced every round
                r["amount"] = str(Decimal(r["amount"]) + Decimal("0.01") * n)
        if n % 3 == 1:  # two offers withdrawn, back the round after
            rows = [r for r in rows if r["sku"] not in ("gpu-5", "gpu-6")]
        if n >= 2:  # a new offer from the third version on
            rows.append({**acme[0], "sku": "late-1", "amount": str(Decimal("3.33") + n)})
        result = ingest(engine, settings, CrawlResult(source="acme", records=rows))
        assert result.rejected == 0
        if n % 2 == 0:  # the second source crawls every other round
            beta_rows = [dict(r, amount=str(Decimal(r["amount"]) + n)) for r in beta]
            assert ingest(engine, settings, CrawlResult(source="beta", records=beta_rows))
    with engine.connect() as conn:
        return current_version(conn)


def observations(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(OBS)).mappings()]


def visible(rows: list[dict[str, Any]], version: int) -> dict[int, dict[str, Any]]:
    """Brute force: each offer's observation at ``version``."""
    seen: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["version_from"] <= version and (r["version_to"] is None or r["version_to"] > version):
            assert r["offer_id"] not in seen, "two observations of one offer at one version"
            seen[r["offer_id"]] = r
    return seen


def price(row: dict[str, Any] | None) -> tuple[Any, ...] | None:
    return None if row is None else (row["amount"], row["currency"], row["gpu_hour_usd"])


def public(p: dict[str, Any] | None) -> tuple[Any, ...] | None:
    if p is None:
        return None
    return (p["amount"], p["currency"], p["price_per_gpu_hour_usd"])


def test_reads_through_time_match_the_observations(engine: Engine, settings: Settings) -> None:
    """One catalog (its ingests are the slow part), every read checked on it."""
    catalog = build(engine, settings), observations(engine)
    diffs_match(engine, catalog)
    change_feed_matches(engine, catalog)
    as_of_listings_match(engine, catalog)
    history_is_every_observation_in_time_order(engine, catalog)
    history_windows_are_the_overlapping_observations(engine, catalog)


def diffs_match(engine: Engine, catalog: tuple[int, list[dict[str, Any]]]) -> None:
    latest, rows = catalog
    assert latest >= ROUNDS + 2
    with engine.connect() as conn:
        for old in range(latest + 1):
            for new in range(latest + 1):
                before, after = visible(rows, old), visible(rows, new)
                expected = []
                for offer_id in sorted(before.keys() | after.keys()):
                    a, b = before.get(offer_id), after.get(offer_id)
                    if a is None:
                        expected.append((offer_id, "added", None, price(b)))
                    elif b is None:
                        expected.append((offer_id, "withdrawn", price(a), None))
                    elif (a["amount"], a["currency"]) != (b["amount"], b["currency"]):
                        expected.append((offer_id, "changed", price(a), price(b)))
                got: list[tuple[Any, ...]] = []
                after_offer = 0
                while True:  # small pages: every keyset boundary is crossed
                    page, last = diff_versions(conn, old, new, after_offer=after_offer, limit=4)
                    got += [
                        (c["offer"]["id"], c["kind"], public(c["old"]), public(c["new"]))
                        for c in page
                    ]
                    if last is None:
                        break
                    after_offer = last
                assert got == expected, (old, new)


def change_feed_matches(engine: Engine, catalog: tuple[int, list[dict[str, Any]]]) -> None:
    latest, rows = catalog
    events: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        events.setdefault((r["version_from"], r["offer_id"]), {})["new"] = price(r)
        if r["version_to"] is not None:
            events.setdefault((r["version_to"], r["offer_id"]), {})["old"] = price(r)
    with engine.connect() as conn:
        for since in range(latest + 1):
            for until in range(since, latest + 1):
                expected = []
                for key in sorted(events):
                    if since < key[0] <= until:
                        old, new = events[key].get("old"), events[key].get("new")
                        kind = "changed" if old and new else "added" if new else "withdrawn"
                        expected.append((*key, kind, old, new))
                # one event a page crosses every boundary: on every range with an end at
                # the catalog's first or last version (each ``since`` and each ``until``
                # then stops a walk of single events); pages of 3 and one page of all on
                # every range
                ends = since == 0 or until == latest
                for limit in (1, 3, 1000) if ends else (3, 1000):
                    got: list[tuple[Any, ...]] = []
                    after = (since, 0)
                    while True:
                        page, last = change_feed(conn, since, until, after=after, limit=limit)
                        got += [
                            (
                                c["version"],
                                c["offer"]["id"],
                                c["kind"],
                                public(c["old"]),
                                public(c["new"]),
                            )
                            for c in page
                        ]
                        if last is None:
                            break
                        after = last
                    assert got == expected, (since, until, limit)


def as_of_listings_match(engine: Engine, catalog: tuple[int, list[dict[str, Any]]]) -> None:
    latest, rows = catalog
    everything = OfferFilters(include_peers=True)
    with engine.connect() as conn:
        for version in range(1, latest + 1):
            seen = visible(rows, version)
            listed = list_offers(conn, everything, 1000, version=version)
            got = {o["id"]: (o["amount"], o["version_from"]) for o in listed}
            assert got == {k: (r["amount"], r["version_from"]) for k, r in seen.items()}
            # the listing's order: cheapest per GPU-hour first, then id
            keys = [(o["gpu_hour_usd"] is None, o["gpu_hour_usd"], o["id"]) for o in listed]
            assert keys == sorted(keys)
            # paging by offset crosses the same rows
            paged = [
                o["id"]
                for start in range(0, len(listed), 7)
                for o in list_offers(conn, everything, 7, start, version=version)
            ]
            assert paged == [o["id"] for o in listed]
            every_sort_pages_at(conn, version, seen, paged=version == latest // 2)


def _number(value: Any) -> Any:
    """A sort value compared as it sorts: numbers as numbers, the provider as text."""
    return value if isinstance(value, str) else Decimal(str(value))


def every_sort_pages_at(
    conn: Any, version: int, seen: dict[int, dict[str, Any]], *, paged: bool
) -> None:
    """Every sort of a pinned listing, both ways: the offers seen at ``version`` at their
    price then, keyed ones by key then id and the rest by id, and (``paged``) a cursor's
    pages the same (a pinned page sorts ids and keys, then reads its rows by id:
    PostgreSQL's through a LATERAL probe per offer, service.query.sql.pinned_join)."""
    everything = OfferFilters(include_peers=True)
    for sort in SORT_KEYS:
        for descending in (False, True):
            listed = list_offers(
                conn, everything, 1000, version=version, sort=sort, descending=descending
            )
            assert {o["id"]: o["amount"] for o in listed} == {
                k: r["amount"] for k, r in seen.items()
            }, (sort, descending)
            keyed = [
                (_number(o["sort_value"]), o["id"]) for o in listed if o["sort_value"] is not None
            ]
            if descending:
                keyed.sort(key=lambda pair: pair[1])
                keyed.sort(key=lambda pair: pair[0], reverse=True)
            unkeyed = sorted(o["id"] for o in listed if o["sort_value"] is None)
            order = [i for _, i in (keyed if descending else sorted(keyed))] + unkeyed
            assert [o["id"] for o in listed] == order, (sort, descending)
            if not paged:
                continue
            pages: list[int] = []
            after = None
            while True:
                page = list_offers(
                    conn,
                    everything,
                    5,
                    version=version,
                    sort=sort,
                    descending=descending,
                    after=after,
                )
                pages += [o["id"] for o in page]
                if len(page) < 5:
                    break
                after = After(page[-1]["sort_value"], page[-1]["id"])
            assert pages == order, (sort, descending)


def history_is_every_observation_in_time_order(
    engine: Engine, catalog: tuple[int, list[dict[str, Any]]]
) -> None:
    _, rows = catalog
    with engine.connect() as conn:
        for offer_id in sorted({r["offer_id"] for r in rows}):
            mine = sorted(
                (r for r in rows if r["offer_id"] == offer_id),
                key=lambda r: (r["valid_from"], r["id"]),
            )
            got = offer_history(conn, offer_id)
            assert [(h["id"], h["amount"], h["version_to"]) for h in got] == [
                (r["id"], r["amount"], r["version_to"]) for r in mine
            ]


def history_windows_are_the_overlapping_observations(
    engine: Engine, catalog: tuple[int, list[dict[str, Any]]]
) -> None:
    """``from`` / ``to``: the observations whose [valid_from, valid_to) overlaps [start,
    end], each bound given alone and both, at every instant an observation starts or ends
    and a microsecond either side of it (the bounds' comparisons off by one fail here)."""
    _, rows = catalog
    tick = timedelta(microseconds=1)
    with engine.connect() as conn:
        for offer_id in sorted({r["offer_id"] for r in rows}):
            full = offer_history(conn, offer_id)
            instants = {h["valid_from"] for h in full} | {
                h["valid_to"] for h in full if h["valid_to"] is not None
            }
            bounds = sorted({t + d for t in instants for d in (-tick, timedelta(0), tick)})
            for start, end in [
                *((t, None) for t in bounds),
                *((None, t) for t in bounds),
                *zip(bounds, bounds[2:], strict=False),
            ]:
                expected = [
                    h["id"]
                    for h in full
                    if (start is None or h["valid_to"] is None or start < h["valid_to"])
                    and (end is None or end >= h["valid_from"])
                ]
                got = offer_history(conn, offer_id, start, end)
                assert [h["id"] for h in got] == expected, (offer_id, start, end)


def test_a_diffs_work_does_not_grow_with_an_offers_history(sqlite_url: str) -> None:
    """SQLite's work for a consecutive diff (its virtual machine's steps, counted: exact,
    unlike time) stays the same when a busy offer's history doubles: each page's offers
    are probed once per end, never walked through their earlier rows (the previous read
    of the row at the lower version stepped through every one of them)."""
    engine = make_engine(sqlite_url)
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    load_reference(engine, REFERENCE_DIR)
    rows = records(6)

    def reprice(rounds: int) -> None:
        for n in range(rounds):  # the first offer moves every time, the second every 5th
            rows[0]["amount"] = str(Decimal("2.00") + Decimal("0.01") * (n % 2))
            if n % 5 == 0:
                rows[1]["amount"] = str(Decimal(rows[1]["amount"]) + Decimal("0.01"))
            assert ingest(engine, settings, CrawlResult(source="acme", records=rows))

    def steps_of_last_diff() -> int:
        with engine.connect() as conn:
            latest = current_version(conn)
            raw: Any = conn.connection.driver_connection
            count = [0]

            def step() -> int:
                count[0] += 1
                return 0

            raw.set_progress_handler(step, 10)
            changes, _ = diff_versions(conn, latest - 1, latest)
            raw.set_progress_handler(None, 10)
            assert [c["kind"] for c in changes] == ["changed"] * len(changes) and changes
            return count[0]

    reprice(30)
    short = steps_of_last_diff()
    reprice(90)  # four times the history
    assert steps_of_last_diff() <= short * 1.2
    engine.dispose()
