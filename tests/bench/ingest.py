"""Ingest benchmark: 200,000 synthetic offers on SQLite and PostgreSQL.

Measures, in one run and side by side: first ingest, unchanged re-ingest, 5 %-changed
re-ingest (offers/s, seconds, database bytes added), and the floor: the same rows
inserted by one raw ``executemany`` on the same database kind.

The source is shaped like a large provider's catalog: 40 providers, each with its
instance types (SKUs) offered in 25 regions (each in a country) under three price kinds,
so 75 offers per SKU (2,680 SKUs in all), on a database holding the reference data and
the ECB rates (GPU names resolve, euro prices get their USD figures). A last step per
round ingests the worst shape for the SKU registry into a fresh database: the same
number of offers, each its own SKU.

Besides wall time it prints this process's CPU time: on a shared machine the wall time
of one step swings with the load of its neighbours, its CPU time much less (PostgreSQL's
own work runs in the server and only shows in the wall time).

Each backend runs ``GPUATLAS_BENCH_ROUNDS`` rounds (default 3), each on fresh
databases: first ingest, unchanged re-ingest, 5 %-changed re-ingest, floor, then the
one-offer-per-SKU first ingest. A step's line gives the median round (offers/s from
it) and the fastest and slowest; the ratio to the floor is taken within each round
(both measured minutes apart at most) and its median printed, with every round's.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from schema.prices import Offer, PriceObservation
from schema.records import OfferRecord
from service.alerts.listeners import install
from service.catalog.ingest import ingest
from service.catalog.refcheck import row_checks_needed
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import FIXTURES_DIR, REFERENCE_DIR, Settings
from service.core.db import make_engine, normalize_url
from service.core.migrate import upgrade
from service.crawl.run import crawl_source
from tests.support.pg import pg_database

N = int(os.environ.get("GPUATLAS_BENCH_OFFERS", "200000"))
ROUNDS = max(1, int(os.environ.get("GPUATLAS_BENCH_ROUNDS", "3")))
GPUS = ["H100 SXM", "A100 80GB", "L40S", "H200", "MI300X", "T4", "L4", "B200"]
PROVIDERS, REGIONS = 40, 25
COUNTRIES = ["DE", "FR", "NL", "FI", "SE", "IE", "GB", "US", "CA", "JP", "SG", "IN", "AU"]
KINDS = ("on_demand", "spot", "reserved_1y")
SKU_PER_OFFER = "first ingest, 1 offer per SKU"
FLOOR = 3
"""The floor's position among a round's figures."""


def synthetic(
    n: int, changed_share: float = 0.0, seed_shift: int = 0, *, sku_per_offer: bool = False
) -> list[OfferRecord]:
    """:func:`iter_synthetic`'s records, as one list."""
    return list(iter_synthetic(n, changed_share, seed_shift, sku_per_offer=sku_per_offer))


def iter_synthetic(
    n: int, changed_share: float = 0.0, seed_shift: int = 0, *, sku_per_offer: bool = False
) -> Iterator[OfferRecord]:
    """``n`` offers, one at a time: record ``i`` is provider ``i % 40``'s; in the catalog shape (the
    default) its region is ``(i // 40) % 25``, its price kind ``(i // 1000) % 3`` and its
    SKU ``i // 3000`` (a mixed radix, so every offer is distinct), and the SKU fixes the
    GPU, GPU count, vCPUs and memory. With ``sku_per_offer`` every record is its own SKU
    (the shape of the earlier rounds of this benchmark). Every ``1 / changed_share``-th
    price moves by a cent."""
    from schema.enums import PriceKind, PricePer, Unit

    step = int(1 / changed_share) if changed_share else 0
    kinds = [PriceKind(k) for k in KINDS]
    construct = OfferRecord.model_construct  # already-valid records, as the pipeline delivers
    for i in range(n):
        provider = i % PROVIDERS
        if sku_per_offer:
            sku, region, kind, shape = i // PROVIDERS, i % REGIONS, i % 3, i
        else:
            sku, region, kind = i // 3000, (i // PROVIDERS) % REGIONS, (i // 1000) % 3
            shape = sku + provider
        count = Decimal(1 + shape % 8)
        amount = Decimal(100 + (i * 37) % 9000) / 100
        if step and i % step == 0:
            amount += Decimal("0.01") * (1 + seed_shift)
        yield construct(
            provider=f"p{provider}",
            source="bench",
            sku=f"sku-{sku}",
            gpu_model=None,
            gpu_name_raw=GPUS[shape % len(GPUS)],
            gpu_count=count,
            gpu_memory_gb=None,
            vcpus=count * 8,
            memory_gb=count * 64,
            region=f"region-{region}",
            country=COUNTRIES[region % len(COUNTRIES)],
            price_kind=kinds[kind],
            unit=Unit.hour,
            price_per=PricePer.instance,
            amount=amount,
            currency="EUR" if provider % 3 == 0 else "USD",
            source_url=None,
            bare_metal=None,
            price_floor=False,
            observed_at=None,
        )


