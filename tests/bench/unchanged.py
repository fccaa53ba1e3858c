"""Benchmark: an unchanged crawl, confirmed (the shortcut) against the full path.

    .venv/bin/python -m tests.bench.unchanged [offers] [aws_mb] [database_url]

Two user paths on a fresh database (SQLite file by default), each timed three times:

* ``gpuatlas ingest --file``: ``offers`` synthetic offers (default 200,000) as a JSON
  Lines file, ingested once; then the same file again, confirmed unchanged, and the full
  path of the same file (``complete=False``: read, validate, diff; nothing to withdraw).
* an AWS crawl through the real local replay server: a synthetic ``aws_mb`` MB (default
  100) us-east-1 offer file, crawled once; then the same crawl, confirmed unchanged, and
  the full path (the parser version bumped for that run).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crawlers.providers.aws import INDEX_PATH, AwsPriceList
from service.alerts import listeners
from service.catalog.snapshot import ingest_jsonl
from service.crawl.run import crawl_source
from tests.bench.aws_parse import write_synthetic_offer
from tests.bench.ingest import prepared, synthetic
from tests.support.replay import ReplayServer, Reply

ROOT = Path(__file__).resolve().parents[2]


def _times(label: str, run: Callable[[], Any], rounds: int = 3) -> float:
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - start)
        status = getattr(result, "status", None)
        if status is not None and getattr(status, "value", status) != "ok":
            raise RuntimeError(f"{label}: {result}")
    median = statistics.median(seconds)
    print(f"  {label:<44} {median:7.3f} s  (min {min(seconds):.3f}, max {max(seconds):.3f})")
    return median


def ingest_file(url: str, offers: int, folder: Path) -> None:
    engine, settings = prepared(url)
    path = folder / "bench.jsonl"
    with path.open("wb") as handle:
        for record in synthetic(offers):
            handle.write(record.model_dump_json().encode() + b"\n")
    size = path.stat().st_size / 1024**2
    print(f"ingest --file, {offers:,} offers ({size:.0f} MB), {engine.dialect.name}")
    _times("first ingest", lambda: ingest_jsonl(engine, settings, path, "bench"), rounds=1)
    _times(
        "unchanged, full path (before)",
        lambda: ingest_jsonl(engine, settings, path, "bench", complete=False),
    )
    _times("unchanged, confirmed (after)", lambda: ingest_jsonl(engine, settings, path, "bench"))
    engine.dispose()


def aws_crawl(url: str, size_mb: int, folder: Path) -> None:
    engine, settings = prepared(url)
    offer = folder / "offer.json"
    records = write_synthetic_offer(offer, size_mb=size_mb)
    index = json.loads((ROOT / "fixtures" / "aws" / "region_index.json").read_bytes())
    index["regions"] = {"us-east-1": index["regions"]["us-east-1"]}
    path = index["regions"]["us-east-1"]["currentVersionUrl"]
    with ReplayServer() as server:
        server.route(INDEX_PATH, Reply(json.dumps(index).encode()))
        server.route(path, Reply.file(offer))
        aws = settings.model_copy(update={"source_base_urls": {"aws": server.url}})
        print(
            f"AWS crawl through the replay server, {offer.stat().st_size / 1024**2:.0f} MB "
            f"offer file, {records:,} records, {engine.dialect.name}"
        )
        _times("first crawl", lambda: crawl_source(engine, aws, "aws"), rounds=1)
        _times("unchanged, confirmed (after)", lambda: crawl_source(engine, aws, "aws"))
        real = AwsPriceList.parser_version
        versions = iter(range(1000))

        def full() -> Any:  # a new parser version each time: the full path
            AwsPriceList.parser_version = f"{real}-bench{next(versions)}"  # type: ignore[misc]
            return crawl_source(engine, aws, "aws")

        try:
            _times("unchanged, full path (before)", full)
        finally:
            AwsPriceList.parser_version = real  # type: ignore[misc]
    engine.dispose()


def main() -> None:
    offers = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    size_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    listeners.install()
    with tempfile.TemporaryDirectory(prefix="gpuatlas-bench-") as tmp:
        folder = Path(tmp)
        url = sys.argv[3] if len(sys.argv) > 3 else f"sqlite:///{folder / 'jsonl.db'}"
        ingest_file(url, offers, folder)
        url = sys.argv[3] if len(sys.argv) > 3 else f"sqlite:///{folder / 'aws.db'}"
        aws_crawl(url, size_mb, folder)


if __name__ == "__main__":
    main()
