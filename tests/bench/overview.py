"""GPU overview benchmark (issue 23): the home page computed afresh at 200,000 offers.

The listing benchmark's SQLite catalog (:func:`tests.bench.listing.sqlite_catalog`: 200,000
synthetic offers over a year, a 5 %-changed re-ingest six months ago, a peer source of
10,000 offers today, so the 90-day trend has observations to sweep). Measured side by side
in one run, each ``GPUATLAS_BENCH_OVERVIEW_RUNS`` times (default 15) after one warm-up:

- in process: :func:`service.query.overview.overview_document` (every statement, the trend);
- over HTTP through the real application under uvicorn, ``Cache-Control: no-cache``:
  ``GET /`` (the HTML page), ``GET /v1/overview`` (its JSON twin), ``GET /offers`` (the
  listing's first page, the home page before) and ``GET /gpus/{slug}`` (a GPU page);
- the same in process and ``GET /`` without ``ix_offer_gpu_kind_provider`` (dropped on the
  scratch copy), which the grouped aggregate reads instead of sorting every offer.

Also the in-process figure's CPU time, and the page's weight (HTML + CSS). Run alone: ``python -m tests.bench.overview``.
Asserts nothing about time.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
from sqlalchemy import text

from service.alerts.listeners import install
from service.compliance.filters import gdpr_countries
from service.core.db import make_engine
from service.query.filters import OfferFilters
from service.query.overview import overview_document
from tests.bench import api as bench_api
from tests.bench.listing import sqlite_catalog

RUNS = int(os.environ.get("GPUATLAS_BENCH_OVERVIEW_RUNS", "15"))
NO_CACHE = {"Cache-Control": "no-cache"}
CSS = Path(__file__).resolve().parents[2] / "service" / "web" / "static" / "gpuatlas.css"


def timed(call: Callable[[], object]) -> dict[str, float]:
    """Wall times, and this process's CPU time (the in-process figure's is the whole work,
    SQLite running in process: it moves much less than wall time on a shared machine)."""
    call()  # warm-up: page cache, statement cache, facts
    times, cpu = [], []
    for _ in range(RUNS):
        started, cpu_started = time.perf_counter(), time.process_time()
        call()
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    times.sort()
    return {
        "median": statistics.median(times),
        "p90": times[int(0.9 * (len(times) - 1))],
        "min": times[0],
        "cpu": statistics.median(cpu),
    }


def line(label: str, figures: dict[str, float], cpu: bool = False) -> None:
    print(
        f"  {label:<44} median {figures['median']:7.1f} ms   p90 {figures['p90']:7.1f} ms"
        f"   min {figures['min']:7.1f} ms"
        + (f"   CPU median {figures['cpu']:7.1f} ms" if cpu else ""),
        flush=True,
    )


def in_process(url: str) -> Callable[[], object]:
    engine = make_engine(url)
    today = datetime.now(UTC).date()

    def call() -> object:
        with engine.connect() as conn:
            eu = gdpr_countries(conn, today, "eu_eea")
            return overview_document(conn, OfferFilters(), None, today, eu)

    return call


def over_http(client: httpx.Client, path: str) -> Callable[[], object]:
    def call() -> object:
        response = client.get(path, headers=NO_CACHE)
        response.raise_for_status()
        return response

    return call


def run(url: str, label: str) -> None:
    port = bench_api.free_port()
    server = bench_api.serve(url, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            line(f"{label}in process (queries + document)", timed(in_process(url)), cpu=True)
            line(f"{label}GET / (HTML)", timed(over_http(client, "/")))
            if label:
                return
            line("GET /v1/overview (JSON twin)", timed(over_http(client, "/v1/overview")))
            line("GET /offers (listing, first page)", timed(over_http(client, "/offers")))
            slug = client.get("/v1/overview").json()["data"][0]["slug"]
            line(f"GET /gpus/{slug}", timed(over_http(client, f"/gpus/{slug}")))
            html = client.get("/", headers=NO_CACHE).content
            rows = html.count(b"<tr data-gpu=")
            css = CSS.stat().st_size
            print(
                f"  page weight: HTML {len(html):,} B ({rows} GPUs) + CSS {css:,} B"
                f" = {(len(html) + css) / 1024:.1f} KiB",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    install()
    with sqlite_catalog() as url:
        engine = make_engine(url)
        with engine.connect() as conn:
            offers = conn.execute(text("SELECT count(*) FROM offer")).scalar()
        print(f"  SQLite, {offers:,} offers, computed afresh, {RUNS} runs each", flush=True)
        run(url, "")
        with engine.begin() as conn:
            conn.execute(text("DROP INDEX ix_offer_gpu_kind_provider"))
        engine.dispose()
        run(url, "no ix_offer_gpu_kind_provider: ")


if __name__ == "__main__":
    main()
