"""Query API benchmark: a synthetic catalog served by uvicorn on loopback.

Scale (environment): GPUATLAS_BENCH_API_OFFERS (default 200,000 offers across 40
providers), GPUATLAS_BENCH_API_ROUNDS (default 24 re-ingests spread over a year, each
repricing 5 % of the offers plus a "hot" 0.1 % that changes every round), so the default run
holds about 440,000 observations (5 million would take far longer than a few minutes to set
up through the real ingest). GPUATLAS_BENCH_API_SECONDS: seconds per HTTP measurement
(default 5); GPUATLAS_BENCH_API_CLIENTS: concurrent clients of the load test (default 50,
30 s with GPUATLAS_BENCH_API_LOAD_SECONDS).

The synthetic records (tests/bench_ingest.py) tie GPU count to GPU and quote every
on-demand offer in EUR: here counts and countries are made independent of the GPU and a
EUR->USD rate is stored, so the four-filter listing matches a realistic share of offers
(about 1 in 40) and they have USD prices.

Measures over HTTP: p50/p99 and requests/s for (1) a listing with four filters, page of
100; (2) one offer's history over a year at day resolution; (3) eligible providers for a
GPU; (4) full CSV export rows/s. The floors, in the same run: the listing's SQL executed
directly, and the trivial /healthz endpoint; ratios printed. SQLite always, PostgreSQL when
GPUATLAS_TEST_POSTGRES_URL is set. Asserts nothing about time except zero errors in the
load test.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from schema.types import utcnow
from service.config import REFERENCE_DIR, Settings
from service.db import make_engine
from service.fx import Rate, store_rates
from service.ingest import CrawlResult, ingest
from service.migrate import upgrade
from service.queries import OfferFilters, current_version, list_offers
from service.reference import load_reference
from tests.bench_ingest import synthetic

N = int(os.environ.get("GPUATLAS_BENCH_API_OFFERS", "200000"))
ROUNDS = int(os.environ.get("GPUATLAS_BENCH_API_ROUNDS", "24"))
SECONDS = float(os.environ.get("GPUATLAS_BENCH_API_SECONDS", "5"))
CLIENTS = int(os.environ.get("GPUATLAS_BENCH_API_CLIENTS", "50"))
LOAD_SECONDS = float(os.environ.get("GPUATLAS_BENCH_API_LOAD_SECONDS", "30"))
ROOT = Path(__file__).resolve().parent.parent

LISTING = {
    "gpu": "h100",
    "not_country": "US",
    "min_gpus": "2",
    "price_kind": "on_demand",
    "limit": "100",
}


def build(url: str) -> int:
    """A year of catalog history; returns a 'hot' offer id (one change per round)."""
    upgrade(url)
    engine = make_engine(url)
    settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
    load_reference(engine, REFERENCE_DIR)
    start = utcnow() - timedelta(days=365)
    with engine.begin() as conn:  # the synthetic EUR offers (all on-demand ones) get USD prices
        rate = Rate(start.date() - timedelta(days=1), "USD", Decimal("1.08"))
        store_rates(conn, [rate], "bench", None)
    began = time.perf_counter()
    countries = ("DE", "FR", "US", "NL", "JP")
    counts = tuple(Decimal(c) for c in (1, 2, 4, 8))
    records = [  # countries and GPU counts independent of the GPU (synthetic ties count to GPU)
        r.model_copy(update={"country": countries[i % 5], "gpu_count": counts[(i // 8) % 4]})
        for i, r in enumerate(synthetic(N))
    ]
    ingest(engine, settings, CrawlResult(source="bench", records=records), now=start)
    for r in range(1, ROUNDS + 1):
        step = Decimal("0.01") * (1 if r % 2 else -1)
        records = [
            rec.model_copy(update={"amount": rec.amount + step})
            if i % 20 == r % 20 or i % 1000 == 0
            else rec
            for i, rec in enumerate(records)
        ]
        when = start + timedelta(days=365 * r / (ROUNDS + 1))
        ingest(engine, settings, CrawlResult(source="bench", records=records), now=when)
    with engine.connect() as conn:
        hot = list_offers(conn, OfferFilters(), 1, sort="provider")[0]["id"]
        version = current_version(conn)
    print(
        f"  catalog: {N} offers, {version} versions, built in {time.perf_counter() - began:.0f} s"
    )
    engine.dispose()
    return int(hot)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(url: str, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "GPUATLAS_DATABASE_URL": url,
        "GPUATLAS_SCHEDULER_ENABLED": "false",
        "GPUATLAS_ENVIRONMENT": "test",
    }
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "service.api.main:create_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    for _ in range(100):
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("uvicorn did not start")


def measure(label: str, call: Callable[[], Any], seconds: float = SECONDS) -> dict[str, float]:
    call()  # warm
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    times.sort()
    figure = {
        "p50_ms": statistics.median(times) * 1000,
        "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))] * 1000,
        "rps": len(times) / sum(times),
    }
    print(
        f"  {label:<34} p50 {figure['p50_ms']:7.2f} ms  p99 {figure['p99_ms']:7.2f} ms  "
        f"{figure['rps']:8.0f} req/s"
    )
    return figure


def load_test(base: str) -> None:
    errors = 0
    done = 0
    lock = threading.Lock()
    stop = time.perf_counter() + LOAD_SECONDS

    def worker() -> None:
        nonlocal errors, done
        with httpx.Client(base_url=base, timeout=30) as client:
            while time.perf_counter() < stop:
                response = client.get("/v1/offers", params=LISTING)
                with lock:
                    done += 1
                    errors += response.status_code != 200

    threads = [threading.Thread(target=worker) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(
        f"  load: {CLIENTS} clients x {LOAD_SECONDS:.0f} s: {done} requests, "
        f"{done / LOAD_SECONDS:.0f} req/s, {errors} errors"
    )
    assert errors == 0, "the load test must see no errors"


def run_backend(name: str, url: str) -> None:
    print(f"\n[{name}]")
    hot = build(url)
    port = free_port()
    proc = serve(url, port)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            trivial = measure("floor: GET /healthz", lambda: client.get("/healthz"))
            listing = measure(
                "listing, 4 filters, 100", lambda: client.get("/v1/offers", params=LISTING)
            )
            engine = make_engine(url)
            filters = OfferFilters(
                gpu="h100", not_country=("US",), min_gpus=Decimal(2), price_kind="on_demand"
            )

            def direct() -> None:
                with engine.connect() as conn:
                    list_offers(conn, filters, 101)

            sql = measure("floor: listing SQL directly", direct)
            engine.dispose()
            history = measure(
                "history, a year at day resolution",
                lambda: client.get(f"/v1/offers/{hot}/history", params={"resolution": "day"}),
            )
            eligible = measure(
                "eligible-providers gpu=h100",
                lambda: client.get("/v1/eligible-providers", params={"gpu": "h100"}),
            )
            t0 = time.perf_counter()
            rows = 0
            with client.stream("GET", "/v1/export", params={"format": "csv"}) as response:
                for line in response.iter_lines():
                    rows += 1 if line else 0
            elapsed = time.perf_counter() - t0
            print(
                f"  export csv: {rows - 1} rows in {elapsed:.1f} s = {(rows - 1) / elapsed:,.0f} rows/s"
            )
            print(
                f"  ratios: listing/SQL p50 {listing['p50_ms'] / sql['p50_ms']:.2f}x; listing "
                f"throughput {100 * listing['rps'] / trivial['rps']:.0f}% of /healthz; "
                f"history p50 {history['p50_ms']:.1f} ms; eligible p50 {eligible['p50_ms']:.1f} ms"
            )
        load_test(base)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_backend("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}")
    pg = os.environ.get("GPUATLAS_TEST_POSTGRES_URL")
    if pg:
        from service.db import normalize_url
        from tests.conftest import create_pg_database, drop_pg_database

        admin = normalize_url(pg)
        url = create_pg_database(admin)
        try:
            run_backend("postgresql", url)
        finally:
            drop_pg_database(admin, url)


if __name__ == "__main__":
    main()
