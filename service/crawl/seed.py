"""Fill a new catalog from what ships with the project, through the real crawl path.

Reference data is loaded, the ECB fixture gives FX rates, then every source's bundled
fixture files are replayed as one crawl of that source (the ``--from-file`` path), and
any ``fixtures/snapshot/<source>.jsonl`` file is ingested as a crawl of ``<source>``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from crawlers.registry import all_sources
from service.catalog.snapshot import ingest_jsonl
from service.compliance.reference_load import load_reference
from service.core.config import FIXTURES_DIR, REFERENCE_DIR, Settings
from service.crawl.run import CrawlReport, crawl_source
from service.crawl.sources import sync_sources

SEED_SUFFIXES = {".json", ".xml", ".html", ".htm", ".csv", ".zip", ".jsonl"}
NOT_SEED_PREFIXES = ("bad", "broken", "error", "invalid", "truncated", "robots", "_")


def seed_files(source_cls: type, fixtures_dir: Path = FIXTURES_DIR) -> list[Path]:
    """The fixture files a source's seed replays: declared (those that exist), or its folder's
    good samples."""
    folder = fixtures_dir / (getattr(source_cls, "fixtures", None) or source_cls.name)  # type: ignore[attr-defined]
    declared = getattr(source_cls, "seed_fixtures", None)
    if declared is not None:
        return [folder / name for name in declared if (folder / name).is_file()]
    if not folder.is_dir():
        return []
    return sorted(
        path
        for path in folder.iterdir()
        if path.is_file()
        and path.suffix.lower() in SEED_SUFFIXES
        and not path.name.lower().startswith(NOT_SEED_PREFIXES)
    )


def seed_catalog(
    engine: Engine,
    settings: Settings,
    on_source: Callable[[str, int, int], None] | None = None,
) -> list[CrawlReport]:
    """Seed everything; ``on_source(name, done, total)`` reports progress."""
    load_reference(engine, REFERENCE_DIR)
    sync_sources(engine)
    reports: list[CrawlReport] = []
    sources = all_sources()
    ordered = sorted(sources, key=lambda n: (getattr(sources[n], "kind", "") != "fx", n))
    planned = [(name, seed_files(sources[name])) for name in ordered]
    planned = [(name, files) for name, files in planned if files]
    for done, (name, files) in enumerate(planned):
        if on_source:
            on_source(name, done, len(planned))
        reports.append(crawl_source(engine, settings, name, from_files=files, trigger="seed"))
    snapshot = FIXTURES_DIR / "snapshot"
    if snapshot.is_dir():
        for path in sorted(snapshot.glob("*.jsonl")):
            result = ingest_jsonl(engine, settings, path, trigger="seed")
            reports.append(
                CrawlReport(
                    source=path.stem,
                    status=result.status,
                    reason=result.reason,
                    crawl_run_id=result.crawl_run_id,
                    catalog_version=result.catalog_version,
                    counts=result.counts,
                )
            )
    return reports
