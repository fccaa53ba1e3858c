"""Parse throughput per source on its largest bundled fixture, beside the json.loads floor.

For each API/peer source: the largest seed fixture is parsed through the source's own
``parse`` (the ``--from-file`` path) and then the shared validation pipeline; records/s
and MB/s are printed with the time of ``json.loads`` of the same bytes (the floor, for
JSON payloads) and the ratio between the two.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from crawlers.base import ApiSource, Context
from crawlers.http import run_from_files
from crawlers.pipeline import Pipeline, SourceMeta
from crawlers.registry import all_sources
from service.crawl.seed import seed_files

REPEAT_UNDER_SECONDS = 0.5


def best_of(func, minimum: float = REPEAT_UNDER_SECONDS) -> float:  # type: ignore[no-untyped-def]
    """The fastest of several runs, repeating until ``minimum`` seconds were spent."""
    best, spent = float("inf"), 0.0
    while spent < minimum or best == float("inf"):
        started = time.perf_counter()
        func()
        elapsed = time.perf_counter() - started
        best, spent = min(best, elapsed), spent + elapsed
    return best


def main() -> None:
    print(
        f"{'source':<26} {'fixture':<34} {'MB':>6} {'records':>8} {'rec/s':>10} "
        f"{'parse s':>8} {'json.loads s':>12} {'ratio':>6}"
    )
    for name, cls in all_sources().items():
        if not (isinstance(cls, type) and issubclass(cls, ApiSource)):
            continue  # spiders: their parse runs in Scrapy (see docs/benchmarks.md)
        files = [f for f in seed_files(cls) if f.suffix in (".json", ".csv", ".xml", ".zip")]
        if not files:
            continue
        largest: Path = max(files, key=lambda f: f.stat().st_size)
        ctx = Context(base_url=getattr(cls, "base_url", ""))
        meta = SourceMeta(name=name, provider=cls.provider, currency=cls.currency)
        counted = {"records": 0}

        def parse(cls=cls, ctx=ctx, largest=largest, meta=meta, counted=counted) -> None:  # type: ignore[no-untyped-def]
            output = run_from_files(cls(), ctx, [largest])
            records, _ = Pipeline(meta).run(output.records)
            counted["records"] = len(records)

        try:
            parse_s = best_of(parse)
        except Exception as exc:
            print(f"{name:<26} {largest.name:<34} skipped: {type(exc).__name__}: {exc}"[:140])
            continue
        body = largest.read_bytes()
        floor = best_of(lambda body=body: json.loads(body)) if largest.suffix == ".json" else None
        rate = counted["records"] / parse_s if parse_s else 0
        ratio = f"{parse_s / floor:6.1f}" if floor else "     -"
        floor_text = f"{floor:12.4f}" if floor else f"{'-':>12}"
        print(
            f"{name:<26} {largest.name[:34]:<34} {len(body) / 1e6:6.2f} "
            f"{counted['records']:>8} {rate:>10,.0f} {parse_s:8.4f} {floor_text} {ratio}"
        )


if __name__ == "__main__":
    main()