@dataclass
class Figure:
    label: str
    seconds: float
    bytes_added: int
    cpu_seconds: float = 0.0


def line(rounds: list[Figure], n: int) -> str:
    """One step over every round: the median round's figures, then the fastest and
    slowest round (KiB added is the median round's; rounds add the same rows)."""
    ordered = sorted(rounds, key=lambda f: f.seconds)
    mid = ordered[(len(ordered) - 1) // 2]
    rate = n / mid.seconds if mid.seconds else float("inf")
    spread = f"  [{ordered[0].seconds:.3f}–{ordered[-1].seconds:.3f} s]" if len(ordered) > 1 else ""
    return (
        f"  {mid.label:<30} {mid.seconds:8.3f} s  {rate:12,.0f} offers/s  "
        f"{mid.bytes_added / 1024:12,.1f} KiB added  (client CPU {mid.cpu_seconds:.3f} s)"
        f"{spread}"
    )


def reference_loop() -> float:
    """Seconds of a fixed pure-Python workload (tuples, a dict, string joins): the
    machine's momentary speed for the kind of work an ingest does, printed beside the
    figures so that runs minutes or sessions apart can be read against each other."""
    start = time.perf_counter()
    seen: dict[tuple[int, str], str] = {}
    for i in range(1_000_000):
        key = (i % 5000, "sku")
        seen[key] = "\x1f".join(("p", str(i), "region"))
    return time.perf_counter() - start


def db_bytes(engine: Engine, sqlite_path: Path | None) -> int:
    if sqlite_path is not None:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        size = sqlite_path.stat().st_size
        wal = sqlite_path.with_name(sqlite_path.name + "-wal")
        return size + (wal.stat().st_size if wal.exists() else 0)
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar() or 0)


def timed(label: str, engine: Engine, sqlite_path: Path | None, func: Any) -> Figure:
    before = db_bytes(engine, sqlite_path)
    cpu = time.process_time()
    start = time.perf_counter()
    func()
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    return Figure(label, seconds, db_bytes(engine, sqlite_path) - before, cpu)


def prepared(url: str) -> tuple[Engine, Settings]:
    """A fresh database at ``url``, migrated, with the reference data and the ECB rates
    in force (the bundled fixtures, the rates through the real crawl path), as a running
    catalog has them."""
    upgrade(url)
    engine = make_engine(url)
    settings = Settings(
        database_url=url,
        environment="test",
        _env_file=None,  # type: ignore[call-arg]
        max_price_factor=Decimal(1000),
    )
    load_reference(engine, REFERENCE_DIR)
    daily = FIXTURES_DIR / "ecb" / "eurofxref-daily.xml"  # the rates in force
    report = crawl_source(engine, settings, "ecb", from_files=[daily])
    if report.status != "ok":
        raise RuntimeError(f"the ECB fixture did not load: {report.status} {report.reason}")
    return engine, settings


def run_backend(
    name: str,
    url: str,
    sqlite_path: Path | None,
    first: list[OfferRecord],
    changed: list[OfferRecord],
) -> list[Figure]:
    """One round's catalog steps on a fresh database at ``url``: the three ingests,
    then the floor."""
    engine, settings = prepared(url)
    figures = [
        timed(
            "first ingest",
            engine,
            sqlite_path,
            lambda: ingest(engine, settings, CrawlResult("bench", first)),
        ),
        timed(
            "unchanged re-ingest",
            engine,
            sqlite_path,
            lambda: ingest(engine, settings, CrawlResult("bench", first)),
        ),
        timed(
            "5 %-changed re-ingest",
            engine,
            sqlite_path,
            lambda: ingest(engine, settings, CrawlResult("bench", changed)),
        ),
    ]
    figures.append(floor(name, url, engine, sqlite_path, first))
    engine.dispose()
    return figures


def run_sku_per_offer(url: str, sqlite_path: Path | None, records: list[OfferRecord]) -> Figure:
    """The first ingest of a source whose every offer is its own SKU, on a fresh database."""
    engine, settings = prepared(url)
    figure = timed(
        SKU_PER_OFFER,
        engine,
        sqlite_path,
        lambda: ingest(engine, settings, CrawlResult("bench", records)),
    )
    engine.dispose()
    return figure


