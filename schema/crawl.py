"""Crawl runs, their raw payloads, rejected records and unmapped names."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401
from schema.types import UTCDateTime


class CrawlRun(SQLModel, table=True):
    __tablename__ = "crawl_run"

    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=100, index=True)
    trigger: str = Field(default="cli", max_length=32)
    started_at: datetime = Field(sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    status: str = Field(default="running", max_length=16, index=True)
    reason: str | None = Field(default=None, max_length=200, description="short status reason")
    error: str | None = Field(default=None, max_length=4000)
    parser_version: str | None = Field(default=None, max_length=32)
    source_urls: list[str] = Field(default_factory=list, sa_type=JSON)
    seen: int = 0
    added: int = 0
    changed: int = 0
    withdrawn: int = 0
    updated: int = 0
    rejected: int = 0
    unmapped: int = 0
    catalog_version: int | None = None
    log: str | None = Field(default=None, max_length=100000)
    owner: str | None = Field(
        default=None, max_length=200, description="host:pid:start of the process crawling"
    )
    reference_digest: str | None = Field(
        default=None,
        max_length=64,
        description="digest of the reference data the ingest resolved with",
    )
    unmapped_counts: list[Any] | None = Field(
        default=None,
        sa_type=JSON,
        description="[kind, name, records] of each unmapped name the ingest counted",
    )


class RawPayload(SQLModel, table=True):
    """A fetched body, zlib-compressed and addressed by the sha256 of its raw bytes."""

    __tablename__ = "raw_payload"

    sha256: str = Field(primary_key=True, max_length=64)
    size: int
    compressed: bytes = Field(sa_type=LargeBinary)
    content_type: str | None = Field(default=None, max_length=200)
    first_seen_at: datetime = Field(sa_type=UTCDateTime)


class CrawlRunPayload(SQLModel, table=True):
    __tablename__ = "crawl_run_payload"

    id: int | None = Field(default=None, primary_key=True)
    crawl_run_id: int = Field(foreign_key="crawl_run.id", index=True)
    sha256: str = Field(foreign_key="raw_payload.sha256", max_length=64)
    url: str = Field(max_length=2048)
    status_code: int | None = None
    fetched_at: datetime = Field(sa_type=UTCDateTime)


class RejectedRecord(SQLModel, table=True):
    __tablename__ = "rejected_record"

    id: int | None = Field(default=None, primary_key=True)
    crawl_run_id: int = Field(foreign_key="crawl_run.id", index=True)
    position: int
    reason: str = Field(max_length=1000)
    record: dict[str, Any] | None = Field(default=None, sa_type=JSON)


class UnmappedName(SQLModel, table=True):
    __tablename__ = "unmapped_name"
    __table_args__ = (UniqueConstraint("kind", "source", "value"),)

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=16)
    source: str = Field(max_length=100)
    value: str = Field(max_length=200)
    occurrences: int = 0
    first_seen_at: datetime = Field(sa_type=UTCDateTime)
    last_seen_at: datetime = Field(sa_type=UTCDateTime)
    last_crawl_run_id: int | None = None


class SourceInfo(SQLModel, table=True):
    """What the service knows of each source, written from the crawler registry by the
    processes that crawl (seed, scheduler, `db upgrade`), so the API never imports it."""

    __tablename__ = "source_info"

    name: str = Field(primary_key=True, max_length=100)
    provider: str = Field(max_length=64)
    kind: str = Field(max_length=16)
    schedule: str = Field(max_length=16, description="default interval, e.g. 1h")
    credential: str | None = Field(default=None, max_length=64)
    parser_version: str | None = Field(default=None, max_length=32)
    docs_url: str | None = Field(default=None, max_length=500)
    updated_at: datetime = Field(sa_type=UTCDateTime)
