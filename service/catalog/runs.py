"""Crawl runs and what they store beside the catalog: raw payloads, rejected records and
unmapped names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from sqlalchemy import Connection, Engine, func, insert, select, text, update

from schema.crawl import CrawlRun, CrawlRunPayload, RawPayload, RejectedRecord, UnmappedName
from schema.enums import CrawlStatus
from schema.types import utcnow
from service.catalog.results import IngestError, Payload, Rejection, clip, safe_excerpt
from service.catalog.run_owner import close_dead_runs, this_owner
from service.core.db import writer

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
PAYLOAD = RawPayload.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]
REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]
UNMAPPED = UnmappedName.__table__  # type: ignore[attr-defined]

MAX_STORED_REJECTIONS = 1000

INGEST_LOCK_KEY = 0x67707561  # "gpua": one catalog, one writer at a time (PostgreSQL)


def lock_writer(conn: Connection) -> None:
    """Serialize catalog writers. SQLite: the transaction is already BEGIN IMMEDIATE."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": INGEST_LOCK_KEY})


def start_crawl_run(
    engine: Engine, source: str, *, trigger: str = "cli", parser_version: str | None = None
) -> int:
    """Record that a crawl of ``source`` began; returns the crawl run id.

    The run records its owner (this process, see :mod:`service.catalog.run_owner`). Earlier runs of
    the source left 'running' by a dead process are closed as ``failed: interrupted``
    first, so every run ends with a status and a reason."""
    now = utcnow()
    with writer(engine).begin() as conn:
        close_dead_runs(conn, now, source)
        result = conn.execute(
            insert(RUN).values(
                source=source,
                trigger=trigger,
                started_at=utcnow(),
                status=CrawlStatus.running.value,
                parser_version=parser_version,
                owner=this_owner(),
                source_urls=[],
                seen=0,
                added=0,
                changed=0,
                withdrawn=0,
                updated=0,
                rejected=0,
                unmapped=0,
            )
        )
        run_id = result.inserted_primary_key[0] if result.inserted_primary_key else None
    if run_id is None:
        raise IngestError("could not create a crawl run")
    return int(run_id)


def finish_crawl_run(
    engine: Engine,
    run_id: int,
    status: CrawlStatus,
    reason: str | None,
    *,
    error: str | None = None,
    log: str | None = None,
    payloads: Iterable[Payload] = (),
    source_urls: Iterable[str] = (),
) -> None:
    """Close a crawl run that did not reach ingest (skipped, failed before parsing...)."""
    with writer(engine).begin() as conn:
        store_payloads(conn, run_id, list(payloads))
        conn.execute(
            update(RUN)
            .where(RUN.c.id == run_id)
            .values(
                status=status.value,
                reason=clip(reason, 200),
                error=clip(error, 4000),
                log=clip(log, 100000),
                finished_at=utcnow(),
                source_urls=list(source_urls),
            )
        )


def stored_payloads(conn: Connection, hashes: Iterable[str]) -> set[str]:
    """Which of the payloads ``hashes`` (SHA-256) the catalog holds already."""
    wanted = list(hashes)
    if not wanted:
        return set()
    found = conn.execute(select(PAYLOAD.c.sha256).where(PAYLOAD.c.sha256.in_(wanted)))
    return set(found.scalars())


def store_payloads(
    conn: Connection, run_id: int, payloads: list[Payload], *, bodies_later: bool = False
) -> Callable[[], None]:
    """Store the run's payloads: the bodies the catalog does not hold yet and the run's
    links to each.

    With ``bodies_later``, a body still being compressed ahead (:meth:`Payload.compressing`)
    is stored empty for now, and the function returned writes it in once compressed: the
    caller goes on with its writes meanwhile and calls it before its transaction commits,
    so no reader ever sees the empty body (a rollback or a killed process takes the row
    away with the rest). Otherwise, and when nothing is left to write, the function
    returned does nothing."""
    if not payloads:
        return _nothing
    by_hash = {p.sha256: p for p in payloads}
    existing = stored_payloads(conn, by_hash)
    now = utcnow()
    later = {
        sha: p
        for sha, p in by_hash.items()
        if bodies_later and sha not in existing and p.compressing()
    }
    new = [
        {
            "sha256": sha,
            "size": p.size,
            "compressed": b"" if sha in later else p.compressed(),
            "content_type": clip(p.content_type, 200),
            "first_seen_at": now,
        }
        for sha, p in by_hash.items()
        if sha not in existing
    ]
    if new:
        conn.execute(insert(PAYLOAD), new)
    conn.execute(
        insert(RUN_PAYLOAD),
        [
            {
                "crawl_run_id": run_id,
                "sha256": p.sha256,
                "url": clip(p.url, 2048) or "",
                "status_code": p.status_code,
                "fetched_at": p.fetched_at,
            }
            for p in payloads
        ],
    )
    if not later:
        return _nothing

    def write_bodies() -> None:
        for sha, payload in later.items():
            conn.execute(
                update(PAYLOAD)
                .where(PAYLOAD.c.sha256 == sha)
                .values(compressed=payload.compressed())
            )

    return write_bodies


def _nothing() -> None:
    return None


def run_payload_ids(conn: Connection, run_id: int) -> dict[str, int]:
    """The ``crawl_run_payload`` rows of run ``run_id`` by payload sha256 (a body fetched
    at two URLs: its first row), what the run's price observations refer to."""
    rows = conn.execute(
        select(RUN_PAYLOAD.c.sha256, func.min(RUN_PAYLOAD.c.id))
        .where(RUN_PAYLOAD.c.crawl_run_id == run_id)
        .group_by(RUN_PAYLOAD.c.sha256)
    )
    return {sha256: int(first) for sha256, first in rows}


def store_rejections(conn: Connection, run_id: int, rejections: list[Rejection]) -> None:
    rows = [
        {
            "crawl_run_id": run_id,
            "position": r.position,
            "reason": clip(r.reason, 1000) or "",
            "record": safe_excerpt(r.record) if r.record is not None else None,
        }
        for r in rejections[:MAX_STORED_REJECTIONS]
    ]
    if rows:
        conn.execute(insert(REJECTED), rows)


def store_unmapped(
    conn: Connection, run_id: int, source: str, names: Counter[tuple[str, str]]
) -> None:
    now = utcnow()
    for (kind, value), count in names.items():
        value = clip(value, 200) or ""
        updated = conn.execute(
            update(UNMAPPED)
            .where(UNMAPPED.c.kind == kind, UNMAPPED.c.source == source, UNMAPPED.c.value == value)
            .values(
                occurrences=UNMAPPED.c.occurrences + count,
                last_seen_at=now,
                last_crawl_run_id=run_id,
            )
        )
        if not updated.rowcount:
            conn.execute(
                insert(UNMAPPED).values(
                    kind=kind,
                    source=source,
                    value=value,
                    occurrences=count,
                    first_seen_at=now,
                    last_seen_at=now,
                    last_crawl_run_id=run_id,
                )
            )
