"""Where each price was read from: the ``crawl_run_payload`` row its observation names
(the payload's sha256 and the URL it was fetched at), added to a page of rows at once."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from service.core.in_list import among
from service.query.filters import ComplianceSets, OfferFilters
from service.query.places import place_rows
from service.query.sql import RUN_PAYLOAD, VERSION

IDS_PER_STATEMENT = 500


def with_payloads(conn: Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set each row's ``raw_sha256`` and ``raw_url`` from its ``payload_id`` (both None
    without one): one primary-key read per distinct payload, not two per row (the rows of
    a page share a few payloads; a subquery per row and column cost PostgreSQL a fifth of
    a page of 100)."""
    wanted = sorted({r["payload_id"] for r in rows if r.get("payload_id") is not None})
    found: dict[int, tuple[str, str]] = {}
    for start in range(0, len(wanted), IDS_PER_STATEMENT):
        chunk = wanted[start : start + IDS_PER_STATEMENT]
        stmt = select(RUN_PAYLOAD.c.id, RUN_PAYLOAD.c.sha256, RUN_PAYLOAD.c.url).where(
            among(RUN_PAYLOAD.c.id, chunk, conn.dialect.name)
        )
        found.update((row_id, (sha, url)) for row_id, sha, url in conn.execute(stmt))
    none = (None, None)
    for row in rows:
        row["raw_sha256"], row["raw_url"] = found.get(row.get("payload_id"), none)  # type: ignore[arg-type]
    return rows


def with_runs(conn: Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set the ``crawl_run_id`` a row's observation leaves to its version (null: that of
    ``version_from``, :data:`schema.prices.VERSIONS_OWN`): one primary-key read per
    distinct version of the page."""
    wanted = sorted(
        {r["version_from"] for r in rows if r.get("crawl_run_id") is None and "version_from" in r}
    )
    runs: dict[int, int] = {}
    for start in range(0, len(wanted), IDS_PER_STATEMENT):
        chunk = wanted[start : start + IDS_PER_STATEMENT]
        stmt = select(VERSION.c.id, VERSION.c.crawl_run_id).where(
            among(VERSION.c.id, chunk, conn.dialect.name)
        )
        runs.update((version, run) for version, run in conn.execute(stmt))
    for row in rows:
        if row.get("crawl_run_id") is None and "version_from" in row:
            row["crawl_run_id"] = runs.get(row["version_from"])
    return rows


def finished_rows(
    conn: Connection,
    rows: list[dict[str, Any]],
    filters: OfferFilters | None = None,
    compliance: ComplianceSets | None = None,
) -> list[dict[str, Any]]:
    """A page of offer rows as every reader serves them: their places
    (:func:`~service.query.places.place_rows`), their payloads (:func:`with_payloads`) and
    their crawl runs (:func:`with_runs`)."""
    return with_runs(conn, with_payloads(conn, place_rows(conn, rows, filters, compliance)))
