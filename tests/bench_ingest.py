"""Ingest benchmark: 200,000 synthetic offers on SQLite and PostgreSQL.

Measures, in one run and side by side: first ingest, unchanged re-ingest, 5 %-changed
re-ingest (offers/s, seconds, database bytes added), and the floor: the same rows
inserted by one raw ``executemany`` on the same database kind.

Besides wall time it prints this process's CPU time: on a shared machine the wall time
of one step swings with the load of its neighbours, its CPU time much less (PostgreSQL's
own work runs in the server and only shows in the wall time).

Each backend runs ``GPUATLAS_BENCH_ROUNDS`` rounds (default 3), each on a fresh
database: first ingest, unchanged re-ingest, 5 %-changed re-ingest, floor. A step's line
gives the median round (offers/s from it) and the fastest and slowest; the ratio to the
floor is taken within each round (both measured minutes apart at most) and its median
printed, with every round's.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from schema.records import OfferRecord
from service.config import Settings
from service.db import make_engine, normalize_url
from service.ingest import CrawlResult, ingest
from service.migrate import upgrade
from tests.pg import create_pg_database, drop_pg_database

N = int(os.environ.get("GPUATLAS_BENCH_OFFERS", "200000"))
ROUNDS = max(1, int(os.environ.get("GPUATLAS_BENCH_ROUNDS", "3")))
GPUS = ["H100 SXM", "A100 80GB", "L40S", "H200", "MI300X", "T4", "L4", "B200"]


def synthetic(n: int, changed_share: float = 0.0, seed_shift: int = 0) -> list[OfferRecord]:
    step = int(1 / changed_share) if changed_share else 0
    out = []
    construct = OfferRecord.model_construct  # already-valid records, as the pipeline delivers
    for i in range(n):
        amount = Decimal(100 + (i * 37) % 9000) / 100
        if step and i % step == 0:
            amount += Decimal("0.01") * (1 + seed_shift)
        out.append(
            construct(
                provider=f"p{i % 40}",
                source="bench",
                sku=f"sku-{i // 40}",
                gpu_model=None,
                gpu_name_raw=GPUS[i % len(GPUS)],
                gpu_count=Decimal(1 + i % 8),
                gpu_memory_gb=None,
                vcpus=Decimal(8),
                memory_gb=Decimal(64),
                region=f"region-{i % 25}",
                country="DE",
                price_kind=_kind(i),
                unit=_unit(),
                price_per=_per(),
                amount=amount,
                currency="USD" if i % 3 else "EUR",
                source_url=None,
                bare_metal=None,
                price_floor=False,
                observed_at=None,
            )
        )
    return out


def _kind(i: int) -> Any:
    from schema.enums import PriceKind

    return (PriceKind.on_demand, PriceKind.spot, PriceKind.reserved_1y)[i % 3]


def _unit() -> Any:
    from schema.enums import Unit

    return Unit.hour


def _per() -> Any:
    from schema.enums import PricePer

    return PricePer.instance


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
        f"  {mid.label:<28} {mid.seconds:8.3f} s  {rate:12,.0f} offers/s  "
        f"{mid.bytes_added / 1024:12,.1f} KiB added  (client CPU {mid.cpu_seconds:.3f} s)"
        f"{spread}"
    )


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


def run_backend(
    name: str,
    url: str,
    sqlite_path: Path | None,
    first: list[OfferRecord],
    changed: list[OfferRecord],
) -> list[Figure]:
    """One round on a fresh database at ``url``: the three ingests, then the floor."""
    upgrade(url)
    engine = make_engine(url)
    settings = Settings(
        database_url=url,
        environment="test",
        _env_file=None,  # type: ignore[call-arg]
        max_price_factor=Decimal(1000),
    )
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


def main() -> None:
    print(
        f"ingest benchmark: {N:,} offers (40 providers), pre-validated OfferRecords, "
        f"{ROUNDS} round(s) per database"
    )
    records = synthetic(N), synthetic(N, changed_share=0.05)
    results: dict[str, list[list[Figure]]] = {"SQLite": []}
    pg = os.environ.get("GPUATLAS_TEST_POSTGRES_URL")
    admin = normalize_url(pg) if pg else None
    if admin:
        results["PostgreSQL"] = []
    for _ in range(ROUNDS):  # the databases take turns: a slow minute hits both alike
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.db"
            results["SQLite"].append(run_backend("sqlite", f"sqlite:///{path}", path, *records))
        if admin:
            url = create_pg_database(admin)
            try:
                results["PostgreSQL"].append(run_backend("postgresql", url, None, *records))
            finally:
                drop_pg_database(admin, url)
    for backend, rounds in results.items():
        print(f"\n{backend}")
        for step in range(len(rounds[0])):
            print(line([figures[step] for figures in rounds], N))
        ratios = sorted(figures[0].seconds / figures[-1].seconds for figures in rounds)
        print(
            "  first ingest / raw executemany floor, within each round: "
            f"median {ratios[(len(ratios) - 1) // 2]:.2f}x "
            f"({', '.join(f'{r:.2f}x' for r in ratios)})"
        )


if __name__ == "__main__":
    main()