def floor(
    name: str, url: str, engine: Engine, sqlite_path: Path | None, records: list[OfferRecord]
) -> Figure:
    """The same offer + observation rows inserted by one raw executemany each."""
    offers = [
        (
            i,
            r.source,
            r.provider,
            r.sku,
            r.region,
            r.price_kind.value,
            r.unit.value,
            str(r.amount),
            r.currency,
        )
        for i, r in enumerate(records, start=1)
    ]
    observations = [(i, i, str(r.amount), r.currency) for i, r in enumerate(records, start=1)]
    create = [
        "CREATE TABLE floor_offer (id INTEGER PRIMARY KEY, source TEXT, provider TEXT, sku TEXT, "
        "region TEXT, price_kind TEXT, unit TEXT, amount TEXT, currency TEXT, "
        "UNIQUE (source, provider, sku, region, price_kind, unit))",
        "CREATE TABLE floor_obs (id INTEGER PRIMARY KEY, offer_id INTEGER, amount TEXT, "
        "currency TEXT)",
    ]
    if sqlite_path is not None:

        def go() -> None:
            conn = sqlite3.connect(sqlite_path)
            for statement in create:
                conn.execute(statement)
            conn.executemany("INSERT INTO floor_offer VALUES (?,?,?,?,?,?,?,?,?)", offers)
            conn.executemany("INSERT INTO floor_obs VALUES (?,?,?,?)", observations)
            conn.commit()
            conn.close()
    else:
        import psycopg
        from sqlalchemy.engine import make_url

        u = make_url(normalize_url(url))

        def go() -> None:
            with (
                psycopg.connect(
                    host=u.host,
                    port=u.port,
                    user=u.username,
                    dbname=u.database,
                    password=u.password,
                ) as conn,
                conn.cursor() as cur,
            ):
                for statement in create:
                    cur.execute(statement)
                cur.executemany(
                    "INSERT INTO floor_offer VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)", offers
                )
                cur.executemany("INSERT INTO floor_obs VALUES (%s,%s,%s,%s)", observations)

    return timed("floor: raw executemany", engine, sqlite_path, go)


def foreign_key_checks(url: str) -> str:
    """How this role's large loads check foreign keys (see service/catalog/refcheck.py)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            reason = row_checks_needed(conn, [Offer.__table__, PriceObservation.__table__])  # type: ignore[attr-defined]
    finally:
        engine.dispose()
    if reason is None:
        return (
            "(large loads' foreign keys checked once per load: this role may set "
            "session_replication_role)"
        )
    return f"(large loads' foreign keys checked row by row: {reason})"


def main() -> None:
    install()  # its ingests write their alert events, as the CLI's do
    print(
        f"ingest benchmark: {N:,} offers ({PROVIDERS} providers, {REGIONS} regions, "
        f"{len(KINDS)} price kinds), pre-validated OfferRecords, {ROUNDS} round(s) per database"
    )
    records = synthetic(N), synthetic(N, changed_share=0.05)
    wide = synthetic(N, sku_per_offer=True)
    results: dict[str, list[list[Figure]]] = {"SQLite": []}
    pg = os.environ.get("GPUATLAS_TEST_POSTGRES_URL")
    admin = normalize_url(pg) if pg else None
    if admin:
        results["PostgreSQL"] = []
    loops: list[float] = []
    checks = ""
    for _ in range(ROUNDS):  # the databases take turns: a slow minute hits both alike
        loops.append(reference_loop())
        with tempfile.TemporaryDirectory() as tmp:
            path, other = Path(tmp) / "bench.db", Path(tmp) / "wide.db"
            figures = run_backend("sqlite", f"sqlite:///{path}", path, *records)
            figures.append(run_sku_per_offer(f"sqlite:///{other}", other, wide))
            results["SQLite"].append(figures)
        if admin:
            with pg_database(admin) as url:
                figures = run_backend("postgresql", url, None, *records)
                checks = foreign_key_checks(url)
            with pg_database(admin) as url:
                figures.append(run_sku_per_offer(url, None, wide))
            results["PostgreSQL"].append(figures)
    loops.sort()
    print(
        f"\nmachine: reference loop {loops[(len(loops) - 1) // 2]:.3f} s, median of the rounds "
        f"[{loops[0]:.3f}–{loops[-1]:.3f} s] (the same pure-Python work every run: lower is faster)"
    )
    for backend, rounds in results.items():
        print(f"\n{backend}")
        if backend == "PostgreSQL":
            print(f"  {checks}")
        for step in range(len(rounds[0])):
            print(line([figures[step] for figures in rounds], N))
        ratios = sorted(figures[0].seconds / figures[FLOOR].seconds for figures in rounds)
        print(
            "  first ingest / raw executemany floor, within each round: "
            f"median {ratios[(len(ratios) - 1) // 2]:.2f}x "
            f"({', '.join(f'{r:.2f}x' for r in ratios)})"
        )


if __name__ == "__main__":
    main()
