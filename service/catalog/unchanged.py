"""An unchanged crawl: recorded without parsing, validating or diffing.

A crawl whose raw payloads are byte-identical to those of the last crawl of its source,
that last crawl was good (``ok``), the parser version is the same and the reference data
that resolves records (GPU models and aliases, providers, regions and their countries, GPU
families and group members, the cluster facts of instance families) is the same as when
that crawl was ingested, would find exactly what that crawl found: the same records,
rejections and unmapped names, and an empty diff. :func:`confirm_unchanged` records such a
crawl as the full ingest would have: status ``ok``, its payloads (pointing at the stored
``raw_payload`` rows), the last crawl's counts with nothing added, changed or withdrawn,
its rejections and unmapped names counted again, the locations of the source's offers
refreshed, and ``finished_at`` (the time ``last_confirmed`` shows). Anything else returns
None and takes the full path.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, insert, literal, select, update

from schema.catalog import GpuAlias, GpuModel, Provider, Region
from schema.cluster import ClusterReference
from schema.crawl import CrawlRun, CrawlRunPayload, RejectedRecord
from schema.enums import CrawlStatus, OfferStatus, UnmappedKind
from schema.prices import Offer
from schema.types import utcnow
from service.catalog.locations import refresh
from service.catalog.results import IngestResult, Payload, Rejection, clip
from service.catalog.runs import lock_writer, store_payloads, store_unmapped
from service.core.db import writer

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]
REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]
OFFER = Offer.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
ALIAS = GpuAlias.__table__  # type: ignore[attr-defined]
PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
CLUSTER = ClusterReference.__table__  # type: ignore[attr-defined]

# Every column an ingest's resolution reads (service.catalog.resolver, gpu_catalog and
# locations), in a fixed order.
_REFERENCE = (
    select(
        GPU.c.slug,
        GPU.c.name,
        GPU.c.memory_gb,
        GPU.c.form_factor,
        GPU.c.default_rank,
        GPU.c.family,
    ).order_by(GPU.c.slug),
    select(ALIAS.c.alias, ALIAS.c.gpu_slug).order_by(ALIAS.c.alias),
    select(PROVIDER.c.slug).order_by(PROVIDER.c.slug),
    select(REGION.c.provider, REGION.c.code, REGION.c.country, REGION.c.gpus, REGION.c.members)
    # region order is reference order (locations list places in it)
    .order_by(REGION.c.id),
    # the cluster facts of instance families (service.catalog.cluster)
    select(
        CLUSTER.c.provider,
        CLUSTER.c.sku,
        CLUSTER.c.sku_prefix,
        CLUSTER.c.interconnect,
        CLUSTER.c.interconnect_gbps,
        CLUSTER.c.network,
        CLUSTER.c.network_gbps,
    ).order_by(CLUSTER.c.provider, CLUSTER.c.sku, CLUSTER.c.sku_prefix),
)


def reference_digest(conn: Connection) -> str:
    """A digest of the reference data that resolves records, as it is in ``conn``'s
    transaction: four small reads (hundreds of rows), a few milliseconds."""
    digest = hashlib.sha256()
    for stmt in _REFERENCE:
        for row in conn.execute(stmt):
            digest.update(orjson.dumps([_text(v) for v in row]))
        digest.update(b"\x1e")
    return digest.hexdigest()


def _text(value: Any) -> Any:
    # decimals in canonical text: 80 and 80.0 are one value on both databases
    if value is None or isinstance(value, bool | int | str | list):
        return value
    text = str(value)
    return text.rstrip("0").rstrip(".") if "." in text else text


def unmapped_list(names: Counter[tuple[str, str]]) -> list[list[Any]]:
    """An ingest's unmapped names as stored on its crawl run."""
    return [[kind, value, count] for (kind, value), count in sorted(names.items())]


def as_repeated(
    conn: Connection, digest: str, names: Counter[tuple[str, str]]
) -> tuple[str, list[list[Any]]]:
    """The reference digest and unmapped names to store on an ``ok`` ingest: those that a
    repeat of it would find, which is what :func:`confirm_unchanged` compares and reports.

    ``digest`` is the reference digest the ingest resolved with, ``names`` its unmapped
    names. An ingest that met providers the reference data lacks registered them (each
    counted once as an unmapped provider): a repeat finds them known and counts no such
    name, while resolving every record as this ingest did (a provider's slug is the only
    thing registered, and no record's GPU, region or country depends on it). So the digest
    stored is the reference as this ingest leaves it, read again in its transaction, and
    the names stored are its own without the providers it registered (this run's own
    ``unmapped_name`` counts keep them)."""
    registered = {name for name in names if name[0] == UnmappedKind.provider.value}
    if not registered:
        return digest, unmapped_list(names)
    repeated = Counter({name: count for name, count in names.items() if name not in registered})
    return reference_digest(conn), unmapped_list(repeated)


