"""One row per real offer (issue 19): what the source ranking, ``also_from`` and the GPU
names cost the listing, on SQLite and PostgreSQL.

A synthetic catalog (``tests/bench/ingest.py``'s shape, GPUATLAS_BENCH_DEDUPE_OFFERS
identities, default 60,000) reported by three sources through the real ingest: the
first-party ``bench`` (60 % of the identities), ``skypilot:bench`` (60 %) and
``gpuhunt:bench`` (50 %), overlapping so every combination occurs. Measured in-process on
one connection, in turns (the fastest of GPUATLAS_BENCH_DEDUPE_REPEAT runs each, so the
load of a shared machine hits every variant alike):

* the default listing, page of 100 (+1), under three rules: the ranking (now), the former
  rule (a peer hidden only by a first-party offer; rebuilt here from its SQL) and none
  (``include_peers``);
* ``also_from`` for that page;
* the GPU's human name as a scalar subquery per row (the alternative not taken) against
  the per-snapshot dict (taken: free per row);
* every matching offer streamed (the export path) under the three rules.

Run: ``.venv/bin/python -m tests.bench.dedupe`` (PostgreSQL too when
GPUATLAS_TEST_POSTGRES_URL is set). Asserts nothing about time.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, exists, or_, select, text

from service.alerts.listeners import install
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.db import normalize_url
from service.query.filters import OfferFilters
from service.query.offers import also_from, base_query, list_offers, offers_query, stream_offers
from service.query.sql import GPU, OFFER, OFFER_COLUMNS
from tests.bench.ingest import prepared, synthetic
from tests.support.pg import pg_database

CENT = Decimal("0.01")
N = int(os.environ.get("GPUATLAS_BENCH_DEDUPE_OFFERS", "60000"))
REPEAT = int(os.environ.get("GPUATLAS_BENCH_DEDUPE_REPEAT", "15"))
SOURCES = {
    "bench": lambda i: i % 10 < 6,
    "skypilot:bench": lambda i: 3 <= i % 10 < 9,
    "gpuhunt:bench": lambda i: i % 10 >= 5 or i % 10 == 0,
}


def load(url: str) -> Any:
    engine, settings = prepared(url)
    base = synthetic(N)
    for source, keep in SOURCES.items():
        records = [
            r.model_copy(update={"source": source, "amount": r.amount + CENT * (i % 3)})
            if source != "bench"
            else r
            for i, r in enumerate(base)
            if keep(i)
        ]
        result = ingest(engine, settings, CrawlResult(source=source, records=records))
        print(f"  ingested {source}: {result.added} offers")
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE"))
    return engine


def former_rule() -> Any:
    """The rule before issue 19: a peer offer hidden only by a first-party one."""
    first = OFFER.alias("first_party")
    covered = exists().where(
        first.c.provider == OFFER.c.provider,
        first.c.sku == OFFER.c.sku,
        first.c.region == OFFER.c.region,
        first.c.price_kind == OFFER.c.price_kind,
        ~first.c.source.contains(":"),
        first.c.status == "active",
    )
    return or_(~OFFER.c.source.contains(":"), ~covered)


GPU_NAME = select(GPU.c.name).where(GPU.c.slug == OFFER.c.gpu_slug).scalar_subquery()


def fastest(call: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def page(conn: Connection, rule: str, extra: tuple[Any, ...] = ()) -> list[Any]:
    dialect = conn.dialect.name
    if rule == "ranking":
        return list_offers(conn, OfferFilters(), 101)
    stmt = offers_query(OfferFilters(include_peers=True), dialect, nulls=False)
    if rule == "former":
        stmt = stmt.where(former_rule())
    if extra:
        stmt = stmt.add_columns(*extra)
    return list(conn.execute(stmt.limit(101)).mappings())


def stream(conn: Connection, rule: str) -> int:
    if rule == "ranking":
        return sum(len(p) for p in stream_offers(conn, OfferFilters()))
    peers = OfferFilters(include_peers=True)
    stmt = base_query(OFFER_COLUMNS, peers, conn.dialect.name, scan=True).order_by(OFFER.c.id)
    if rule == "former":
        stmt = stmt.where(former_rule())
    return len(conn.execute(stmt).all())


def run(url: str) -> None:
    engine = load(url)
    with engine.connect() as conn:
        name = conn.dialect.name
        rows = [dict(r) for r in list_offers(conn, OfferFilters(), 100)]
        figures = {
            "page of 100, ranking (now)": lambda: page(conn, "ranking"),
            "page of 100, former rule": lambda: page(conn, "former"),
            "page of 100, include_peers": lambda: page(conn, "none"),
            "page of 100 + gpu name subquery": lambda: page(conn, "none", (GPU_NAME,)),
            "also_from for the page": lambda: also_from(conn, rows),
        }
        for label, call in figures.items():
            print(f"{name:10} {label:34} {fastest(call):8.2f} ms")
        counts = {rule: stream(conn, rule) for rule in ("ranking", "former", "none")}
        for rule in ("ranking", "former", "none"):
            ms = fastest(lambda rule=rule: stream(conn, rule))  # type: ignore[misc]
            print(f"{name:10} stream every offer, {rule:8} {counts[rule]:7} rows {ms:8.1f} ms")
    engine.dispose()


def main() -> None:
    install()  # its ingests write their alert events, as the CLI's do
    print(f"{N} identities; sources: {', '.join(SOURCES)}; fastest of {REPEAT}")
    with tempfile.TemporaryDirectory() as folder:
        run(f"sqlite:///{Path(folder) / 'bench.db'}")
    pg = os.environ.get("GPUATLAS_TEST_POSTGRES_URL")
    if pg:
        with pg_database(normalize_url(pg), "gpuatlas_bench_dedupe") as url:
            run(url)


if __name__ == "__main__":
    main()