def confirm_unchanged(
    engine: Engine,
    source: str,
    run_id: int,
    payloads: Sequence[Payload],
    source_urls: Sequence[str],
    parser_version: str | None,
    log: str | None = None,
    now: datetime | None = None,
    *,
    compare_urls: bool = True,
) -> IngestResult | None:
    """Record crawl run ``run_id`` as a repeat of the last good crawl of ``source`` when its
    payloads (url and sha256, in order), parser version and reference data are the same;
    None (nothing written) otherwise. One transaction, under the ingest lock.

    ``compare_urls`` False: the payloads' bodies alone are compared (sha256, in order), for
    a crawl whose records do not depend on where its payloads were read: ``ingest --file``,
    whose records are the file's lines (a crawl's parser may read its URL: a region in an
    index file's path)."""
    if not payloads:
        return None
    hashes = [(p.url, p.sha256) for p in payloads]  # hashed before the lock is taken
    with writer(engine).begin() as conn:
        lock_writer(conn)
        last = conn.execute(
            select(RUN)
            .where(
                RUN.c.source == source,
                RUN.c.id != run_id,
                RUN.c.status != CrawlStatus.running.value,
                RUN.c.finished_at.is_not(None),
            )
            # the order the runs wrote in: ingests take finished_at under the lock
            .order_by(RUN.c.finished_at.desc(), RUN.c.id.desc())
            .limit(1)
        ).first()
        if (
            last is None
            or last.status != CrawlStatus.ok.value
            or last.parser_version != parser_version
            or last.reference_digest is None
            or last.unmapped_counts is None
        ):
            return None
        stored = conn.execute(
            select(RUN_PAYLOAD.c.url, RUN_PAYLOAD.c.sha256)
            .where(RUN_PAYLOAD.c.crawl_run_id == last.id)
            .order_by(RUN_PAYLOAD.c.id)
        ).all()
        if compare_urls:
            same = [(clip(url, 2048) or "", sha) for url, sha in hashes] == [
                tuple(r) for r in stored
            ]
        else:
            same = [sha for _, sha in hashes] == [sha for _, sha in stored]
        if not same:
            return None
        digest = reference_digest(conn)
        if digest != last.reference_digest:
            return None
        now = utcnow() if now is None else now
        return _record(conn, source, run_id, payloads, source_urls, last, digest, log, now)


def _record(
    conn: Connection,
    source: str,
    run_id: int,
    payloads: Sequence[Payload],
    source_urls: Sequence[str],
    last: Any,
    digest: str,
    log: str | None,
    now: datetime,
) -> IngestResult:
    store_payloads(conn, run_id, list(payloads))  # the raw_payload rows exist: links only
    # the same records are rejected again: their rows, copied
    columns = [REJECTED.c.position, REJECTED.c.reason, REJECTED.c.record]
    conn.execute(
        insert(REJECTED).from_select(
            ["crawl_run_id", "position", "reason", "record"],
            select(literal(run_id), *columns)
            .where(REJECTED.c.crawl_run_id == last.id)
            .order_by(REJECTED.c.id),
        )
    )
    names: Counter[tuple[str, str]] = Counter(
        {(kind, value): count for kind, value, count in last.unmapped_counts}
    )
    store_unmapped(conn, run_id, source, names)
    _refresh_locations(conn, source)
    rejections = [
        Rejection(position, reason, record)
        for position, reason, record in conn.execute(
            select(*columns).where(REJECTED.c.crawl_run_id == run_id).order_by(REJECTED.c.id)
        )
    ]
    result = IngestResult(
        crawl_run_id=run_id,
        status=CrawlStatus.ok,
        seen=last.seen,
        rejected=last.rejected,
        unmapped=last.unmapped,
        rejections=rejections,
    )
    note = (
        f"unchanged: every payload as in crawl run {last.id}, same parser version and "
        "reference data; not parsed, validated or diffed"
    )
    conn.execute(
        update(RUN)
        .where(RUN.c.id == run_id)
        .values(
            status=CrawlStatus.ok.value,
            finished_at=now,
            catalog_version=None,
            source_urls=list(source_urls),
            log=clip("\n".join(filter(None, [note, log])), 100000),
            reference_digest=digest,
            unmapped_counts=last.unmapped_counts,
            **result.counts,
        )
    )
    return result


def _refresh_locations(conn: Connection, source: str) -> None:
    """What the full ingest's location refresh does for records identical to the stored
    ones: a source's own stated locations are those stored, so they are re-derived from
    the stored basis (a peer catalog re-derives its providers' offers of every source)."""
    if ":" in source:
        providers = conn.execute(
            select(OFFER.c.provider)
            .where(OFFER.c.source == source, OFFER.c.status == OfferStatus.active.value)
            .distinct()
        ).scalars()
        found = set(providers)
        if found:
            refresh(conn, found)
        return
    refresh(conn, source=source)
